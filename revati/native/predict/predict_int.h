/* Duration predictor for the device shim (predict.h; docs/predictor.md): what the files of
 * librevati_predict.so share.
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
 * drift apart. Self-contained on purpose (no time/core.c): the device shim links it, tests
 * load it with ctypes.
 *
 * roofline.c     the hardware spec vector (rv_spec_key), the roofline of GEMMs, copies,
 *                memsets, collectives and plain launches (rv_roofline_ns), and collectives
 *                and vLLM's custom all-reduce by the spec's table (collective_ns,
 *                custom_allreduce_ns)
 * features.c     feature names and vectors per op class (rv_feature_name, rv_features)
 * kernel_args.c  sizes read from kernel arguments (rv_arg_layout, rv_arg_sizes) and the
 *                fused-MoE GEMM in them (rv_moe_dims)
 * shapes.c       attention by shape, mixed-step attention (rv_attn_mix) and the fused-MoE
 *                GEMMs by routing: rooflines and features
 * models.c       the run's state: hardware spec, model index (LightGBM models, name
 *                patterns, vocabulary), kernel classification and model evaluation
 * dispatch.c     prediction cache, rv_predict_ns and the engine's batch
 *                (rv_attention_batch), predicted-time totals
 * power.c        sustained power (rv_power_load, rv_power_throttle, rv_power_count)
 *
 * Everything declared here without EXPORT is internal: the build hides every symbol that
 * is not EXPORT (-fvisibility=hidden).
 */
#ifndef REVATI_PREDICT_INT_H
#define REVATI_PREDICT_INT_H

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

/* ---------------------------------------------------------------- models.c: errors */

void die(const char *what);

/* ---------------------------------------------------------------- roofline.c */

/* Order of the spec vector shared with Python (rv_spec_key). */
enum { SP_SM_COUNT, SP_MEMORY_BYTES, SP_FP32, SP_TF32, SP_FP16, SP_BF16, SP_FP8, SP_HBM,
       SP_NVLINK, SP_PCIE, SP_LAUNCH_NS, SP_N };
extern const char *const spec_keys[SP_N];

double dtype_bytes(int dtype);
/* A GEMM's seconds of tensor-core work (tc) and of HBM traffic (tm) at peak rates. */
void gemm_times(const struct rv_launch *l, const double *spec, double *tc, double *tm);
EXPORT int64_t rv_roofline_ns(const struct rv_launch *l, const double *spec);

/* The spec's optional collective table (revati/device/spec.py `collectives`, fitted by
 * tools/calibrate/collectives_published.py): per collective and rank count, the duration
 * t = alpha + wire bytes / bus bandwidth. Names mirrored by spec.COLLECTIVE_OPS. */
enum { CT_ALLREDUCE, CT_ALLGATHER, CT_REDUCESCATTER, CT_BROADCAST, CT_SENDRECV,
       CT_CUSTOM_AR_1STAGE, CT_CUSTOM_AR_2STAGE, CT_N };
#define CT_MAX_RANKS 8 /* one NVSwitch node */
extern const char *const coll_table_names[CT_N];
/* A collective's duration in ns: by this run's table, else the NVLink roofline. */
int64_t collective_ns(const struct rv_launch *l);
/* vLLM's custom all-reduce kernel by this run's table, in ns; -1 for any other kernel, or
 * where the table has no entry or the launch does not tell the buffer's size. */
int64_t custom_allreduce_ns(const struct rv_launch *l);

/* ---------------------------------------------------------------- features.c */

#define NFEAT_MAX 24  /* features.NFEAT_MAX mirrors it */

double lg2(double x);
EXPORT int rv_features(const struct rv_launch *l, const double *spec, int kernel_id, double *out);

/* ---------------------------------------------------------------- shapes.c */

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

/* Attention's seconds of tensor-core work (tc) and of HBM traffic (tm) at peak rates. */
void attn_times(const struct rv_attn_shape *a, const double *spec, double *tc, double *tm);
EXPORT int64_t rv_attention_roofline_ns(const struct rv_attn_shape *a, const double *spec);
EXPORT int rv_attention_features(const struct rv_attn_shape *a, const double *spec,
                                 int kernel_id, double *out);

/* A step that mixes decodes with prefill chunks in one attention launch (chunked prefill):
 * no uniform shape describes it (docs/predictor.md, "Mixed steps"), so its own model takes
 * the two groups' sizes. Decodes: one query token each over dec_kv KV tokens in all (the
 * longest dec_kv_max); prefill rows: pre_q query tokens over pre_kv KV tokens, pre_pairs
 * causal query-key pairs. Mirrored by features.AttnMix. */
struct rv_attn_mix {
    int64_t decodes, prefills, heads, kv_heads, head_dim;
    double dec_kv, dec_kv_max, pre_q, pre_q_max, pre_kv, pre_pairs;
};

EXPORT void rv_attention_mix(int rows, const int64_t *q_lens, const int64_t *kv_lens, int heads,
                             int kv_heads, int head_dim, struct rv_attn_mix *m);
EXPORT int64_t rv_attention_mix_roofline_ns(const struct rv_attn_mix *m, const double *spec);
EXPORT int rv_attention_mix_features(const struct rv_attn_mix *m, const double *spec,
                                     int kernel_id, double *out);
EXPORT int64_t rv_moe_roofline_ns(const struct rv_launch *l, int experts, int top_k,
                                  const double *spec);
EXPORT int rv_moe_features(const struct rv_launch *l, int experts, int top_k,
                           const double *spec, double *out);

/* ---------------------------------------------------------------- models.c: state */

extern double g_spec[SP_N];       /* this run's GPU (REVATI_HW_SPEC): the roofline fallback */
/* Optional spec keys (revati/device/spec.py sustained_power): slowdown factors of
 * compute-bound GEMMs and attention at the power limit, the power state's time constant, the
 * states at which throttling starts and is complete, and the power load of memory-bound
 * kernels (0: they draw no more than an idle GPU); zero when the spec has none or they are
 * inconsistent (sustained power not modelled). */
enum { PW_GEMM, PW_ATTENTION, PW_TAU_MS, PW_ONSET, PW_FULL, PW_MEMORY, PW_N };
extern double g_power[PW_N];
/* This run's collective table: {alpha_us, busbw_gbps} by [CT_*][ranks]; busbw 0: no entry. */
extern double g_coll[CT_N][CT_MAX_RANKS + 1][2];
extern double g_model_spec[SP_N]; /* the GPU the models were trained on (index 'spec' lines) */
extern int g_moe_experts, g_moe_top_k; /* REVATI_MOE: the served model's routing (0: none) */
extern int64_t g_fixed_ns;        /* REVATI_PREDICT_FIXED_NS (-1: not set) */
extern int g_transfer;            /* REVATI_PREDICT_TRANSFER: the models are another GPU's */

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

extern struct family *g_fam;
extern pthread_once_t g_once;     /* init: the spec, the demangler, REVATI_MOE, the models */
void init(void);

uint64_t fnv1a(const void *p, size_t n, uint64_t h);
#define FNV0 1469598103934665603ULL

/* ---------------------------------------------------------------- models.c: prediction */

/* A kernel's hashes: of its demangled name, and of that name's skeleton. */
struct name_hash { uint64_t exact, skeleton; };

/* The kernel's id in a family's vocabulary: its own, else its skeleton's (-1: neither). */
int vocab_id(struct name_hash h, int family);
/* Family of a kernel by its demangled name (-1: none) and the name's hashes for vocab_id. */
int classify(const char *name, struct name_hash *hash);
int family_by_op(int op);
int64_t evaluate(int fam, const double *x, int n, int64_t roof);
/* A model's time on the GPU it was trained on, carried to this run's GPU when they differ
 * (g_transfer): plus what this GPU's roofline for the same work adds to that GPU's. */
int64_t on_this_gpu(int64_t ns, int64_t roof_model, int64_t roof_run);

/* ---------------------------------------------------------------- dispatch.c */

void count_prediction(int64_t ns, int src, int flags);
/* The batch rv_attention_batch last reported: how many uniform parts it has (0: none yet). */
int batch_now(struct rv_attn_shape part[2], struct rv_attn_shape *whole);

#endif
