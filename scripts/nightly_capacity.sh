#!/usr/bin/env bash
# Nightly capacity plan with revati-tune (a Hydra multirun, one study per combination):
#   - sweep=tp_pp: the best parallel layout (goodput per GPU under the workload's SLOs);
#   - sweep=rate_capacity: the Pareto front of output throughput against p99 TTFT over
#     request rate x tensor-parallel size, i.e. how much load one replica takes at what
#     tail latency;
# for every model x GPU type x workload below. Studies resume, so a night that runs out of
# time carries on the next night; raising a budget (sweep.n_trials=...) extends them.
#
#   scripts/nightly_capacity.sh [extra Hydra overrides...]
#
# Environment: REVATI_NIGHTLY_{MODELS,HARDWARE,WORKLOADS} (comma lists), REVATI_NIGHTLY_DIR
# (where outputs/ and the MLflow store go; default: here), REVATI_TUNE_STORAGE (an RDB URL
# such as postgresql://user@host/db, so that several hosts run this script on one set of
# studies), REVATI_TUNE (the command, default revati-tune).
set -euo pipefail

models=${REVATI_NIGHTLY_MODELS:-llama3_8b,qwen2_5_7b,qwen2_5_32b,llama3_70b,mixtral_8x7b}
hardware=${REVATI_NIGHTLY_HARDWARE:-h100_sxm,h200_sxm}
workloads=${REVATI_NIGHTLY_WORKLOADS:-chat_short,random_1k,long_context}
tune=${REVATI_TUNE:-revati-tune}

overrides=("+model=$models" "hardware=$hardware" "workload=$workloads")
if [[ -n ${REVATI_TUNE_STORAGE:-} ]]; then
    overrides+=("study.storage=$REVATI_TUNE_STORAGE")
fi

cd "${REVATI_NIGHTLY_DIR:-.}"
for sweep in tp_pp rate_capacity; do
    "$tune" --multirun "${overrides[@]}" "sweep=$sweep" study.show_progress=false "$@"
done
echo "reports: $(pwd)/outputs/revati-tune/*/report.md; MLflow: $(pwd)/outputs/revati-tune/mlflow.db"
