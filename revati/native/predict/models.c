/* The run's state: the hardware spec, the model index with its LightGBM models, name
 * patterns and kernel vocabulary; kernel classification and model evaluation
 * (predict_int.h). */
#include "predict_int.h"

void die(const char *what)
{
    fprintf(stderr, "revati predict: %s\n", what);
    abort();
}

/* ---------------------------------------------------------------- state */

double g_spec[SP_N];       /* this run's GPU (REVATI_HW_SPEC): the roofline fallback */
/* The optional sustained-power spec keys, in PW_* order (predict_int.h says what they are). */
static const char *const power_keys[PW_N] = {
    "power.gemm_slowdown", "power.attention_slowdown", "power.time_constant_ms",
    "power.throttle_onset", "power.throttle_full", "power.memory_load"};
double g_power[PW_N];
double g_coll[CT_N][CT_MAX_RANKS + 1][2];
double g_model_spec[SP_N]; /* the GPU the models were trained on (index 'spec' lines) */
int g_moe_experts, g_moe_top_k; /* REVATI_MOE: the served model's routing (0: none) */
int64_t g_fixed_ns = -1;
/* The models were trained on another GPU of this run's architecture (revati/device/env.py
 * picks them where this GPU has none): each prediction is that GPU's time, which
 * on_this_gpu carries over (docs/predictor.md, "Another GPU of the same architecture"). */
int g_transfer;

struct pattern { int family; char *needle; };
struct vocab_entry { uint64_t hash; int family; int id; };

struct family *g_fam;
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

pthread_once_t g_once = PTHREAD_ONCE_INIT;

uint64_t fnv1a(const void *p, size_t n, uint64_t h)
{
    const unsigned char *s = p;
    for (size_t i = 0; i < n; i++) h = (h ^ s[i]) * 1099511628211ULL;
    return h;
}

/* A "collective.<name>.<ranks> <alpha_us> <busbw_gbps>" line of the spec, `name` past the
 * prefix. Said loudly when malformed: spec.py writes what this reads, so a mismatch is a bug. */
static void load_collective(const char *name, const char *line)
{
    const char *dot = strrchr(name, '.');
    char *end;
    long n = dot ? strtol(dot + 1, &end, 10) : 0;
    double alpha, busbw;
    int entry = -1;
    for (int i = 0; dot && i < CT_N; i++)
        if (strlen(coll_table_names[i]) == (size_t)(dot - name) &&
            !strncmp(name, coll_table_names[i], dot - name))
            entry = i;
    if (entry < 0 || n < 2 || n > CT_MAX_RANKS || *end ||
        sscanf(line, "%*s %lf %lf", &alpha, &busbw) != 2 || !(alpha >= 0) || !(busbw > 0)) {
        fprintf(stderr, "revati predict: REVATI_HW_SPEC: bad collective line: %s", line);
        abort();
    }
    g_coll[entry][n][0] = alpha;
    g_coll[entry][n][1] = busbw;
}

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
        if (!strncmp(key, "collective.", 11)) load_collective(key + 11, line);
    }
    if (!(g_power[PW_GEMM] >= 1 && g_power[PW_ATTENTION] >= 1 && g_power[PW_TAU_MS] > 0 &&
          g_power[PW_ONSET] >= 0 && g_power[PW_FULL] > g_power[PW_ONSET] &&
          g_power[PW_FULL] <= 1 && g_power[PW_MEMORY] >= 0 && g_power[PW_MEMORY] < 1))
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

/* A kernel name's skeleton: the name without its template arguments that are literals
 * (numbers and booleans: "128", "true"; each with its comma), without spaces, and with every
 * other run of digits reduced to one placeholder. Two builds of one kernel template (another
 * engine's FlashAttention 3, with other tile sizes or one flag more; torch 2.14's elementwise
 * kernels, which end in one more flag, "std::array<char*, 1ul>, false>" where torch 2.11's
 * profile has "std::array<char*, 1ul> >") share a skeleton; a name the profile never saw is
 * given the vocabulary id of the first profiled kernel with its skeleton, so it is
 * predicted as that kernel (and an attention kernel from the engine's batch) instead of as
 * an unknown. Salted: never equal to an exact name's. */
static uint64_t skeleton_hash(const char *name)
{
    uint64_t h = FNV0 ^ 0x5bd1e995u;
    for (const char *p = name; *p;) {
        if (*p == ' ') {
            p++;
            continue;
        }
        if (*p == '<' || *p == ',') { /* a literal argument next: leave it out */
            const char *q = p + 1;
            while (*q == ' ') q++;
            const char *end = skip_literal(q);
            while (end && *end == ' ') end++;
            if (end && (*end == ',' || *end == '>')) {
                if (*p == '<') { /* keep the bracket, drop the argument and its comma */
                    h = fnv1a("<", 1, h);
                    p = *end == ',' ? end + 1 : end;
                } else {
                    p = end;
                }
                continue;
            }
        }
        const char *end = skip_literal(p);
        if (!end) {
            h = fnv1a(p++, 1, h);
            continue;
        }
        h = fnv1a("#", 1, h);
        p = end;
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

void init(void)
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
    const char *transfer = getenv("REVATI_PREDICT_TRANSFER");
    g_transfer = transfer && !strcmp(transfer, "1");
}

int64_t on_this_gpu(int64_t ns, int64_t roof_model, int64_t roof_run)
{
    if (!g_transfer || roof_model <= 0 || roof_run <= 0) return ns;
    /* What the roofline adds (or saves) on this GPU is added to the trained GPU's time: the
     * part of a kernel's time that its roofline does not explain (latency, launch, a small
     * grid) does not scale with bandwidth, and scaling the whole time by the rooflines' ratio
     * read real H100 runs worse (docs/validation.md, "An H100"). A saving is at most the
     * ratio's. */
    int64_t add = ns + (roof_run - roof_model);
    if (roof_run >= roof_model) return add;
    int64_t scaled = (int64_t)llround((double)ns * (double)roof_run / (double)roof_model);
    return add > scaled ? add : scaled;
}

/* ---------------------------------------------------------------- prediction */

static int vocab_find(uint64_t hash, int family)
{
    for (size_t i = hash & (g_vocab_cap - 1); g_vocab && g_vocab[i].family >= 0;
         i = (i + 1) & (g_vocab_cap - 1))
        if (g_vocab[i].hash == hash && g_vocab[i].family == family) return g_vocab[i].id;
    return -1;
}

/* The kernel's id in a family's vocabulary: its own, else its skeleton's (-1: neither). */
int vocab_id(struct name_hash h, int family)
{
    int id = vocab_find(h.exact, family);
    return id >= 0 ? id : vocab_find(h.skeleton, family);
}

/* Family of a kernel by its demangled name (-1: none) and the name's hashes for vocab_id. */
int classify(const char *name, struct name_hash *hash)
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

int family_by_op(int op)
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

int64_t evaluate(int fam, const double *x, int n, int64_t roof)
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
