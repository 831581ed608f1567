#!/bin/bash
# Real vLLM 0.26.0 on the lent H200 machine: one server per configuration, the same loads
# against each (what Revati's emulated runs are compared with). Runs there, through the
# device tool, from the repository root:
#
#   PAYLOAD=/root/parts CONFIGS="default mnbt2048" LOADS="heavy" bash tools/device/vllm_real.sh
#
# PAYLOAD: a folder of parts whose concatenation is a tar of v.whl (the vLLM wheel, trimmed
#   of what a bf16 Llama on Hopper never loads) and deps/*.whl (its pure-Python and small
#   binary dependencies for Python 3.12), carried a part per call (tools/device/README.md).
# CONFIGS: server configurations, by name (see config_flags): each gets a fresh server.
# LOADS: loads run against every configuration, by name (see load_args).
# MODEL: the dummy-weight model folder (`python -m revati.models llama3_8b DIR`), default
#   .carry/models/llama3_8b.
# Results come back in $OUT/results.tar.gz: CONFIG_LOAD.json (`vllm bench serve
# --save-detailed`), the server logs, commands.txt, durations.txt, versions.txt, main.log.
set -u
T0=$(date +%s)
W=/root/w
mkdir -p "$W"
exec > >(tee -a "$W/main.log") 2>&1
el() { echo $(( $(date +%s) - T0 )); }
SPID=
stop_server() {
    [ -n "$SPID" ] || return 0
    kill -TERM -- -"$SPID" 2>/dev/null
    for _ in $(seq 20); do kill -0 "$SPID" 2>/dev/null || break; sleep 1; done
    kill -KILL -- -"$SPID" 2>/dev/null
    SPID=
}
finish() {
    stop_server
    echo "== finish at $(el)s"
    tar -czf "$OUT/results.tar.gz" -C "$W" .
}
trap finish EXIT
trap "exit 143" TERM INT   # a timeout still brings the results back
export PYTHONUNBUFFERED=1
REPO=$PWD
MODEL=${MODEL:-$REPO/.carry/models/llama3_8b}

# --- install the payload (once per machine) ---
if [ ! -d /root/site/vllm ]; then
    cat "$PAYLOAD"/p.* > /root/payload.tar || exit 2
    echo "payload md5 $(md5sum < /root/payload.tar | cut -d' ' -f1)"
    mkdir -p /root/pl /root/site && tar -xf /root/payload.tar -C /root/pl || exit 3
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
        --target /root/site /root/pl/deps/*.whl || exit 4
    python3 -m zipfile -e /root/pl/v.whl /root/site || exit 5
    echo "== installed at $(el)s"
fi
export PYTHONPATH=/root/site
[ -f "$W/versions.txt" ] || { nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm \
    --format=csv; python3 -c 'import torch, vllm; print("torch", torch.__version__, "vllm",
    vllm.__version__)'; } > "$W/versions.txt" 2>&1
# as every real run in docs/validation: the V1 model runner that the emulated server runs
# (revati/engines/vllm.py says why), no FlashInfer sampler (not carried), no NVLink multicast
export VLLM_USE_V2_MODEL_RUNNER=0 VLLM_USE_FLASHINFER_SAMPLER=0 VLLM_NO_USAGE_STATS=1 \
    DO_NOT_TRACK=1 HF_HUB_OFFLINE=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 \
    NVSHMEM_DISABLE_NVLS=1 VLLM_SERVER_DEV_MODE=1

config_flags() {   # server flags of a configuration name
    case $1 in
        default) echo "" ;;
        mnbt*) echo "--max-num-batched-tokens ${1#mnbt}" ;;
        seqs*) echo "--max-num-seqs ${1#seqs}" ;;
        *) echo "unknown configuration $1" >&2; return 1 ;;
    esac
}
load_args() {      # `vllm bench serve` load arguments of a load name
    case $1 in
        # ~50 requests running at once: prefill chunks and decodes share most steps
        heavy) echo "--random-input-len 1024 --random-output-len 256 --num-prompts 300 --request-rate 16" ;;
        # forty streams in flight, closed loop: a moderate streaming load
        streams40) echo "--random-input-len 512 --random-output-len 128 --num-prompts 400 --max-concurrency 40 --request-rate inf" ;;
        saturating) echo "--random-input-len 512 --random-output-len 128 --num-prompts 200 --request-rate inf" ;;
        *) echo "unknown load $1" >&2; return 1 ;;
    esac
}

start_server() {   # start_server CONFIG: a fresh server, healthy, or exit
    local flags
    flags=$(config_flags "$1") || exit 6
    local serve="python3 -m vllm.entrypoints.cli.main serve $MODEL --tokenizer $MODEL/tokenizer \
--load-format dummy --host 127.0.0.1 --port 8000 --max-model-len 4096 $flags"
    echo "$1: $serve" >> "$W/commands.txt"
    echo "== $1: server launch at $(el)s"
    setsid bash -c "exec $serve" > "$W/server_$1.log" 2>&1 &
    SPID=$!
    local t=$(el)
    until curl -sf 127.0.0.1:8000/health > /dev/null 2>&1; do
        kill -0 "$SPID" 2>/dev/null || { echo "SERVER DIED"; tail -40 "$W/server_$1.log"; exit 7; }
        [ $(( $(el) - t )) -lt 300 ] || { echo "server not up"; exit 8; }
        sleep 2
    done
    echo "== $1: healthy at $(el)s; $(curl -s 127.0.0.1:8000/metrics | grep -o 'num_gpu_blocks="[0-9]*"')"
}

bench() {          # bench CONFIG LOAD
    local args
    args=$(load_args "$2") || exit 9
    curl -s -o /dev/null -X POST 127.0.0.1:8000/reset_prefix_cache
    local b="python3 -m vllm.entrypoints.cli.main bench serve --backend vllm \
--base-url http://127.0.0.1:8000 --model $MODEL --tokenizer $MODEL/tokenizer \
--dataset-name random --ignore-eos --save-result --save-detailed \
--percentile-metrics ttft,tpot,itl,e2el --metric-percentiles 50,90,99 --seed 0 \
--num-warmups 16 --result-dir $W --result-filename $1_$2.json $args"
    echo "$1 $2: $b" >> "$W/commands.txt"
    local s; s=$(date +%s.%N)
    timeout 240 $b > "$W/bench_$1_$2.log" 2>&1
    echo "$1 $2 rc=$? wall_s=$(python3 -c "print(round($(date +%s.%N) - $s, 1))")" \
        | tee -a "$W/durations.txt"
    grep -E "Mean TTFT|Mean TPOT|Output token throughput|P99 ITL" "$W/bench_$1_$2.log"
}

for config in $CONFIGS; do
    start_server "$config"
    for load in $LOADS; do bench "$config" "$load"; done
    stop_server
done
echo "== done at $(el)s"
