#!/bin/bash
# Real vLLM 0.26.0 on one H200: install carried parts, start server as Revati's emulator does, run 3 benchmarks.
set -u
T0=$(date +%s)
W=/root/w; mkdir -p $W
exec > >(tee -a $W/main.log) 2>&1
el() { echo $(( $(date +%s) - T0 )); }
finish() {
  echo "== finish at $(el)s"
  [ -n "${SPID:-}" ] && kill -TERM -- -$SPID 2>/dev/null; sleep 2
  cp -f $OUT/*.json $W/ 2>/dev/null
  tar -czf $OUT/results.tar.gz -C $W . ; ls -la $OUT
}
trap finish EXIT
export PYTHONUNBUFFERED=1
echo "== start $(date -u +%FT%TZ)"
cd /root/parts && ls -la && md5sum p.* && cat p.* > /root/payload.tar && md5sum /root/payload.tar && echo "expect $EXPECT_MD5"
mkdir -p /root/pl /root/site && tar -xf /root/payload.tar -C /root/pl && rm -f /root/payload.tar || exit 3
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /root/site /root/pl/deps/*.whl || exit 4
tar -xJf /root/pl/vllm026-trim.tar.xz -C /root/site || exit 5
echo "== installed at $(el)s"
export PYTHONPATH=/root/site
cd /root
MODEL=$REPO/.carry/models/llama3_8b
{ date -u; uname -a; nvidia-smi; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv;
  python3 --version; python3 -c 'import torch,vllm,transformers,tokenizers,triton;print("torch",torch.__version__,"cuda",torch.version.cuda,"cudnn",torch.backends.cudnn.version());print("vllm",vllm.__version__,vllm.__file__);print("transformers",transformers.__version__,"tokenizers",tokenizers.__version__,"triton",triton.__version__);print(torch.cuda.get_device_name(0),torch.cuda.get_device_capability(0))'; } > $W/versions.txt 2>&1
cat $W/versions.txt | tail -8
echo "== versions at $(el)s"
export VLLM_USE_V2_MODEL_RUNNER=0 VLLM_USE_FLASHINFER_SAMPLER=0 VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 HF_HUB_OFFLINE=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 VLLM_SERVER_DEV_MODE=1
SERVE="python3 -m vllm.entrypoints.cli.main serve $MODEL --tokenizer $MODEL/tokenizer --load-format dummy --host 127.0.0.1 --port 8000 --tensor-parallel-size 1 --pipeline-parallel-size 1 --max-model-len 4096"
echo "$SERVE" > $W/commands.txt
setsid bash -c "exec $SERVE" > $W/server.log 2>&1 &
SPID=$!
echo "server pid $SPID"
up=0
while [ $(el) -lt 330 ]; do
  if ! kill -0 $SPID 2>/dev/null; then echo "SERVER DIED at $(el)s"; tail -60 $W/server.log; exit 6; fi
  if curl -sf 127.0.0.1:8000/health >/dev/null 2>&1; then up=1; break; fi
  sleep 2
done
[ $up = 1 ] || { echo "server not up by $(el)s"; tail -40 $W/server.log; exit 7; }
echo "== server healthy at $(el)s"
curl -s 127.0.0.1:8000/metrics > $W/metrics_start.txt
grep -E 'cache_config_info' $W/metrics_start.txt | tee $W/num_gpu_blocks.txt
grep -n -i -E 'KV cache|num_gpu_blocks|GPU blocks|memory|graph|compile|backend|Maximum concurrency' $W/server.log | head -40
bench() {  # name, limit_at, args...
  local name=$1 lim=$2 tmo=$3; shift 3
  if [ $(el) -gt $lim ]; then echo "SKIP $name at $(el)s (over $lim)"; return; fi
  kill -0 $SPID 2>/dev/null || { echo "server dead before $name"; return; }
  echo "reset_prefix_cache: $(curl -s -o /dev/null -w '%{http_code}' -X POST 127.0.0.1:8000/reset_prefix_cache)" | tee -a $W/bench_$name.log
  local B="python3 -m vllm.entrypoints.cli.main bench serve --backend vllm --base-url http://127.0.0.1:8000 --model $MODEL --tokenizer $MODEL/tokenizer --dataset-name random --ignore-eos --save-result --save-detailed --percentile-metrics ttft,tpot,itl,e2el --metric-percentiles 50,90,99 --seed 0 --result-dir $OUT --result-filename $name.json $*"
  echo "$B" >> $W/commands.txt
  local s=$(date +%s.%N); echo "== $name start $(date -u +%FT%T.%NZ) at $(el)s"
  timeout $tmo $B >> $W/bench_$name.log 2>&1; local rc=$?
  local e=$(date +%s.%N)
  echo "$name rc=$rc wall_s=$(python3 -c "print(round($e-$s,3))")" | tee -a $W/durations.txt
  grep -E -A40 'Serving Benchmark Result' $W/bench_$name.log | head -45
}
bench decode_heavy 340 100 --random-input-len 128 --random-output-len 512 --num-prompts 100 --request-rate 4
bench prefill_heavy 420 60 --random-input-len 2048 --random-output-len 32 --num-prompts 100 --request-rate 8
bench mixed_saturating 455 60 --random-input-len 512 --random-output-len 128 --num-prompts 200 --request-rate inf
curl -s 127.0.0.1:8000/metrics > $W/metrics_end.txt
echo "== done at $(el)s"
