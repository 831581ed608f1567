#!/bin/bash
# A real engine (vLLM 0.26.0 or SGLang 0.5.17) on the lent H200 machine, measured the way
# Revati's emulated runs are: the ground truth under validation/. Runs there, through the
# device tool, from the repository root:
#
#   bash tools/device/real_engine.sh [OPTIONS] [LOAD ...] [-- SERVER FLAGS]
#
# Each configuration (--configs) gets a fresh server; the LOADs run against it in the order
# given, each after the server's prefix cache is emptied (vLLM: POST /reset_prefix_cache;
# SGLang: POST /flush_cache), through `vllm bench serve` of vLLM 0.26.0 (`--backend openai`
# for SGLang, as `revati bench --engine sglang` runs it), `--seed 0 --ignore-eos
# --save-detailed`. SERVER FLAGS go at the end of every server's command line.
#
# LOAD: a name of load_args below (decode_heavy, prefill_heavy, mixed_saturating,
#   mixed_moderate, moe_decode, moe_mixed_saturating, heavy, streams40, saturating), or
#   profile:NAME, a short load of NAME's shape (profile_args) under the engine's torch profiler,
#   without warm-ups: its result goes to profiled/NAME.json, its trace to
#   $OUT/trace_NAME.json.gz (the GPU events: kernels with grid and block, copies, memsets,
#   step annotations; what `revati profile engine-rows --trace` reads) and, whole, to
#   $OUT/trace_NAME_full.json.gz.NN (parts of 15 MiB; `cat` them).
#
# OPTIONS
#   --engine vllm|sglang   default vllm
#   --model NAME           the dummy-weight model folder .carry/models/NAME, made by
#                          `python -m revati.models NAME .carry/models` (default llama3_8b)
#   --configs "A B ..."    server configurations by name (config_flags below; vLLM), a fresh
#                          server each; files are then named CONFIG_LOAD.json, server_CONFIG.log.
#                          Without it: one server, LOAD.json, server.log.
#   --warmups N            `--num-warmups` before each measured load (16; 0 leaves the flag out)
#   --debug                VLLM_LOGGING_LEVEL=DEBUG (vLLM's KV-cache sizing terms in its log)
#   --rawmem               vLLM's memory-profiling terms in bytes (tools/device/rawmem_sitecustomize.py
#                          on the server's PYTHONPATH: RAWMEM lines; implies --debug)
#   --cpu                  CPU seconds of the server's processes (tools/device/cpu_of.py) and of
#                          the client (getrusage) around each load: cpu.txt
#   --step-clock           tools/fidelity/vllm_step_clock/ on the server's PYTHONPATH: each vLLM
#                          engine step's batch and times, steps/steps.PID.tsv
#   --request-path         tools/fidelity/vllm_request_path/ on the server's PYTHONPATH: where each
#                          request's first token spent its time, request_path/events.PID.tsv
#   --record-triton        tools/device/triton_record_sitecustomize.py on the server's PYTHONPATH:
#                          inputs and outputs of the V2 model runner's Triton kernels (or those
#                          matching $TRITON_RECORD), triton_rec/*.pt
#   --v2-runner            vLLM's default model runner (V2) instead of the V1 runner
#   --profile-steps N      vLLM: start the server with its torch profiler (`--profiler-config`,
#                          max_iterations N; 200 when a profile: load is given without it)
#   --payload DIR          the carried parts (default $ROOT/parts); parts carried with this call
#                          as .carry/p.NN, s.NN or c.NN are copied there first
#   --expect-md5 MD5       md5 of the vLLM payload tar, checked before it is installed
#   --install-only         install the payload and stop
#   --keep-serving         leave the (last) server running: a later call with the same engine,
#                          model and configuration uses it (calls of under 10 minutes each)
#   --health-timeout S     seconds a server may take to become healthy (480)
#   --load-timeout S       seconds a load's client may take (240)
#
# The payload, concatenated from PAYLOAD's parts (tools/device/README.md says how to make it):
#   p.NN   a tar of deps/*.whl (vLLM's pure-Python and small binary dependencies for Python
#          3.12) and vLLM itself, as v.whl (the wheel, trimmed) or vllm026-*.tar.xz (its
#          files); fa3.so.xz in PAYLOAD or in the tar, if present, becomes vLLM's FA3 library.
#          For SGLang this is the client's vLLM.
#   s.NN   (SGLang) a tar of deps/*.whl (SGLang's own pins and imports), sglang-trim.tar.xz
#          (the sglang and sgl_kernel packages) and flash_ops.abi3.so.xz (sgl_kernel's FA3)
#   c.NN   (SGLang, optional) a tar of the nvidia-cutlass-dsl wheels (FlashInfer's CuTe-DSL
#          norm kernels; without them it runs its CUDA ones)
#
# Results come back in $OUT/results.tar.gz: the result JSONs, server and client logs,
# commands.txt (every command line as run), durations.txt, versions.txt, main.log (with each
# load's start and end in UTC and ms since the epoch), num_gpu_blocks.txt, memory_lines.txt,
# metrics_start/end.txt and jit_lines.txt (vLLM), server_info.json (SGLang). ROOT (the
# environment, default /root) holds the installed payload and the run's files ($ROOT/w),
# which outlive the call while the machine stays warm.
#
# Every real run under validation/ gives in its README the invocation that reproduces it.
set -u
T0=$(date +%s)
ROOT=${ROOT:-/root}                    # where the payload is installed and the run kept
el() { echo $(( $(date +%s) - T0 )); }
REPO=$PWD
ENGINE=vllm MODEL_NAME=llama3_8b CONFIGS="" WARMUPS=16 DEBUG=0 RAWMEM=0 CPU=0 STEP_CLOCK=0
REQUEST_PATH=0 RECORD=0 V2=0
PROFILE_STEPS="" PAYLOAD=$ROOT/parts EXPECT_MD5="" INSTALL_ONLY=0 KEEP=0 HEALTH_S=480
LOAD_S=240 LOADS=() EXTRA=()
while [ $# -gt 0 ]; do
    case $1 in
        --engine) ENGINE=$2; shift ;;
        --model) MODEL_NAME=$2; shift ;;
        --configs) CONFIGS=$2; shift ;;
        --warmups) WARMUPS=$2; shift ;;
        --debug) DEBUG=1 ;;
        --rawmem) RAWMEM=1; DEBUG=1 ;;
        --cpu) CPU=1 ;;
        --step-clock) STEP_CLOCK=1 ;;
        --request-path) REQUEST_PATH=1 ;;
        --record-triton) RECORD=1 ;;
        --v2-runner) V2=1 ;;
        --profile-steps) PROFILE_STEPS=$2; shift ;;
        --payload) PAYLOAD=$2; shift ;;
        --expect-md5) EXPECT_MD5=$2; shift ;;
        --install-only) INSTALL_ONLY=1 ;;
        --keep-serving) KEEP=1 ;;
        --health-timeout) HEALTH_S=$2; shift ;;
        --load-timeout) LOAD_S=$2; shift ;;
        --) shift; EXTRA=("$@"); break ;;
        -*) echo "unknown option $1" >&2; exit 1 ;;
        *) LOADS+=("$1") ;;
    esac
    shift
done
case $ENGINE in vllm) PORT=8000 ;; sglang) PORT=30000 ;; *) echo "unknown engine $ENGINE" >&2; exit 1 ;; esac
[ $((RAWMEM + STEP_CLOCK + REQUEST_PATH + RECORD)) -le 1 ] \
    || { echo "--rawmem, --step-clock, --request-path and --record-triton are each a sitecustomize: one at a time" >&2; exit 1; }
OUT=${OUT:?run through the device tool, which sets OUT}
W=${W:-$ROOT/w}                        # the run's files, kept between calls
mkdir -p "$W" "$PAYLOAD"
exec > >(tee -a "$W/main.log") 2>&1
echo "== start $(date -u +%FT%TZ): $0 --engine $ENGINE --model $MODEL_NAME ${CONFIGS:+--configs \"$CONFIGS\"} ${LOADS[*]:-} ${EXTRA[*]:+-- ${EXTRA[*]}}"
MODEL=$REPO/.carry/models/$MODEL_NAME
SITE=$ROOT/site                        # the vLLM payload: vLLM's server, and the client
SGL_PATH=$ROOT/site-sgl:$ROOT/site-sgl/nvidia_cutlass_dsl/dsl_packages:$SITE
# as every real run under validation/: the V1 model runner that the emulated server runs
# (revati/engines/vllm.py says why), no FlashInfer sampler (not carried), no NVLink multicast
export PYTHONUNBUFFERED=1 VLLM_USE_V2_MODEL_RUNNER=0 VLLM_USE_FLASHINFER_SAMPLER=0 \
    VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 HF_HUB_OFFLINE=1 NCCL_NVLS_ENABLE=0 \
    TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 VLLM_SERVER_DEV_MODE=1
[ "$V2" = 1 ] && unset VLLM_USE_V2_MODEL_RUNNER
[ "$DEBUG" = 1 ] && export VLLM_LOGGING_LEVEL=DEBUG
if [ "$ENGINE" = sglang ]; then
    export TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 HF_HUB_DISABLE_TELEMETRY=1 \
        TVM_FFI_CACHE_DIR=$ROOT/.cache/tvm-ffi
    # SGLang JIT-compiles some kernels at start (tvm-ffi and the image's nvcc)
    command -v nvcc > /dev/null || export PATH=/usr/local/cuda/bin:$PATH
    export CUDA_HOME=${CUDA_HOME:-$(dirname "$(dirname "$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)")")}
fi

SERVER_LOG="" SERVER_PID_FILE=$W/server.pid
quoted() {         # a command line as a shell reads it back
    local a out=""
    for a; do
        if [[ $a =~ ^[A-Za-z0-9_./:=,+@%-]+$ ]]; then out+="$a "; else out+="'${a//\'/\'\\\'\'}' "; fi
    done
    echo "${out% }"
}
server_pid() { cat "$SERVER_PID_FILE" 2>/dev/null; }
server_alive() { local p; p=$(server_pid); [ -n "$p" ] && kill -0 "$p" 2>/dev/null; }
stop_server() {
    server_alive || { rm -f "$SERVER_PID_FILE"; return 0; }
    local p; p=$(server_pid)
    [ "$ENGINE" = vllm ] && curl -s "127.0.0.1:$PORT/metrics" > "$W/metrics_end${SUFFIX:-}.txt"
    kill -TERM -- -"$p" 2>/dev/null
    for _ in $(seq 20); do kill -0 "$p" 2>/dev/null || break; sleep 1; done
    kill -KILL -- -"$p" 2>/dev/null
    rm -f "$SERVER_PID_FILE"
    echo "== server stopped at $(el)s"
}
finish() {
    [ "$KEEP" = 1 ] || stop_server
    [ -n "${VPID:-}" ] && wait "$VPID"
    grep -n -E 'JIT compilation|latency spike' "$W"/server*.log > "$W/jit_lines.txt" 2>/dev/null
    echo "== finish at $(el)s $(date -u +%FT%T.%NZ)"
    tar -czf "$OUT/results.tar.gz" -C "$W" --exclude=./prof .
}
trap finish EXIT
trap "exit 143" TERM INT   # a timeout still brings the results back

# --- install the payload (once per machine) ---
for f in "$REPO"/.carry/[psc].[0-9][0-9]; do [ -f "$f" ] && cp "$f" "$PAYLOAD/"; done
install_vllm() {
    cat "$PAYLOAD"/p.* > $ROOT/payload.tar || exit 2
    local md5; md5=$(md5sum < $ROOT/payload.tar | cut -d' ' -f1)
    echo "payload md5 $md5${EXPECT_MD5:+ (expected $EXPECT_MD5)}"
    [ -z "$EXPECT_MD5" ] || [ "$md5" = "$EXPECT_MD5" ] || { echo "MD5 MISMATCH"; exit 2; }
    mkdir -p $ROOT/pl "$SITE" && tar -xf $ROOT/payload.tar -C $ROOT/pl && rm -f $ROOT/payload.tar || exit 3
    # the wheels of projects the image lacks: those it has stay the image's (its torch's)
    python3 - $ROOT/pl/deps > $ROOT/pl/wanted.txt <<'PY'
import importlib.metadata as md, pathlib, re, sys
norm = lambda n: re.sub(r"[-_.]+", "-", n).lower()
have = {norm(d.metadata["Name"]) for d in md.distributions()}
for w in sorted(pathlib.Path(sys.argv[1]).glob("*.whl")):
    print(w) if norm(w.name.split("-")[0]) not in have else print("skip", w.name, file=sys.stderr)
PY
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
        --target "$SITE" $(cat $ROOT/pl/wanted.txt) || exit 4
    if [ -f $ROOT/pl/v.whl ]; then python3 -m zipfile -e $ROOT/pl/v.whl "$SITE" || exit 5
    else tar -xJf $ROOT/pl/vllm026-*.tar.xz -C "$SITE" || exit 5; fi
    local fa3
    for fa3 in "$PAYLOAD/fa3.so.xz" $ROOT/pl/fa3.so.xz; do
        [ -f "$fa3" ] && { xz -dc "$fa3" > "$SITE/vllm/vllm_flash_attn/_vllm_fa3_C.abi3.so" || exit 5; }
    done
    echo "== vLLM installed at $(el)s"
}
install_sglang() {
    cat "$PAYLOAD"/s.* > $ROOT/sgl.tar && echo "sglang payload md5 $(md5sum < $ROOT/sgl.tar | cut -d' ' -f1)"
    mkdir -p $ROOT/sglp $ROOT/site-sgl && tar -xf $ROOT/sgl.tar -C $ROOT/sglp && rm -f $ROOT/sgl.tar || exit 6
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
        --target $ROOT/site-sgl $ROOT/sglp/deps/*.whl || exit 6
    tar -xJf $ROOT/sglp/sglang-trim.tar.xz -C $ROOT/site-sgl || exit 7
    xz -dc $ROOT/sglp/flash_ops.abi3.so.xz > $ROOT/site-sgl/sgl_kernel/flash_ops.abi3.so || exit 8
    # nvidia-cutlass-dsl: its .pth (which puts dsl_packages on sys.path) does not run in a
    # --target install, hence SGL_PATH
    if ls "$PAYLOAD"/c.* > /dev/null 2>&1; then
        mkdir -p $ROOT/cdsl && cat "$PAYLOAD"/c.* > $ROOT/cdsl.tar \
            && echo "cutlass-dsl payload md5 $(md5sum < $ROOT/cdsl.tar | cut -d' ' -f1)" \
            && tar -xf $ROOT/cdsl.tar -C $ROOT/cdsl || exit 9
        python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
            --target $ROOT/site-sgl $ROOT/cdsl/*.whl || exit 10
    fi
    # SGLang tries `import vllm` (marlin_utils, suppress_other_loggers) and takes other paths
    # when that fails, as in Revati's SGLang venv: hide the client's vLLM from it
    mkdir -p $ROOT/site-sgl/vllm
    echo 'raise ImportError("vllm hidden from SGLang")' > $ROOT/site-sgl/vllm/__init__.py
    echo "== SGLang installed at $(el)s"
    # one JIT compile now, so a missing compiler shows here rather than in the server's start
    PYTHONPATH=$SGL_PATH python3 -c "import torch; from sglang.kernels.ops.activation.activation import silu_and_mul; x=torch.randn(8,28672,device='cuda',dtype=torch.bfloat16); o=silu_and_mul(x); torch.cuda.synchronize(); ref=torch.nn.functional.silu(x[:,:14336].float())*x[:,14336:].float(); print('JIT ok, maxerr', (o.float()-ref).abs().max().item())" 2>&1 | tail -5
}
versions() {
    { date -u; uname -a; nvidia-smi
      nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
      python3 --version
      PYTHONPATH=$SITE python3 -c 'import torch,vllm,transformers,tokenizers,triton;print("torch",torch.__version__,"cuda",torch.version.cuda,"cudnn",torch.backends.cudnn.version());print("vllm",vllm.__version__,vllm.__file__);print("transformers",transformers.__version__,"tokenizers",tokenizers.__version__,"triton",triton.__version__);print(torch.cuda.get_device_name(0),torch.cuda.get_device_capability(0))'
      if [ "$ENGINE" = sglang ]; then
          echo "CUDA_HOME=$CUDA_HOME"; nvcc --version | tail -2
          PYTHONPATH=$SGL_PATH python3 -c 'import torch,sglang,sgl_kernel,flashinfer,transformers;print("torch",torch.__version__,"sglang",sglang.__version__,"sgl_kernel",getattr(sgl_kernel,"__version__","?"),"flashinfer",flashinfer.__version__,"transformers",transformers.__version__)'
          PYTHONPATH=$SGL_PATH python3 -c 'import flashinfer.norm as n; print("flashinfer norm kernels:", "CUDA" if n._USE_CUDA_NORM else "CuTe DSL")'
      fi
      ls $ROOT/pl/deps $ROOT/sglp/deps 2>/dev/null
    } > "$W/versions.txt" 2>&1
}
[ -d "$SITE/vllm" ] || install_vllm
[ "$ENGINE" = vllm ] || [ -d $ROOT/site-sgl/sglang ] || install_sglang
[ -f "$W/versions.txt" ] || { versions & VPID=$!; }   # imports only; runs while a server starts
[ "$INSTALL_ONLY" = 1 ] && exit 0
md5sum "$MODEL/config.json" "$MODEL/generation_config.json" "$MODEL/tokenizer/tokenizer.json" || exit 11

config_flags() {   # server flags of a configuration name
    case $1 in
        default) echo "" ;;
        # the default server started again on this machine: vLLM's and inductor's compile
        # caches now hold its graph, as on a production server's restart
        rerun) echo "" ;;
        mnbt*) echo "--max-num-batched-tokens ${1#mnbt}" ;;
        seqs*) echo "--max-num-seqs ${1#seqs}" ;;
        *) echo "unknown configuration $1" >&2; return 1 ;;
    esac
}
load_args() {      # `vllm bench serve` arguments of a load name
    case $1 in
        # the four loads of the Llama-3.1-8B tables (docs/validation.md, "Setup")
        decode_heavy) echo "--random-input-len 128 --random-output-len 512 --num-prompts 100 --request-rate 4" ;;
        prefill_heavy) echo "--random-input-len 2048 --random-output-len 32 --num-prompts 100 --request-rate 8" ;;
        mixed_saturating|moe_mixed_saturating|saturating)
            echo "--random-input-len 512 --random-output-len 128 --num-prompts 200 --request-rate inf" ;;
        mixed_moderate) echo "--random-input-len 512 --random-output-len 128 --num-prompts 200 --request-rate 16" ;;
        moe_decode) echo "--random-input-len 256 --random-output-len 256 --num-prompts 64 --request-rate 4" ;;
        # ~50 requests running at once: prefill chunks and decodes share most steps
        heavy) echo "--random-input-len 1024 --random-output-len 256 --num-prompts 300 --request-rate 16" ;;
        # forty streams in flight, closed loop: a moderate streaming load
        streams40) echo "--random-input-len 512 --random-output-len 128 --num-prompts 400 --max-concurrency 40 --request-rate inf" ;;
        *) echo "unknown load $1" >&2; return 1 ;;
    esac
}
profile_args() {   # "STEPS ARGS" of a profiled load: STEPS, SGLang's num_steps (0: the whole load)
    case $1 in
        mixed_saturating) echo "0 --random-input-len 512 --random-output-len 128 --num-prompts 200 --request-rate inf" ;;
        mixed_moderate) echo "0 --random-input-len 512 --random-output-len 128 --num-prompts 24 --request-rate 16" ;;
        prefill_heavy) echo "0 --random-input-len 2048 --random-output-len 32 --num-prompts 20 --request-rate 8" ;;
        decode_heavy) echo "300 --random-input-len 128 --random-output-len 512 --num-prompts 8 --request-rate 4" ;;
        *) echo "unknown profiled load $1" >&2; return 1 ;;
    esac
}
for l in "${LOADS[@]}"; do   # every name known before any server starts
    case $l in profile:*) profile_args "${l#profile:}" > /dev/null || exit 1
                          [ "$ENGINE" = sglang ] || PROFILE_STEPS=${PROFILE_STEPS:-200} ;;
               *) load_args "$l" > /dev/null || exit 1 ;; esac
done

start_server() {   # start_server CONFIG: a healthy server of that configuration, or exit
    local key="$ENGINE $MODEL_NAME $1 ${EXTRA[*]:-}" flags
    if server_alive && [ "$(cat "$W/server.key" 2>/dev/null)" = "$key" ]; then
        echo "== $1: the server of an earlier call, pid $(server_pid)"; return
    fi
    stop_server
    flags=$(config_flags "$1") || exit 12
    local cmd env_path
    if [ "$ENGINE" = vllm ]; then
        cmd=(python3 -m vllm.entrypoints.cli.main serve "$MODEL" --tokenizer "$MODEL/tokenizer"
             --load-format dummy --host 127.0.0.1 --port $PORT --tensor-parallel-size 1
             --pipeline-parallel-size 1 --max-model-len 4096)
        env_path=$SITE
        if [ "$RAWMEM" = 1 ]; then
            mkdir -p "$W/diag" && cp "$REPO/tools/device/rawmem_sitecustomize.py" "$W/diag/sitecustomize.py"
            env_path=$env_path:$W/diag
        fi
        if [ "$RECORD" = 1 ]; then
            mkdir -p "$W/rec" "$W/triton_rec" && export TRITON_RECORD_DIR=$W/triton_rec
            cp "$REPO/tools/device/triton_record_sitecustomize.py" "$W/rec/sitecustomize.py"
            env_path=$env_path:$W/rec
        fi
        if [ "$STEP_CLOCK" = 1 ]; then
            mkdir -p "$W/steps"; export STEP_CLOCK_DIR=$W/steps
            env_path=$env_path:$REPO/tools/fidelity/vllm_step_clock
        fi
        if [ "$REQUEST_PATH" = 1 ]; then
            mkdir -p "$W/request_path"; export REQUEST_PATH_DIR=$W/request_path
            env_path=$env_path:$REPO/tools/fidelity/vllm_request_path
        fi
        if [ -n "$PROFILE_STEPS" ]; then
            mkdir -p "$W/prof/new"
            cmd+=(--profiler-config "{\"profiler\":\"torch\",\"torch_profiler_dir\":\"$W/prof/new\",\"torch_profiler_with_stack\":false,\"torch_profiler_dump_cuda_time_total\":false,\"ignore_frontend\":true,\"max_iterations\":$PROFILE_STEPS}")
        fi
    else
        cmd=(python3 -m sglang.launch_server --model-path "$MODEL" --tokenizer-path "$MODEL/tokenizer"
             --load-format dummy --host 127.0.0.1 --port $PORT --tp-size 1 --pp-size 1
             --skip-server-warmup --context-length 4096)
        env_path=$SGL_PATH
    fi
    # shellcheck disable=SC2206
    cmd+=($flags "${EXTRA[@]}")
    echo "${SUFFIX:+$1: }PYTHONPATH=$env_path $(quoted "${cmd[@]}")" >> "$W/commands.txt"
    echo "== $1: server launch $(date -u +%FT%T.%NZ) at $(el)s"
    SERVER_LOG=$W/server$SUFFIX.log
    PYTHONPATH=$env_path setsid bash -c 'echo $$ > "$0"; exec "$@"' "$SERVER_PID_FILE" "${cmd[@]}" \
        > "$SERVER_LOG" 2>&1 < /dev/null &
    echo "$key" > "$W/server.key"
    local t; t=$(el)
    sleep 2
    until curl -sf "127.0.0.1:$PORT/health" > /dev/null 2>&1; do
        server_alive || { echo "SERVER DIED at $(el)s"; tail -60 "$SERVER_LOG"; exit 13; }
        [ $(( $(el) - t )) -lt "$HEALTH_S" ] || { echo "server not up by $(el)s"; tail -40 "$SERVER_LOG"; exit 14; }
        sleep 2
    done
    echo "== $1: server healthy $(date -u +%FT%T.%NZ) at $(el)s"
    if [ "$ENGINE" = vllm ]; then
        curl -s "127.0.0.1:$PORT/metrics" > "$W/metrics_start$SUFFIX.txt"
        grep -E 'cache_config_info' "$W/metrics_start$SUFFIX.txt" | tee "$W/num_gpu_blocks$SUFFIX.txt" \
            | grep -o 'num_gpu_blocks="[0-9]*"'
        grep -n -E 'RAWMEM|Estimated|GPU KV cache size|kv-cache-memory|Maximum concurrency' "$SERVER_LOG" \
            | cut -c1-400 | tee "$W/memory_lines$SUFFIX.txt"
    else
        curl -s "127.0.0.1:$PORT/server_info" > "$W/server_info$SUFFIX.json"
        python3 -c 'import json,sys;d=json.load(open(sys.argv[1]));print({k:d.get(k) for k in ("max_total_num_tokens","page_size","attention_backend","sampling_backend","cuda_graph_max_bs","chunked_prefill_size","mem_fraction_static")})' "$W/server_info$SUFFIX.json"
    fi
}

client() {         # client NAME RESULT_FILE WARMUPS ARGS...: one `vllm bench serve`
    local name=$1 result=$2 warm=$3; shift 3
    local backend=vllm; [ "$ENGINE" = sglang ] && backend=openai
    local cmd=(python3 -m vllm.entrypoints.cli.main bench serve --backend $backend
               --base-url "http://127.0.0.1:$PORT" --model "$MODEL" --tokenizer "$MODEL/tokenizer"
               --dataset-name random --ignore-eos --save-result --save-detailed
               --percentile-metrics ttft,tpot,itl,e2el --metric-percentiles 50,90,99 --seed 0)
    [ "$warm" -gt 0 ] && cmd+=(--num-warmups "$warm")
    cmd+=(--result-dir "$(dirname "$result")" --result-filename "$(basename "$result")" "$@")
    echo "${name}: $(quoted "${cmd[@]}")" >> "$W/commands.txt"
    local procs=""
    if [ "$CPU" = 1 ]; then
        procs=$(pgrep -g "$(server_pid)" | tr '\n' ' ')   # the server's process group
        python3 "$REPO/tools/device/cpu_of.py" $procs | sed "s/^/cpu_before $name /" | tee -a "$W/cpu.txt"
        # the client's own CPU seconds (user + system, its children included)
        cmd=(python3 -c 'import resource,subprocess,sys; r=subprocess.call(sys.argv[1:]); u=resource.getrusage(resource.RUSAGE_CHILDREN); print("client_cpu_s", round(u.ru_utime+u.ru_stime,2)); sys.exit(r)' "${cmd[@]}")
    fi
    local s; s=$(date +%s.%N)
    echo "== $name start $(date -u +%FT%T.%NZ) epoch_ms $(date +%s%3N) at $(el)s"
    # every output line (and tqdm frame) with its UTC wall time
    PYTHONPATH=$SITE timeout "$LOAD_S" "${cmd[@]}" 2>&1 | python3 -u -c '
import sys,datetime
for l in sys.stdin:
    l=l.rstrip("\r\n")
    if l: print(datetime.datetime.now(datetime.timezone.utc).strftime("%H:%M:%S.%f")[:-3], l, flush=True)
' >> "$W/bench_$name.log"
    local rc=${PIPESTATUS[0]} e; e=$(date +%s.%N)
    echo "== $name end $(date -u +%FT%T.%NZ) epoch_ms $(date +%s%3N) at $(el)s"
    if [ "$CPU" = 1 ]; then
        python3 "$REPO/tools/device/cpu_of.py" $procs | sed "s/^/cpu_after $name /" | tee -a "$W/cpu.txt"
        grep client_cpu_s "$W/bench_$name.log" | sed "s/^/$name /" | tee -a "$W/cpu.txt"
    fi
    echo "$name rc=$rc wall_s=$(python3 -c "print(round($e - $s, 3))") start_utc=$(date -u -d "@$s" +%FT%T.%N) end_utc=$(date -u -d "@$e" +%FT%T.%N)" \
        | tee -a "$W/durations.txt"
    grep -E -A40 'Serving Benchmark Result' "$W/bench_$name.log" | head -45
    grep -n -E 'JIT compilation' "$SERVER_LOG" 2>/dev/null | cut -c1-250
}

measured() {       # measured PREFIX LOAD: one load, after the prefix cache is emptied
    local name=$1$2 args
    args=$(load_args "$2")
    server_alive || { echo "server dead before $name"; return; }
    local path=/reset_prefix_cache; [ "$ENGINE" = sglang ] && path=/flush_cache
    echo "$path: $(curl -s -o /dev/null -w '%{http_code}' -X POST "127.0.0.1:$PORT$path") at $(date -u +%FT%T.%NZ)" \
        | tee -a "$W/bench_$name.log"
    # shellcheck disable=SC2086
    client "$name" "$W/$name.json" "$WARMUPS" $args
}

profiled() {       # profiled PREFIX LOAD: a short load under the torch profiler, its trace kept
    local name=$1$2 steps args   # logs: bench_profiled_NAME.log; result: profiled/NAME.json
    read -r steps args <<< "$(profile_args "$2")"
    server_alive || { echo "server dead before $name"; return; }
    local path=/reset_prefix_cache; [ "$ENGINE" = sglang ] && path=/flush_cache
    curl -s -o /dev/null -X POST "127.0.0.1:$PORT$path"
    mkdir -p "$W/profiled" "$W/prof/$name"
    if [ "$ENGINE" = vllm ]; then   # the profiler's settings came with the server
        echo "$name start_profile: $(curl -s -o /dev/null -w '%{http_code}' -X POST "127.0.0.1:$PORT/start_profile") epoch_ms $(date +%s%3N)"
    else
        local req='{"output_dir":"'$W/prof/$name'","activities":["GPU"],"with_stack":false,"profile_id":"'$name'"'
        [ "$steps" -gt 0 ] && req="$req"',"num_steps":'$steps
        echo "$name start_profile: $(curl -s -m 60 -X POST -H 'Content-Type: application/json' -d "$req}" "127.0.0.1:$PORT/start_profile")"
    fi
    # shellcheck disable=SC2086
    client "profiled_$name" "$W/profiled/$name.json" 0 $args
    # SGLang with num_steps has stopped by itself; otherwise this stops it and writes the trace
    [ "$ENGINE" = sglang ] && [ "$steps" -gt 0 ] \
        || echo "$name stop_profile: $(curl -s -o /dev/null -w '%{http_code}' -m 180 -X POST "127.0.0.1:$PORT/stop_profile") epoch_ms $(date +%s%3N) at $(el)s"
    local src="$W/prof/$name"; [ "$ENGINE" = vllm ] && src="$W/prof/new"
    for _ in $(seq 60); do ls "$src"/*.json.gz > /dev/null 2>&1 && break; sleep 2; done
    sleep 3
    [ "$ENGINE" = vllm ] && mv "$W"/prof/new/* "$W/prof/$name/" 2>/dev/null
    local trace; trace=$(ls -t "$W/prof/$name"/*.json.gz 2>/dev/null | head -1)
    [ -n "$trace" ] || { echo "$name: no trace"; return; }
    ls -la "$W/prof/$name"
    split -b 15M -d "$trace" "$OUT/trace_${name}_full.json.gz."
    python3 - "$trace" "$OUT/trace_$name.json.gz" <<'PY'
import gzip, json, sys
ev = json.load(gzip.open(sys.argv[1], "rt"))["traceEvents"]
keep = [e for e in ev if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation")]
json.dump({"traceEvents": keep}, gzip.open(sys.argv[2], "wt"))
print(sys.argv[1], len(ev), "events,", len(keep), "kept,",
      sum(e["cat"] == "kernel" for e in keep), "kernels")
PY
}

run_config() {     # run_config CONFIG PREFIX
    start_server "$1"
    local l
    for l in "${LOADS[@]}"; do
        case $l in profile:*) profiled "$2" "${l#profile:}" ;; *) measured "$2" "$l" ;; esac
    done
}
if [ -z "$CONFIGS" ]; then
    SUFFIX="" run_config default ""
else
    set -- $CONFIGS
    for config; do
        SUFFIX=_$config
        run_config "$config" "${config}_"
        [ "$config" = "${!#}" ] && [ "$KEEP" = 1 ] || stop_server
    done
fi
echo "== done at $(el)s"
