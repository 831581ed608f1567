/* The hardware spec vector, the roofline and the spec's collective table (predict_int.h). */
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

/* ---------------------------------------------------------------- collectives by table */

const char *const coll_table_names[CT_N] = {
    "allreduce", "allgather", "reducescatter", "broadcast", "sendrecv",
    "custom_allreduce_1stage", "custom_allreduce_2stage"};

/* Seconds for `wire` bytes per rank by the table's entry for (collective, ranks); false where
 * the spec has none. The figures behind the table were timed around whole operations (launch
 * included), so no launch overhead is added to them. */
static bool by_table(int entry, int n, double wire, double *s)
{
    if (entry < 0 || n < 2 || n > CT_MAX_RANKS || !(g_coll[entry][n][1] > 0)) return false;
    *s = g_coll[entry][n][0] * 1e-6 + wire / (g_coll[entry][n][1] * 1e9);
    return true;
}

/* The roofline counts a collective's wire bytes at NVLink's line rate and nothing else, so it
 * misses the latency that dominates small messages (tens of microseconds where it says one)
 * and NCCL's protocol overhead on large ones; the table has both, per rank count. */
int64_t collective_ns(const struct rv_launch *l)
{
    int entry = -1, n = l->nranks;
    switch (l->coll) {
    case RV_COLL_ALLREDUCE: entry = CT_ALLREDUCE; break;
    case RV_COLL_ALLGATHER: entry = CT_ALLGATHER; break;
    case RV_COLL_REDUCESCATTER: entry = CT_REDUCESCATTER; break;
    case RV_COLL_BROADCAST: entry = CT_BROADCAST; break;
    /* a transfer between one pair of GPUs, whatever the communicator's size */
    case RV_COLL_SEND: case RV_COLL_RECV: entry = CT_SENDRECV; n = 2; break;
    default: break; /* reduce, all-to-all: the roofline */
    }
    double s;
    if (l->nranks > 1 && by_table(entry, n, coll_wire_bytes(l->coll, (double)l->bytes, n), &s))
        return llround(s * 1e9);
    return rv_roofline_ns(l, g_spec);
}

/* vLLM's custom all-reduce (csrc/custom_all_reduce.cuh): vllm::cross_device_reduce_1stage or
 * _2stage<T, ngpus>(RankData*, RankSignals, Signal*, T*, int rank, int size), launched by the
 * engine, not NCCL. The rank count is the template's int literal, "Li<ngpus>E" in the mangled
 * name the shim passes. `size` counts 16-byte packs and is the launch's arg_max: rv_arg_sizes
 * counts the 4-byte scalars from 1 up (rank < ngpus <= 8 is smaller than any buffer of 128
 * bytes or more), leaves the RankSignals structure out and the pointers above its range. The
 * one-stage kernel reads the whole buffer from every peer; the two-stage one reduce-scatters
 * and all-gathers it, moving what a ring all-reduce moves. */
int64_t custom_allreduce_ns(const struct rv_launch *l)
{
    static const char stem[] = "cross_device_reduce_";
    const char *p = l->kernel ? strstr(l->kernel, stem) : NULL;
    if (!p || l->arg_max <= 0) return -1;
    p += sizeof stem - 1;
    int entry = !strncmp(p, "1stageI", 7) ? CT_CUSTOM_AR_1STAGE
              : !strncmp(p, "2stageI", 7) ? CT_CUSTOM_AR_2STAGE : -1;
    const char *lit = entry >= 0 ? strstr(p, "Li") : NULL;
    int n = lit ? atoi(lit + 2) : 0;
    if (n < 2 || n > CT_MAX_RANKS) return -1;
    double bytes = 16.0 * (double)l->arg_max;
    double wire = entry == CT_CUSTOM_AR_1STAGE ? (n - 1) * bytes : 2.0 * (n - 1) / n * bytes;
    double s;
    return by_table(entry, n, wire, &s) ? llround(s * 1e9) : -1;
}
