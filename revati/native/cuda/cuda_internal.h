/* Shared state of the emulated CUDA driver (librevati_cuda.so, SONAME libcuda.so.1).
 *
 * cuda.c               initialisation, devices, contexts, modules/kernels, cuGetProcAddress
 * cuda_memory.c        split-state device memory, host memory, copies, memsets, pointer
 *                      queries
 * cuda_stream.c        streams, events, launches, graphs: per-stream virtual timelines
 * cuda_launch_queue.c  a stream's bounded launch queue (the node spec's launch_queue)
 * cuda_dilation.c      the GPU node's host CPU speed (REVATI_CPU_DILATION)
 * darkapi.c            cuGetExportTable: the private tables cudart/cuBLAS need
 * cuda_spec.c          the node spec shared with NVML
 * generated            weak logging stubs for every other entry point, the versioned
 *                      cuGetProcAddress table, per-thread-stream variants (gen_cuda.py)
 */
#ifndef REVATI_CUDA_INTERNAL_H
#define REVATI_CUDA_INTERNAL_H

#include <cuda.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "core.h"
#include "cuda_spec.h"
#include "predict.h"

/* Internal helpers shared by the cuda*.c files stay hidden... */
#pragma GCC visibility push(hidden)

#define RV_ATTR_MAX 256

/* ---- cuda.c ------------------------------------------------------------------- */
struct rv_ctx {
    uint32_t magic;
    int dev;                 /* visible ordinal */
    unsigned flags;
    int refcount;
    bool primary;
    unsigned long long id;
    size_t limits[16];
};
#define RV_MAX_PARAMS 64
struct rv_func {
    uint32_t magic;
    char *name;
    uint64_t name_hash;                      /* rv_kernel_hash(name), for every launch */
    struct rv_module *mod;
    int attrs[32];
    const struct rv_kernel_params *params;   /* NULL: layout unknown (no cubin for this GPU) */
    bool code_loaded;                        /* its code is on the device (rv_driver_code) */
    bool host_named;                         /* rv_host_kernel_named: decided at lookup */
    uint32_t loaded_on;                      /* devices it is loaded on (bit per ordinal) */
    struct rv_func *next;
};
/* What a loaded cubin says of one kernel. */
struct rv_kernel_params {
    char *kernel;
    int count;                        /* parameters; -1: malformed */
    uint16_t size[RV_MAX_PARAMS], offset[RV_MAX_PARAMS];
    int param_bytes;                  /* end of the last parameter (what a graph node keeps) */
    int regs;                         /* registers per thread; -1: unknown */
    int static_smem;                  /* bytes of static shared memory */
    int local_bytes;                  /* local memory (stack frame) per thread */
    int max_threads;                  /* __launch_bounds__ / maxntid product; 0: none */
    int text_bytes;                   /* machine code (.text.<kernel>) */
    int arg_layout;                   /* enum rv_arg_layout of its name */
    bool module_syscalls;             /* its module calls assert/printf/malloc on the device */
    struct rv_kernel_params *next;
};

extern pthread_mutex_t rv_cuda_lock;
bool rv_cuda_ready(void);                       /* cuInit succeeded */
int rv_ndev(void);                              /* visible devices */
int rv_phys(int dev);                           /* visible ordinal -> physical index */
struct rv_ctx *rv_current_ctx(void);
int rv_current_dev(void);                       /* device of the current context, else 0 */
struct rv_ctx *rv_primary_ctx(int dev);
const char *rv_func_name(CUfunction f);         /* mangled name, "?" if not ours */
uint64_t rv_func_name_hash(CUfunction f);     /* its rv_kernel_hash; 0 if not ours */
int rv_func_param_bytes(CUfunction f);          /* bytes of its parameters, 0: unknown */
/* Lazy loading: true the first time f is loaded on dev (marks it loaded); always false
 * under CUDA_MODULE_LOADING=EAGER, where a module's kernels load with it. */
bool rv_func_load(CUfunction f, int dev);
bool rv_func_is_loaded(CUfunction f, int dev);
/* Load f on the device of stream h if it is not yet (cuda_stream.c): waits for the device. */
void rv_cuda_lazy_load(CUfunction f, CUstream h);
/* What f's cubin adds to a launch's features, as a real GPU's profiler reports them: static
 * shared memory on top of the dynamic bytes in l->shared_bytes and, for a plain kernel, the
 * sizes among its arguments (cuLaunchKernel's kernelParams or extra; -1 when f's parameter
 * layout is unknown). */
void rv_func_launch_features(CUfunction f, void **params, void **extra, struct rv_launch *l);
/* The device pointers among f's arguments (up to max, into out): the memory the kernel is
 * handed, where its results go; 0 when f's parameter layout is unknown. */
int rv_func_device_args(CUfunction f, void **params, void **extra, uintptr_t *out, int max);
struct rv_host_launch;   /* cuda_host_kernels.c */
/* rv_host_kernel on f's arguments: true when f was computed on the host; with `capture`,
 * rv_host_kernel_capture instead (its result in *captured). */
bool rv_func_host_kernel(CUfunction f, void **params, void **extra, const unsigned grid[3],
                         bool capture, struct rv_host_launch **captured);
int rv_attr(int attribute, int dev, bool *known);
CUresult rv_unimplemented(const char *name);    /* logs once, NOT_SUPPORTED */
/* A persistent copy of a formatted name (rv_log_once keeps the pointer it is given). */
const char *rv_intern(const char *s);

/* ---- cuda_cubin.c ------------------------------------------------------------- */
/* The parameter layouts of every kernel in the cubin for this GPU inside a module image
 * (a fatbin, wrapped or not, or an ELF cubin); NULL if there is none. */
struct rv_kernel_params *rv_cubin_params(const void *image);

/* ---- cuda_memory.c ------------------------------------------------------------ */
CUresult rv_dev_alloc(CUdeviceptr *dp, size_t size, int dev);
CUresult rv_dev_free(CUdeviceptr dp);
int rv_ptr_device(uintptr_t p);                 /* -1: not device memory */
/* Device memory that holds what the host put there (copies to the device, copies within
 * it, non-zero memsets) keeps it only until a kernel is handed a pointer into it: from
 * then on it holds what the kernel computed, which no kernel computes here, so copies out
 * of it read zero (sampled token 0), never a stale value of a buffer the allocator gave out
 * again. Kernels computed on the host (rv_host_kernel) still read what the host put there. */
void rv_device_computed(const uintptr_t *ptrs, int n);
/* [p, p + n) now holds what a kernel computed on the host: it reads as host-written. */
void rv_host_computed(uintptr_t p, size_t n);
/* Bytes from p to the end of the host-written range holding it (what one copy or fill put
 * there); 0 where p holds none. */
size_t rv_host_written_from(uintptr_t p);
/* Bytes from p to the end of the device allocation or page-locked host range holding it;
 * 0 where p is in neither. */
size_t rv_bytes_from(uintptr_t p);

/* ---- cuda_host_kernels.c -------------------------------------------------------------- */
/* Computes on the host, from its arguments, a kernel whose outputs the engine reads back or
 * derives lengths from (docs/limits.md, "Kernels computed on the host"); false for every
 * other kernel, which stays predicted. `values` points at each of its `count` parameters. */
bool rv_host_kernel(const char *name, int count, const uint16_t *size, const void *const *values,
                    const unsigned grid[3]);
/* Whether a kernel of this name may be one rv_host_kernel computes (its parameters decide). */
bool rv_host_kernel_named(const char *name);
/* Such a kernel captured into a graph, to compute at each replay (rv_host_kernel_replay);
 * NULL for every other kernel. */
struct rv_host_launch *rv_host_kernel_capture(const char *name, int count, const uint16_t *size,
                                              const void *const *values, const unsigned grid[3]);
void rv_host_kernel_replay(const struct rv_host_launch *h);
/* Device memory the real driver takes for itself, outside every allocator (measured on the
 * H200, docs/validation.md "KV-cache size"): a kernel's code when it first runs, executable
 * graphs' nodes, streams, the device-side system calls' set-up, and deeper thread stacks. */
void rv_driver_code(int dev, int text_bytes);
void rv_driver_graph(int dev, size_t node_bytes, bool instantiate);   /* false: destroyed */
void rv_driver_stream(int dev, bool create);                          /* false: destroyed */
void rv_driver_syscalls(int dev);            /* a kernel of a module with EIATTR_EXTERNS ran */
void rv_driver_stack(int dev, size_t from_bytes, size_t to_bytes);    /* per thread */
/* What an executable graph keeps for one node: l's kernel with param_bytes of parameters,
 * launched with programmatic dependent launch allowed (pdl), or l's copy/memset. */
size_t rv_graph_node_bytes(const struct rv_launch *l, int param_bytes, bool pdl);

/* ---- cuda_stream.c ------------------------------------------------------------ */
/* Append one operation to a stream's timeline (or to the graph it is capturing). */
CUresult rv_enqueue(CUstream s, const struct rv_launch *l, const char *name);
/* The same for a kernel with param_bytes of parameters, launched with programmatic dependent
 * launch allowed or not (what an executable graph keeps for it: rv_graph_node_bytes). */
CUresult rv_enqueue_kernel(CUstream s, const struct rv_launch *l, const char *name,
                           int param_bytes, bool pdl);
/* Block until everything queued on a stream so far is complete (virtual time). */
CUresult rv_stream_sync(CUstream s, const char *call);
/* Queue a copy/memset on `s` and, when `sync`, wait for it (blocking copies). */
CUresult rv_enqueue_transfer(CUstream s, int op, int64_t bytes, int copy_kind, bool sync,
                             const char *call);
CUresult rv_check_stream(CUstream s);
int rv_stream_device(CUstream s);
/* Cross-process operations (the NCCL shim): see cuda_device_api.h. */
#include "cuda_device_api.h"
void rv_cuda_per_thread_begin(void);
void rv_cuda_per_thread_end(void);

/* The timelines' state: cuda_stream.c's, shared with cuda_launch_queue.c. */
struct stream {
    uint32_t magic;
    int dev;
    unsigned flags;
    int prio;
    bool legacy;
    unsigned long long id;
    int64_t tail;
    int64_t *starts;             /* start times of the last launch_queue launches (a ring) */
    uint64_t launched;           /* launches queued so far */
    struct graph *capture;       /* graph being captured into, or NULL */
    struct stream *capture_origin;
    char track[48];
    struct stream *next;         /* device's stream list */
};
extern pthread_mutex_t g_tl;   /* all timeline state */
/* Stream handle -> stream, with CUDA's special handles; NULL if invalid. Holds g_tl. */
struct stream *resolve(CUstream h);

/* ---- cuda_launch_queue.c ------------------------------------------------------ */
/* Takes g_tl and resolves h, first waiting (time-warp sleep) while a stream that is not
 * capturing has no room for a launch. NULL, with g_tl released, if h is not a stream. */
struct stream *lock_for_launch(CUstream h);
/* Remember the start of the launch just queued on s. Holds g_tl. */
void queue_note(struct stream *s, int64_t start);

/* ---- cuda_dilation.c ---------------------------------------------------------- */
/* REVATI_CPU_DILATION=f: a thread that drives a GPU sleeps (f - 1) x the CPU time it used
 * since its last call here (virtual time), before it queues work or waits for the GPU. */
void dilate_cpu(void);

#define RV_MAGIC_CTX 0x52564358u
#define RV_MAGIC_FUNC 0x52564655u

#pragma GCC visibility pop
/* ...while every non-static function a cuda*.c file defines after including this header
 * is a driver entry point, exported under its exact symbol name (the build hides
 * everything else by default). */
#pragma GCC visibility push(default)

#endif
