#!/bin/bash
# Real vLLM 0.26.0 on one H200, as docs/validation/real-warm/run_warm.sh (same payload recipe,
# server flags and environment), with three additions: vLLM's memory-profiling terms in bytes
# (rawmem_sitecustomize.py on PYTHONPATH, VLLM_LOGGING_LEVEL=DEBUG), the CPU seconds of the
# API server, the engine core and the client around each benchmark (cpu_of.py, getrusage),
# and a mixed workload at a moderate rate besides the decode-heavy one.
set -u
T0=$(date +%s)
W=/root/w; mkdir -p $W
exec > >(tee -a $W/main.log) 2>&1
el() { echo $(( $(date +%s) - T0 )); }
finish() {
  echo "== finish at $(el)s $(date -u +%FT%T.%NZ)"
  if [ -n "${SPID:-}" ]; then kill -TERM -- -$SPID 2>/dev/null; for i in 1 2 3 4 5 6; do kill -0 $SPID 2>/dev/null || break; sleep 1; done; kill -KILL -- -$SPID 2>/dev/null; fi
  echo "== server stopped at $(el)s"
  grep -n -E 'JIT compilation|latency spike' $W/server.log > $W/jit_lines.txt 2>/dev/null
  tar -czf $OUT/results.tar.gz -C $W . ; ls -la $OUT
}
trap finish EXIT
export PYTHONUNBUFFERED=1
echo "== start $(date -u +%FT%TZ)"
cd /root/parts && ls -la && md5sum p.* && cat p.* > /root/payload.tar && md5sum /root/payload.tar && echo "expect $EXPECT_MD5"
[ "$(md5sum < /root/payload.tar | cut -d' ' -f1)" = "$EXPECT_MD5" ] || { echo "MD5 MISMATCH"; exit 2; }
mkdir -p /root/pl /root/site && tar -xf /root/payload.tar -C /root/pl && rm -f /root/payload.tar || exit 3
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /root/site /root/pl/deps/*.whl || exit 4
tar -xJf /root/pl/vllm026-trim.tar.xz -C /root/site || exit 5
echo "== installed at $(el)s"
mkdir -p /root/diag && cp $REPO/docs/validation/real-check/rawmem_sitecustomize.py /root/diag/sitecustomize.py
export PYTHONPATH=/root/site:/root/diag VLLM_LOGGING_LEVEL=DEBUG
CPU_OF="python3 $REPO/docs/validation/real-check/cpu_of.py"
cd /root
MODEL=$REPO/.carry/models/llama3_8b
md5sum $MODEL/config.json $MODEL/generation_config.json $MODEL/tokenizer/tokenizer.json
# versions: run in the background while the server starts (it only imports; takes ~20 s)
( { date -u; uname -a; nvidia-smi; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv;
  python3 --version; python3 -c 'import torch,vllm,transformers,tokenizers,triton;print("torch",torch.__version__,"cuda",torch.version.cuda,"cudnn",torch.backends.cudnn.version());print("vllm",vllm.__version__,vllm.__file__);print("transformers",transformers.__version__,"tokenizers",tokenizers.__version__,"triton",triton.__version__);print(torch.cuda.get_device_name(0),torch.cuda.get_device_capability(0))';
  ls /root/pl/deps; } > $W/versions.txt 2>&1 ) &
VPID=$!
export VLLM_USE_V2_MODEL_RUNNER=0 VLLM_USE_FLASHINFER_SAMPLER=0 VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 HF_HUB_OFFLINE=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 VLLM_SERVER_DEV_MODE=1
SERVE="python3 -m vllm.entrypoints.cli.main serve $MODEL --tokenizer $MODEL/tokenizer --load-format dummy --host 127.0.0.1 --port 8000 --tensor-parallel-size 1 --pipeline-parallel-size 1 --max-model-len 4096"
echo "$SERVE" > $W/commands.txt
echo "== server launch $(date -u +%FT%T.%NZ) at $(el)s"
setsid bash -c "exec $SERVE" > $W/server.log 2>&1 &
SPID=$!
echo "server pid $SPID"
up=0
while [ $(el) -lt 270 ]; do
  if ! kill -0 $SPID 2>/dev/null; then echo "SERVER DIED at $(el)s"; tail -60 $W/server.log; exit 6; fi
  if curl -sf 127.0.0.1:8000/health >/dev/null 2>&1; then up=1; break; fi
  sleep 2
done
[ $up = 1 ] || { echo "server not up by $(el)s"; tail -40 $W/server.log; exit 7; }
echo "== server healthy $(date -u +%FT%T.%NZ) at $(el)s"
wait $VPID  # versions job only (not the server)
tail -8 $W/versions.txt | head -7
curl -s 127.0.0.1:8000/metrics > $W/metrics_start.txt
grep -E 'cache_config_info' $W/metrics_start.txt | tee $W/num_gpu_blocks.txt | grep -o 'num_gpu_blocks="[0-9]*"'
grep -n -E 'RAWMEM|Estimated|GPU KV cache size|kv-cache-memory' $W/server.log | cut -c1-400 | tee $W/memory_lines.txt
bench() {  # name, limit_at, timeout, args...
  local name=$1 lim=$2 tmo=$3; shift 3
  if [ $(el) -gt $lim ]; then echo "SKIP $name at $(el)s (over $lim)"; echo "$name SKIPPED" >> $W/durations.txt; return; fi
  kill -0 $SPID 2>/dev/null || { echo "server dead before $name"; return; }
  echo "reset_prefix_cache: $(curl -s -o /dev/null -w '%{http_code}' -X POST 127.0.0.1:8000/reset_prefix_cache) at $(date -u +%FT%T.%NZ)" | tee -a $W/bench_$name.log
  local B="python3 -m vllm.entrypoints.cli.main bench serve --backend vllm --base-url http://127.0.0.1:8000 --model $MODEL --tokenizer $MODEL/tokenizer --dataset-name random --ignore-eos --save-result --save-detailed --percentile-metrics ttft,tpot,itl,e2el --metric-percentiles 50,90,99 --seed 0 --num-warmups 16 --result-dir $OUT --result-filename $name.json $*"
  echo "$B" >> $W/commands.txt
  local s=$(date +%s.%N); echo "== $name start $(date -u +%FT%T.%NZ) at $(el)s"
  local procs="$SPID $(pgrep -P $SPID | tr '\n' ' ')"
  $CPU_OF $procs | sed "s/^/cpu_before $name /" | tee -a $W/cpu.txt
  # every output line (and tqdm frame) is prefixed with its UTC wall time; the client's CPU
  # seconds (user + system, its children included) from getrusage
  timeout $tmo python3 -c 'import resource,subprocess,sys; r=subprocess.call(sys.argv[1:]); u=resource.getrusage(resource.RUSAGE_CHILDREN); print("client_cpu_s", round(u.ru_utime+u.ru_stime,2)); sys.exit(r)' $B 2>&1 | python3 -u -c '
import sys,datetime
for l in sys.stdin:
    l=l.rstrip("\r\n")
    if l: print(datetime.datetime.now(datetime.timezone.utc).strftime("%H:%M:%S.%f")[:-3], l, flush=True)
' >> $W/bench_$name.log; local rc=${PIPESTATUS[0]}
  local e=$(date +%s.%N)
  $CPU_OF $procs | sed "s/^/cpu_after $name /" | tee -a $W/cpu.txt
  grep client_cpu_s $W/bench_$name.log | sed "s/^/$name /" | tee -a $W/cpu.txt
  echo "$name rc=$rc wall_s=$(python3 -c "print(round($e-$s,3))") start_utc=$(date -u -d @$s +%FT%T.%N) end_utc=$(date -u -d @$e +%FT%T.%N)" | tee -a $W/durations.txt
  grep -E -A40 'Serving Benchmark Result' $W/bench_$name.log | head -45
  grep -n -E 'JIT compilation' $W/server.log | cut -c1-250
}
bench decode_heavy 280 110 --random-input-len 128 --random-output-len 512 --num-prompts 100 --request-rate 4
bench mixed_moderate 360 70 --random-input-len 512 --random-output-len 128 --num-prompts 200 --request-rate 16
curl -s 127.0.0.1:8000/metrics > $W/metrics_end.txt
echo "== done at $(el)s"
