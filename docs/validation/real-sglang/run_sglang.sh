#!/bin/bash
# Real SGLang 0.5.17 on one H200, measured as docs/validation/real-warm/run_warm.sh measures
# vLLM: the same three workloads through the same client (`vllm bench serve`, 16 warm-ups,
# --backend openai as `revati bench --engine sglang` runs it), the server started with the
# flags revati/engines/sglang.py gives the emulated one.
#   run_sglang.sh install   unpack the carried parts (/root/parts: vLLM p.*, SGLang s.*)
#   run_sglang.sh serve     start the server in its own session, wait until it is healthy
#   run_sglang.sh profile   torch-profiler traces of short loads against the running server
#                           (PROFILES: which, in order), reduced to their GPU events:
#                           $OUT/trace_<load>.json.gz, for `revati profile engine-rows`
#   run_sglang.sh bench     the benchmarks against the running server, then stop it
#                           (WORKLOADS: which, in order; default the three of 2026-12-02)
# Everything it records goes under $OUT (results.tar.gz: logs, versions, commands).
set -u
MODE=${1:?install|serve|bench}
REPO=$PWD
W=/root/w; mkdir -p $W
exec > >(tee -a $W/main_$MODE.log) 2>&1
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
# SGLang's own pins (openai, fastapi, transformers 5.12.1, tvm-ffi 0.1.11, ...) live in
# /root/site-sgl, ahead of the vLLM payload's /root/site; the client is vLLM's, on /root/site
# alone. SGLang JIT-compiles some kernels at start (tvm-ffi + the image's nvcc 13.0).
# FlashInfer's CuTe-DSL norm kernels need nvidia-cutlass-dsl, whose .pth (which puts its
# dsl_packages on sys.path) a --target install does not run: the path is given here instead.
SGL_PATH=/root/site-sgl:/root/site-sgl/nvidia_cutlass_dsl/dsl_packages:/root/site
export PYTHONUNBUFFERED=1 DO_NOT_TRACK=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 \
  HF_DATASETS_OFFLINE=1 HF_HUB_DISABLE_TELEMETRY=1 VLLM_NO_USAGE_STATS=1 \
  NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 \
  TVM_FFI_CACHE_DIR=/root/.cache/tvm-ffi
command -v nvcc >/dev/null || export PATH=/usr/local/cuda/bin:$PATH
export CUDA_HOME=${CUDA_HOME:-$(dirname "$(dirname "$(command -v nvcc)")")}
MODEL=$REPO/.carry/models/llama3_8b
PORT=30000
save() { tar -czf $OUT/results_$MODE.tar.gz -C $W --exclude=./prof . ; ls -la $OUT; }
trap save EXIT
case $MODE in
install)
  cd /root/parts && ls -la
  cat p.?? > /root/vllm.tar && md5sum /root/vllm.tar
  cat s.?? > /root/sgl.tar && md5sum /root/sgl.tar
  mkdir -p /root/pl /root/sglp /root/site /root/site-sgl
  tar -xf /root/vllm.tar -C /root/pl && tar -xf /root/sgl.tar -C /root/sglp || exit 3
  rm -f /root/vllm.tar /root/sgl.tar
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /root/site \
    /root/pl/deps/*.whl || exit 4
  tar -xJf /root/pl/vllm026-*.tar.xz -C /root/site || exit 5
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
    --target /root/site-sgl /root/sglp/deps/*.whl || exit 6
  tar -xJf /root/sglp/sglang-trim.tar.xz -C /root/site-sgl || exit 7
  xz -dc /root/sglp/flash_ops.abi3.so.xz > /root/site-sgl/sgl_kernel/flash_ops.abi3.so || exit 8
  # nvidia-cutlass-dsl (cu13 flavour), a dependency of sglang and flashinfer-python, carried
  # as c.?? parts since 2026-12-03 10:20 UTC (runs before it lacked it; FlashInfer then falls
  # back from its CuTe-DSL norm kernels to its CUDA ones)
  if ls c.?? >/dev/null 2>&1; then
    mkdir -p /root/cdsl && cat c.?? > /root/cdsl.tar && md5sum /root/cdsl.tar && tar -xf /root/cdsl.tar -C /root/cdsl || exit 9
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
      --target /root/site-sgl /root/cdsl/*.whl || exit 10
  fi
  # SGLang tries `import vllm` (marlin_utils, suppress_other_loggers): hide the client's vLLM
  mkdir -p /root/site-sgl/vllm
  echo 'raise ImportError("vllm hidden from SGLang")' > /root/site-sgl/vllm/__init__.py
  echo "== installed at $(el)s"
  { date -u; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
    echo "CUDA_HOME=$CUDA_HOME"; nvcc --version | tail -2
    PYTHONPATH=$SGL_PATH python3 -c 'import torch,sglang,sgl_kernel,flashinfer,transformers;print("torch",torch.__version__,"sglang",sglang.__version__,"sgl_kernel",getattr(sgl_kernel,"__version__","?"),"flashinfer",flashinfer.__version__,"transformers",transformers.__version__)'
    PYTHONPATH=/root/site python3 -c 'import vllm;print("client vllm",vllm.__version__)'
  } > $W/versions.txt 2>&1
  PYTHONPATH=$SGL_PATH python3 -c 'import flashinfer.norm as n; print("flashinfer norm kernels:", "CUDA" if n._USE_CUDA_NORM else "CuTe DSL")' >> $W/versions.txt 2>&1
  cat $W/versions.txt
  # one JIT compile now, so a missing compiler shows here rather than in the server's start
  PYTHONPATH=$SGL_PATH python3 -c "import torch; from sglang.kernels.ops.activation.activation import silu_and_mul; x=torch.randn(8,28672,device='cuda',dtype=torch.bfloat16); o=silu_and_mul(x); torch.cuda.synchronize(); ref=torch.nn.functional.silu(x[:,:14336].float())*x[:,14336:].float(); print('JIT ok, maxerr', (o.float()-ref).abs().max().item())" 2>&1 | tail -5
  echo "== preflight done at $(el)s"
  ;;
serve)
  SERVE="python3 -m sglang.launch_server --model-path $MODEL --tokenizer-path $MODEL/tokenizer --load-format dummy --host 127.0.0.1 --port $PORT --tp-size 1 --pp-size 1 --skip-server-warmup --context-length 4096"
  echo "$SERVE" > $W/commands.txt
  echo "== server launch $(date -u +%FT%T.%NZ)"
  PYTHONPATH=$SGL_PATH setsid bash -c "echo \$\$ > $W/server.pid; exec $SERVE" \
    > $W/server.log 2>&1 < /dev/null &
  up=0
  while [ $(el) -lt 540 ]; do
    sleep 2
    kill -0 $(cat $W/server.pid) 2>/dev/null || { echo "SERVER DIED at $(el)s"; tail -60 $W/server.log; exit 6; }
    if curl -sf 127.0.0.1:$PORT/health >/dev/null 2>&1; then up=1; break; fi
  done
  [ $up = 1 ] || { echo "server not up by $(el)s"; tail -40 $W/server.log; exit 7; }
  echo "== server healthy $(date -u +%FT%T.%NZ) at $(el)s"
  curl -s 127.0.0.1:$PORT/server_info > $W/server_info.json
  python3 -c 'import json;d=json.load(open("/root/w/server_info.json"));print({k:d.get(k) for k in ("max_total_num_tokens","page_size","attention_backend","sampling_backend","cuda_graph_max_bs","chunked_prefill_size","mem_fraction_static")})'
  grep -n -i -E 'backend|KV Cache|max_total_num_tokens|cuda graph|Capture|jit|compil' $W/server.log | cut -c1-250 | head -30
  ;;
profile)
  mkdir -p $W/prof $W/profiled
  profiled() {  # name, num_steps (0: the whole load), client args...
    local name=$1 steps=$2; shift 2
    kill -0 $(cat $W/server.pid) 2>/dev/null || { echo "server dead before $name"; return; }
    curl -s -o /dev/null -X POST 127.0.0.1:$PORT/flush_cache
    local req='{"output_dir":"'$W/prof/$name'","activities":["GPU"],"with_stack":false,"profile_id":"'$name'"'
    [ $steps -gt 0 ] && req="$req"',"num_steps":'$steps
    echo "$name start_profile: $(curl -s -m 60 -X POST -H 'Content-Type: application/json' -d "$req}" 127.0.0.1:$PORT/start_profile)"
    local B="env PYTHONPATH=/root/site python3 -m vllm.entrypoints.cli.main bench serve --backend openai --base-url http://127.0.0.1:$PORT --model $MODEL --tokenizer $MODEL/tokenizer --dataset-name random --ignore-eos --save-result --seed 0 --num-warmups 0 --result-dir $W/profiled --result-filename $name.json $*"
    echo "$B" >> $W/commands.txt
    timeout 120 $B > $W/bench_profiled_$name.log 2>&1; echo "$name rc=$? at $(el)s"
    grep -E -A12 'Serving Benchmark Result' $W/bench_profiled_$name.log | head -12
    # with num_steps the profiler has stopped itself; otherwise this stops it and writes the trace
    [ $steps -gt 0 ] || echo "$name stop_profile: $(curl -s -m 180 -X POST 127.0.0.1:$PORT/stop_profile)"
    for i in $(seq 1 60); do ls $W/prof/$name/*.json.gz >/dev/null 2>&1 && break; sleep 2; done
    ls -la $W/prof/$name
    # keep the GPU events (kernels with grid and block, copies, memsets): a few MB, not the whole trace
    python3 - $W/prof/$name $OUT/trace_$name.json.gz <<'PY'
import glob, gzip, json, sys
src = sorted(glob.glob(sys.argv[1] + "/*.json.gz"))
ev = json.load(gzip.open(src[-1], "rt"))["traceEvents"]
keep = [e for e in ev if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
json.dump({"traceEvents": keep}, gzip.open(sys.argv[2], "wt"))
print(src[-1], len(ev), "events,", len(keep), "kept,",
      sum(e["cat"] == "kernel" for e in keep), "kernels")
PY
  }
  for w in ${PROFILES:-mixed_saturating mixed_moderate prefill_heavy decode_heavy}; do
    case $w in
      mixed_saturating) profiled $w 0 --random-input-len 512 --random-output-len 128 --num-prompts 200 --request-rate inf ;;
      mixed_moderate) profiled $w 0 --random-input-len 512 --random-output-len 128 --num-prompts 24 --request-rate 16 ;;
      prefill_heavy) profiled $w 0 --random-input-len 2048 --random-output-len 32 --num-prompts 20 --request-rate 8 ;;
      decode_heavy) profiled $w 300 --random-input-len 128 --random-output-len 512 --num-prompts 8 --request-rate 4 ;;
      *) echo "unknown load $w" ;;
    esac
  done
  echo "== profiled at $(el)s"
  ;;
bench)
  bench() {  # name, args...
    local name=$1; shift
    kill -0 $(cat $W/server.pid) 2>/dev/null || { echo "server dead before $name"; return; }
    echo "flush_cache: $(curl -s -o /dev/null -w '%{http_code}' -X POST 127.0.0.1:$PORT/flush_cache)" | tee -a $W/bench_$name.log
    local B="env PYTHONPATH=/root/site python3 -m vllm.entrypoints.cli.main bench serve --backend openai --base-url http://127.0.0.1:$PORT --model $MODEL --tokenizer $MODEL/tokenizer --dataset-name random --ignore-eos --save-result --save-detailed --percentile-metrics ttft,tpot,itl,e2el --metric-percentiles 50,90,99 --seed 0 --num-warmups 16 --result-dir $OUT --result-filename $name.json $*"
    echo "$B" >> $W/commands.txt
    local s=$(date +%s.%N)
    timeout 150 $B >> $W/bench_$name.log 2>&1; local rc=$?
    local e=$(date +%s.%N)
    echo "$name rc=$rc wall_s=$(python3 -c "print(round($e-$s,3))")" | tee -a $W/durations.txt
    grep -E -A30 'Serving Benchmark Result' $W/bench_$name.log | head -32
  }
  for w in ${WORKLOADS:-decode_heavy prefill_heavy mixed_saturating}; do
    case $w in
      decode_heavy) bench $w --random-input-len 128 --random-output-len 512 --num-prompts 100 --request-rate 4 ;;
      prefill_heavy) bench $w --random-input-len 2048 --random-output-len 32 --num-prompts 100 --request-rate 8 ;;
      mixed_saturating) bench $w --random-input-len 512 --random-output-len 128 --num-prompts 200 --request-rate inf ;;
      mixed_moderate) bench $w --random-input-len 512 --random-output-len 128 --num-prompts 200 --request-rate 16 ;;
      *) echo "unknown workload $w" ;;
    esac
  done
  kill -TERM -- -$(cat $W/server.pid) 2>/dev/null; sleep 5; kill -KILL -- -$(cat $W/server.pid) 2>/dev/null
  gzip -k $W/server.log
  echo "== done at $(el)s"
  ;;
esac
