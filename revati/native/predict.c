/* Duration predictor for the device shim (predict.h; docs/predictor.md).
 *
 * Three sources, in this order:
 *   fixed     REVATI_PREDICT_FIXED_NS=<ns>: every op takes exactly that (tests, debugging).
 *   model     a LightGBM model per kernel family, trained on a real-GPU profile by
 *             `revati predictor train`; evaluated through LightGBM's own C API
 *             (lib_lightgbm.so from the lightgbm Python package, path in REVATI_LIGHTGBM_LIB,
 *             dlopen'ed lazily so a run without models never needs it). The models predict
 *             log(measured / roofline), so they correct the roofline rather than replace it,
 *             which keeps extrapolation outside the profiled range sane.
 *   roofline  from the hardware spec (REVATI_HW_SPEC, "key value" lines) for everything no
 *             model covers; its share of GPU time is reported (rv_predict_totals).
 *
 * The feature vectors and the roofline are computed only here: the Python trainer calls
 * rv_features() and rv_roofline_ns() through ctypes, so training and emulation cannot
 * drift apart. Self-contained on purpose (no core.c): the device shim links it, tests load
 * it with ctypes.
 */
#include "predict.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

static void die(const char *what)
{
    fprintf(stderr, "revati predict: %s\n", what);
    abort();
}

/* ---------------------------------------------------------------- hardware spec */

/* Order of the spec vector shared with Python (rv_spec_key). */
enum { SP_SM_COUNT, SP_MEMORY_BYTES, SP_FP32, SP_TF32, SP_FP16, SP_BF16, SP_FP8, SP_HBM,
       SP_NVLINK, SP_PCIE, SP_LAUNCH_NS, SP_N };

static const char *const spec_keys[SP_N] = {
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

static double dtype_bytes(int dtype)
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
static void gemm_times(const struct rv_launch *l, const double *spec, double *tc, double *tm)
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

/* ---------------------------------------------------------------- features */

/* One feature vector per op class. Names are exported so the Python trainer labels its
 * columns from here (rv_feature_name). Kernel identity (which kernel of a family) is the
 * caller's: slot 0 of the kernel vector is the kernel's index in its family's vocabulary. */
static const char *const gemm_names[] = {
    "m", "n", "k", "batch", "dtype_a", "dtype_b", "dtype_c", "trans_a", "trans_b",
    "log2_flops", "log2_bytes", "log_roofline_ns"};
static const char *const kernel_names[] = {
    "kernel_id", "grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z",
    "shared_bytes", "blocks", "threads_per_block", "log2_threads", "waves", "log2_arg_max",
    "log2_arg_sum", "log2_blocks_arg_max", "log_roofline_ns"};
static const char *const copy_names[] = {"copy_kind", "bytes", "log2_bytes", "log_roofline_ns"};
static const char *const coll_names[] = {"coll", "nranks", "bytes", "log2_bytes",
                                         "log_roofline_ns"};
static const char *const attn_names[] = {  /* op 100, attention by shape */
    "kernel_id", "batch", "q_len", "kv_len", "heads", "kv_heads", "head_dim", "log2_flops",
    "log2_bytes", "log_roofline_ns"};
static const char *const mix_names[] = {  /* op 102, attention over decodes + prefill chunks */
    "kernel_id", "decodes", "prefills", "heads", "kv_heads", "head_dim", "log2_dec_kv",
    "log2_dec_kv_max", "log2_pre_q", "log2_pre_q_max", "log2_pre_kv", "log2_pre_pairs",
    "log2_flops", "log2_bytes", "log_roofline_ns"};
static const char *const moe_names[] = {  /* op 101, fused-MoE GEMMs by routing */
    "tokens", "experts", "top_k", "n", "k", "touched_experts", "grid_x", "block_x",
    "shared_bytes", "log2_flops", "log2_bytes", "log_roofline_ns"};

#define NFEAT_MAX 24  /* features.NFEAT_MAX mirrors it */
#define NFEAT(names) (sizeof names / sizeof *names)
_Static_assert(NFEAT(gemm_names) <= NFEAT_MAX && NFEAT(kernel_names) <= NFEAT_MAX &&
               NFEAT(copy_names) <= NFEAT_MAX && NFEAT(coll_names) <= NFEAT_MAX &&
               NFEAT(attn_names) <= NFEAT_MAX && NFEAT(moe_names) <= NFEAT_MAX &&
               NFEAT(mix_names) <= NFEAT_MAX,
               "a feature vector outgrew NFEAT_MAX");

static int feature_count(int op, const char *const **names)
{
    switch (op) {
    case RV_OP_GEMM: *names = gemm_names; return sizeof gemm_names / sizeof *gemm_names;
    case RV_OP_KERNEL: *names = kernel_names; return sizeof kernel_names / sizeof *kernel_names;
    case RV_OP_MEMCPY: case RV_OP_MEMSET:
        *names = copy_names; return sizeof copy_names / sizeof *copy_names;
    case RV_OP_COLLECTIVE: *names = coll_names; return sizeof coll_names / sizeof *coll_names;
    case 100 /* RV_OP_ATTENTION_SHAPE */:
        *names = attn_names; return sizeof attn_names / sizeof *attn_names;
    case 101 /* RV_OP_MOE_SHAPE */:
        *names = moe_names; return sizeof moe_names / sizeof *moe_names;
    case 102 /* RV_OP_ATTENTION_MIX */:
        *names = mix_names; return sizeof mix_names / sizeof *mix_names;
    default: *names = NULL; return 0;
    }
}

EXPORT const char *rv_feature_name(int op, int i)
{
    const char *const *names;
    int n = feature_count(op, &names);
    return i >= 0 && i < n ? names[i] : NULL;
}

static double lg2(double x) { return x > 0 ? log2(x) : 0; }
static double lg2_arg(int64_t x) { return x < 0 ? NAN : lg2((double)x); } /* -1: unknown */

/* PyTorch's torch.cat kernels (CatArrayBatchedCopy*, aten/src/ATen/native/cuda/Shape.cu)
 * launch two blocks per SM along x at any size and one row of blocks per input along y, so
 * their sizes are only in parameter 1, a CatArrInputTensorMetadata<T, unsigned, n, s> passed
 * by value: input pointers[n], then 4-byte offset[n], dimSize[n], nElements[n], then
 * isContiguous[n] and s 32-byte size/stride records. The host fills entries [0, gridDim.y) and
 * leaves the others as the stack held them, so only those are read. PyTorch instantiates
 * n = 128, s = 1 (contiguous inputs) and n = 64, s = 64; the parameter's size tells which.
 * Returns false (sizes not read) for any other layout. */
static bool cat_input_sizes(unsigned inputs, int count, const uint16_t *size,
                            const void *const *values, int64_t *arg_max, int64_t *arg_sum)
{
    static const struct { uint16_t bytes; unsigned n; } layouts[] = {{2720, 128}, {3392, 64}};
    if (count < 2) return false;
    for (size_t j = 0; j < sizeof layouts / sizeof *layouts; j++) {
        unsigned n = layouts[j].n;
        if (size[1] != layouts[j].bytes || inputs == 0 || inputs > n) continue;
        const char *elements = (const char *)values[1] + 16 * (size_t)n;
        for (unsigned i = 0; i < inputs; i++) {
            uint32_t e;
            memcpy(&e, elements + 4 * (size_t)i, 4);
            if (e > *arg_max) *arg_max = e;
            *arg_sum += e;
        }
        return true;
    }
    return false;
}

/* Element count of a PyTorch TensorInfo<T, I> passed by value (aten/src/ATen/cuda/detail/
 * TensorInfo.cuh: data pointer, I sizes[25], I strides[25], int dims; 216 bytes with a 32-bit I,
 * 416 with a 64-bit one), or 0 when the parameter is not laid out so. */
static int64_t tensor_info_elements(uint16_t size, const void *value)
{
    enum { MAX_DIMS = 25 };
    unsigned width = size == 216 ? 4 : size == 416 ? 8 : 0;
    if (!width) return 0;
    const char *info = value;
    int32_t dims;
    memcpy(&dims, info + 8 + 2 * MAX_DIMS * width, 4);
    if (dims < 1 || dims > MAX_DIMS) return 0;
    double elements = 1;
    for (int d = 0; d < dims; d++) {
        uint64_t n = 0;
        memcpy(&n, info + 8 + (size_t)d * width, width); /* little endian */
        elements *= (double)n;
    }
    return elements >= 1 && elements < 0x1p40 ? (int64_t)elements : 0;
}

/* PyTorch's index_select kernels (indexSelectSmallIndex/LargeIndex, Indexing.cu: embedding
 * lookups) have a grid sized by the row width alone, capped, so how many rows they copy is only
 * in their TensorInfo parameters: 0, the output, whose select dimension the host reduced to 1
 * (one row: its element count is the row width), and 2, the indices (one per row copied).
 * Returns rows x width, the elements the kernel moves, or 0 for any other kernel or layout. */
static int64_t index_select_elements(int count, const uint16_t *size, const void *const *values)
{
    if (count < 3) return 0;
    int64_t width = tensor_info_elements(size[0], values[0]);
    int64_t rows = tensor_info_elements(size[2], values[2]);
    return width > 0 && rows > 0 && (double)width * (double)rows < 0x1p40 ? width * rows : 0;
}

/* PyTorch's reductions (reduce_kernel, Reduce.cuh) take one parameter, a ReduceOp by value,
 * and launch a grid shaped by their split strategy; their sizes are in its ReduceConfig: int
 * element_size_bytes, num_inputs (per output), num_outputs, step_input, step_output,
 * ctas_per_output, input_mult[3], output_mult[2], block_width, block_height, num_threads. The
 * ops and identity before it vary in size with the reduction, so the config is found by its
 * signature: its block dimensions are the launch's. Sets the elements read (num_inputs x
 * num_outputs) as the largest size and num_inputs + num_outputs as the sum; false if not found. */
static bool reduce_config_sizes(unsigned block_x, unsigned block_y, int count,
                                const uint16_t *size, const void *const *values,
                                int64_t *arg_max, int64_t *arg_sum)
{
    if (count != 1 || block_x == 0) return false;
    const char *op = values[0];
    for (size_t o = 0; o + 14 * 4 <= size[0]; o += 4) {
        int32_t c[14];
        memcpy(c, op + o, sizeof c);
        bool element = c[0] == 1 || c[0] == 2 || c[0] == 4 || c[0] == 8 || c[0] == 16;
        if (!element || c[1] < 1 || c[2] < 1 || c[3] < 1 || c[4] < 1 || c[5] < 1 ||
            c[11] != (int32_t)block_x || c[12] != (int32_t)block_y ||
            c[13] != c[11] * c[12])
            continue;
        *arg_max = (int64_t)c[1] * c[2];
        *arg_sum = (int64_t)c[1] + c[2];
        return true;
    }
    return false;
}

/* cuBLASLt's split-K reduction (splitKreduce_kernel) launches one block per output tile, and
 * sums as many partial products per element as the GEMM had splits (k 4,096: 3, k 19,072: 7
 * for the same tiles). Parameter 0, cublasSplitKParams<float> (60 bytes), holds them: 32-bit
 * alpha, beta, m, n, four leading dimensions, batch, m x n, splits (layout read from the
 * emulated cuBLAS's launches of known GEMMs). Sets partial elements read (m x n x splits) as
 * the largest size and m x n + splits as the sum; false for any other kernel or layout. */
static bool split_k_sizes(int count, const uint16_t *size, const void *const *values,
                          int64_t *arg_max, int64_t *arg_sum)
{
    if (count < 1 || size[0] != 60) return false;
    int32_t p[15];
    memcpy(p, values[0], sizeof p);
    int32_t m = p[2], n = p[3], splits = p[10];
    if (m < 1 || n < 1 || splits < 1 || splits > 4096 || (int64_t)m * n != p[9]) return false;
    *arg_max = (int64_t)m * n * splits;
    *arg_sum = (int64_t)m * n + splits;
    return true;
}

EXPORT int rv_arg_layout(const char *kernel)
{
    static const struct { const char *needle; int layout; } known[] = {
        {"CatArrayBatchedCopy", RV_ARGS_CAT}, {"indexSelect", RV_ARGS_INDEX_SELECT},
        {"splitKreduce_kernel", RV_ARGS_SPLIT_K}, {"reduce_kernel", RV_ARGS_REDUCE}};
    if (!kernel) return RV_ARGS_SCALARS;
    if (!strcmp(kernel, "fused_moe_kernel")) return RV_ARGS_FUSED_MOE; /* Triton: unmangled */
    for (size_t i = 0; i < sizeof known / sizeof *known; i++) /* first match: split-K first */
        if (strstr(kernel, known[i].needle)) return known[i].layout;
    return RV_ARGS_SCALARS;
}

EXPORT void rv_arg_sizes(int layout, const uint32_t grid[3], const uint32_t block[3], int count,
                         const uint16_t *size, const void *const *values, int64_t *arg_max,
                         int64_t *arg_sum)
{
    *arg_max = *arg_sum = 0;
    switch (layout) {
    case RV_ARGS_CAT:
        if (cat_input_sizes(grid[1], count, size, values, arg_max, arg_sum)) return;
        break;
    case RV_ARGS_REDUCE:
        if (reduce_config_sizes(block[0], block[1], count, size, values, arg_max, arg_sum))
            return;
        break;
    case RV_ARGS_SPLIT_K:
        if (split_k_sizes(count, size, values, arg_max, arg_sum)) return;
        break;
    default: break;
    }
    for (int i = 0; i < count; i++) {
        int64_t v = 0;
        if (size[i] == 4) {
            uint32_t u;
            memcpy(&u, values[i], 4);
            v = u < (1u << 24) ? u : 0;
        } else if (size[i] == 8) {
            memcpy(&v, values[i], 8);
            v = v < (1LL << 31) ? v : 0;
        }
        if (v > 0) {
            if (v > *arg_max) *arg_max = v;
            *arg_sum += v;
        }
    }
    int64_t selected = layout == RV_ARGS_INDEX_SELECT ? index_select_elements(count, size, values)
                                                      : 0;
    if (selected > 0) { /* the bytes moved dominate the table and row sizes */
        *arg_max = selected;
        *arg_sum += selected;
    }
}

/* Fills out[] (at least NFEAT_MAX) and returns the count, or -1 for an unknown op. */
EXPORT int rv_features(const struct rv_launch *l, const double *spec, int kernel_id, double *out)
{
    double lroof = log((double)rv_roofline_ns(l, spec));
    switch (l->op) {
    case RV_OP_GEMM: {
        double b = l->batch > 0 ? (double)l->batch : 1.0;
        double m = (double)l->m, n = (double)l->n, k = (double)l->k;
        double v[] = {m, n, k, b, l->dtype_a, l->dtype_b, l->dtype_c, l->trans_a, l->trans_b,
                      lg2(2 * m * n * k * b),
                      lg2(b * (m * k * dtype_bytes(l->dtype_a) + k * n * dtype_bytes(l->dtype_b) +
                               m * n * dtype_bytes(l->dtype_c))),
                      lroof};
        memcpy(out, v, sizeof v);
        return sizeof v / sizeof *v;
    }
    case RV_OP_KERNEL: {
        double blocks = (double)l->grid[0] * l->grid[1] * l->grid[2];
        double tpb = (double)l->block[0] * l->block[1] * l->block[2];
        double v[] = {kernel_id, l->grid[0], l->grid[1], l->grid[2], l->block[0], l->block[1],
                      l->block[2], l->shared_bytes, blocks, tpb, lg2(blocks * tpb),
                      blocks / spec[SP_SM_COUNT], lg2_arg(l->arg_max), lg2_arg(l->arg_sum),
                      l->arg_max < 0 ? NAN : lg2(blocks * (double)l->arg_max), lroof};
        memcpy(out, v, sizeof v);
        return sizeof v / sizeof *v;
    }
    case RV_OP_MEMCPY: case RV_OP_MEMSET: {
        double v[] = {l->op == RV_OP_MEMSET ? 0 : l->copy_kind, (double)l->bytes,
                      lg2((double)l->bytes), lroof};
        memcpy(out, v, sizeof v);
        return sizeof v / sizeof *v;
    }
    case RV_OP_COLLECTIVE: {
        double v[] = {l->coll, l->nranks, (double)l->bytes, lg2((double)l->bytes), lroof};
        memcpy(out, v, sizeof v);
        return sizeof v / sizeof *v;
    }
    default: return -1;
    }
}

/* ---------------------------------------------------------------- attention by shape */

/* Attention cost is in the sequence lengths, which no launch shape carries (a decode kernel's
 * grid is the same at every KV length, inside CUDA graphs every launch is the captured one).
 * The engine tells them: a read-only observer in the engine process (for vLLM,
 * revati/engines/vllm_observer, a vLLM plugin) reports each step's batch through
 * rv_attention_batch before the step's kernels are launched, and every attention-family
 * kernel launched or replayed after it is predicted from that batch. Mirrored by
 * features.AttnShape. */
struct rv_attn_shape { int64_t batch, q_len, kv_len, heads, kv_heads, head_dim; };
#define RV_OP_ATTENTION_SHAPE 100 /* feature-vector class and index op of the shape models */
#define RV_OP_MOE_SHAPE 101       /* and of the fused-MoE GEMMs' (rv_moe_features) */
#define RV_OP_ATTENTION_MIX 102   /* and of the mixed-step attention model (rv_attn_mix) */

/* Query-key pairs: a multi-token query is causal and aligned to the end of the KV (prefill,
 * chunked prefill, speculative verification), a single token sees the whole KV. */
static double attn_pairs(const struct rv_attn_shape *a)
{
    double q = (double)a->q_len, kv = (double)a->kv_len;
    return q > 1 ? q * kv - q * (q - 1) / 2 : kv;
}

static double attn_flops(const struct rv_attn_shape *a)
{
    return 4.0 * a->batch * a->heads * attn_pairs(a) * a->head_dim;
}

static double attn_bytes(const struct rv_attn_shape *a) /* 16-bit q, k, v, o */
{
    return 2.0 * a->batch * a->head_dim *
           (2.0 * a->q_len * a->heads + 2.0 * a->kv_len * a->kv_heads);
}

/* Attention's seconds of tensor-core work (tc) and of HBM traffic (tm) at peak rates. */
static void attn_times(const struct rv_attn_shape *a, const double *spec, double *tc, double *tm)
{
    *tc = attn_flops(a) / spec[SP_BF16];
    *tm = attn_bytes(a) / spec[SP_HBM];
}

EXPORT int64_t rv_attention_roofline_ns(const struct rv_attn_shape *a, const double *spec)
{
    double tc, tm;
    attn_times(a, spec, &tc, &tm);
    return (int64_t)llround((tc > tm ? tc : tm) * 1e9 + spec[SP_LAUNCH_NS]);
}

EXPORT int rv_attention_features(const struct rv_attn_shape *a, const double *spec,
                                 int kernel_id, double *out)
{
    double v[] = {kernel_id, a->batch, a->q_len, a->kv_len, a->heads, a->kv_heads, a->head_dim,
                  lg2(attn_flops(a)), lg2(attn_bytes(a)),
                  log((double)rv_attention_roofline_ns(a, spec))};
    memcpy(out, v, sizeof v);
    return sizeof v / sizeof *v;
}

/* A step that mixes decodes with prefill chunks in one attention launch (chunked prefill):
 * no uniform shape describes it (docs/predictor.md, "Mixed steps"), so its own model takes
 * the two groups' sizes. Decodes: one query token each over dec_kv KV tokens in all (the
 * longest dec_kv_max); prefill rows: pre_q query tokens over pre_kv KV tokens, pre_pairs
 * causal query-key pairs. Mirrored by features.AttnMix. */
struct rv_attn_mix {
    int64_t decodes, prefills, heads, kv_heads, head_dim;
    double dec_kv, dec_kv_max, pre_q, pre_q_max, pre_kv, pre_pairs;
};

/* One step's per-sequence lengths summed by group (rows with no query tokens skipped). */
EXPORT void rv_attention_mix(int rows, const int64_t *q_lens, const int64_t *kv_lens, int heads,
                             int kv_heads, int head_dim, struct rv_attn_mix *m)
{
    *m = (struct rv_attn_mix){.heads = heads, .kv_heads = kv_heads, .head_dim = head_dim};
    for (int i = 0; i < rows; i++) {
        double q = (double)q_lens[i], kv = (double)kv_lens[i];
        if (q <= 0) continue;
        if (q == 1) {
            m->decodes++;
            m->dec_kv += kv;
            m->dec_kv_max = fmax(m->dec_kv_max, kv);
        } else {
            struct rv_attn_shape one = {1, q_lens[i], kv_lens[i], 0, 0, 0};
            m->prefills++;
            m->pre_q += q;
            m->pre_q_max = fmax(m->pre_q_max, q);
            m->pre_kv += kv;
            m->pre_pairs += attn_pairs(&one);
        }
    }
}

static double mix_flops(const struct rv_attn_mix *m)
{
    return 4.0 * m->heads * (m->dec_kv + m->pre_pairs) * m->head_dim;
}

static double mix_bytes(const struct rv_attn_mix *m) /* 16-bit q, k, v, o */
{
    return 2.0 * m->head_dim * (2.0 * (m->decodes + m->pre_q) * m->heads +
                                2.0 * (m->dec_kv + m->pre_kv) * m->kv_heads);
}

EXPORT int64_t rv_attention_mix_roofline_ns(const struct rv_attn_mix *m, const double *spec)
{
    double tc = mix_flops(m) / spec[SP_BF16], tm = mix_bytes(m) / spec[SP_HBM];
    return (int64_t)llround((tc > tm ? tc : tm) * 1e9 + spec[SP_LAUNCH_NS]);
}

EXPORT int rv_attention_mix_features(const struct rv_attn_mix *m, const double *spec,
                                     int kernel_id, double *out)
{
    double v[] = {kernel_id, m->decodes, m->prefills, m->heads, m->kv_heads, m->head_dim,
                  lg2(m->dec_kv), lg2(m->dec_kv_max), lg2(m->pre_q), lg2(m->pre_q_max),
                  lg2(m->pre_kv), lg2(m->pre_pairs), lg2(mix_flops(m)), lg2(mix_bytes(m)),
                  log((double)rv_attention_mix_roofline_ns(m, spec))};
    memcpy(out, v, sizeof v);
    return sizeof v / sizeof *v;
}

/* ---------------------------------------------------------------- mixture-of-experts GEMMs */

/* vLLM's and SGLang's fused-MoE Triton kernel (`fused_moe_kernel`) multiplies every routed
 * (token, expert) pair's activations by that expert's weights: a grouped GEMM whose cost is
 * mostly in the weights of the experts the step's tokens touch. Its launch shows neither
 * (the grid is sized for the worst case, and inside a CUDA graph for the captured batch;
 * blocks of untouched experts exit early), but its arguments show the GEMM: after the
 * pointers (Triton drops those passed as None) come N, K, EM and num_valid_tokens as 32-bit
 * integers, and num_valid_tokens is the batch's tokens x top-k, for the batch the kernel
 * really runs (a graph replays the padded batch it was captured for, and pads are routed
 * too). rv_moe_dims puts them in the launch as m (pairs), n and k; which experts the pairs
 * touch is the router's output, which no emulated kernel computes, so the predictor assumes
 * uniform routing (what dummy weights give): with E experts and k of them per token, T tokens
 * touch E(1 - (1 - k/E)^T) experts on average. E and k are the served model's
 * (REVATI_MOE="E k", set by Revati from the catalog model); every rank is taken to hold all E
 * experts (tensor parallelism; expert parallelism is not modelled). */
EXPORT bool rv_moe_dims(int layout, int count, const uint16_t *size,
                        const void *const *values, int64_t *m, int64_t *n, int64_t *k)
{
    if (layout != RV_ARGS_FUSED_MOE) return false;
    uint32_t dims[4];
    int got = 0;
    for (int i = 0; i < count && got < 4; i++) {
        if (size[i] == 4) memcpy(&dims[got++], values[i], 4);
        else if (size[i] != 8 || got > 0) return false; /* not the layout above */
    }
    if (got < 4 || !dims[0] || !dims[1] || !dims[3]) return false;
    *n = dims[0];
    *k = dims[1];
    *m = dims[3];
    return true;
}

static double moe_touched(const struct rv_launch *l, int experts, int top_k)
{
    double tokens = (double)l->m / top_k;
    return experts * (1.0 - pow(1.0 - (double)top_k / experts, tokens));
}

static double moe_flops(const struct rv_launch *l) { return 2.0 * l->m * l->n * l->k; }

static double moe_bytes(const struct rv_launch *l, int experts, int top_k) /* 16-bit */
{
    return 2.0 * (moe_touched(l, experts, top_k) * l->n * l->k +
                  (double)l->m * (double)(l->n + l->k));
}

EXPORT int64_t rv_moe_roofline_ns(const struct rv_launch *l, int experts, int top_k,
                                  const double *spec)
{
    double tc = moe_flops(l) / spec[SP_BF16], tm = moe_bytes(l, experts, top_k) / spec[SP_HBM];
    return (int64_t)llround((tc > tm ? tc : tm) * 1e9 + spec[SP_LAUNCH_NS]);
}

EXPORT int rv_moe_features(const struct rv_launch *l, int experts, int top_k,
                           const double *spec, double *out)
{
    double v[] = {(double)l->m / top_k, experts, top_k, (double)l->n, (double)l->k,
                  moe_touched(l, experts, top_k), l->grid[0], l->block[0], l->shared_bytes,
                  lg2(moe_flops(l)), lg2(moe_bytes(l, experts, top_k)),
                  log((double)rv_moe_roofline_ns(l, experts, top_k, spec))};
    memcpy(out, v, sizeof v);
    return sizeof v / sizeof *v;
}

/* ---------------------------------------------------------------- state */

static double g_spec[SP_N];       /* this run's GPU (REVATI_HW_SPEC): the roofline fallback */
/* Optional spec keys (revati/device/spec.py sustained_power): slowdown factors of
 * compute-bound GEMMs and attention at the power limit, the power state's time constant and
 * the states at which throttling starts and is complete; zero when the spec has none or they
 * are inconsistent (sustained power not modelled). */
enum { PW_GEMM, PW_ATTENTION, PW_TAU_MS, PW_ONSET, PW_FULL, PW_N };
static const char *const power_keys[PW_N] = {
    "power.gemm_slowdown", "power.attention_slowdown", "power.time_constant_ms",
    "power.throttle_onset", "power.throttle_full"};
static double g_power[PW_N];
static double g_model_spec[SP_N]; /* the GPU the models were trained on (index 'spec' lines) */
static int g_moe_experts, g_moe_top_k; /* REVATI_MOE: the served model's routing (0: none) */
static int64_t g_fixed_ns = -1;

struct family {
    char name[64];
    int op;
    int nfeat;
    void *booster;
    void *fast; /* LightGBM FastConfig: single-row prediction without re-parsing parameters */
    /* The model's base: log ns = booster + base. Without "base" lines the roofline
     * (log_roofline_ns, the last feature); with them, a least-squares line in the log features
     * that extrapolates where the trees, which predict constants beyond their data, cannot:
     * intercept coef[0] plus coef[1 + i] times feature i (missing features count 0), the line
     * of the launch's kernel (kernel_id, feature 0) where the trainer fitted one, else the
     * family's (kernel_id -1). A feature below the smallest value the line was fitted on
     * counts as that value (low[i]). */
    int nbase;
    struct base_line { int kernel_id; double coef[NFEAT_MAX + 1], low[NFEAT_MAX]; } *base;
    bool launch_only; /* predicts from the launch what another family predicts by shape */
};

struct pattern { int family; char *needle; };
struct vocab_entry { uint64_t hash; int family; int id; };

static struct family *g_fam;
static int g_nfam;
static struct pattern *g_pat;
static int g_npat;
static struct vocab_entry *g_vocab; /* open addressing by hash of the demangled name */
static size_t g_vocab_cap;

/* LightGBM C API, resolved from REVATI_LIGHTGBM_LIB on first model load. */
static int (*lgbm_create)(const char *, int *, void **);
static int (*lgbm_fast_init)(void *, int, int, int, int, int32_t, const char *, void **);
static int (*lgbm_fast_predict)(void *, const void *, int64_t *, double *);
static const char *(*lgbm_error)(void);
static char *(*cxa_demangle)(const char *, char *, size_t *, int *);

/* Predicted GPU time (ns) by what it came from: the three rv_pred_source values, then of
 * them T_BY_BATCH, attention predicted from the batch the engine reported
 * (rv_attention_batch); T_UNSEEN, kernels a model predicted without knowing them (no
 * vocabulary id, no skeleton); T_LAUNCH_ONLY, attention, GEMM and fused-MoE kernels
 * predicted from their launch alone (index 'launch_only' lines: their shapes were not
 * known, so their family's weakest model ran). revati/predict/totals.py reads this layout. */
enum { T_BY_BATCH = RV_SRC_FIXED + 1, T_UNSEEN, T_LAUNCH_ONLY, T_N };
static _Atomic int64_t g_own_totals[T_N];
/* g_own_totals, or when REVATI_PREDICT_TOTALS names a directory, <dir>/<pid>.totals mapped
 * shared (map_totals, at the process's first prediction, so processes that predict nothing
 * leave no file): `revati bench` then reads every count the moment it is made, also after the
 * process ended through _exit (as engine processes often do) or crashed, and counting costs
 * no system call. A child forked after that keeps the mapping: its counts add to its
 * parent's file, so a process tree's file total never counts a launch twice. */
static _Atomic int64_t *g_totals = g_own_totals;
static pthread_once_t g_totals_once = PTHREAD_ONCE_INIT;
static void map_totals(void);
static _Atomic int64_t *totals(void)
{
    pthread_once(&g_totals_once, map_totals);
    return g_totals;
}
/* What a prediction was, besides its source (cached with it) */
enum { PRED_UNSEEN = 1, PRED_LAUNCH_ONLY = 2 };
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static uint64_t fnv1a(const void *p, size_t n, uint64_t h)
{
    const unsigned char *s = p;
    for (size_t i = 0; i < n; i++) h = (h ^ s[i]) * 1099511628211ULL;
    return h;
}
#define FNV0 1469598103934665603ULL

static void load_spec(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) { fprintf(stderr, "revati predict: REVATI_HW_SPEC=%s: %s\n", path, strerror(errno)); abort(); }
    int seen[SP_N] = {0};
    char key[128], val[256];
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "%127s %255s", key, val) != 2 || key[0] == '#') continue;
        for (int i = 0; i < SP_N; i++)
            if (!strcmp(key, spec_keys[i])) { g_spec[i] = strtod(val, NULL); seen[i] = 1; }
        for (int i = 0; i < PW_N; i++)
            if (!strcmp(key, power_keys[i])) g_power[i] = strtod(val, NULL);
    }
    if (!(g_power[PW_GEMM] >= 1 && g_power[PW_ATTENTION] >= 1 && g_power[PW_TAU_MS] > 0 &&
          g_power[PW_ONSET] >= 0 && g_power[PW_FULL] > g_power[PW_ONSET] &&
          g_power[PW_FULL] <= 1))
        memset(g_power, 0, sizeof g_power);
    fclose(f);
    for (int i = 0; i < SP_N; i++)
        if (!seen[i] || (i != SP_LAUNCH_NS && g_spec[i] <= 0)) {
            fprintf(stderr, "revati predict: %s lacks a positive '%s'\n", path, spec_keys[i]);
            abort();
        }
}

static void *need_sym(void *h, const char *name)
{
    void *s = dlsym(h, name);
    if (!s) { fprintf(stderr, "revati predict: lightgbm lacks %s\n", name); abort(); }
    return s;
}

static void open_lightgbm(void)
{
    const char *lib = getenv("REVATI_LIGHTGBM_LIB");
    if (!lib || !*lib) die("REVATI_PREDICT_MODELS is set but REVATI_LIGHTGBM_LIB is not");
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!h) { fprintf(stderr, "revati predict: dlopen %s: %s\n", lib, dlerror()); abort(); }
    lgbm_create = need_sym(h, "LGBM_BoosterCreateFromModelfile");
    lgbm_fast_init = need_sym(h, "LGBM_BoosterPredictForMatSingleRowFastInit");
    lgbm_fast_predict = need_sym(h, "LGBM_BoosterPredictForMatSingleRowFast");
    lgbm_error = need_sym(h, "LGBM_GetLastError");
}

static int find_family(const char *name)
{
    for (int i = 0; i < g_nfam; i++)
        if (!strcmp(g_fam[i].name, name)) return i;
    fprintf(stderr, "revati predict: index names unknown family '%s'\n", name);
    abort();
}

static void vocab_put(uint64_t hash, int family, int id)
{
    size_t i = hash & (g_vocab_cap - 1);
    while (g_vocab[i].family >= 0) {
        /* a skeleton already taken stays with its first kernel */
        if (g_vocab[i].hash == hash && g_vocab[i].family == family) return;
        i = (i + 1) & (g_vocab_cap - 1);
    }
    g_vocab[i] = (struct vocab_entry){hash, family, id};
}

/* The end of a numeric or boolean literal at p (NULL: none there). */
static const char *skip_literal(const char *p)
{
    if (*p >= '0' && *p <= '9') {
        while (*p >= '0' && *p <= '9') p++;
        return p;
    }
    if (!strncmp(p, "true", 4)) return p + 4;
    if (!strncmp(p, "false", 5)) return p + 5;
    return NULL;
}

/* A kernel name's skeleton: every run of numeric and boolean template arguments ("2",
 * "128, true, false, 1") reduced to one placeholder. Two builds of one kernel template
 * (another engine's FlashAttention 3, with other tile sizes or one flag more) share a
 * skeleton; a name the profile never saw is given the vocabulary id of the first profiled
 * kernel with its skeleton, so it is predicted as that kernel (and an attention kernel from
 * the engine's batch) instead of as an unknown. Salted: never equal to an exact name's. */
static uint64_t skeleton_hash(const char *name)
{
    uint64_t h = FNV0 ^ 0x5bd1e995u;
    for (const char *p = name; *p;) {
        const char *end = skip_literal(p);
        if (!end) {
            h = fnv1a(p++, 1, h);
            continue;
        }
        h = fnv1a("#", 1, h);
        for (p = end; p[0] == ',' && p[1] == ' ' && (end = skip_literal(p + 2));) p = end;
    }
    return h;
}

/* The index written by revati.predict.train: see docs/predictor.md for its grammar. */
/* "base <family> <kernel_id> <intercept> <coef_0> ... <coef_{nfeat-1}> <low_0> ...
 * <low_{nfeat-1}>": one coefficient and one lower bound a feature; kernel_id -1 is the
 * family's line. */
static void parse_base(int fam, const char *p)
{
    if (fam < 0 || !g_fam[fam].booster) die("index: base line for a family without a model");
    struct family *fm = &g_fam[fam];
    char *end;
    long id = strtol(p, &end, 10);
    if (end == p) die("index: base line without a kernel id");
    p = end;
    fm->base = realloc(fm->base, (fm->nbase + 1) * sizeof *fm->base);
    struct base_line *b = &fm->base[fm->nbase++];
    b->kernel_id = (int)id;
    for (int i = 0; i <= 2 * fm->nfeat; i++) {
        double v = strtod(p, &end);
        if (end == p) die("index: base line with fewer values than twice the model's features");
        if (i <= fm->nfeat) b->coef[i] = v;
        else b->low[i - fm->nfeat - 1] = v;
        p = end;
    }
    while (*p == ' ') p++;
    if (*p) die("index: base line with more values than twice the model's features");
}

static void load_index(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) { fprintf(stderr, "revati predict: REVATI_PREDICT_MODELS=%s: %s\n", path, strerror(errno)); abort(); }
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash) slash[1] = 0; else strcpy(dir, "./");
    open_lightgbm();
    size_t nkern = 0;
    int nspec = 0;
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    /* Two passes: families first (patterns and kernels refer to them), then the rest. */
    for (int pass = 0; pass < 2; pass++) {
        rewind(f);
        if (pass == 1) {
            g_vocab_cap = 64;
            while (g_vocab_cap < 4 * nkern + 2) g_vocab_cap *= 2; /* names and skeletons */
            g_vocab = malloc(g_vocab_cap * sizeof *g_vocab);
            for (size_t i = 0; i < g_vocab_cap; i++) g_vocab[i].family = -1;
        }
        while ((len = getline(&line, &cap, f)) > 0) {
            if (line[len - 1] == '\n') line[--len] = 0;
            char kind[16], fam[64], file[1024];
            int op, nfeat, id, off = 0;
            double val;
            if (pass == 0 && sscanf(line, "spec %63s %lf", fam, &val) == 2) {
                for (int i = 0; i < SP_N; i++)
                    if (!strcmp(fam, spec_keys[i])) { g_model_spec[i] = val; nspec |= 1 << i; }
                continue;
            }
            if (pass == 0 && sscanf(line, "model %63s %d %d %1023s", fam, &op, &nfeat, file) == 4) {
                if (nfeat > NFEAT_MAX) die("index: model with too many features");
                g_fam = realloc(g_fam, (g_nfam + 1) * sizeof *g_fam);
                struct family *fm = &g_fam[g_nfam++];
                *fm = (struct family){0};
                snprintf(fm->name, sizeof fm->name, "%s", fam);
                fm->op = op;
                fm->nfeat = nfeat;
                char full[8192];
                snprintf(full, sizeof full, "%s%s", dir, file);
                int iters;
                if (lgbm_create(full, &iters, &fm->booster) != 0 ||
                    lgbm_fast_init(fm->booster, 0 /*normal*/, 0, -1, 1 /*float64*/, nfeat,
                                   "num_threads=1", &fm->fast) != 0) {
                    fprintf(stderr, "revati predict: load %s: %s\n", full, lgbm_error());
                    abort();
                }
            } else if (pass == 0 && sscanf(line, "family %63s %d", fam, &op) == 2) {
                /* a family the profile had too few launches of: the roofline predicts it,
                 * but its name patterns still claim kernels before later families' do */
                g_fam = realloc(g_fam, (g_nfam + 1) * sizeof *g_fam);
                g_fam[g_nfam] = (struct family){.op = op};
                snprintf(g_fam[g_nfam++].name, sizeof g_fam->name, "%s", fam);
            } else if (pass == 0 && sscanf(line, "%15s", kind) == 1 && !strcmp(kind, "kernel")) {
                nkern++;
            } else if (pass == 1 && sscanf(line, "pattern %63s %n", fam, &off) == 1 && off) {
                g_pat = realloc(g_pat, (g_npat + 1) * sizeof *g_pat);
                g_pat[g_npat++] = (struct pattern){find_family(fam), strdup(line + off)};
            } else if (pass == 1 && sscanf(line, "launch_only %63s", fam) == 1) {
                int i = find_family(fam);
                if (i < 0) die("index: launch_only names no family");
                g_fam[i].launch_only = true;
            } else if (pass == 1 && sscanf(line, "base %63s %n", fam, &off) == 1 && off) {
                parse_base(find_family(fam), line + off);
            } else if (pass == 1 && sscanf(line, "kernel %63s %d %n", fam, &id, &off) == 2 && off) {
                vocab_put(fnv1a(line + off, strlen(line + off), FNV0), find_family(fam), id);
                vocab_put(skeleton_hash(line + off), find_family(fam), id);
            }
        }
    }
    free(line);
    fclose(f);
    if (g_nfam == 0) die("index lists no family");
    if (nspec != (1 << SP_N) - 1) die("index lacks the spec its models were trained on");
}

static void init(void)
{
    const char *fixed = getenv("REVATI_PREDICT_FIXED_NS");
    if (fixed && *fixed) {
        char *end;
        g_fixed_ns = strtoll(fixed, &end, 10);
        if (*end || g_fixed_ns < 0) die("REVATI_PREDICT_FIXED_NS is not a non-negative integer");
        return;
    }
    const char *spec = getenv("REVATI_HW_SPEC");
    if (!spec || !*spec) die("REVATI_HW_SPEC is not set (and no REVATI_PREDICT_FIXED_NS)");
    load_spec(spec);
    cxa_demangle = dlsym(RTLD_DEFAULT, "__cxa_demangle");
    if (!cxa_demangle) {
        void *h = dlopen("libstdc++.so.6", RTLD_NOW | RTLD_LOCAL);
        if (h) cxa_demangle = dlsym(h, "__cxa_demangle");
    }
    const char *moe = getenv("REVATI_MOE");
    if (moe && *moe && (sscanf(moe, "%d %d", &g_moe_experts, &g_moe_top_k) != 2 ||
                        g_moe_experts < 1 || g_moe_top_k < 1 || g_moe_top_k > g_moe_experts))
        die("REVATI_MOE is not \"<experts> <experts per token>\"");
    const char *idx = getenv("REVATI_PREDICT_MODELS");
    if (idx && *idx) load_index(idx);
}

/* ---------------------------------------------------------------- cache */

/* Everything a prediction depends on, with the kernel name reduced to a hash. */
struct key {
    int op;
    uint32_t grid[3], block[3], shared_bytes;
    int64_t m, n, k, batch, bytes, arg_max, arg_sum;
    int dtype_a, dtype_b, dtype_c, trans_a, trans_b, copy_kind, coll, nranks;
    uint64_t name_hash;
    struct rv_attn_shape attn; /* zero unless predicted by shape */
};
struct slot { struct key key; int64_t ns; int source; int flags; int used; };

static struct slot *g_cache;
static size_t g_cache_cap, g_cache_len;

static struct slot *cache_find(const struct key *k, uint64_t h)
{
    if (!g_cache) return NULL;
    size_t i = h & (g_cache_cap - 1);
    while (g_cache[i].used) {
        if (!memcmp(&g_cache[i].key, k, sizeof *k)) return &g_cache[i];
        i = (i + 1) & (g_cache_cap - 1);
    }
    return &g_cache[i];
}

static void cache_put(const struct key *k, uint64_t h, int64_t ns, int source, int flags)
{
    if (2 * (g_cache_len + 1) > g_cache_cap) {
        struct slot *old = g_cache;
        size_t oldcap = g_cache_cap;
        g_cache_cap = oldcap ? 2 * oldcap : 4096;
        g_cache = calloc(g_cache_cap, sizeof *g_cache);
        if (!g_cache) die("out of memory for the prediction cache");
        for (size_t i = 0; i < oldcap; i++)
            if (old[i].used)
                *cache_find(&old[i].key, fnv1a(&old[i].key, sizeof old[i].key, FNV0)) = old[i];
        free(old);
    }
    *cache_find(k, h) = (struct slot){*k, ns, source, flags, 1};
    g_cache_len++;
}

static void make_key(struct key *k, const struct rv_launch *l, const struct rv_attn_shape *a)
{
    memset(k, 0, sizeof *k); /* padding too: the key is compared with memcmp */
    k->op = l->op;
    memcpy(k->grid, l->grid, sizeof k->grid);
    memcpy(k->block, l->block, sizeof k->block);
    k->shared_bytes = l->shared_bytes;
    k->m = l->m; k->n = l->n; k->k = l->k; k->batch = l->batch; k->bytes = l->bytes;
    k->arg_max = l->arg_max; k->arg_sum = l->arg_sum;
    k->dtype_a = l->dtype_a; k->dtype_b = l->dtype_b; k->dtype_c = l->dtype_c;
    k->trans_a = l->trans_a; k->trans_b = l->trans_b;
    k->copy_kind = l->copy_kind; k->coll = l->coll; k->nranks = l->nranks;
    k->name_hash = l->kernel ? fnv1a(l->kernel, strlen(l->kernel), FNV0) : 0;
    if (a) k->attn = *a;
}

/* ---------------------------------------------------------------- prediction */

/* A kernel's hashes: of its demangled name, and of that name's skeleton. */
struct name_hash { uint64_t exact, skeleton; };

static int vocab_find(uint64_t hash, int family)
{
    for (size_t i = hash & (g_vocab_cap - 1); g_vocab && g_vocab[i].family >= 0;
         i = (i + 1) & (g_vocab_cap - 1))
        if (g_vocab[i].hash == hash && g_vocab[i].family == family) return g_vocab[i].id;
    return -1;
}

/* The kernel's id in a family's vocabulary: its own, else its skeleton's (-1: neither). */
static int vocab_id(struct name_hash h, int family)
{
    int id = vocab_find(h.exact, family);
    return id >= 0 ? id : vocab_find(h.skeleton, family);
}

/* Family of a kernel by its demangled name (-1: none) and the name's hashes for vocab_id. */
static int classify(const char *name, struct name_hash *hash)
{
    char *dem = NULL;
    int status = -1;
    if (cxa_demangle && name[0] == '_' && name[1] == 'Z') dem = cxa_demangle(name, NULL, NULL, &status);
    const char *n = status == 0 && dem ? dem : name;
    hash->exact = fnv1a(n, strlen(n), FNV0);
    hash->skeleton = skeleton_hash(n);
    int fam = -1;
    for (int i = 0; fam < 0 && i < g_npat; i++)
        if (strcasestr(n, g_pat[i].needle)) fam = g_pat[i].family;
    free(dem);
    return fam;
}

static int family_by_op(int op)
{
    for (int i = 0; i < g_nfam; i++)
        if (g_fam[i].op == op) return i;
    return -1;
}

/* A model's prediction as a duration; one that is not a number or beyond a day is a broken
 * model or index, never a kernel's time: said loudly rather than turned into garbage time. */
static int64_t duration_ns(const struct family *fm, double ns)
{
    if (!(ns >= 0 && ns < 86400e9)) {
        fprintf(stderr, "revati predict: model %s predicted %g ns\n", fm->name, ns);
        abort();
    }
    return (int64_t)llround(ns);
}

static int64_t evaluate(int fam, const double *x, int n, int64_t roof)
{
    const struct family *fm = &g_fam[fam];
    if (n != fm->nfeat) die("model feature count differs from this build's features");
    int64_t outlen = 0;
    double y = 0;
    if (lgbm_fast_predict(fm->fast, x, &outlen, &y) != 0 || outlen != 1) {
        fprintf(stderr, "revati predict: model %s: %s\n", fm->name, lgbm_error());
        abort();
    }
    if (fm->nbase == 0) return duration_ns(fm, (double)roof * exp(y));
    int kid = fm->op == RV_OP_KERNEL && !isnan(x[0]) ? (int)x[0] : -1;
    const struct base_line *line = NULL, *family_line = NULL;
    for (int i = 0; i < fm->nbase; i++) {
        if (kid >= 0 && fm->base[i].kernel_id == kid) line = &fm->base[i];
        if (fm->base[i].kernel_id == -1) family_line = &fm->base[i];
    }
    if (!line) line = family_line;
    if (!line) die("index: a family with kernel base lines but no family line");
    double base = line->coef[0];
    for (int i = 0; i < n; i++)
        if (!isnan(x[i])) base += line->coef[1 + i] * fmax(x[i], line->low[i]);
    return duration_ns(fm, exp(y + base));
}

/* The models learnt log(measured / roofline) on the profiled GPU, so they are evaluated
 * against that GPU's spec (g_model_spec), never this run's: a spec edit cannot shift them. */
static int64_t predict_uncached(const struct rv_launch *l, const struct rv_attn_shape *a,
                                int *source, int *flags)
{
    *flags = 0;
    int fam = -1;
    struct name_hash hash = {0, 0};
    double x[NFEAT_MAX];
    if (l->op == RV_OP_KERNEL && l->m > 0 && g_moe_experts > 0) { /* rv_moe_dims found it */
        int moe_fam = family_by_op(RV_OP_MOE_SHAPE);
        if (moe_fam >= 0 && g_fam[moe_fam].booster) {
            int n = rv_moe_features(l, g_moe_experts, g_moe_top_k, g_model_spec, x);
            *source = RV_SRC_MODEL;
            return evaluate(moe_fam, x, n,
                            rv_moe_roofline_ns(l, g_moe_experts, g_moe_top_k, g_model_spec));
        }
        *source = RV_SRC_ROOFLINE;
        return rv_moe_roofline_ns(l, g_moe_experts, g_moe_top_k, g_spec);
    }
    if (l->op == RV_OP_KERNEL) {
        if (l->kernel) fam = classify(l->kernel, &hash);
        int shape_fam = family_by_op(RV_OP_ATTENTION_SHAPE);
        if (a && fam >= 0 && shape_fam >= 0 && g_fam[shape_fam].booster &&
            !strcmp(g_fam[fam].name, "attention")) {
            int n = rv_attention_features(a, g_model_spec, vocab_id(hash, shape_fam), x);
            if (x[0] < 0) {
                *flags = PRED_UNSEEN;
                x[0] = NAN; /* a kernel the profile never ran: kernel id unknown */
            }
            *source = RV_SRC_MODEL;
            return evaluate(shape_fam, x, n, rv_attention_roofline_ns(a, g_model_spec));
        }
    } else {
        fam = family_by_op(l->op);
    }
    if (fam < 0 || !g_fam[fam].booster) {
        *source = RV_SRC_ROOFLINE;
        return a ? rv_attention_roofline_ns(a, g_spec) : rv_roofline_ns(l, g_spec);
    }
    int kid = l->op == RV_OP_KERNEL ? vocab_id(hash, fam) : -1;
    int n = rv_features(l, g_model_spec, kid, x);
    if (l->op == RV_OP_KERNEL && kid < 0) {
        *flags = PRED_UNSEEN;
        x[0] = NAN;
    }
    if (g_fam[fam].launch_only) *flags |= PRED_LAUNCH_ONLY;
    *source = RV_SRC_MODEL;
    return evaluate(fam, x, n, rv_roofline_ns(l, g_model_spec));
}

static void count_prediction(int64_t ns, int src, int flags)
{
    _Atomic int64_t *t = totals();
    atomic_fetch_add(&t[src], ns);
    if (flags & PRED_UNSEEN) atomic_fetch_add(&t[T_UNSEEN], ns);
    if (flags & PRED_LAUNCH_ONLY) atomic_fetch_add(&t[T_LAUNCH_ONLY], ns);
}

/* A cached prediction, not yet counted in the totals; *flags: PRED_* (of a kernel the models
 * never saw, from the launch alone). */
static int64_t predict_once(const struct rv_launch *l, const struct rv_attn_shape *a, int *source,
                            int *flags)
{
    pthread_once(&g_once, init);
    int src;
    int64_t ns;
    *flags = 0;
    if (g_fixed_ns >= 0) {
        src = RV_SRC_FIXED;
        ns = g_fixed_ns;
    } else {
        struct key k;
        make_key(&k, l, a);
        uint64_t h = fnv1a(&k, sizeof k, FNV0);
        pthread_mutex_lock(&g_lock);
        struct slot *s = cache_find(&k, h);
        if (s && s->used) {
            ns = s->ns;
            src = s->source;
            *flags = s->flags;
        } else {
            ns = predict_uncached(l, a, &src, flags);
            cache_put(&k, h, ns, src, *flags);
        }
        pthread_mutex_unlock(&g_lock);
    }
    if (source) *source = src;
    return ns;
}

static int64_t predict(const struct rv_launch *l, const struct rv_attn_shape *a, int *source)
{
    int src, flags;
    int64_t ns = predict_once(l, a, &src, &flags);
    count_prediction(ns, src, flags);
    if (source) *source = src;
    return ns;
}

/* ---------------------------------------------------------------- the engine's batch */

/* The current step as attention sees it, in uniform shapes (the profiled kernels ran
 * uniform batches): the decode rows (one query token each, at their mean KV length), the
 * rows with longer queries (prefills and prefill chunks) at their mean query length and
 * the KV length that keeps their query-key pairs, hence FLOPs, exact, and, for a step
 * that has both, the whole batch as one such shape and its groups' sizes (mix). A mixed
 * step's prediction depends on the kernel and the step only, so the step keeps the last
 * one made (every layer launches the same kernel). */
static struct {
    pthread_mutex_t lock;
    int n;
    struct rv_attn_shape part[2], whole;
    struct rv_attn_mix mix;
    uint64_t step;       /* counts the steps reported */
    uint64_t mix_kernel; /* hash of the kernel name the step's last prediction is for (0: none) */
    int64_t mix_ns;
    int mix_src, mix_flags;
} g_batch = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* Mean query length q and the KV length that gives n rows of q queries `pairs` pairs. */
static struct rv_attn_shape uniform(int64_t n, double q_sum, double pairs, int heads,
                                    int kv_heads, int head_dim)
{
    double q = q_sum / n, kv = (pairs / n + q * (q - 1) / 2) / q;
    return (struct rv_attn_shape){n, llround(q), llround(kv), heads, kv_heads, head_dim};
}

EXPORT void rv_attention_batch(int rows, const int64_t *q_lens, const int64_t *kv_lens,
                               int heads, int kv_heads, int head_dim)
{
    struct rv_attn_mix m;
    rv_attention_mix(rows, q_lens, kv_lens, heads, kv_heads, head_dim, &m);
    struct rv_attn_shape part[2], whole = {0};
    int n = 0;
    if (m.decodes)
        part[n++] = (struct rv_attn_shape){m.decodes, 1, llround(m.dec_kv / m.decodes), heads,
                                           kv_heads, head_dim};
    if (m.prefills) part[n++] = uniform(m.prefills, m.pre_q, m.pre_pairs, heads, kv_heads,
                                        head_dim);
    if (n == 2) whole = uniform(m.decodes + m.prefills, m.decodes + m.pre_q,
                                m.dec_kv + m.pre_pairs, heads, kv_heads, head_dim);
    pthread_mutex_lock(&g_batch.lock);
    g_batch.n = n;
    memcpy(g_batch.part, part, sizeof part);
    g_batch.whole = whole;
    g_batch.mix = m;
    g_batch.step++;
    g_batch.mix_kernel = 0;
    pthread_mutex_unlock(&g_batch.lock);
}

/* Whether a kernel is an attention kernel that the attention-by-shape model was measured on
 * (memoised by name: classification demangles). Another attention kernel, with another
 * cost per query-key pair, keeps its launch-based prediction rather than borrow the shape
 * model's idea of some other kernel. */
static bool is_attention_kernel(const char *name)
{
    enum { CAP = 4096 };
    static struct { uint64_t h; int8_t attn; } memo[CAP];
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    uint64_t h = fnv1a(name, strlen(name), FNV0) | 1;
    pthread_mutex_lock(&lock);
    size_t i = h % CAP;
    for (int probe = 0; probe < CAP && memo[i].h && memo[i].h != h; probe++) i = (i + 1) % CAP;
    int8_t attn = memo[i].h == h ? memo[i].attn : -1;
    pthread_mutex_unlock(&lock);
    if (attn >= 0) return attn;
    struct name_hash dh;
    int fam = classify(name, &dh), shape_fam = family_by_op(RV_OP_ATTENTION_SHAPE);
    attn = fam >= 0 && !strcmp(g_fam[fam].name, "attention") && shape_fam >= 0 &&
           g_fam[shape_fam].booster && vocab_id(dh, shape_fam) >= 0;
    pthread_mutex_lock(&lock);
    if (!memo[i].h) {
        memo[i].h = h;
        memo[i].attn = attn;
    }
    pthread_mutex_unlock(&lock);
    return attn;
}

EXPORT bool rv_predict_by_batch(const struct rv_launch *l)
{
    pthread_once(&g_once, init);
    return l->op == RV_OP_KERNEL && l->kernel && g_fixed_ns < 0 && is_attention_kernel(l->kernel);
}

/* The batch rv_attention_batch last reported: how many uniform parts it has (0: none yet). */
static int batch_now(struct rv_attn_shape part[2], struct rv_attn_shape *whole)
{
    pthread_mutex_lock(&g_batch.lock);
    int n = g_batch.n;
    memcpy(part, g_batch.part, sizeof g_batch.part);
    *whole = g_batch.whole;
    pthread_mutex_unlock(&g_batch.lock);
    return n;
}

/* A launch over decodes and prefill chunks (the step's mix): the attention_mix model where
 * it knows the kernel (held-out error in the predictor report). Otherwise the two uniform
 * estimates that bracket such launches (on 3,000 FA3 calls, profiles/h200/rows/
 * fa3_mixed_a.jsonl.gz): the parts predicted apart pay the kernel's fixed cost twice and put
 * the decodes on the decode kernel; the whole batch as one shape spreads the decodes' KV over
 * prefill-sized queries; their geometric mean reads 10 % GPU-time weighted error. Counted in
 * the totals here, once per launch, also when the step's last prediction is reused. */
static int64_t predict_mixed(const struct rv_launch *l, int *source)
{
    uint64_t name = fnv1a(l->kernel, strlen(l->kernel), FNV0) | 1;
    pthread_mutex_lock(&g_batch.lock);
    struct rv_attn_shape part[2] = {g_batch.part[0], g_batch.part[1]}, whole = g_batch.whole;
    struct rv_attn_mix m = g_batch.mix;
    bool reuse = g_batch.mix_kernel == name;
    uint64_t step = g_batch.step;
    int64_t ns = g_batch.mix_ns;
    int src = g_batch.mix_src, flags = g_batch.mix_flags;
    pthread_mutex_unlock(&g_batch.lock);
    if (!reuse) {
        struct name_hash hash;
        int mix_fam = family_by_op(RV_OP_ATTENTION_MIX), kid = -1;
        pthread_mutex_lock(&g_lock); /* the models' fast-predict handles are not thread-safe */
        if (mix_fam >= 0 && g_fam[mix_fam].booster) {
            classify(l->kernel, &hash);
            kid = vocab_id(hash, mix_fam);
        }
        if (kid >= 0) {
            double x[NFEAT_MAX];
            int n = rv_attention_mix_features(&m, g_model_spec, kid, x);
            ns = evaluate(mix_fam, x, n, rv_attention_mix_roofline_ns(&m, g_model_spec));
            src = RV_SRC_MODEL;
            flags = 0;
        }
        pthread_mutex_unlock(&g_lock);
        if (kid < 0) {
            int f[3];
            double apart = (double)(predict_once(l, &part[0], &src, &f[0]) +
                                    predict_once(l, &part[1], &src, &f[1]));
            ns = llround(sqrt(apart * (double)predict_once(l, &whole, &src, &f[2])));
            flags = f[0] | f[1] | f[2];
        }
        pthread_mutex_lock(&g_batch.lock);
        if (g_batch.step == step) { /* not if another thread reported the next step meanwhile */
            g_batch.mix_kernel = name;
            g_batch.mix_ns = ns;
            g_batch.mix_src = src;
            g_batch.mix_flags = flags;
        }
        pthread_mutex_unlock(&g_batch.lock);
    }
    count_prediction(ns, src, flags);
    if (source) *source = src;
    return ns;
}

EXPORT int64_t rv_predict_ns(const struct rv_launch *l, int *source)
{
    if (!rv_predict_by_batch(l)) return predict(l, NULL, source);
    struct rv_attn_shape part[2], whole;
    int n = batch_now(part, &whole);
    if (n == 0) return predict(l, NULL, source);
    if (n == 1) {
        int64_t ns = predict(l, &part[0], source);
        atomic_fetch_add(&totals()[T_BY_BATCH], ns);
        return ns;
    }
    int64_t ns = predict_mixed(l, source);
    atomic_fetch_add(&totals()[T_BY_BATCH], ns);
    return ns;
}

/* An attention kernel whose sequence lengths are known: the attention_shape model when the
 * index has one and the kernel is of the attention family; otherwise as rv_predict_ns, with
 * the attention roofline where no model covers the kernel. */
EXPORT int64_t rv_predict_attention_ns(const struct rv_launch *l, const struct rv_attn_shape *a,
                                       int *source)
{
    return predict(l, a, source);
}

/* ---------------------------------------------------------------- sustained power */

/* Compute-bound work slows down once the GPU holds its power limit: on the H200 the SM clock
 * fell from 1,980 to about 1,470 MHz within some 50 ms of back-to-back compute-bound GEMMs,
 * which then took 1.18-1.27x their time at boost clock (attention prefill 1.31-1.36x), while
 * memory-bound GEMMs, copies and element-wise kernels kept their speed (the HBM clock stays);
 * a GEMM busy less than ~63 % of the time did not slow down at all (rv_power_throttle).
 * The profile measured every kernel at boost clock, cold. How compute-bound a launch is comes
 * from its roofline on this GPU: with r = compute time / memory time at peak rates, GEMMs with
 * r below 0.3 kept their speed and those above 1 slowed fully; between, linearly. Kernels
 * whose work the emulator does not know (plain launches) count as memory-bound. Returns that
 * share (0..1: how much of the power limit the launch draws, for the power state the device
 * shim keeps), *hot_extra the fraction it slows down by at the power limit, and *tau_ns the
 * power state's time constant (0: sustained power not modelled). */
EXPORT double rv_power_load(const struct rv_launch *l, double *hot_extra, double *tau_ns)
{
    pthread_once(&g_once, init);
    *hot_extra = 0;
    *tau_ns = g_power[PW_TAU_MS] * 1e6;
    if (g_power[PW_TAU_MS] <= 0) return 0;
    double tc, tm, slowdown;
    if (l->op == RV_OP_GEMM) {
        gemm_times(l, g_spec, &tc, &tm);
        slowdown = g_power[PW_GEMM];
    } else if (rv_predict_by_batch(l)) {
        struct rv_attn_shape part[2], whole;
        int n = batch_now(part, &whole);
        if (n == 0) return 0;
        attn_times(n == 2 ? &whole : &part[0], g_spec, &tc, &tm);
        slowdown = g_power[PW_ATTENTION];
    } else {
        return 0;
    }
    double share = tm > 0 ? (tc / tm - 0.3) / 0.7 : 1;
    share = share < 0 ? 0 : share > 1 ? 1 : share;
    *hot_extra = (slowdown - 1) * share;
    return share;
}

/* How far the GPU is throttled (0..1) at power state h: not at all while the recent power
 * draw stays under the limit, fully from the spec's throttle_full on. Measured on the H200
 * with a compute-bound GEMM run at duty cycles from 12 to 97 %: no slowdown up to 63 % busy,
 * 69 % of the full slowdown at 73 %, 94 % at 86 %. */
EXPORT double rv_power_throttle(double h)
{
    if (g_power[PW_TAU_MS] <= 0) return 0;
    double f = (h - g_power[PW_ONSET]) / (g_power[PW_FULL] - g_power[PW_ONSET]);
    return f < 0 ? 0 : f > 1 ? 1 : f;
}

/* The device shim's power-limit slowdown of a launch (ns beyond its prediction), counted
 * with the measured models' GPU time: it is a measured effect on modelled launches. */
EXPORT void rv_power_count(int64_t extra_ns)
{
    count_prediction(extra_ns, RV_SRC_MODEL, false);
}

EXPORT void rv_predict_totals(int64_t out_ns[3])
{
    for (int i = 0; i < 3; i++) out_ns[i] = atomic_load(&totals()[i]);
}

/* Set up g_totals (see there). A directory that cannot take the file only loses the report,
 * never the run: say so and count in memory. */
static void map_totals(void)
{
    const char *dir = getenv("REVATI_PREDICT_TOTALS");
    if (!dir || !*dir) return;
    char path[4096];
    snprintf(path, sizeof path, "%s/%d.totals", dir, (int)getpid());
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    void *m = MAP_FAILED;
    if (fd >= 0 && ftruncate(fd, sizeof g_own_totals) == 0)
        m = mmap(NULL, sizeof g_own_totals, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (fd >= 0) close(fd);
    if (m == MAP_FAILED) {
        fprintf(stderr, "[revati] warning: predicted GPU time not reported: cannot map %s: %s\n",
                path, strerror(errno));
        return;
    }
    g_totals = m;
}
