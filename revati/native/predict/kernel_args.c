/* Sizes read from kernel arguments: the structures of the kernels rv_arg_layout knows, the
 * scalars of every other (rv_arg_sizes), the fused-MoE GEMM (rv_moe_dims); predict_int.h. */
#include "predict_int.h"

/* ---------------------------------------------------------------- kernel arguments */

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
