/* Duration predictor as the device shim calls it (docs/predictor.md).
 *
 * The device shim fills one rv_launch per kernel, copy, memset or collective it queues
 * and asks for its duration on the emulated GPU. The features are exactly what the
 * profiler records on a real GPU (revati/predict/features.py mirrors this struct), so a
 * model trained on real profiles sees the same inputs at emulation time.
 *
 * Prediction is cached per distinct feature vector and never counts in virtual time.
 */
#ifndef REVATI_PREDICT_H
#define REVATI_PREDICT_H

#include <stdbool.h>
#include <stdint.h>

enum rv_op {
    RV_OP_KERNEL = 0,   /* a kernel launch (cuLaunchKernel*, graph kernel node) */
    RV_OP_GEMM = 1,     /* a kernel launched inside a cuBLAS/cuBLASLt call: m,n,k known */
    RV_OP_MEMCPY = 2,   /* bytes + copy_kind */
    RV_OP_MEMSET = 3,   /* bytes */
    RV_OP_COLLECTIVE = 4 /* NCCL: coll, bytes, nranks */
};

enum rv_dtype { RV_DT_NONE = 0, RV_DT_F32, RV_DT_F16, RV_DT_BF16, RV_DT_FP8_E4M3,
                RV_DT_FP8_E5M2, RV_DT_I8, RV_DT_I32, RV_DT_F64 };

enum rv_copy_kind { RV_COPY_H2D = 1, RV_COPY_D2H = 2, RV_COPY_D2D = 3, RV_COPY_H2H = 4,
                    RV_COPY_P2P = 5 };

enum rv_coll { RV_COLL_ALLREDUCE = 1, RV_COLL_ALLGATHER, RV_COLL_REDUCESCATTER,
               RV_COLL_BROADCAST, RV_COLL_REDUCE, RV_COLL_ALLTOALL, RV_COLL_SEND,
               RV_COLL_RECV };

struct rv_launch {
    int op;                 /* enum rv_op */
    int device;             /* emulated device ordinal */
    const char *kernel;     /* mangled kernel name, or NULL for copies/collectives */
    /* rv_kernel_hash(kernel), which the device shim computes once per kernel; 0: not given,
     * and the predictor hashes the name (several times a launch: a long template name
     * hashed on every launch cost ~2 % of a serving engine's CPU, which counts as its own) */
    uint64_t kernel_hash;
    uint32_t grid[3], block[3];
    uint32_t shared_bytes;  /* static + dynamic shared memory (as CUPTI reports it) */
    /* RV_OP_GEMM; for a fused-MoE kernel (RV_OP_KERNEL), its GEMM (rv_moe_dims) */
    int64_t m, n, k, batch;
    int dtype_a, dtype_b, dtype_c; /* enum rv_dtype */
    int trans_a, trans_b;
    /* RV_OP_MEMCPY / MEMSET / COLLECTIVE */
    int64_t bytes;
    int copy_kind;          /* enum rv_copy_kind */
    int coll;               /* enum rv_coll */
    int nranks;
    /* RV_OP_KERNEL: the sizes among the kernel's scalar arguments, or the sizes that
     * rv_arg_sizes reads from a known argument structure (torch.cat's inputs, index_select's
     * output); -1 when the launch's parameter layout is unknown */
    int64_t arg_max, arg_sum;
};

/* Kernels whose argument structures the predictor reads, told by name once per kernel (when
 * its cubin is parsed), not on every launch. */
enum rv_arg_layout {
    RV_ARGS_SCALARS = 0,  /* any other kernel: its scalar arguments */
    RV_ARGS_CAT,          /* torch.cat: CatArrayBatchedCopy* */
    RV_ARGS_INDEX_SELECT, /* index_select / embedding: indexSelect{Small,Large}Index */
    RV_ARGS_REDUCE,       /* PyTorch reductions: reduce_kernel */
    RV_ARGS_SPLIT_K,      /* cuBLASLt's split-K reduction: splitKreduce_kernel */
    RV_ARGS_FUSED_MOE,    /* vLLM's and SGLang's Triton fused_moe_kernel */
};
__attribute__((visibility("default")))
int rv_arg_layout(const char *kernel);

/* A launch shape does not carry the sizes a kernel works on (an RMSNorm launches one block
 * per row at any hidden size, a segmented sort one block per row at any vocabulary); its
 * scalar arguments usually do. values[i] points at parameter i, size[i] bytes (the cubin's
 * layout). Counted: 4-byte values in [1, 2^24) (floats and negative values are above) and
 * 8-byte values in [1, 2^31) (pointers are above). Structure parameters are left out: they
 * hold padding bytes of whatever the stack held, pointers at 4-byte offsets and per-call
 * counters (a random-number generator's offset), so the same shape would not give the same
 * features in a profile and in an emulated run (seen when reading them: about a third of
 * the profile's structure-carrying launches differed between two replays), except where a
 * kernel's structure layout is known (layout: rv_arg_layout of its name; grid, block: its
 * launch shape, which tells how many entries the host filled or where a structure starts;
 * see cat_input_sizes, index_select_elements, reduce_config_sizes and split_k_sizes in
 * kernel_args.c). */
__attribute__((visibility("default")))
void rv_arg_sizes(int layout, const uint32_t grid[3], const uint32_t block[3], int count,
                  const uint16_t *size, const void *const *values, int64_t *arg_max,
                  int64_t *arg_sum);

/* A fused-MoE Triton kernel's GEMM (kernel_args.c): m = routed (token, expert) pairs, n, k from
 * its arguments; false for any other kernel layout. */
__attribute__((visibility("default")))
bool rv_moe_dims(int layout, int count, const uint16_t *size, const void *const *values,
                 int64_t *m, int64_t *n, int64_t *k);

/* Source of a prediction, for the coverage report. */
enum rv_pred_source { RV_SRC_MODEL = 0, RV_SRC_ROOFLINE = 1, RV_SRC_FIXED = 2 };

/* The hash of a kernel name that struct rv_launch carries in kernel_hash. */
__attribute__((visibility("default")))
uint64_t rv_kernel_hash(const char *kernel);

/* Predicted duration in ns on the emulated GPU (the hardware spec of this run).
 * *source (may be NULL) says where it came from. Thread-safe. */
__attribute__((visibility("default")))
int64_t rv_predict_ns(const struct rv_launch *l, int *source);

/* Whether l's duration depends on the engine's current batch (an attention kernel that the
 * attention-by-shape model knows, predicted from the sequence lengths rv_attention_batch last
 * reported): a CUDA graph replay must predict such a node again every time. */
__attribute__((visibility("default")))
bool rv_predict_by_batch(const struct rv_launch *l);

/* The engine's next step: per row (request) its query tokens and its KV length after the
 * step, and the attention heads, KV heads and head size of one layer on this GPU. */
__attribute__((visibility("default")))
void rv_attention_batch(int rows, const int64_t *q_lens, const int64_t *kv_lens, int heads,
                        int kv_heads, int head_dim);

/* How much of the GPU's power limit a launch draws (0 memory-bound .. 1 compute-bound), how
 * much slower it runs when the GPU holds its power limit (*hot_extra, a fraction) and the
 * power state's time constant (*tau_ns; 0: the hardware spec models no sustained power). */
__attribute__((visibility("default")))
double rv_power_load(const struct rv_launch *l, double *hot_extra, double *tau_ns);
/* How far a GPU at power state h (0..1, the low-pass filtered power load) is throttled. */
__attribute__((visibility("default")))
double rv_power_throttle(double h);
/* Counts the power-limit slowdown the device shim applied into the predicted GPU time. */
__attribute__((visibility("default")))
void rv_power_count(int64_t extra_ns);

/* Predicted GPU time so far, per source, in ns (for predictor_coverage). */
__attribute__((visibility("default")))
void rv_predict_totals(int64_t out_ns[3]);

#endif
