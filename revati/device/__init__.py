"""Emulated GPUs: hardware specs (spec), the environment of an emulated process (env), and
the probe `revati doctor` compares with a spec (probe). The native side is in
revati/native/: cuda*.c and darkapi.c (libcuda.so.1), nvml.c (libnvidia-ml.so.1), nccl.c
(libnccl.so.2), cublas.c (GEMM shapes), generated tables from gen_cuda.py."""
