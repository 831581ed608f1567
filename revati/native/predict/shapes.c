/* Predictions by shape rather than by launch: attention from the engine's batch (uniform
 * shapes and mixed steps) and the fused-MoE GEMMs from their routing; predict_int.h. */
#include "predict_int.h"

/* ---------------------------------------------------------------- attention by shape */

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
void attn_times(const struct rv_attn_shape *a, const double *spec, double *tc, double *tm)
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

/* The fused-MoE GEMMs that rv_moe_dims (kernel_args.c) reads from the kernel's arguments,
 * under uniform routing (see there). */

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
