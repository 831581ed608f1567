#!/bin/bash
# On the H200: vLLM 0.26.0 (the carried MoE payload + FA3) serving llama3_8b exactly as
# docs/validation/real-warm/run_warm.sh, logged at DEBUG level; stops once healthy, after
# saving num_gpu_blocks and the memory lines. Everything under $OUT.
set -u
REPO=$PWD
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
cp .carry/p.03 /root/parts/ && cd /root/parts && cat p.00 p.01 p.02 p.03 > /root/payload.tar
md5sum /root/payload.tar
mkdir -p /root/pl /root/site && tar -xf /root/payload.tar -C /root/pl || exit 3
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /root/site /root/pl/deps/*.whl || exit 4
tar -xJf /root/pl/vllm026-moe.tar.xz -C /root/site || exit 5
xz -dc /root/parts/fa3.so.xz > /root/site/vllm/vllm_flash_attn/_vllm_fa3_C.abi3.so || exit 6
echo "== installed at $(el)s"
export PYTHONPATH=/root/site PYTHONUNBUFFERED=1 VLLM_LOGGING_LEVEL=DEBUG
export VLLM_USE_V2_MODEL_RUNNER=0 VLLM_USE_FLASHINFER_SAMPLER=0 VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1 HF_HUB_OFFLINE=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 VLLM_SERVER_DEV_MODE=1
MODEL=$REPO/.carry/models/llama3_8b
SERVE="python3 -m vllm.entrypoints.cli.main serve $MODEL --tokenizer $MODEL/tokenizer --load-format dummy --host 127.0.0.1 --port 8000 --tensor-parallel-size 1 --pipeline-parallel-size 1 --max-model-len 4096"
echo "$SERVE" > $OUT/commands.txt
setsid bash -c "exec $SERVE" > $OUT/server.log 2>&1 &
SPID=$!
up=0
while [ $(el) -lt 480 ]; do
  kill -0 $SPID 2>/dev/null || { echo "SERVER DIED at $(el)s"; break; }
  if curl -sf 127.0.0.1:8000/health >/dev/null 2>&1; then up=1; break; fi
  sleep 2
done
echo "== healthy=$up at $(el)s"
curl -s 127.0.0.1:8000/metrics | grep -E 'cache_config_info' > $OUT/num_gpu_blocks.txt
grep -o 'num_gpu_blocks="[0-9]*"' $OUT/num_gpu_blocks.txt
kill -TERM -- -$SPID 2>/dev/null; sleep 3; kill -KILL -- -$SPID 2>/dev/null
grep -E "CUDA graph memory|first-capture|non-torch|KV cache|Free memory|Memory profiling" $OUT/server.log | cut -c1-400
gzip -k $OUT/server.log
