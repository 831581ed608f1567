"""Emulated GPUs: hardware specs (spec), the environment of an emulated process (env), and
the probe `revati doctor` compares with a spec (probe). The native side is in
revati/native/: cuda/ (libcuda.so.1: cuda*.c, darkapi.c and the tables gen_cuda.py generates),
nvml/ (libnvidia-ml.so.1), nccl/ (libnccl.so.2), cublas/ (GEMM shapes)."""
