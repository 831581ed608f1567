/* Predictions as the device shim asks for them: cached per distinct launch, attention from
 * the engine's batch, counted in the predicted-time totals (predict_int.h). */
#include "predict_int.h"

/* ---------------------------------------------------------------- totals */

/* Predicted GPU time (ns) by what it came from: the three rv_pred_source values, then of
 * them T_BY_BATCH, attention predicted from the batch the engine reported
 * (rv_attention_batch); T_UNSEEN, kernels a model predicted without knowing them (no
 * vocabulary id, no skeleton); T_LAUNCH_ONLY, attention, GEMM and fused-MoE kernels
 * predicted from their launch alone (index 'launch_only' lines: their shapes were not
 * known, so their family's weakest model ran); T_COLLECTIVE, collectives and vLLM's custom
 * all-reduce. revati/predict/totals.py reads this layout. */
enum { T_BY_BATCH = RV_SRC_FIXED + 1, T_UNSEEN, T_LAUNCH_ONLY, T_COLLECTIVE, T_N };
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
enum { PRED_UNSEEN = 1, PRED_LAUNCH_ONLY = 2, PRED_COLLECTIVE = 4 };
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;

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

/* The key's hash for the cache's index, a word at a time (every launch hashes its key: FNV-1a
 * byte by byte cost ~0.4 % of a serving engine's CPU), mixed so that the index's low bits
 * depend on every bit of the key. */
static uint64_t key_hash(const struct key *k)
{
    _Static_assert(sizeof *k % sizeof(uint64_t) == 0, "struct key is a whole number of words");
    uint64_t w[sizeof *k / sizeof(uint64_t)], h = FNV0;
    memcpy(w, k, sizeof w);
    for (size_t i = 0; i < sizeof w / sizeof w[0]; i++) {
        h = (h ^ w[i]) * 0x9e3779b97f4a7c15ULL;
        h ^= h >> 32;
    }
    return h;
}

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
                *cache_find(&old[i].key, key_hash(&old[i].key)) = old[i];
        free(old);
    }
    *cache_find(k, h) = (struct slot){*k, ns, source, flags, 1};
    g_cache_len++;
}

EXPORT uint64_t rv_kernel_hash(const char *kernel)
{
    return fnv1a(kernel, strlen(kernel), FNV0);
}

/* The launch's kernel-name hash: the one it carries, else its name's. */
static uint64_t kernel_hash(const struct rv_launch *l)
{
    return l->kernel_hash ? l->kernel_hash : rv_kernel_hash(l->kernel);
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
    k->name_hash = l->kernel ? kernel_hash(l) : 0;
    if (a) k->attn = *a;
}

/* ---------------------------------------------------------------- prediction */

/* The models learnt log(measured / roofline) on the profiled GPU, so they are evaluated
 * against that GPU's spec (g_model_spec), never this run's: a spec edit cannot shift them. A
 * run on another GPU with those models (g_transfer) carries each time over (on_this_gpu). */
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
            int64_t roof = rv_moe_roofline_ns(l, g_moe_experts, g_moe_top_k, g_model_spec);
            *source = RV_SRC_MODEL;
            return on_this_gpu(evaluate(moe_fam, x, n, roof), roof,
                               rv_moe_roofline_ns(l, g_moe_experts, g_moe_top_k, g_spec));
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
            int64_t roof = rv_attention_roofline_ns(a, g_model_spec);
            return on_this_gpu(evaluate(shape_fam, x, n, roof), roof,
                               rv_attention_roofline_ns(a, g_spec));
        }
    } else {
        fam = family_by_op(l->op);
    }
    /* vLLM's custom all-reduce runs on several GPUs at once, so no profile of one GPU has it:
     * the spec's collective table predicts it unless a model knows the kernel by name. */
    if (l->op == RV_OP_KERNEL) {
        int64_t ns = custom_allreduce_ns(l);
        if (ns >= 0 && (fam < 0 || !g_fam[fam].booster || vocab_id(hash, fam) < 0)) {
            *source = RV_SRC_ROOFLINE;
            *flags = PRED_COLLECTIVE;
            return ns;
        }
    }
    if (l->op == RV_OP_COLLECTIVE) *flags = PRED_COLLECTIVE;
    if (fam < 0 || !g_fam[fam].booster) {
        *source = RV_SRC_ROOFLINE;
        if (a) return rv_attention_roofline_ns(a, g_spec);
        /* The table applies here, not in rv_roofline_ns: that is the base the models learnt
         * their corrections against, on the profiled GPU's spec (which has no table) and as
         * the trainer computes it in Python (which reads no spec file). */
        return l->op == RV_OP_COLLECTIVE ? collective_ns(l) : rv_roofline_ns(l, g_spec);
    }
    int kid = l->op == RV_OP_KERNEL ? vocab_id(hash, fam) : -1;
    int n = rv_features(l, g_model_spec, kid, x);
    if (l->op == RV_OP_KERNEL && kid < 0) {
        *flags = PRED_UNSEEN;
        x[0] = NAN;
    }
    if (g_fam[fam].launch_only) *flags |= PRED_LAUNCH_ONLY;
    *source = RV_SRC_MODEL;
    int64_t roof = rv_roofline_ns(l, g_model_spec);
    return on_this_gpu(evaluate(fam, x, n, roof), roof, rv_roofline_ns(l, g_spec));
}

void count_prediction(int64_t ns, int src, int flags)
{
    _Atomic int64_t *t = totals();
    atomic_fetch_add(&t[src], ns);
    if (flags & PRED_UNSEEN) atomic_fetch_add(&t[T_UNSEEN], ns);
    if (flags & PRED_LAUNCH_ONLY) atomic_fetch_add(&t[T_LAUNCH_ONLY], ns);
    if (flags & PRED_COLLECTIVE) atomic_fetch_add(&t[T_COLLECTIVE], ns);
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
        uint64_t h = key_hash(&k);
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
static bool is_attention_kernel(const struct rv_launch *l)
{
    enum { CAP = 4096 };
    static struct { uint64_t h; int8_t attn; } memo[CAP];
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    uint64_t h = kernel_hash(l) | 1;
    pthread_mutex_lock(&lock);
    size_t i = h % CAP;
    for (int probe = 0; probe < CAP && memo[i].h && memo[i].h != h; probe++) i = (i + 1) % CAP;
    int8_t attn = memo[i].h == h ? memo[i].attn : -1;
    pthread_mutex_unlock(&lock);
    if (attn >= 0) return attn;
    struct name_hash dh;
    int fam = classify(l->kernel, &dh), shape_fam = family_by_op(RV_OP_ATTENTION_SHAPE);
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
    return l->op == RV_OP_KERNEL && l->kernel && g_fixed_ns < 0 && is_attention_kernel(l);
}

/* The batch rv_attention_batch last reported: how many uniform parts it has (0: none yet). */
int batch_now(struct rv_attn_shape part[2], struct rv_attn_shape *whole)
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
    uint64_t name = kernel_hash(l) | 1;
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
            int64_t roof = rv_attention_mix_roofline_ns(&m, g_model_spec);
            ns = on_this_gpu(evaluate(mix_fam, x, n, roof), roof,
                             rv_attention_mix_roofline_ns(&m, g_spec));
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

/* ---------------------------------------------------------------- totals, reported */

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
