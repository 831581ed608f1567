/* Kernels computed on the host (docs/limits.md, "Kernels computed on the host").
 *
 * No kernel computes anything under emulation, and the engines notice only where the CPU
 * reads a kernel's output back. vLLM's V2 model runner (its default) keeps each request's
 * progress on the GPU: small Triton kernels turn the scheduler's decisions into positions
 * and sequence lengths, count the tokens each request sampled and fold them into its state,
 * and the CPU reads those counts back to learn which requests advanced. Those kernels,
 * found by name and parameter layout, are computed here from their arguments as
 * vllm/v1/worker/gpu/ defines them; so are torch's small contiguous fills and integer
 * aranges, which make their inputs (`new_ones`, `torch.arange`). What they leave alone
 * (token values, block tables, penalties' counts) and every other kernel stay predicted.
 * tests/native/test_host_kernels.py checks them against launches recorded on a real GPU. */
#include "cuda_internal.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ARGS 24
/* Fills and aranges computed: up to this many bytes, more than per-request bookkeeping holds
 * (a count per request slot: 4 KiB at vLLM's 1,024 slots). Larger ones (activations,
 * workspaces) stay predicted: computing them at every graph replay would cost CPU time that
 * the clock counts. */
#define HOST_FILL_LIMIT (64u << 10)

/* Triton 3 passes a kernel the arguments that are not constexpr, in order, leaving out the
 * ones it specialised away (None, integers equal to 1), then two scratch pointers. `spec`
 * lists the source's arguments, 'p' a pointer and 'i' an int32, each followed by '?' where
 * it may be left out; on success arg[j] points at argument j's value (NULL: left out).
 * False unless exactly one reading of the parameters fits. */
static bool bind(const char *spec, int count, const uint16_t *size, const void *const *values,
                 const void **arg) {
    char type[MAX_ARGS];
    bool optional[MAX_ARGS];
    int n = 0, nopt = 0, kept = count - 2, found = 0;
    for (const char *c = spec; *c && n < MAX_ARGS; c++) {
        if (*c == '?') { optional[n - 1] = true; nopt++; continue; }
        type[n] = *c;
        optional[n++] = false;
    }
    if (kept < 0 || kept > n || size[count - 1] != 8 || size[count - 2] != 8) return false;
    for (unsigned mask = 0; mask < 1u << nopt; mask++) {   /* a set bit: that one left out */
        const void *a[MAX_ARGS];
        int at = 0, o = 0;
        bool fits = true;
        for (int j = 0; j < n && fits; j++) {
            if (optional[j] && (mask >> o++ & 1)) { a[j] = NULL; continue; }
            fits = at < kept && size[at] == (type[j] == 'p' ? 8 : 4);
            a[j] = fits ? values[at++] : NULL;
        }
        if (!fits || at != kept) continue;
        if (found++) return false;
        memcpy(arg, a, (size_t)n * sizeof *a);
    }
    return found == 1;
}

/* One buffer argument; element accesses outside what its allocation holds are skipped (a
 * predicted kernel's output read as an index holds whatever the host left there). [lo, hi):
 * what stores wrote since the last written(). */
struct buf { char *base; size_t bytes; const char *kernel; char *lo, *hi; };
static struct buf buf_of(const void *arg, const char *kernel) {
    uintptr_t p = 0;
    if (arg) memcpy(&p, arg, sizeof p);
    return (struct buf){(char *)p, p ? rv_bytes_from(p) : 0, kernel, NULL, NULL};
}
/* What the stores wrote now reads as host-written: one range, not one per element (a range
 * list of a prompt's every token would make each later copy search thousands). */
static void written(struct buf *b) {
    if (b->hi > b->lo) rv_host_computed((uintptr_t)b->lo, (size_t)(b->hi - b->lo));
    b->lo = b->hi = NULL;
}
static bool inside(const struct buf *b, int64_t i, size_t width) {
    if (i >= 0 && (uint64_t)(i + 1) * width <= b->bytes) return true;
    rv_log_once("host kernel: an index out of its buffer (element left as it is)", b->kernel);
    return false;
}
static int64_t load(const struct buf *b, int64_t i, size_t width, int64_t otherwise) {
    if (!inside(b, i, width)) return otherwise;
    if (width == 8) { int64_t v; memcpy(&v, b->base + i * 8, 8); return v; }
    int32_t v;
    memcpy(&v, b->base + i * 4, 4);
    return v;
}
static void store(struct buf *b, int64_t i, size_t width, int64_t v) {
    if (!inside(b, i, width)) return;
    char *at = b->base + i * (int64_t)width;
    if (width == 8) memcpy(at, &v, 8);
    else { int32_t w = (int32_t)v; memcpy(at, &w, 4); }
    if (!b->lo || at < b->lo) b->lo = at;
    if (at + width > b->hi) b->hi = at + width;
}
/* The width of the request-index array (idx_mapping) handed to n programs: vLLM 0.26 copies
 * it to the device as int32, 0.33 as int64. Eight bytes when the host's copy holds n
 * eight-byte entries and each reads as one int64 (its high half 0, or -1 under a negative
 * index), else four. */
static size_t index_width(const struct buf *idx, int64_t n) {
    if (n <= 0 || rv_host_written_from((uintptr_t)idx->base) < (uint64_t)n * 8) return 4;
    for (int64_t i = 0; i < n; i++) {
        int32_t lo = (int32_t)load(idx, 2 * i, 4, 0), hi = (int32_t)load(idx, 2 * i + 1, 4, 0);
        if (!((hi == 0 && lo >= 0) || (hi == -1 && lo < 0))) return 4;
    }
    return 8;
}
static int32_t int_arg(const void *arg) {   /* an int32 argument; 1 where Triton left it out */
    int32_t v = 1;
    if (arg) memcpy(&v, arg, 4);
    return v;
}

/* buffer_utils.py: StagedWriteTensor.apply_write (one int32 tensor; block tables of several
 * KV-cache groups go through MULTI_GROUP, whose values no length depends on). 0.33 splits
 * each write over a second grid dimension; computed whole, once. */
static bool apply_write(const char *k, int count, const uint16_t *size, const void *const *v,
                        unsigned writes) {
    const void *a[MAX_ARGS];
    if (!bind("pi?pppp", count, size, v, a)) return false;
    struct buf out = buf_of(a[0], k), idx = buf_of(a[2], k), starts = buf_of(a[3], k),
               contents = buf_of(a[4], k), cu = buf_of(a[5], k);
    int64_t stride = int_arg(a[1]);
    for (int64_t j = 0; j < writes; j++) {
        int64_t row = load(&idx, j, 4, -1), start = load(&starts, j, 4, 0);
        int64_t from = j ? load(&cu, j - 1, 4, 0) : 0, to = load(&cu, j, 4, 0);
        if (row < 0) continue;
        for (int64_t i = from; i < to; i++)
            store(&out, row * stride + start + i - from, 4, load(&contents, i, 4, 0));
        written(&out);   /* rows lie far apart (a prompt's tokens, a request's blocks) */
    }
    return true;
}

/* input_batch.py: positions (int64) and sequence lengths of the step's requests; the last
 * program pads the sequence lengths with zeros up to max_num_reqs. */
static bool prepare_pos_seq_lens(const char *k, int count, const uint16_t *size,
                                 const void *const *v, unsigned programs) {
    const void *a[MAX_ARGS];
    if (!bind("pppppi?", count, size, v, a)) return false;
    struct buf pos = buf_of(a[0], k), seq_lens = buf_of(a[1], k), idx = buf_of(a[2], k),
               qsl = buf_of(a[3], k), computed = buf_of(a[4], k);
    int64_t reqs = (int64_t)programs - 1, max_reqs = int_arg(a[5]);
    size_t w = index_width(&idx, reqs);
    for (int64_t r = reqs; r < max_reqs; r++) store(&seq_lens, r, 4, 0);
    for (int64_t r = 0; r < reqs; r++) {
        int64_t done = load(&computed, load(&idx, r, w, -1), 4, 0);
        int64_t start = load(&qsl, r, 4, 0), len = load(&qsl, r + 1, 4, 0) - start;
        store(&seq_lens, r, 4, done + len);
        for (int64_t i = 0; i < len; i++) store(&pos, start + i, 8, done + i);
    }
    written(&seq_lens);
    written(&pos);
    return true;
}

/* input_batch.py: a request still prefilling a chunk samples nothing and rejects nothing. */
static bool num_sampled_and_rejected(const char *k, int count, const uint16_t *size,
                                     const void *const *v, unsigned reqs) {
    const void *a[MAX_ARGS];
    if (!bind("pppppp", count, size, v, a)) return false;
    struct buf sampled = buf_of(a[0], k), rejected = buf_of(a[1], k), seq_lens = buf_of(a[2], k),
               cu_logits = buf_of(a[3], k), idx = buf_of(a[4], k), prefill = buf_of(a[5], k);
    size_t w = index_width(&idx, reqs);
    for (int64_t b = 0; b < reqs; b++) {
        bool chunk = load(&seq_lens, b, 4, 0) < load(&prefill, load(&idx, b, w, -1), 4, 0);
        int64_t n = chunk ? 0 : load(&sampled, b, 4, 0);
        int64_t logits = load(&cu_logits, b + 1, 4, 0) - load(&cu_logits, b, 4, 0);
        store(&sampled, b, 4, n);
        store(&rejected, b, 4, chunk ? 0 : logits - n);
    }
    written(&sampled);
    written(&rejected);
    return true;
}

/* input_batch.py: after sampling, each request's length, last token and computed-token count
 * (its all_token_ids row, output_bin_counts and draft tokens hold token values: left
 * predicted). 0.33 appends the draft tokens (None without speculative decoding), their
 * per-request copy and their count. */
static bool post_update(const char *k, int count, const uint16_t *size, const void *const *v,
                        unsigned reqs) {
    const void *a[MAX_ARGS];
    if (!bind("pppp?ipi?ppp?pip", count, size, v, a) &&        /* 0.26 */
        !bind("pppp?ipi?ppp?pipp?pi?", count, size, v, a))      /* 0.33 */
        return false;
    struct buf idx = buf_of(a[0], k), computed = buf_of(a[1], k), last = buf_of(a[2], k),
               tokens = buf_of(a[5], k), sampled = buf_of(a[7], k), rejected = buf_of(a[8], k),
               qsl = buf_of(a[9], k), total = buf_of(a[12], k);
    int64_t tokens_stride = int_arg(a[6]);
    size_t w = index_width(&idx, reqs);
    for (int64_t r = 0; r < reqs; r++) {
        int64_t req = load(&idx, r, w, -1);
        if (req < 0) continue;
        int64_t n = load(&sampled, r, 4, 0);
        if (n > 0) {
            store(&last, req, 8, load(&tokens, r * tokens_stride + n - 1, 8, 0));
            store(&total, req, 4, load(&total, req, 4, 0) + n);
        }
        int64_t len = a[9] ? load(&qsl, r + 1, 4, 0) - load(&qsl, r, 4, 0) : 0;
        int64_t delta = len - load(&rejected, r, 4, 0);
        if (delta) store(&computed, req, 4, load(&computed, req, 4, 0) + delta);
    }
    written(&last);
    written(&total);
    written(&computed);
    return true;
}

/* input_batch.py: steps that sample nothing (pooling) advance by the scheduled tokens. */
static bool post_update_num_computed(const char *k, int count, const uint16_t *size,
                                     const void *const *v, unsigned reqs) {
    const void *a[MAX_ARGS];
    if (!bind("ppp", count, size, v, a)) return false;
    struct buf idx = buf_of(a[0], k), computed = buf_of(a[1], k), qsl = buf_of(a[2], k);
    size_t w = index_width(&idx, reqs);
    for (int64_t b = 0; b < reqs; b++) {
        int64_t req = load(&idx, b, w, -1);
        int64_t len = load(&qsl, b + 1, 4, 0) - load(&qsl, b, 4, 0);
        store(&computed, req, 4, load(&computed, req, 4, 0) + len);
    }
    written(&computed);
    return true;
}

/* torch's fill of a contiguous tensor (vectorized, or unrolled with trivial offsets):
 * (int n, FillFunctor<T>{T value}, std::array<char*, 1> data). */
static bool fill_named(const char *name) {
    return strstr(name, "FillFunctor") && (strstr(name, "vectorized_elementwise_kernel") ||
        (strstr(name, "unrolled_elementwise_kernel") && strstr(name, "TrivialOffsetCalculator")));
}
/* Without `apply`, only whether it is one to compute. */
static bool fill(const char *name, int count, const uint16_t *size, const void *const *v,
                 bool apply) {
    if (!fill_named(name) || count < 3) return false;
    size_t w = size[1];
    if (size[0] != 4 || size[2] != 8 || (w != 1 && w != 2 && w != 4 && w != 8)) return false;
    int32_t n;
    memcpy(&n, v[0], 4);
    struct buf data = buf_of(v[2], name);
    if (n <= 0 || (size_t)n * w > HOST_FILL_LIMIT || !inside(&data, n - 1, w)) return false;
    if (!apply) return true;
    for (int32_t i = 0; i < n; i++) memcpy(data.base + (size_t)i * w, v[1], w);
    rv_host_computed((uintptr_t)data.base, (size_t)n * w);
    return true;
}

/* torch.arange on integers: (index_t n, {int64 start, int64 step, ...}, T *out); which T is the
 * dispatch lambda's ordinal (AT_DISPATCH_ALL_TYPES_AND2: uint8, int8, int32, int64, int16,
 * then floating types, left predicted). */
static bool arange_named(const char *name) {
    return strstr(name, "elementwise_kernel_with_index") && strstr(name, "arange_cuda_out");
}
static bool arange(const char *name, int count, const uint16_t *size, const void *const *v,
                   bool apply) {
    static const struct { const char *lambda; size_t width; } types[] = {
        {"UlvE_clEvEUllE_", 1}, {"UlvE0_clEvEUllE_", 1}, {"UlvE1_clEvEUllE_", 4},
        {"UlvE2_clEvEUllE_", 8}, {"UlvE3_clEvEUllE_", 2}};
    if (!arange_named(name) || count != 3 || size[1] < 16 || size[2] != 8) return false;
    size_t w = 0;
    for (size_t t = 0; t < sizeof types / sizeof *types && !w; t++)
        if (strstr(name, types[t].lambda)) w = types[t].width;
    int64_t n = 0, start, step;
    if (!w || (size[0] != 4 && size[0] != 8)) return false;
    if (size[0] == 4) { int32_t m; memcpy(&m, v[0], 4); n = m; } else memcpy(&n, v[0], 8);
    memcpy(&start, v[1], 8);
    memcpy(&step, (const char *)v[1] + 8, 8);
    struct buf out = buf_of(v[2], name);
    if (n <= 0 || (uint64_t)n * w > HOST_FILL_LIMIT || !inside(&out, n - 1, w)) return false;
    if (!apply) return true;
    for (int64_t i = 0; i < n; i++) {
        int64_t x = start + i * step;
        memcpy(out.base + i * (int64_t)w, &x, w);   /* little endian: the low bytes */
    }
    rv_host_computed((uintptr_t)out.base, (size_t)n * w);
    return true;
}

/* The Triton kernels computed here: their Python names */
static const struct {
    const char *name;
    bool (*compute)(const char *, int, const uint16_t *, const void *const *, unsigned);
} TRITON[] = {
    {"_apply_write_kernel", apply_write},
    {"_prepare_pos_seq_lens_kernel", prepare_pos_seq_lens},
    {"_get_num_sampled_and_rejected_kernel", num_sampled_and_rejected},
    {"_post_update_kernel", post_update},
    {"_post_update_num_computed_tokens_kernel", post_update_num_computed}};

static int triton_index(const char *name) {
    if (name[0] != '_' || name[1] == 'Z') return -1;
    for (size_t i = 0; i < sizeof TRITON / sizeof *TRITON; i++)
        if (!strcmp(name, TRITON[i].name)) return (int)i;
    return -1;
}

bool rv_host_kernel_named(const char *name) {
    return name && (triton_index(name) >= 0 || fill_named(name) || arange_named(name));
}

bool rv_host_kernel(const char *name, int count, const uint16_t *size, const void *const *values,
                    const unsigned grid[3]) {
    if (!name || count <= 0 || count > MAX_ARGS + 2) return false;
    int t = triton_index(name);
    if (t < 0)
        return fill(name, count, size, values, true) || arange(name, count, size, values, true);
    if (TRITON[t].compute(name, count, size, values, grid[0])) return true;
    rv_log_once("host kernel: parameters not as known, left predicted (what it computes reads "
                "zero)", name);
    return false;
}

/* A launch captured into a graph: what it was handed, computed again at each replay (vLLM
 * 0.33 replays its decode steps' bookkeeping from a graph). */
struct rv_host_launch {
    const char *name;
    int count;
    unsigned grid[3];
    uint16_t size[MAX_ARGS + 2];
    char *bytes;   /* the parameters' values, back to back */
};

struct rv_host_launch *rv_host_kernel_capture(const char *name, int count, const uint16_t *size,
                                              const void *const *values, const unsigned grid[3]) {
    if (!name || count <= 0 || count > MAX_ARGS + 2) return NULL;
    if (triton_index(name) < 0 && !fill(name, count, size, values, false) &&
        !arange(name, count, size, values, false))
        return NULL;
    size_t total = 0;
    for (int i = 0; i < count; i++) total += size[i];
    struct rv_host_launch *h = calloc(1, sizeof *h);
    char *bytes = malloc(total ? total : 1);
    if (!h || !bytes) { free(h); free(bytes); return NULL; }
    *h = (struct rv_host_launch){name, count, {grid[0], grid[1], grid[2]}, {0}, bytes};
    for (int i = 0; i < count; i++) {
        h->size[i] = size[i];
        memcpy(bytes, values[i], size[i]);
        bytes += size[i];
    }
    return h;
}

void rv_host_kernel_replay(const struct rv_host_launch *h) {
    const void *values[MAX_ARGS + 2];
    const char *at = h->bytes;
    for (int i = 0; i < h->count; i++) { values[i] = at; at += h->size[i]; }
    rv_host_kernel(h->name, h->count, h->size, values, h->grid);
}
