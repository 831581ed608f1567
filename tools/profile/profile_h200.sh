#!/usr/bin/env bash
# Measure a GPU machine into a hardware profile: the commands that produced the shipped H200
# profile (revati/predict/data/profiles/h200). Run from the repository root on the GPU machine,
# with a torch CUDA build, pandas, pyarrow, PyYAML and (for devinfo) nvidia-ml-py installed.
#   tools/profile/profile_h200.sh OUT_DIR [CUDA_H]
# CUDA_H: a cuda.h (or its CUdevice_attribute enum) when the machine has no CUDA headers.
# Then, on any machine (no GPU needed):
#   revati profile merge --out revati/predict/data/profiles/h200 OUT_DIR/gemm OUT_DIR/rest
#   cp OUT_DIR/e2e/* revati/predict/data/profiles/h200/
#   revati profile args --profile revati/predict/data/profiles/h200   # kernel-argument sizes
#   revati profile rows --profile revati/predict/data/profiles/h200 MOE/moe_rows.jsonl  # fused MoE
#   revati predictor train --profile revati/predict/data/profiles/h200
#   revati predictor e2e --hardware h200_sxm --out revati/predict/data/models/h200/e2e_emulated.json
# and the sustained-power figures of revati/conf/hardware/h200_sxm.yaml:
#   python tools/calibrate/power_h200.py fit OUT_DIR/power.json
set -euo pipefail
OUT=${1:?usage: $0 OUT_DIR [CUDA_H]}
CUDA_H=${2:-}
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
PY=${PYTHON:-python3}
# The predictor library (spec keys, features) without a full package install.
gcc -O2 -fvisibility=hidden -std=gnu11 -D_GNU_SOURCE -shared -fPIC \
    -o revati/native/librevati_predict.so revati/native/predict/*.c -ldl -lpthread -lm
mkdir -p "$OUT"
$PY -m revati.profile.devinfo --out "$OUT/devinfo.json" ${CUDA_H:+--cuda-h "$CUDA_H"}
# Two runs, each under its own time budget, so a lease that ends early keeps the first. The
# prefixes of the second include the *_offgrid, embedding_rows and sampling_large sweeps, which
# the shipped profile measured in runs of their own (2026-12-01 12:14, 2026-12-02 01:45 and
# 07:56 UTC).
$PY -m revati.profile.micro --out "$OUT/gemm" --only gemm_bf16,gemm_fp8,gemm_fp16 \
    --max-seconds 200 2>&1 | tee "$OUT/micro.log"
$PY -m revati.profile.micro --out "$OUT/rest" --max-seconds 200 \
    --only rms,elementwise,reduce,silu,rotary,sampling,embedding,memcpy,attn_decode,attn_prefill,attn_chunk \
    2>&1 | tee -a "$OUT/micro.log"
$PY -m revati.profile.e2e --out "$OUT/e2e" --reps 11
$PY tools/calibrate/power_h200.py measure "$OUT/power.json"
