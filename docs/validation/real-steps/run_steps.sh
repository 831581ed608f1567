#!/bin/bash
# Real vLLM 0.26.0 on one H200, the server of docs/validation/real-check/run_check.sh (same
# payload, flags, environment), to time the steps of the moderate mixed load one by one:
# tools/fidelity/vllm_step_clock/ on the server's PYTHONPATH writes each engine step's batch, CPU
# and GPU times (steps.*.tsv); then a torch-profiler window of the same load gives the
# kernels of its mixed steps (vLLM's own --profiler-config, /start_profile, /stop_profile).
# LOAD picks the load: mixed_moderate (the default; the run of 22:52 UTC) or mixed_saturating.
set -u
T0=$(date +%s)
W=/root/w; mkdir -p $W/steps $W/prof
exec > >(tee -a $W/main.log) 2>&1
el() { echo $(( $(date +%s) - T0 )); }
finish() {
  echo "== finish at $(el)s $(date -u +%FT%T.%NZ)"
  if [ -n "${SPID:-}" ]; then kill -TERM -- -$SPID 2>/dev/null; for i in 1 2 3 4 5 6; do kill -0 $SPID 2>/dev/null || break; sleep 1; done; kill -KILL -- -$SPID 2>/dev/null; fi
  echo "== server stopped at $(el)s"
  ls -la $W/prof
  # the trace goes back beside the results (one file each, under 16 MiB)
  for f in $W/prof/*.json.gz; do [ -f "$f" ] && split -b 15M -d "$f" $OUT/trace.gz.; done
  tar -czf $OUT/results.tar.gz -C $W --exclude=prof . ; ls -la $OUT
}
trap finish EXIT
export PYTHONUNBUFFERED=1
echo "== start $(date -u +%FT%TZ)"
cd /root/parts && ls -la && cat p.* > /root/payload.tar && echo "expect $EXPECT_MD5"
[ "$(md5sum < /root/payload.tar | cut -d' ' -f1)" = "$EXPECT_MD5" ] || { echo "MD5 MISMATCH"; exit 2; }
mkdir -p /root/pl /root/site && tar -xf /root/payload.tar -C /root/pl && rm -f /root/payload.tar || exit 3
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /root/site /root/pl/deps/*.whl || exit 4
tar -xJf /root/pl/vllm026-trim.tar.xz -C /root/site || exit 5
echo "== installed at $(el)s"
export PYTHONPATH=/root/site:$REPO/tools/fidelity/vllm_step_clock STEP_CLOCK_DIR=$W/steps
cd /root
MODEL=$REPO/.carry/models/llama3_8b
md5sum $MODEL/config.json $MODEL/generation_config.json $MODEL/tokenizer/tokenizer.json
export VLLM_USE_V2_MODEL_RUNNER=0 VLLM_USE_FLASHINFER_SAMPLER=0 VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 HF_HUB_OFFLINE=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 VLLM_SERVER_DEV_MODE=1
PROF='{"profiler":"torch","torch_profiler_dir":"'$W/prof'","torch_profiler_with_stack":false,"torch_profiler_dump_cuda_time_total":false,"ignore_frontend":true,"max_iterations":'${PROFILE_STEPS:-200}'}'
SERVE="python3 -m vllm.entrypoints.cli.main serve $MODEL --tokenizer $MODEL/tokenizer --load-format dummy --host 127.0.0.1 --port 8000 --tensor-parallel-size 1 --pipeline-parallel-size 1 --max-model-len 4096 --profiler-config '$PROF'"
echo "$SERVE" > $W/commands.txt
echo "== server launch $(date -u +%FT%T.%NZ) at $(el)s"
setsid bash -c "exec $SERVE" > $W/server.log 2>&1 &
SPID=$!
up=0
while [ $(el) -lt 270 ]; do
  if ! kill -0 $SPID 2>/dev/null; then echo "SERVER DIED at $(el)s"; tail -60 $W/server.log; exit 6; fi
  if curl -sf 127.0.0.1:8000/health >/dev/null 2>&1; then up=1; break; fi
  sleep 2
done
[ $up = 1 ] || { echo "server not up by $(el)s"; tail -40 $W/server.log; exit 7; }
echo "== server healthy $(date -u +%FT%T.%NZ) at $(el)s"
grep -o 'num_gpu_blocks="[0-9]*"' <(curl -s 127.0.0.1:8000/metrics)
bench() {  # name, timeout, args...
  local name=$1 tmo=$2; shift 2
  kill -0 $SPID 2>/dev/null || { echo "server dead before $name"; return; }
  echo "reset_prefix_cache: $(curl -s -o /dev/null -w '%{http_code}' -X POST 127.0.0.1:8000/reset_prefix_cache)"
  local B="python3 -m vllm.entrypoints.cli.main bench serve --backend vllm --base-url http://127.0.0.1:8000 --model $MODEL --tokenizer $MODEL/tokenizer --dataset-name random --ignore-eos --save-result --save-detailed --percentile-metrics ttft,tpot,itl,e2el --metric-percentiles 50,90,99 --seed 0 --result-dir $OUT --result-filename $name.json $*"
  echo "$B" >> $W/commands.txt
  echo "== $name start $(date -u +%FT%T.%NZ) epoch_ms $(date +%s%3N) at $(el)s"
  timeout $tmo $B > $W/bench_$name.log 2>&1; echo "$name rc=$?"
  echo "== $name end $(date -u +%FT%T.%NZ) epoch_ms $(date +%s%3N) at $(el)s"
  grep -E -A40 'Serving Benchmark Result' $W/bench_$name.log | head -45
}
case ${LOAD:-mixed_moderate} in
  mixed_moderate) RATE=16 PROFILED=24 ;;
  mixed_saturating) RATE=inf PROFILED=200 ;;
  *) echo "unknown LOAD=$LOAD"; exit 8 ;;
esac
bench ${LOAD:-mixed_moderate} 70 --num-warmups 16 --random-input-len 512 --random-output-len 128 --num-prompts 200 --request-rate $RATE
echo "start_profile: $(curl -s -o /dev/null -w '%{http_code}' -X POST 127.0.0.1:8000/start_profile) epoch_ms $(date +%s%3N)"
bench ${LOAD%_*}_profiled 60 --num-warmups 0 --random-input-len 512 --random-output-len 128 --num-prompts $PROFILED --request-rate $RATE
echo "stop_profile: $(curl -s -o /dev/null -w '%{http_code}' -m 120 -X POST 127.0.0.1:8000/stop_profile) epoch_ms $(date +%s%3N) at $(el)s"
for i in $(seq 1 60); do ls $W/prof/*.json.gz >/dev/null 2>&1 && break; sleep 2; done
sleep 3; ls -la $W/prof; echo "== done at $(el)s"
