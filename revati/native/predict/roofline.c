/* The hardware spec vector and the roofline (predict_int.h). */
#include "predict_int.h"

/* ---------------------------------------------------------------- hardware spec */

const char *const spec_keys[SP_N] = {
    "sm_count", "memory_bytes", "peak_flops.fp32", "peak_flops.tf32", "peak_flops.fp16",
    "peak_flops.bf16", "peak_flops.fp8", "hbm_bytes_per_s", "nvlink_bytes_per_s",
    "pcie_bytes_per_s", "launch_overhead_ns"};

EXPORT const char *rv_spec_key(int i) { return i >= 0 && i < SP_N ? spec_keys[i] : NULL; }
EXPORT int rv_spec_len(void) { return SP_N; }

/* ---------------------------------------------------------------- roofline */

static double peak_flops(const double *spec, int dtype)
{
    switch (dtype) {
    case RV_DT_F16: return spec[SP_FP16];
    case RV_DT_BF16: return spec[SP_BF16];
    case RV_DT_FP8_E4M3: case RV_DT_FP8_E5M2: case RV_DT_I8: return spec[SP_FP8];
    default: return spec[SP_FP32]; /* f32 (cuBLAS default is no TF32), f64, unknown */
    }
}

double dtype_bytes(int dtype)
{
    switch (dtype) {
    case RV_DT_F16: case RV_DT_BF16: return 2;
    case RV_DT_FP8_E4M3: case RV_DT_FP8_E5M2: case RV_DT_I8: return 1;
    case RV_DT_F64: return 8;
    default: return 4;
    }
}

/* Bytes on the wire per rank for a ring/tree collective over `bytes` of payload
 * (bytes = the largest buffer of the op: the all-reduced buffer, the gathered output,
 * the scattered input). */
static double coll_wire_bytes(int coll, double bytes, int n)
{
    double f = (double)(n - 1) / n;
    switch (coll) {
    case RV_COLL_ALLREDUCE: return 2.0 * f * bytes;
    case RV_COLL_ALLGATHER: case RV_COLL_REDUCESCATTER: case RV_COLL_ALLTOALL: return f * bytes;
    default: return bytes; /* broadcast, reduce, send, recv */
    }
}

/* A GEMM's seconds of tensor-core work (tc) and of HBM traffic (tm) at peak rates. */
void gemm_times(const struct rv_launch *l, const double *spec, double *tc, double *tm)
{
    double b = l->batch > 0 ? (double)l->batch : 1.0;
    double m = (double)l->m, n = (double)l->n, k = (double)l->k;
    double bytes = b * (m * k * dtype_bytes(l->dtype_a) + k * n * dtype_bytes(l->dtype_b) +
                        m * n * dtype_bytes(l->dtype_c));
    *tc = 2.0 * m * n * k * b / peak_flops(spec, l->dtype_a);
    *tm = bytes / spec[SP_HBM];
}

/* Seconds of pure work (no launch overhead) by the roofline. */
static double roofline_s(const struct rv_launch *l, const double *spec)
{
    switch (l->op) {
    case RV_OP_GEMM: {
        double tc, tm;
        gemm_times(l, spec, &tc, &tm);
        return tc > tm ? tc : tm;
    }
    case RV_OP_MEMCPY:
        switch (l->copy_kind) {
        case RV_COPY_D2D: return 2.0 * (double)l->bytes / spec[SP_HBM]; /* read + write */
        case RV_COPY_P2P: return (double)l->bytes / spec[SP_NVLINK];
        default: return (double)l->bytes / spec[SP_PCIE]; /* H2D, D2H, pageable H2H staging */
        }
    case RV_OP_MEMSET: return (double)l->bytes / spec[SP_HBM];
    case RV_OP_COLLECTIVE:
        if (l->nranks <= 1) return 0;
        return coll_wire_bytes(l->coll, (double)l->bytes, l->nranks) / spec[SP_NVLINK];
    default: {
        /* A kernel nobody profiled: all we know is its launch shape. Assume each thread
         * streams 16 bytes (one 128-bit load or store), the common case for the
         * memory-bound element-wise and normalisation kernels that dominate the long tail. */
        double threads = (double)l->grid[0] * l->grid[1] * l->grid[2] *
                         (double)l->block[0] * l->block[1] * l->block[2];
        return threads * 16.0 / spec[SP_HBM];
    }
    }
}

/* Roofline duration in ns (launch overhead included) for a spec vector in rv_spec_key order. */
EXPORT int64_t rv_roofline_ns(const struct rv_launch *l, const double *spec)
{
    return (int64_t)llround(roofline_s(l, spec) * 1e9 + spec[SP_LAUNCH_NS]);
}
