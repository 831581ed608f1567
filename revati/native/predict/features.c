/* Feature vectors per op class and their names (predict_int.h). */
#include "predict_int.h"

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

double lg2(double x) { return x > 0 ? log2(x) : 0; }
static double lg2_arg(int64_t x) { return x < 0 ? NAN : lg2((double)x); } /* -1: unknown */

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
