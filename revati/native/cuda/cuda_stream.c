/* Streams, events, kernel launches and CUDA graphs as virtual timelines (docs/timewarp.md,
 * "Where a real driver makes the host wait").
 *
 * Each stream has a tail: the virtual CLOCK_MONOTONIC time (rv_now_ns) at which the work
 * queued on it so far completes. Queuing an operation of predicted duration d starts it at
 * max(now, tail, dependencies) and moves the tail to start + d. Dependencies follow CUDA's
 * stream semantics: the legacy default stream waits for every blocking stream of its
 * device and they wait for it; a per-thread default stream behaves as a blocking stream;
 * events carry timeline positions across streams. A host synchronisation becomes
 * rv_sleep_until(tail), a time-warp wait. While a stream captures a graph, operations are
 * recorded as graph nodes instead, and a graph launch queues its nodes in order. */
#include "cuda_internal.h"

#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define RV_MAGIC_STREAM 0x52565354u
#define RV_MAGIC_EVENT 0x52564556u
#define RV_MAGIC_GRAPH 0x52564752u
#define RV_MAGIC_EXEC 0x52564758u

/* What rv_power_load says of an operation: its power load, its slowdown at the power limit
 * and the power state's time constant (0: not modelled). */
struct power { double load, extra, tau; };

/* A node either has a predicted duration (l) or is a cross-process operation (join != NULL:
 * a collective, whose completion depends on other ranks and is asked for at replay). */
struct node {
    struct rv_launch l;
    char *name;
    rv_join_fn join;
    void *ctx;
    int64_t predicted;
    struct power power;  /* rv_power_load of the node, with its prediction */
    bool by_batch; /* attention: predicted again at every replay */
    size_t driver_bytes; /* what an executable graph keeps for it (rv_graph_node_bytes) */
    uintptr_t *args;     /* a kernel's device pointers (rv_device_computed at each replay) */
    int nargs;
    struct rv_host_launch *host;   /* a kernel computed on the host at each replay */
};
struct graph { uint32_t magic; struct node *nodes; size_t n, cap; unsigned long long id; };
struct exec {
    uint32_t magic; struct graph g; int dev; size_t driver_bytes;
    uintptr_t *args; int nargs;   /* its kernels' device pointers, sorted, each once */
    bool args_gathered;           /* at its first replay (its nodes never change after) */
};

/* struct stream: cuda_internal.h (the launch queue shares it). */

/* capture: the id of the graph capture the event was last recorded in (0: none) */
struct event { uint32_t magic; unsigned flags; bool recorded; int64_t t; unsigned long long capture; };

pthread_mutex_t g_tl = PTHREAD_MUTEX_INITIALIZER;          /* all timeline state */
static struct stream g_legacy[RV_MAX_GPUS];
static struct stream *g_streams[RV_MAX_GPUS];               /* non-legacy streams */
static int64_t g_retired_tail[RV_MAX_GPUS];                 /* tails of destroyed streams */
static unsigned long long g_next_id = 16;                   /* small ids: default streams */
static __thread struct stream *t_per_thread[RV_MAX_GPUS];
static __thread int t_per_thread_api;                       /* inside a _ptds/_ptsz call */

void rv_cuda_per_thread_begin(void) { t_per_thread_api++; }
void rv_cuda_per_thread_end(void) { t_per_thread_api--; }

static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

static void name_track(struct stream *s) {
    if (s->legacy) snprintf(s->track, sizeof s->track, "GPU%d default stream", s->dev);
    else snprintf(s->track, sizeof s->track, "GPU%d stream %llu", s->dev, s->id);
}

/* caller holds g_tl */
static struct stream *legacy_stream(int dev) {
    struct stream *s = &g_legacy[dev];
    if (s->magic != RV_MAGIC_STREAM) {
        s->dev = dev;
        s->legacy = true;
        s->id = 1;
        name_track(s);
        s->magic = RV_MAGIC_STREAM;
    }
    return s;
}

static void register_stream(struct stream *s) {
    s->next = g_streams[s->dev];
    g_streams[s->dev] = s;
}

/* caller holds g_tl */
static struct stream *per_thread_stream(int dev) {
    if (!t_per_thread[dev]) {
        struct stream *s = calloc(1, sizeof *s);
        s->magic = RV_MAGIC_STREAM;
        s->dev = dev;
        s->id = g_next_id++;
        name_track(s);
        register_stream(s);
        t_per_thread[dev] = s;
    }
    return t_per_thread[dev];
}

/* Stream handle -> stream, with CUDA's special handles; NULL if invalid. Holds g_tl. */
struct stream *resolve(CUstream h) {
    int dev = rv_current_dev();
    if (h == NULL) return t_per_thread_api ? per_thread_stream(dev) : legacy_stream(dev);
    if (h == CU_STREAM_LEGACY) return legacy_stream(dev);
    if (h == CU_STREAM_PER_THREAD) return per_thread_stream(dev);
    struct stream *s = (struct stream *)h;
    return s->magic == RV_MAGIC_STREAM ? s : NULL;
}

CUresult rv_check_stream(CUstream h) {
    pthread_mutex_lock(&g_tl);
    struct stream *s = resolve(h);
    pthread_mutex_unlock(&g_tl);
    return s ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

int rv_stream_device(CUstream h) {
    pthread_mutex_lock(&g_tl);
    struct stream *s = resolve(h);
    pthread_mutex_unlock(&g_tl);
    return s ? s->dev : rv_current_dev();
}


/* When all work queued on a device completes. Holds g_tl. */
static int64_t device_tail(int dev) {
    int64_t t = max64(legacy_stream(dev)->tail, g_retired_tail[dev]);
    for (struct stream *o = g_streams[dev]; o; o = o->next) t = max64(t, o->tail);
    return t;
}

/* Earliest virtual time new work on s can start. Holds g_tl. */
static int64_t ready_time(struct stream *s) {
    int64_t t = max64(rv_now_ns(), s->tail);
    if (s->legacy) {
        for (struct stream *o = g_streams[s->dev]; o; o = o->next)
            if (!(o->flags & CU_STREAM_NON_BLOCKING)) t = max64(t, o->tail);
    } else if (!(s->flags & CU_STREAM_NON_BLOCKING)) {
        t = max64(t, legacy_stream(s->dev)->tail);
    }
    return t;
}

static void graph_add(struct graph *g, const struct rv_launch *l, const char *name, rv_join_fn join,
                      void *ctx, size_t driver_bytes) {
    if (g->n == g->cap) {
        g->cap = g->cap ? 2 * g->cap : 64;
        g->nodes = realloc(g->nodes, g->cap * sizeof *g->nodes);
    }
    struct node *n = &g->nodes[g->n++];
    n->l = *l;
    n->name = strdup(name);
    n->l.kernel = l->kernel ? n->name : NULL;
    n->join = join;
    n->ctx = ctx;
    n->predicted = -1;
    n->by_batch = false;
    n->driver_bytes = driver_bytes;
    n->args = NULL;
    n->nargs = 0;
    n->host = NULL;
}

/* The device pointers of the kernel being launched by this thread, for rv_enqueue_kernel:
 * handed to rv_device_computed now, or kept in the captured node for its replays. */
#define RV_MAX_DEVICE_ARGS 256
static __thread uintptr_t t_args[RV_MAX_DEVICE_ARGS];
static __thread int t_nargs;
static __thread struct rv_host_launch *t_host;   /* this launch, captured to compute at replays */

static void node_args(struct node *n, const uintptr_t *args, int nargs) {
    if (nargs <= 0) return;
    n->args = malloc((size_t)nargs * sizeof *args);
    if (!n->args) return;
    memcpy(n->args, args, (size_t)nargs * sizeof *args);
    n->nargs = nargs;
}

/* Each GPU's power state (rv_power_load): h in [0, 1], the power draw of the work it ran
 * (1 for compute-bound work, the spec's memory_load for memory-bound kernels, 0 when idle)
 * filtered with the spec's time constant, in virtual time. A launch that starts at state h
 * takes its predicted (cold, boost-clock) duration times 1 + hot_extra * rv_power_throttle(h).
 * Concurrent streams of a device share its state, updated in the order work is queued. */
static struct { double h; int64_t t; } g_power[RV_MAX_GPUS];

static struct power power_of(const struct rv_launch *l) {
    struct power p;
    p.load = rv_power_load(l, &p.extra, &p.tau);
    return p;
}

static int64_t under_power(int dev, const struct power *p, int64_t start, int64_t dur) {
    if (p->tau <= 0) return dur;
    if (start > g_power[dev].t) g_power[dev].h *= exp(-(double)(start - g_power[dev].t) / p->tau);
    int64_t d = llround((double)dur * (1 + p->extra * rv_power_throttle(g_power[dev].h)));
    if (d != dur) rv_power_count(d - dur);
    g_power[dev].h = p->load + (g_power[dev].h - p->load) * exp(-(double)d / p->tau);
    if (start + d > g_power[dev].t) g_power[dev].t = start + d;
    return d;
}


/* Put one operation of predicted duration dur on s's timeline, at `ready` (ready_time) or
 * after s's last operation; returns its start. Holds g_tl. */
static int64_t append_at(struct stream *s, int64_t ready, const struct rv_launch *l,
                         const char *name, int64_t dur, const struct power *p) {
    int64_t start = max64(ready, s->tail);
    dur = under_power(s->dev, p, start, dur);
    s->tail = start + dur;
    if (!rv_tracing()) return start;
    char args[160];
    if (l->op == RV_OP_GEMM)
        snprintf(args, sizeof args, "{\"m\":%" PRId64 ",\"n\":%" PRId64 ",\"k\":%" PRId64
                 ",\"batch\":%" PRId64 ",\"dtype\":%d}", l->m, l->n, l->k, l->batch, l->dtype_a);
    else if (l->op == RV_OP_MEMCPY || l->op == RV_OP_MEMSET)
        snprintf(args, sizeof args, "{\"bytes\":%" PRId64 "}", l->bytes);
    else
        snprintf(args, sizeof args, "{\"grid\":[%u,%u,%u],\"block\":[%u,%u,%u]}", l->grid[0],
                 l->grid[1], l->grid[2], l->block[0], l->block[1], l->block[2]);
    rv_trace_complete(s->track, name, start, dur, args);
    return start;
}

static int64_t append_timed(struct stream *s, const struct rv_launch *l, const char *name,
                            int64_t dur, const struct power *p) {
    return append_at(s, ready_time(s), l, name, dur, p);
}

static int64_t append(struct stream *s, const struct rv_launch *l, const char *name) {
    struct power p = power_of(l);
    return append_timed(s, l, name, rv_predict_ns(l, NULL), &p);
}

/* REVATI_LAUNCH_LOG=<file>: one tab-separated line per queued operation, in the order the
 * program queues them, with the launch features the predictor sees. `revati profile args`
 * reads it to give a real-GPU profile the features only an emulated launch shows (kernel
 * arguments); a program may append its own marker lines (O_APPEND keeps the order). */
static int g_log_fd = -2;
static pthread_once_t g_log_once = PTHREAD_ONCE_INIT;
static void open_log(void) {
    const char *path = getenv("REVATI_LAUNCH_LOG");
    g_log_fd = path && *path ? open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644) : -1;
    if (path && *path && g_log_fd < 0) rv_log(RV_ERROR, "REVATI_LAUNCH_LOG=%s: cannot open", path);
}
static void log_launch(const struct rv_launch *l) {
    pthread_once(&g_log_once, open_log);
    if (g_log_fd < 0) return;
    char line[4096];
    int n = snprintf(line, sizeof line, "%d\t%s\t%u\t%u\t%u\t%u\t%u\t%u\t%u\t%" PRId64 "\t%d\t%"
                     PRId64 "\t%" PRId64 "\n", l->op, l->kernel ? l->kernel : "", l->grid[0],
                     l->grid[1], l->grid[2], l->block[0], l->block[1], l->block[2],
                     l->shared_bytes, l->bytes, l->copy_kind, l->arg_max, l->arg_sum);
    if (n > 0 && (size_t)n < sizeof line && write(g_log_fd, line, (size_t)n) != n)
        rv_log(RV_ERROR, "REVATI_LAUNCH_LOG: short write");
}

CUresult rv_enqueue(CUstream h, const struct rv_launch *l, const char *name) {
    return rv_enqueue_kernel(h, l, name, 0, false);
}

CUresult rv_enqueue_kernel(CUstream h, const struct rv_launch *l, const char *name,
                           int param_bytes, bool pdl) {
    int nargs = t_nargs;   /* this launch's device pointers, never a later operation's */
    struct rv_host_launch *host = t_host;
    t_nargs = 0;
    t_host = NULL;
    if (!rv_cuda_ready()) return CUDA_ERROR_NOT_INITIALIZED;
    dilate_cpu();
    log_launch(l);
    struct stream *s = lock_for_launch(h);
    if (!s) return CUDA_ERROR_INVALID_HANDLE;
    struct rv_launch copy = *l;
    copy.device = rv_phys(s->dev);
    bool captured = s->capture != NULL;
    if (captured) {
        graph_add(s->capture, &copy, name, NULL, NULL, rv_graph_node_bytes(l, param_bytes, pdl));
        struct node *n = &s->capture->nodes[s->capture->n - 1];
        if (host) n->host = host;   /* its inputs are not its results (below) */
        else node_args(n, t_args, nargs);
    } else queue_note(s, append(s, &copy, name));
    pthread_mutex_unlock(&g_tl);
    if (!captured) rv_device_computed(t_args, nargs);
    return CUDA_SUCCESS;
}

/* Join a cross-process operation: releases the timeline lock while join() waits for the
 * other ranks, then moves the tail to the completion join() returns. */
static void joined(struct stream *s, const char *name, rv_join_fn join, void *ctx) {
    int64_t arrival = ready_time(s), busy = 0;
    pthread_mutex_unlock(&g_tl);
    int64_t done = join(ctx, arrival, &busy);
    pthread_mutex_lock(&g_tl);
    s->tail = max64(s->tail, done);
    if (rv_tracing()) rv_trace_complete(s->track, name, done - busy, busy, NULL);
}

CUresult rv_cuda_enqueue_joined(CUstream h, const char *name, rv_join_fn join, void *ctx,
                                bool *captured) {
    if (!rv_cuda_ready()) return CUDA_ERROR_NOT_INITIALIZED;
    struct stream *s = lock_for_launch(h);
    if (!s) return CUDA_ERROR_INVALID_HANDLE;
    *captured = s->capture != NULL;
    if (s->capture) {
        struct rv_launch l = {.op = RV_OP_COLLECTIVE, .device = rv_phys(s->dev)};
        graph_add(s->capture, &l, name, join, ctx, rv_graph_node_bytes(&l, 0, false));
    } else {
        queue_note(s, ready_time(s));   /* the collective's kernel takes a place in the queue */
        joined(s, name, join, ctx);
    }
    pthread_mutex_unlock(&g_tl);
    return CUDA_SUCCESS;
}

CUresult rv_enqueue_transfer(CUstream h, int op, int64_t bytes, int copy_kind, bool sync, const char *call) {
    struct rv_launch l = {.op = op, .bytes = bytes, .copy_kind = copy_kind};
    CUresult r = rv_enqueue(h, &l, call);
    return r || !sync ? r : rv_stream_sync(h, call);
}

CUresult rv_stream_sync(CUstream h, const char *call) {
    dilate_cpu();
    pthread_mutex_lock(&g_tl);
    struct stream *s = resolve(h);
    if (!s) { pthread_mutex_unlock(&g_tl); return CUDA_ERROR_INVALID_HANDLE; }
    bool capturing = s->capture != NULL;
    int64_t until = s->tail;
    pthread_mutex_unlock(&g_tl);
    if (capturing) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    rv_sleep_until(until, call);
    return CUDA_SUCCESS;
}

/* ---- launches ----------------------------------------------------------------------- */
static __thread struct rv_launch t_gemm;
static __thread bool t_gemm_pending;

void rv_cuda_gemm_begin(const struct rv_launch *gemm) {
    t_gemm = *gemm;
    t_gemm_pending = true;
}
void rv_cuda_gemm_end(void) { t_gemm_pending = false; }

/* Loading a kernel waits for the device (CUDA documents that lazy loading may synchronise
 * the context). On the H200, each kernel vLLM launched for the first time during the
 * saturating load (cuBLAS picks a new GEMM kernel for each new batch size of the logits GEMM)
 * was loaded only once every kernel queued before it had finished: its thread waited 130-180
 * ms inside 8,192-token steps, then the load took ~0.1 ms ("Lazy Function Loading" in the
 * torch-profiler trace, docs/validation.md). Not while a stream captures a graph. */
#define LAZY_LOAD_NS 100000
void rv_cuda_lazy_load(CUfunction f, CUstream h) {
    int dev = rv_stream_device(h);
    if (!rv_func_load(f, dev)) return;
    pthread_mutex_lock(&g_tl);
    struct stream *s = resolve(h);
    bool capturing = s && s->capture;
    int64_t idle = device_tail(dev), now = rv_now_ns();
    pthread_mutex_unlock(&g_tl);
    if (capturing) return;
    int64_t at = max64(idle, now);
    if (rv_tracing()) {
        char track[48];
        snprintf(track, sizeof track, "kernel loading (GPU%d)", dev);
        rv_trace_complete(track, rv_func_name(f), at, LAZY_LOAD_NS, NULL);
    }
    rv_sleep_until(at + LAZY_LOAD_NS, "lazy loading of a kernel (waits for the device)");
}

static CUresult launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                       unsigned bz, unsigned shm, CUstream s, void **params, void **extra, bool pdl) {
    if (!f) return CUDA_ERROR_INVALID_HANDLE;
    rv_cuda_lazy_load(f, s);
    const char *name = rv_func_name(f);
    struct rv_launch l = {.op = RV_OP_KERNEL};
    if (t_gemm_pending) {   /* the first kernel of a cuBLAS call carries the GEMM's shape */
        l = t_gemm;
        l.op = RV_OP_GEMM;
        t_gemm_pending = false;
    }
    l.kernel = name;
    l.kernel_hash = rv_func_name_hash(f);
    l.grid[0] = gx, l.grid[1] = gy, l.grid[2] = gz;
    l.block[0] = bx, l.block[1] = by, l.block[2] = bz;
    l.shared_bytes = shm;
    rv_func_launch_features(f, params, extra, &l);
    t_nargs = rv_func_device_args(f, params, extra, t_args, RV_MAX_DEVICE_ARGS);
    /* computed now, in the order the host queues work, which is the order the stream runs
     * it; one captured into a graph at each of the graph's replays */
    CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_NONE;
    if (cuStreamIsCapturing(s, &capture) == CUDA_SUCCESS &&
        rv_func_host_kernel(f, params, extra, l.grid, capture != CU_STREAM_CAPTURE_STATUS_NONE,
                            &t_host))
        t_nargs = 0;   /* its inputs are not its results: they keep what the host put there */
    return rv_enqueue_kernel(s, &l, name, rv_func_param_bytes(f), pdl);
}
CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                        unsigned bz, unsigned shm, CUstream s, void **params, void **extra) {
    return launch(f, gx, gy, gz, bx, by, bz, shm, s, params, extra, false);
}
CUresult cuLaunchKernelEx(const CUlaunchConfig *c, CUfunction f, void **params, void **extra) {
    if (!c) return CUDA_ERROR_INVALID_VALUE;
    bool pdl = false;
    for (unsigned i = 0; i < c->numAttrs; i++)
        if (c->attrs[i].id == CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION)
            pdl = pdl || c->attrs[i].value.programmaticStreamSerializationAllowed;
    return launch(f, c->gridDimX, c->gridDimY, c->gridDimZ, c->blockDimX, c->blockDimY, c->blockDimZ,
                  c->sharedMemBytes, c->hStream, params, extra, pdl);
}
CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                   unsigned by, unsigned bz, unsigned shm, CUstream s, void **params) {
    return launch(f, gx, gy, gz, bx, by, bz, shm, s, params, NULL, false);
}

/* ---- host functions: run by one worker thread when the stream reaches them ------------ */
struct host_call { int64_t at; CUhostFn fn; void *ud; struct host_call *next; };
static struct host_call *g_calls, **g_calls_tail = &g_calls;
static pthread_mutex_t g_calls_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_calls_cond = PTHREAD_COND_INITIALIZER;
static pthread_once_t g_worker_once = PTHREAD_ONCE_INIT;

static void *host_worker(void *arg) {
    for (;;) {
        pthread_mutex_lock(&g_calls_lock);
        while (!g_calls) pthread_cond_wait(&g_calls_cond, &g_calls_lock);
        struct host_call *c = g_calls;
        g_calls = c->next;
        if (!g_calls) g_calls_tail = &g_calls;
        pthread_mutex_unlock(&g_calls_lock);
        rv_sleep_until(c->at, "cuLaunchHostFunc");
        c->fn(c->ud);
        free(c);
    }
    return NULL;
}
static void start_worker(void) {
    pthread_t t;
    pthread_create(&t, NULL, host_worker, NULL);
    pthread_detach(t);
}
CUresult cuLaunchHostFunc(CUstream h, CUhostFn fn, void *ud) {
    if (!fn) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g_tl);
    struct stream *s = resolve(h);
    if (!s) { pthread_mutex_unlock(&g_tl); return CUDA_ERROR_INVALID_HANDLE; }
    if (s->capture) { pthread_mutex_unlock(&g_tl); return rv_unimplemented("cuLaunchHostFunc (in graph capture)"); }
    int64_t at = ready_time(s);
    s->tail = at;
    pthread_mutex_unlock(&g_tl);
    struct host_call *c = calloc(1, sizeof *c);
    *c = (struct host_call){at, fn, ud, NULL};
    pthread_once(&g_worker_once, start_worker);
    pthread_mutex_lock(&g_calls_lock);
    *g_calls_tail = c;
    g_calls_tail = &c->next;
    pthread_cond_signal(&g_calls_cond);
    pthread_mutex_unlock(&g_calls_lock);
    return CUDA_SUCCESS;
}
struct callback { CUstreamCallback cb; CUstream s; void *ud; };
static void run_callback(void *p) {
    struct callback *c = p;
    c->cb(c->s, CUDA_SUCCESS, c->ud);
    free(c);
}
CUresult cuStreamAddCallback(CUstream s, CUstreamCallback cb, void *ud, unsigned flags) {
    if (!cb || flags) return CUDA_ERROR_INVALID_VALUE;
    struct callback *c = malloc(sizeof *c);
    *c = (struct callback){cb, s, ud};
    CUresult r = cuLaunchHostFunc(s, run_callback, c);
    if (r) free(c);
    return r;
}

/* ---- streams ------------------------------------------------------------------------ */
CUresult cuStreamCreateWithPriority(CUstream *ph, unsigned flags, int prio) {
    if (!ph || (flags & ~(unsigned)CU_STREAM_NON_BLOCKING)) return CUDA_ERROR_INVALID_VALUE;
    if (!rv_cuda_ready()) return CUDA_ERROR_NOT_INITIALIZED;
    if (!rv_current_ctx()) return CUDA_ERROR_INVALID_CONTEXT;
    struct stream *s = calloc(1, sizeof *s);
    s->magic = RV_MAGIC_STREAM;
    s->dev = rv_current_dev();
    s->flags = flags;
    s->prio = prio < -5 ? -5 : prio > 0 ? 0 : prio;   /* clamped like the driver */
    pthread_mutex_lock(&g_tl);
    s->id = g_next_id++;
    s->tail = rv_now_ns();
    name_track(s);
    register_stream(s);
    pthread_mutex_unlock(&g_tl);
    rv_driver_stream(s->dev, true);
    *ph = (CUstream)s;
    return CUDA_SUCCESS;
}
CUresult cuStreamCreate(CUstream *ph, unsigned flags) { return cuStreamCreateWithPriority(ph, flags, 0); }
CUresult cuStreamDestroy_v2(CUstream h) {
    pthread_mutex_lock(&g_tl);
    struct stream *s = resolve(h);
    if (!s || s->legacy || h == NULL || h == CU_STREAM_PER_THREAD || h == CU_STREAM_LEGACY) {
        pthread_mutex_unlock(&g_tl);
        return CUDA_ERROR_INVALID_HANDLE;
    }
    for (struct stream **p = &g_streams[s->dev]; *p; p = &(*p)->next)
        if (*p == s) { *p = s->next; break; }
    g_retired_tail[s->dev] = max64(g_retired_tail[s->dev], s->tail);
    s->magic = 0;   /* kept allocated so a stale handle fails instead of crashing */
    pthread_mutex_unlock(&g_tl);
    rv_driver_stream(s->dev, false);
    return CUDA_SUCCESS;
}
CUresult cuStreamSynchronize(CUstream h) { return rv_stream_sync(h, "cuStreamSynchronize"); }
CUresult cuStreamQuery(CUstream h) {
    pthread_mutex_lock(&g_tl);
    struct stream *s = resolve(h);
    CUresult r = !s ? CUDA_ERROR_INVALID_HANDLE
                : s->capture ? CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED
                : s->tail <= rv_now_ns() ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
    pthread_mutex_unlock(&g_tl);
    return r;
}
#define WITH_STREAM(h, body) do { \
    pthread_mutex_lock(&g_tl); struct stream *s = resolve(h); \
    if (!s) { pthread_mutex_unlock(&g_tl); return CUDA_ERROR_INVALID_HANDLE; } \
    body; pthread_mutex_unlock(&g_tl); return CUDA_SUCCESS; } while (0)
CUresult cuStreamGetPriority(CUstream h, int *p) { if (!p) return CUDA_ERROR_INVALID_VALUE; WITH_STREAM(h, *p = s->prio); }
CUresult cuStreamGetFlags(CUstream h, unsigned *f) { if (!f) return CUDA_ERROR_INVALID_VALUE; WITH_STREAM(h, *f = s->flags); }
CUresult cuStreamGetId(CUstream h, unsigned long long *id) { if (!id) return CUDA_ERROR_INVALID_VALUE; WITH_STREAM(h, *id = s->id); }
CUresult cuStreamGetDevice(CUstream h, CUdevice *d) { if (!d) return CUDA_ERROR_INVALID_VALUE; WITH_STREAM(h, *d = s->dev); }
CUresult cuStreamGetCtx(CUstream h, CUcontext *c) { if (!c) return CUDA_ERROR_INVALID_VALUE; WITH_STREAM(h, *c = (CUcontext)rv_primary_ctx(s->dev)); }
CUresult cuStreamGetCtx_v2(CUstream h, CUcontext *c, CUgreenCtx *g) {
    if (g) *g = NULL;
    return cuStreamGetCtx(h, c);
}
/* The graph of capture `id` if some stream still captures it, else NULL (g_tl held). */
static struct graph *capture_in_progress(unsigned long long id) {
    for (int d = 0; d < RV_MAX_GPUS; d++)
        for (struct stream *o = g_streams[d]; o; o = o->next)
            if (o->capture && o->capture->id == id) return o->capture;
    return NULL;
}
CUresult cuStreamWaitEvent(CUstream h, CUevent e, unsigned flags) {
    struct event *ev = (struct event *)e;
    if (!ev || ev->magic != RV_MAGIC_EVENT) return CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_lock(&g_tl);
    struct stream *s = resolve(h);
    if (!s) { pthread_mutex_unlock(&g_tl); return CUDA_ERROR_INVALID_HANDLE; }
    if (ev->capture && !s->capture) {
        /* Waiting on an event recorded during a capture joins this stream to it while it
         * runs. Once it has ended, the wait orders nothing: SGLang's breakable CUDA graphs
         * wait on such events after their segment's capture (a stale join left the stream
         * "capturing" for good, and torch's next RNG op failed). */
        s->capture = capture_in_progress(ev->capture);
    } else if (!s->capture && ev->recorded) {
        s->tail = max64(s->tail, ev->t);
    }
    pthread_mutex_unlock(&g_tl);
    return CUDA_SUCCESS;
}
/* Scheduling hints (priority windows, access policy): no effect on predicted durations. */
CUresult cuStreamSetAttribute(CUstream h, CUstreamAttrID a, const CUstreamAttrValue *v) { if (!v) return CUDA_ERROR_INVALID_VALUE; WITH_STREAM(h, (void)s); }
CUresult cuStreamGetAttribute(CUstream h, CUstreamAttrID a, CUstreamAttrValue *v) {
    if (!v) return CUDA_ERROR_INVALID_VALUE;
    memset(v, 0, sizeof *v);
    WITH_STREAM(h, if (a == CU_LAUNCH_ATTRIBUTE_PRIORITY) v->priority = s->prio);
}
CUresult cuStreamCopyAttributes(CUstream dst, CUstream src) { return rv_check_stream(dst) ? CUDA_ERROR_INVALID_HANDLE : rv_check_stream(src); }

CUresult cuCtxSynchronize(void) {
    if (!rv_current_ctx()) return CUDA_ERROR_INVALID_CONTEXT;
    dilate_cpu();
    pthread_mutex_lock(&g_tl);
    int64_t until = device_tail(rv_current_dev());
    pthread_mutex_unlock(&g_tl);
    rv_sleep_until(until, "cuCtxSynchronize");
    return CUDA_SUCCESS;
}
CUresult cuCtxSynchronize_v2(CUcontext c) {
    struct rv_ctx *x = c ? (struct rv_ctx *)c : rv_current_ctx();
    if (!x || x->magic != RV_MAGIC_CTX) return CUDA_ERROR_INVALID_CONTEXT;
    dilate_cpu();
    pthread_mutex_lock(&g_tl);
    int64_t until = device_tail(x->dev);
    pthread_mutex_unlock(&g_tl);
    rv_sleep_until(until, "cuCtxSynchronize");
    return CUDA_SUCCESS;
}

/* ---- events ------------------------------------------------------------------------- */
static struct event *as_event(CUevent e) {
    struct event *x = (struct event *)e;
    return x && x->magic == RV_MAGIC_EVENT ? x : NULL;
}
CUresult cuEventCreate(CUevent *pe, unsigned flags) {
    if (!pe) return CUDA_ERROR_INVALID_VALUE;
    if (!rv_current_ctx()) return CUDA_ERROR_INVALID_CONTEXT;
    struct event *e = calloc(1, sizeof *e);
    e->magic = RV_MAGIC_EVENT;
    e->flags = flags;
    *pe = (CUevent)e;
    return CUDA_SUCCESS;
}
CUresult cuEventDestroy_v2(CUevent e) {
    struct event *x = as_event(e);
    if (!x) return CUDA_ERROR_INVALID_HANDLE;
    x->magic = 0;
    return CUDA_SUCCESS;
}
CUresult cuEventRecord(CUevent e, CUstream h) {
    struct event *x = as_event(e);
    if (!x) return CUDA_ERROR_INVALID_HANDLE;
    dilate_cpu();
    pthread_mutex_lock(&g_tl);
    struct stream *s = resolve(h);
    if (!s) { pthread_mutex_unlock(&g_tl); return CUDA_ERROR_INVALID_HANDLE; }
    if (s->capture) {
        x->capture = s->capture->id;
    } else {
        x->capture = 0;
        x->t = ready_time(s);
        s->tail = x->t;
        x->recorded = true;
    }
    pthread_mutex_unlock(&g_tl);
    return CUDA_SUCCESS;
}
CUresult cuEventRecordWithFlags(CUevent e, CUstream h, unsigned flags) { return cuEventRecord(e, h); }
CUresult cuEventQuery(CUevent e) {
    struct event *x = as_event(e);
    if (!x) return CUDA_ERROR_INVALID_HANDLE;
    return !x->recorded || x->t <= rv_now_ns() ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}
CUresult cuEventSynchronize(CUevent e) {
    struct event *x = as_event(e);
    if (!x) return CUDA_ERROR_INVALID_HANDLE;
    dilate_cpu();
    if (x->recorded) rv_sleep_until(x->t, "cuEventSynchronize");
    return CUDA_SUCCESS;
}
CUresult cuEventElapsedTime_v2(float *ms, CUevent a, CUevent b) {
    struct event *x = as_event(a), *y = as_event(b);
    if (!ms) return CUDA_ERROR_INVALID_VALUE;
    if (!x || !y || (x->flags | y->flags) & CU_EVENT_DISABLE_TIMING) return CUDA_ERROR_INVALID_HANDLE;
    if (!x->recorded || !y->recorded) return CUDA_ERROR_INVALID_HANDLE;
    int64_t now = rv_now_ns();
    if (x->t > now || y->t > now) return CUDA_ERROR_NOT_READY;
    *ms = (float)((double)(y->t - x->t) / 1e6);
    return CUDA_SUCCESS;
}
#undef cuEventElapsedTime
CUresult cuEventElapsedTime(float *ms, CUevent a, CUevent b) { return cuEventElapsedTime_v2(ms, a, b); }

/* ---- graph capture and replay --------------------------------------------------------- */
static unsigned long long g_next_graph = 1;
static struct graph *new_graph(void) {
    struct graph *g = calloc(1, sizeof *g);
    g->magic = RV_MAGIC_GRAPH;
    g->id = __atomic_fetch_add(&g_next_graph, 1, __ATOMIC_SEQ_CST);
    return g;
}
static struct graph *as_graph(CUgraph h) {
    struct graph *g = (struct graph *)h;
    return g && g->magic == RV_MAGIC_GRAPH ? g : NULL;
}
CUresult cuStreamBeginCapture_v2(CUstream h, CUstreamCaptureMode mode) {
    pthread_mutex_lock(&g_tl);
    struct stream *s = resolve(h);
    CUresult r = !s ? CUDA_ERROR_INVALID_HANDLE
                : s->legacy ? CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED
                : s->capture ? CUDA_ERROR_ILLEGAL_STATE : CUDA_SUCCESS;
    if (!r) {
        s->capture = new_graph();
        s->capture_origin = s;
    }
    pthread_mutex_unlock(&g_tl);
    return r;
}
CUresult cuStreamEndCapture(CUstream h, CUgraph *pg) {
    if (!pg) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g_tl);
    struct stream *s = resolve(h);
    if (!s || !s->capture || s->capture_origin != s) {
        pthread_mutex_unlock(&g_tl);
        return CUDA_ERROR_ILLEGAL_STATE;
    }
    struct graph *g = s->capture;
    for (int d = 0; d < RV_MAX_GPUS; d++)
        for (struct stream *o = g_streams[d]; o; o = o->next)
            if (o->capture == g) { o->capture = NULL; o->capture_origin = NULL; }
    s->capture = NULL;
    s->capture_origin = NULL;
    pthread_mutex_unlock(&g_tl);
    *pg = (CUgraph)g;
    return CUDA_SUCCESS;
}
CUresult cuStreamIsCapturing(CUstream h, CUstreamCaptureStatus *st) {
    if (!st) return CUDA_ERROR_INVALID_VALUE;
    WITH_STREAM(h, *st = s->capture ? CU_STREAM_CAPTURE_STATUS_ACTIVE : CU_STREAM_CAPTURE_STATUS_NONE);
}
CUresult cuStreamGetCaptureInfo_v3(CUstream h, CUstreamCaptureStatus *st, cuuint64_t *id, CUgraph *graph,
                                   const CUgraphNode **deps, const CUgraphEdgeData **edges, size_t *ndeps) {
    WITH_STREAM(h, {
        if (st) *st = s->capture ? CU_STREAM_CAPTURE_STATUS_ACTIVE : CU_STREAM_CAPTURE_STATUS_NONE;
        if (id) *id = s->capture ? s->capture->id : 0;
        if (graph) *graph = (CUgraph)s->capture;
        if (deps) *deps = NULL;
        if (edges) *edges = NULL;
        if (ndeps) *ndeps = 0;
    });
}
CUresult cuStreamGetCaptureInfo_v2(CUstream h, CUstreamCaptureStatus *st, cuuint64_t *id, CUgraph *g,
                                   const CUgraphNode **deps, size_t *n) {
    return cuStreamGetCaptureInfo_v3(h, st, id, g, deps, NULL, n);
}
#undef cuStreamGetCaptureInfo
CUresult cuStreamGetCaptureInfo(CUstream h, CUstreamCaptureStatus *st, cuuint64_t *id) {
    return cuStreamGetCaptureInfo_v3(h, st, id, NULL, NULL, NULL, NULL);
}
/* Graph nodes are kept in capture order and replayed serially: dependency edges carry no
 * extra information for a serial replay. */
CUresult cuStreamUpdateCaptureDependencies_v2(CUstream h, CUgraphNode *d, const CUgraphEdgeData *e, size_t n, unsigned f) {
    WITH_STREAM(h, (void)s);
}
CUresult cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode *mode) { return mode ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE; }
CUresult cuGraphCreate(CUgraph *pg, unsigned flags) { if (!pg) return CUDA_ERROR_INVALID_VALUE; *pg = (CUgraph)new_graph(); return CUDA_SUCCESS; }
CUresult cuGraphDestroy(CUgraph h) {
    struct graph *g = as_graph(h);
    if (!g) return CUDA_ERROR_INVALID_VALUE;
    g->magic = 0;
    return CUDA_SUCCESS;
}
CUresult cuGraphGetNodes(CUgraph h, CUgraphNode *nodes, size_t *n) {
    struct graph *g = as_graph(h);
    if (!g || !n) return CUDA_ERROR_INVALID_VALUE;
    if (nodes) {
        size_t k = *n < g->n ? *n : g->n;
        for (size_t i = 0; i < k; i++) nodes[i] = (CUgraphNode)&g->nodes[i];
        *n = k;
    } else {
        *n = g->n;
    }
    return CUDA_SUCCESS;
}
CUresult cuGraphNodeGetType(CUgraphNode h, CUgraphNodeType *t) {
    if (!h || !t) return CUDA_ERROR_INVALID_VALUE;
    int op = ((struct node *)h)->l.op;
    *t = op == RV_OP_MEMCPY ? CU_GRAPH_NODE_TYPE_MEMCPY : op == RV_OP_MEMSET ? CU_GRAPH_NODE_TYPE_MEMSET
                                                                           : CU_GRAPH_NODE_TYPE_KERNEL;
    return CUDA_SUCCESS;
}
CUresult cuGraphInstantiateWithFlags(CUgraphExec *pe, CUgraph h, unsigned long long flags) {
    struct graph *g = as_graph(h);
    if (!pe || !g) return CUDA_ERROR_INVALID_VALUE;
    struct exec *e = calloc(1, sizeof *e);
    e->magic = RV_MAGIC_EXEC;
    e->g = *g;   /* nodes are immutable once captured; the exec shares them */
    /* the driver's copy of the nodes (rv_driver_graph; collectives are charged as kernels
     * with small parameters: not measured) */
    e->dev = rv_current_dev();
    for (size_t i = 0; i < g->n; i++) e->driver_bytes += g->nodes[i].driver_bytes;
    rv_driver_graph(e->dev, e->driver_bytes, true);
    *pe = (CUgraphExec)e;
    return CUDA_SUCCESS;
}
CUresult cuGraphInstantiateWithParams(CUgraphExec *pe, CUgraph h, CUDA_GRAPH_INSTANTIATE_PARAMS *p) {
    CUresult r = cuGraphInstantiateWithFlags(pe, h, p ? p->flags : 0);
    if (p) { p->result_out = r ? CUDA_GRAPH_INSTANTIATE_ERROR : CUDA_GRAPH_INSTANTIATE_SUCCESS; p->hErrNode_out = NULL; }
    return r;
}
static struct exec *as_exec(CUgraphExec h) {
    struct exec *e = (struct exec *)h;
    return e && e->magic == RV_MAGIC_EXEC ? e : NULL;
}
CUresult cuGraphExecDestroy(CUgraphExec h) {
    struct exec *e = as_exec(h);
    if (!e) return CUDA_ERROR_INVALID_VALUE;
    e->magic = 0;
    rv_driver_graph(e->dev, e->driver_bytes, false);
    return CUDA_SUCCESS;
}
CUresult cuGraphUpload(CUgraphExec h, CUstream s) { return as_exec(h) ? rv_check_stream(s) : CUDA_ERROR_INVALID_VALUE; }
static int cmp_ptr(const void *a, const void *b) {
    uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
    return x < y ? -1 : x > y;
}
/* Every device pointer e's kernels are handed, each once (gathered at the first replay). */
static void exec_args(struct exec *e) {
    if (e->args_gathered) return;
    size_t n = 0;
    for (size_t i = 0; i < e->g.n; i++) n += (size_t)e->g.nodes[i].nargs;
    uintptr_t *args = n ? malloc(n * sizeof *args) : NULL;
    if (n && !args) return;
    n = 0;
    for (size_t i = 0; i < e->g.n; i++)
        for (int k = 0; k < e->g.nodes[i].nargs; k++) args[n++] = e->g.nodes[i].args[k];
    qsort(args, n, sizeof *args, cmp_ptr);
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (!m || args[i] != args[m - 1]) args[m++] = args[i];
    e->args = args;
    e->nargs = (int)m;
    e->args_gathered = true;
}

CUresult cuGraphLaunch(CUgraphExec h, CUstream hs) {
    struct exec *e = as_exec(h);
    if (!e) return CUDA_ERROR_INVALID_VALUE;
    dilate_cpu();
    struct stream *s = lock_for_launch(hs);
    if (!s) return CUDA_ERROR_INVALID_HANDLE;
    /* The whole graph is queued at once, as the driver submits it: its nodes are ready from
     * the launch on, each after the one before. Read once: the clock and the other streams'
     * tails for each of a decode step's ~450 nodes cost the launching thread ~100 us a
     * replay, where the driver takes ~7 us (tools/calibrate/launch_cpu.py). */
    int64_t ready = s->capture ? 0 : ready_time(s);
    if (!s->capture) queue_note(s, ready);   /* a graph launch takes one place */
    for (size_t i = 0; i < e->g.n; i++) {
        struct node *n = &e->g.nodes[i];
        if (s->capture) {
            graph_add(s->capture, &n->l, n->name, n->join, n->ctx, n->driver_bytes);
            node_args(&s->capture->nodes[s->capture->n - 1], n->args, n->nargs);
            s->capture->nodes[s->capture->n - 1].host = n->host;
            continue;
        }
        if (n->join) joined(s, n->name, n->join, n->ctx);
        else {
            /* a graph replays the same launches every time: predict each node once, except
             * attention, whose cost follows the batch the engine reported for this step */
            if (n->predicted < 0) n->by_batch = rv_predict_by_batch(&n->l);
            if (n->predicted < 0 || n->by_batch) {
                n->predicted = rv_predict_ns(&n->l, NULL);
                n->power = power_of(&n->l);
            }
            append_at(s, ready, &n->l, n->name, n->predicted, &n->power);
        }
    }
    bool replay = !s->capture;
    pthread_mutex_unlock(&g_tl);
    if (replay) {   /* what its kernels are handed now holds what they computed */
        for (size_t i = 0; i < e->g.n; i++)
            if (e->g.nodes[i].host) rv_host_kernel_replay(e->g.nodes[i].host);
        exec_args(e);
        rv_device_computed(e->args, e->nargs);
    }
    return CUDA_SUCCESS;
}
CUresult cuGraphExecUpdate_v2(CUgraphExec h, CUgraph hg, CUgraphExecUpdateResultInfo *info) {
    struct exec *e = as_exec(h);
    struct graph *g = as_graph(hg);
    if (!e || !g) return CUDA_ERROR_INVALID_VALUE;
    e->g = *g;
    if (info) { memset(info, 0, sizeof *info); info->result = CU_GRAPH_EXEC_UPDATE_SUCCESS; }
    return CUDA_SUCCESS;
}
CUresult cuGraphDebugDotPrint(CUgraph h, const char *path, unsigned flags) {
    struct graph *g = as_graph(h);
    if (!g || !path) return CUDA_ERROR_INVALID_VALUE;
    FILE *f = fopen(path, "w");
    if (!f) return CUDA_ERROR_OPERATING_SYSTEM;
    fprintf(f, "digraph graph_%llu {\n", g->id);
    for (size_t i = 0; i < g->n; i++) {
        fprintf(f, "  n%zu [label=\"%s\"];\n", i, g->nodes[i].name);
        if (i) fprintf(f, "  n%zu -> n%zu;\n", i - 1, i);
    }
    fprintf(f, "}\n");
    fclose(f);
    return CUDA_SUCCESS;
}
