/* Emulated NCCL (librevati_nccl.so, SONAME libnccl.so.2; preloaded, because torch finds the
 * real one through its RPATH).
 *
 * Communicators span processes through one shared-memory segment per communicator, named
 * in the ncclUniqueId that the application passes from rank 0 to the others (the name is
 * removed once every rank has mapped the segment). A collective
 * (or a send/recv pair) is a rendezvous: each rank posts the virtual time at which its
 * stream can start the operation, and the operation completes at the latest arrival plus
 * its predicted duration (rv_predict_ns, RV_OP_COLLECTIVE), on every rank's stream. No data
 * moves: kernels do not compute either, so there is nothing to reduce.
 *
 * The rendezvous happens when the operation is queued, so a rank's host thread waits
 * there for the others (real NCCL returns at once and the GPUs wait instead). This keeps
 * every stream timeline exact at the cost of host-side lockstep; waits are semaphore waits
 * the time shim sees as untimed, so a missing rank is reported as a deadlock, not a hang.
 * Operations inside ncclGroupStart/End are posted together and then awaited, so the
 * send/recv pairs of an all-to-all cannot deadlock. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core.h"
#include "cuda_device_api.h"
#include "predict.h"

#define EXPORT __attribute__((visibility("default")))
#define MAX_RANKS 64
#define COLL_SLOTS 256
#define P2P_SLOTS 8
#define ID_MAGIC 0x4c43434e56455252ULL   /* "RREVNCCL" */
#define COMM_MAGIC 0x52564e43u
#define NCCL_VERSION_CODE 22809           /* the NCCL torch 2.11.0 ships with: 2.28.9 */

typedef enum { ncclSuccess = 0, ncclUnhandledCudaError = 1, ncclSystemError = 2, ncclInternalError = 3,
               ncclInvalidArgument = 4, ncclInvalidUsage = 5 } ncclResult_t;
typedef struct { char internal[128]; } ncclUniqueId;
typedef int ncclDataType_t;
typedef int ncclRedOp_t;
typedef struct comm *ncclComm_t;
typedef void ncclConfig_t;   /* passed by pointer; the emulator needs none of its fields */

/* ---- shared memory of one communicator ---------------------------------------------- */
struct slot {
    uint64_t seq;            /* seq + 1 of the operation holding the slot; 0: free */
    int32_t arrived, departed, done;
    int64_t arrival_max, duration_max, completion;
};
struct segment {
    _Atomic int init_state;  /* 0: fresh (ftruncate zeroes), 1: initialising, 2: ready */
    pthread_mutex_t lock;    /* process-shared */
    sem_t wake[MAX_RANKS];   /* process-shared: rank r sleeps on wake[r] */
    struct slot coll[COLL_SLOTS];
    struct slot p2p[MAX_RANKS][MAX_RANKS][P2P_SLOTS];   /* [sender][receiver] */
    struct { int color, key; } split[MAX_RANKS];        /* ncclCommSplit exchange */
};

struct id { uint64_t magic; char name[64]; };

struct comm {
    uint32_t magic;
    struct segment *seg;
    char name[64];
    int rank, nranks, device;
    uint64_t coll_seq, split_seq;
    uint64_t sent[MAX_RANKS], received[MAX_RANKS];
};

static struct segment *attach(const char *name) {
    int fd = shm_open(name, O_RDWR | O_CREAT, 0600);
    if (fd < 0) return NULL;
    if (ftruncate(fd, sizeof(struct segment)) != 0) { close(fd); return NULL; }
    struct segment *s = mmap(NULL, sizeof *s, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (s == MAP_FAILED) return NULL;
    int fresh = 0;
    if (atomic_compare_exchange_strong(&s->init_state, &fresh, 1)) {
        pthread_mutexattr_t a;
        pthread_mutexattr_init(&a);
        pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
        pthread_mutex_init(&s->lock, &a);
        for (int r = 0; r < MAX_RANKS; r++) sem_init(&s->wake[r], 1, 0);
        atomic_store(&s->init_state, 2);
    }
    while (atomic_load(&s->init_state) != 2) sched_yield();
    return s;
}

/* ---- rendezvous ----------------------------------------------------------------------- */
/* Ranks r of an operation, for waking: all ranks of a collective, the two of a send/recv. */
struct op {
    struct comm *comm;
    struct slot *slot;
    uint64_t seq;
    int expected;
    int peer;                /* -1: collective */
    bool send;               /* point-to-point: this rank sends to peer (else receives) */
    int64_t duration;
    CUstream stream;
    const char *name;
};

static void wake_participants(struct comm *c, const struct op *o) {
    if (o->peer < 0) {
        for (int r = 0; r < c->nranks; r++) sem_post(&c->seg->wake[r]);
    } else {
        sem_post(&c->seg->wake[c->rank]);
        sem_post(&c->seg->wake[o->peer]);
    }
}

static void post(const struct op *o, int64_t arrival) {
    struct comm *c = o->comm;
    struct slot *s = o->slot;
    for (;;) {
        pthread_mutex_lock(&c->seg->lock);
        if (s->seq == 0) {   /* claim the free slot for this operation */
            *s = (struct slot){.seq = o->seq + 1};
        }
        if (s->seq == o->seq + 1) break;
        pthread_mutex_unlock(&c->seg->lock);   /* an older operation still drains it */
        sem_wait(&c->seg->wake[c->rank]);
    }
    s->arrived++;
    if (arrival > s->arrival_max) s->arrival_max = arrival;
    if (o->duration > s->duration_max) s->duration_max = o->duration;
    if (s->arrived == o->expected) {
        s->completion = s->arrival_max + s->duration_max;
        s->done = 1;
        wake_participants(c, o);
    }
    pthread_mutex_unlock(&c->seg->lock);
}

static int64_t await(const struct op *o) {
    struct comm *c = o->comm;
    struct slot *s = o->slot;
    for (;;) {
        pthread_mutex_lock(&c->seg->lock);
        if (s->seq == o->seq + 1 && s->done) {
            int64_t t = s->completion;
            if (++s->departed == o->expected) {
                *s = (struct slot){0};
                wake_participants(c, o);   /* someone may wait to claim the slot */
            }
            pthread_mutex_unlock(&c->seg->lock);
            return t;
        }
        pthread_mutex_unlock(&c->seg->lock);
        sem_wait(&c->seg->wake[c->rank]);
    }
}

/* ---- operations, groups, and their place on the stream ---------------------------------- */
struct batch { int n, cap; struct op *ops; };
static __thread int t_group_depth;
static __thread struct batch t_group;

static int64_t join_batch(void *ctx, int64_t arrival, int64_t *busy) {
    struct batch *b = ctx;
    /* sequence numbers are taken at every (re)play: ranks replay the same order */
    for (int i = 0; i < b->n; i++) {
        struct op *o = &b->ops[i];
        struct comm *c = o->comm;
        if (o->peer < 0) {
            o->seq = c->coll_seq++;
            o->slot = &c->seg->coll[o->seq % COLL_SLOTS];
        } else if (o->send) {                                  /* rank -> peer */
            o->seq = c->sent[o->peer]++;
            o->slot = &c->seg->p2p[c->rank][o->peer][o->seq % P2P_SLOTS];
        } else {                                               /* peer -> rank */
            o->seq = c->received[o->peer]++;
            o->slot = &c->seg->p2p[o->peer][c->rank][o->seq % P2P_SLOTS];
        }
        post(o, arrival);
    }
    int64_t done = arrival;
    *busy = 0;
    for (int i = 0; i < b->n; i++) {
        int64_t t = await(&b->ops[i]);
        if (t > done) done = t;
        *busy += b->ops[i].duration;
    }
    if (*busy > done - arrival) *busy = done - arrival;
    return done;
}

/* Queue a batch; it is freed unless a graph captured it (the graph replays it). */
static ncclResult_t submit(struct batch *b) {
    bool captured = false;
    CUresult r = CUDA_SUCCESS;
    if (b->n) {
        for (int i = 1; i < b->n; i++)
            if (b->ops[i].stream != b->ops[0].stream)
                rv_log_once("NCCL group spans several streams; timed on the first", "ncclGroupEnd");
        const char *name = b->n == 1 ? b->ops[0].name : "ncclGroup";
        r = rv_cuda_enqueue_joined(b->ops[0].stream, name, join_batch, b, &captured);
    }
    if (!captured) {
        free(b->ops);
        free(b);
    }
    return r == CUDA_SUCCESS ? ncclSuccess : ncclUnhandledCudaError;
}

static void add_op(struct batch *b, const struct op *o) {
    if (b->n == b->cap) {
        b->cap = b->cap ? 2 * b->cap : 8;
        b->ops = realloc(b->ops, (size_t)b->cap * sizeof *b->ops);
    }
    b->ops[b->n++] = *o;
}

static size_t dtype_size(ncclDataType_t t) {
    static const size_t sizes[] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};
    return t >= 0 && t < 12 ? sizes[t] : 0;
}

/* bytes: the largest buffer of the operation, the "size" nccl-tests report */
static ncclResult_t enqueue(struct comm *c, int coll, const char *name, size_t count,
                            ncclDataType_t type, int peer, CUstream stream) {
    if (!c || c->magic != COMM_MAGIC) return ncclInvalidArgument;
    if (!dtype_size(type)) return ncclInvalidArgument;
    if (peer >= c->nranks) return ncclInvalidArgument;
    struct rv_launch l = {.op = RV_OP_COLLECTIVE, .device = c->device, .coll = coll,
                          .bytes = (int64_t)(count * dtype_size(type)), .nranks = c->nranks};
    struct op o = {.comm = c, .expected = peer < 0 ? c->nranks : 2, .peer = peer,
                   .send = coll == RV_COLL_SEND, .duration = rv_predict_ns(&l, NULL),
                   .stream = stream, .name = name};
    if (t_group_depth) {
        add_op(&t_group, &o);
        return ncclSuccess;
    }
    struct batch *b = calloc(1, sizeof *b);
    add_op(b, &o);
    return submit(b);
}

/* ---- API: version, errors, ids, communicators ------------------------------------------ */
EXPORT ncclResult_t ncclGetVersion(int *version) {
    if (!version) return ncclInvalidArgument;
    *version = NCCL_VERSION_CODE;
    return ncclSuccess;
}
EXPORT const char *ncclGetErrorString(ncclResult_t r) {
    switch (r) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error";
    case ncclSystemError: return "unhandled system error";
    case ncclInternalError: return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument: return "invalid argument";
    case ncclInvalidUsage: return "invalid usage";
    default: return "unknown result code";
    }
}
EXPORT const char *ncclGetLastError(ncclComm_t comm) { return ""; }

static ncclResult_t unimplemented(const char *name) {
    rv_log_once("NCCL entry point not implemented", name);
    return ncclInternalError;
}

EXPORT ncclResult_t ncclGetUniqueId(ncclUniqueId *out) {
    if (!out) return ncclInvalidArgument;
    static _Atomic unsigned counter;
    struct id id = {.magic = ID_MAGIC};
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    snprintf(id.name, sizeof id.name, "/revati-nccl-%d-%u-%lx", (int)getpid(),
             atomic_fetch_add(&counter, 1), (unsigned long)ts.tv_nsec);
    memset(out, 0, sizeof *out);
    memcpy(out, &id, sizeof id);
    return ncclSuccess;
}

static ncclResult_t init_rank(ncclComm_t *out, int nranks, const char *name, int rank) {
    if (!out || nranks < 1 || nranks > MAX_RANKS || rank < 0 || rank >= nranks)
        return ncclInvalidArgument;
    struct segment *seg = attach(name);
    if (!seg) {
        rv_log(RV_ERROR, "NCCL: cannot map communicator segment %s: %s", name, strerror(errno));
        return ncclSystemError;
    }
    struct comm *c = calloc(1, sizeof *c);
    c->magic = COMM_MAGIC;
    c->seg = seg;
    snprintf(c->name, sizeof c->name, "%s", name);
    c->rank = rank;
    c->nranks = nranks;
    CUdevice dev = 0;
    cuCtxGetDevice(&dev);
    c->device = dev;
    /* initialisation is collective, as in NCCL: every rank must join */
    struct op o = {.comm = c, .slot = &seg->coll[0], .seq = c->coll_seq++, .expected = nranks,
                   .peer = -1, .name = "ncclCommInitRank"};
    post(&o, rv_now_ns());
    await(&o);
    /* every rank has mapped the segment: its name is not needed any more, and removing it
     * now leaves nothing in /dev/shm when ranks are killed without destroying it */
    if (rank == 0) shm_unlink(name);
    *out = c;
    return ncclSuccess;
}

EXPORT ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank) {
    struct id i;
    memcpy(&i, &id, sizeof i);
    if (i.magic != ID_MAGIC) return ncclInvalidArgument;
    return init_rank(comm, nranks, i.name, rank);
}
EXPORT ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank,
                                           ncclConfig_t *config) {
    return ncclCommInitRank(comm, nranks, id, rank);
}
/* Several ids only spread NCCL's bootstrap load; one segment serves the communicator. */
EXPORT ncclResult_t ncclCommInitRankScalable(ncclComm_t *comm, int nranks, int rank, int nids,
                                             ncclUniqueId *ids, ncclConfig_t *config) {
    if (nids < 1 || !ids) return ncclInvalidArgument;
    return ncclCommInitRank(comm, nranks, ids[0], rank);
}
EXPORT ncclResult_t ncclCommInitAll(ncclComm_t *comms, int ndev, const int *devlist) {
    if (!comms || ndev < 1 || ndev > MAX_RANKS) return ncclInvalidArgument;
    ncclUniqueId id;
    ncclGetUniqueId(&id);
    struct id i;
    memcpy(&i, &id, sizeof i);
    struct segment *seg = attach(i.name);
    if (!seg) return ncclSystemError;
    shm_unlink(i.name); /* mapped by the only process that will use it */
    for (int r = 0; r < ndev; r++) {   /* one process holds every rank: no init rendezvous */
        struct comm *c = calloc(1, sizeof *c);
        *c = (struct comm){.magic = COMM_MAGIC, .seg = seg, .rank = r, .nranks = ndev,
                           .device = devlist ? devlist[r] : r, .coll_seq = 1};
        snprintf(c->name, sizeof c->name, "%s", i.name);
        comms[r] = c;
    }
    return ncclSuccess;
}

static ncclResult_t release(ncclComm_t c) {
    if (!c || c->magic != COMM_MAGIC) return ncclInvalidArgument;
    c->magic = 0;
    return ncclSuccess;
}
EXPORT ncclResult_t ncclCommDestroy(ncclComm_t c) { return release(c); }
EXPORT ncclResult_t ncclCommAbort(ncclComm_t c) { return release(c); }
EXPORT ncclResult_t ncclCommFinalize(ncclComm_t c) { return c && c->magic == COMM_MAGIC ? ncclSuccess : ncclInvalidArgument; }
EXPORT ncclResult_t ncclCommGetAsyncError(ncclComm_t c, ncclResult_t *err) {
    if (!c || !err) return ncclInvalidArgument;
    *err = ncclSuccess;
    return ncclSuccess;
}
EXPORT ncclResult_t ncclCommCount(const ncclComm_t c, int *n) { if (!c || !n) return ncclInvalidArgument; *n = c->nranks; return ncclSuccess; }
EXPORT ncclResult_t ncclCommCuDevice(const ncclComm_t c, int *d) { if (!c || !d) return ncclInvalidArgument; *d = c->device; return ncclSuccess; }
EXPORT ncclResult_t ncclCommUserRank(const ncclComm_t c, int *r) { if (!c || !r) return ncclInvalidArgument; *r = c->rank; return ncclSuccess; }

#define NCCL_SPLIT_NOCOLOR -1
EXPORT ncclResult_t ncclCommSplit(ncclComm_t c, int color, int key, ncclComm_t *out, ncclConfig_t *config) {
    if (!c || c->magic != COMM_MAGIC || !out) return ncclInvalidArgument;
    c->seg->split[c->rank].color = color;
    c->seg->split[c->rank].key = key;
    /* a rendezvous of the parent publishes every rank's (color, key) */
    struct op o = {.comm = c, .seq = c->coll_seq++, .expected = c->nranks, .peer = -1,
                   .name = "ncclCommSplit"};
    o.slot = &c->seg->coll[o.seq % COLL_SLOTS];
    post(&o, rv_now_ns());
    await(&o);
    uint64_t split = c->split_seq++;
    if (color == NCCL_SPLIT_NOCOLOR) {
        *out = NULL;
        return ncclSuccess;
    }
    int n = 0, rank = 0;
    for (int r = 0; r < c->nranks; r++) {
        if (c->seg->split[r].color != color) continue;
        n++;
        int k = c->seg->split[r].key;
        if (k < key || (k == key && r < c->rank)) rank++;
    }
    /* the table may be overwritten by the next split only after everyone has read it */
    struct op after = {.comm = c, .seq = c->coll_seq++, .expected = c->nranks, .peer = -1,
                       .name = "ncclCommSplit"};
    after.slot = &c->seg->coll[after.seq % COLL_SLOTS];
    post(&after, rv_now_ns());
    await(&after);
    char name[64];
    snprintf(name, sizeof name, "%.40s-s%lu-c%d", c->name, (unsigned long)split, color);
    return init_rank(out, n, name, rank);
}
EXPORT ncclResult_t ncclCommShrink(ncclComm_t c, int *exclude, int nexclude, ncclComm_t *out,
                                   ncclConfig_t *config, int flags) {
    return unimplemented("ncclCommShrink");
}

/* ---- memory and registration: device memory of the emulated driver ---------------------- */
EXPORT ncclResult_t ncclMemAlloc(void **ptr, size_t size) {
    if (!ptr) return ncclInvalidArgument;
    CUdeviceptr p;
    if (cuMemAlloc(&p, size) != CUDA_SUCCESS) return ncclUnhandledCudaError;
    *ptr = (void *)p;
    return ncclSuccess;
}
EXPORT ncclResult_t ncclMemFree(void *ptr) {
    return cuMemFree((CUdeviceptr)ptr) == CUDA_SUCCESS ? ncclSuccess : ncclUnhandledCudaError;
}
/* Registration only lets real NCCL use faster algorithms; predictions do not model it. */
EXPORT ncclResult_t ncclCommRegister(const ncclComm_t c, void *buff, size_t size, void **handle) {
    if (!c || !handle) return ncclInvalidArgument;
    *handle = buff;
    return ncclSuccess;
}
EXPORT ncclResult_t ncclCommDeregister(const ncclComm_t c, void *handle) { return c ? ncclSuccess : ncclInvalidArgument; }
EXPORT ncclResult_t ncclCommWindowRegister(ncclComm_t c, void *buff, size_t size, void **win, int flags) {
    if (!c || !win) return ncclInvalidArgument;
    *win = buff;
    return ncclSuccess;
}
EXPORT ncclResult_t ncclCommWindowDeregister(ncclComm_t c, void *win) { return c ? ncclSuccess : ncclInvalidArgument; }
EXPORT ncclResult_t ncclDevCommCreate(ncclComm_t c, const void *reqs, void *devcomm) { return unimplemented("ncclDevCommCreate"); }
EXPORT ncclResult_t ncclDevCommDestroy(ncclComm_t c, const void *devcomm) { return unimplemented("ncclDevCommDestroy"); }

/* custom reduction operators: a handle is enough, nothing is reduced */
EXPORT ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t *op, void *scalar, ncclDataType_t type,
                                             int residence, ncclComm_t c) {
    if (!op || !c) return ncclInvalidArgument;
    *op = 5;   /* ncclNumOps: the first custom operator */
    return ncclSuccess;
}
EXPORT ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t c) { return c ? ncclSuccess : ncclInvalidArgument; }

/* ---- collectives and point-to-point ---------------------------------------------------- */
/* What an operation receives reads zero from then on (rv_cuda_received): the other ranks'
 * kernels computed it. Left as it was, a receive buffer read what an earlier tensor had left
 * in that memory: vLLM's V2 runner broadcasts the sampled tokens and their counts from the
 * last pipeline stage, and the other stages' host-computed bookkeeping (_post_update_kernel)
 * read counts and token ids of some earlier tensor. The ranks' bytes are not carried: a
 * receiver reads zero even where the sender's buffer held what its host put there (those
 * counts: the other stages take no sampled token into their request state). */
static ncclResult_t received(ncclResult_t r, void *buff, size_t count, ncclDataType_t t) {
    if (r == ncclSuccess) rv_cuda_received((CUdeviceptr)buff, count * dtype_size(t));
    return r;
}
EXPORT ncclResult_t ncclAllReduce(const void *s, void *r, size_t count, ncclDataType_t t, ncclRedOp_t op,
                                  ncclComm_t c, CUstream st) {
    return received(enqueue(c, RV_COLL_ALLREDUCE, "ncclAllReduce", count, t, -1, st), r, count, t);
}
EXPORT ncclResult_t ncclAllGather(const void *s, void *r, size_t count, ncclDataType_t t, ncclComm_t c, CUstream st) {
    size_t all = count * (c ? (size_t)c->nranks : 0);
    return received(enqueue(c, RV_COLL_ALLGATHER, "ncclAllGather", all, t, -1, st), r, all, t);
}
EXPORT ncclResult_t ncclReduceScatter(const void *s, void *r, size_t count, ncclDataType_t t, ncclRedOp_t op,
                                      ncclComm_t c, CUstream st) {
    return received(enqueue(c, RV_COLL_REDUCESCATTER, "ncclReduceScatter",
                            count * (c ? (size_t)c->nranks : 0), t, -1, st), r, count, t);
}
EXPORT ncclResult_t ncclBroadcast(const void *s, void *r, size_t count, ncclDataType_t t, int root,
                                  ncclComm_t c, CUstream st) {
    ncclResult_t res = enqueue(c, RV_COLL_BROADCAST, "ncclBroadcast", count, t, -1, st);
    return c && c->rank == root ? res : received(res, r, count, t);   /* the root keeps its own */
}
EXPORT ncclResult_t ncclBcast(void *buff, size_t count, ncclDataType_t t, int root, ncclComm_t c, CUstream st) {
    return ncclBroadcast(buff, buff, count, t, root, c, st);
}
EXPORT ncclResult_t ncclReduce(const void *s, void *r, size_t count, ncclDataType_t t, ncclRedOp_t op, int root,
                               ncclComm_t c, CUstream st) {
    ncclResult_t res = enqueue(c, RV_COLL_REDUCE, "ncclReduce", count, t, -1, st);
    return c && c->rank == root ? received(res, r, count, t) : res;
}
EXPORT ncclResult_t ncclAlltoAll(const void *s, void *r, size_t count, ncclDataType_t t, ncclComm_t c, CUstream st) {
    size_t all = count * (c ? (size_t)c->nranks : 0);
    return received(enqueue(c, RV_COLL_ALLTOALL, "ncclAlltoAll", all, t, -1, st), r, all, t);
}
EXPORT ncclResult_t ncclGather(const void *s, void *r, size_t count, ncclDataType_t t, int root, ncclComm_t c,
                               CUstream st) {
    return unimplemented("ncclGather");
}
EXPORT ncclResult_t ncclScatter(const void *s, void *r, size_t count, ncclDataType_t t, int root, ncclComm_t c,
                                CUstream st) {
    return unimplemented("ncclScatter");
}
EXPORT ncclResult_t ncclSend(const void *buff, size_t count, ncclDataType_t t, int peer, ncclComm_t c, CUstream st) {
    if (peer < 0) return ncclInvalidArgument;
    return enqueue(c, RV_COLL_SEND, "send", count, t, peer, st);
}
EXPORT ncclResult_t ncclRecv(void *buff, size_t count, ncclDataType_t t, int peer, ncclComm_t c, CUstream st) {
    if (peer < 0) return ncclInvalidArgument;
    return received(enqueue(c, RV_COLL_RECV, "recv", count, t, peer, st), buff, count, t);
}

EXPORT ncclResult_t ncclGroupStart(void) {
    t_group_depth++;
    return ncclSuccess;
}
EXPORT ncclResult_t ncclGroupEnd(void) {
    if (t_group_depth <= 0) return ncclInvalidUsage;
    if (--t_group_depth) return ncclSuccess;
    struct batch *b = malloc(sizeof *b);
    *b = t_group;
    t_group = (struct batch){0};
    return submit(b);
}
EXPORT ncclResult_t ncclGroupSimulateEnd(void *info) { return unimplemented("ncclGroupSimulateEnd"); }

/* ---- NCCL 2.29's newer entry points: torch 2.14 (vLLM 0.34) links them, no engine calls
 * them; each fails loudly with its name should one start to ---------------------------- */
EXPORT ncclResult_t ncclCommGetUniqueId(ncclComm_t c, ncclUniqueId *id) { return unimplemented("ncclCommGetUniqueId"); }
EXPORT ncclResult_t ncclCommGrow(ncclComm_t c, int nranks, const ncclUniqueId *id, int rank, ncclComm_t *out,
                                 ncclConfig_t *config) {
    return unimplemented("ncclCommGrow");
}
EXPORT ncclResult_t ncclCommMemStats(ncclComm_t c, int stat, uint64_t *value) { return unimplemented("ncclCommMemStats"); }
EXPORT ncclResult_t ncclCommResume(ncclComm_t c) { return unimplemented("ncclCommResume"); }
EXPORT ncclResult_t ncclCommRevoke(ncclComm_t c, int flags) { return unimplemented("ncclCommRevoke"); }
EXPORT ncclResult_t ncclCommSuspend(ncclComm_t c, int flags) { return unimplemented("ncclCommSuspend"); }
EXPORT ncclResult_t ncclGetLsaMultimemDevicePointer(void *win, size_t offset, void **out) {
    return unimplemented("ncclGetLsaMultimemDevicePointer");
}
EXPORT ncclResult_t ncclGetPeerDevicePointer(void *win, size_t offset, int peer, void **out) {
    return unimplemented("ncclGetPeerDevicePointer");
}
EXPORT ncclResult_t ncclPutSignal(const void *buff, size_t count, ncclDataType_t t, int peer, void *win,
                                  size_t offset, int sig, int ctx, unsigned flags, ncclComm_t c, CUstream st) {
    return unimplemented("ncclPutSignal");
}
EXPORT ncclResult_t ncclSignal(int peer, int sig, int ctx, unsigned flags, ncclComm_t c, CUstream st) {
    return unimplemented("ncclSignal");
}
EXPORT ncclResult_t ncclWaitSignal(int n, void *descs, ncclComm_t c, CUstream st) { return unimplemented("ncclWaitSignal"); }
EXPORT ncclResult_t ncclWinGetUserPtr(ncclComm_t c, void *win, void **out) { return unimplemented("ncclWinGetUserPtr"); }
