#!/usr/bin/env bash
# vLLM's FlashAttention-3 on engine steps that mix decodes with prefill chunks, timed on the
# H200 (issue #25, item 2: the data a mixed-attention model needs). Run by the device tool
# from the repository root, carrying vLLM 0.26.0's FA3 module alone:
#   .carry/fa3.so.gz    vllm/vllm_flash_attn/_vllm_fa3_C.abi3.so from the wheel, gzip -1
#                       (md5 of the .so: fb5540b0c894947ff976243b1fb45d51)
#   .carry/fa3site/     vllm/vllm_flash_attn/ from the wheel without its .so files, and a
#                       vllm/__init__.py that imports nothing (the rest of vLLM is not needed)
#   N=3000 SEED=2 SECONDS_BUDGET=360 bash tools/device/fa3_mixed.sh -> $OUT/fa3/fa3_mixed.jsonl.gz
set -euo pipefail
OUT=${OUT:?run through the device tool, which sets OUT}
SITE=/root/fa3site
mkdir -p "$SITE" "$OUT/fa3"
cp -r .carry/fa3site/. "$SITE/"
gunzip -c .carry/fa3.so.gz > "$SITE/vllm/vllm_flash_attn/_vllm_fa3_C.abi3.so"
PY=${PYTHON:-python3}
{ md5sum "$SITE/vllm/vllm_flash_attn/_vllm_fa3_C.abi3.so"
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv
  $PY -c 'import torch, sys; print(sys.version.split()[0], torch.__version__, torch.version.cuda)'
} > "$OUT/fa3/versions.txt" 2>&1
PYTHONPATH=$SITE:$PWD $PY tools/profile/profile_fa3.py --out "$OUT/fa3" --only-mixed \
    --mixed "${N:-3000}" --mixed-seed "${SEED:-2}" --max-seconds 0 --mixed-seconds "${SECONDS_BUDGET:-360}" \
    2>&1 | tee "$OUT/fa3/profile.log"
gzip -9 "$OUT/fa3/fa3_mixed.jsonl"
