/* Emulated CUDA driver: initialisation, devices, contexts, modules and kernels, entry-point
 * lookup. Memory is in cuda_memory.c, streams/events/launches/graphs in cuda_stream.c.
 * Every entry point not written here is a generated weak stub that logs its name once and
 * returns CUDA_ERROR_NOT_SUPPORTED (gen_cuda.py). */
#include "cuda_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

pthread_mutex_t rv_cuda_lock = PTHREAD_MUTEX_INITIALIZER;

/* The driver version we claim: CUDA 13.0, what the headers we are built from describe. */
#define RV_DRIVER_VERSION CUDA_VERSION

struct rv_named_value { const char *name; int value; };
extern const struct rv_named_value rv_device_attribute_names[];  /* generated */
extern const struct rv_named_value rv_result_names[];            /* generated */

static bool g_ready;
static int g_attr[RV_ATTR_MAX];
static bool g_attr_known[RV_ATTR_MAX];

CUresult rv_unimplemented(const char *name) {
    rv_log_once("CUDA driver entry point not implemented", name);
    return CUDA_ERROR_NOT_SUPPORTED;
}
const char *rv_intern(const char *s) {
    static struct interned { char *s; struct interned *next; } *head;
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&lock);
    struct interned *i = head;
    while (i && strcmp(i->s, s)) i = i->next;
    if (!i) {
        i = malloc(sizeof *i);
        i->s = strdup(s);
        i->next = head;
        head = i;
    }
    pthread_mutex_unlock(&lock);
    return i->s;
}
/* Called by the generated weak stubs (no cuda.h there, hence int). */
RV_EXPORT int rv_cuda_unimplemented(const char *name) { return (int)rv_unimplemented(name); }

bool rv_cuda_ready(void) { return g_ready; }
int rv_ndev(void) { return rv_node()->nvisible; }
int rv_phys(int dev) { return rv_node()->visible[dev]; }

#define CHECK_INIT() do { if (!g_ready) return CUDA_ERROR_NOT_INITIALIZED; } while (0)
#define CHECK_DEV(d) do { CHECK_INIT(); if ((d) < 0 || (d) >= rv_ndev()) return CUDA_ERROR_INVALID_DEVICE; } while (0)
#define CHECK_PTR(p) do { if (!(p)) return CUDA_ERROR_INVALID_VALUE; } while (0)

static void load_attributes(const struct rv_node *n) {
    for (int i = 0; i < n->nattrs; i++) {
        const struct rv_named_value *a = rv_device_attribute_names;
        while (a->name && strcmp(a->name, n->attrs[i].name)) a++;
        if (!a->name || a->value >= RV_ATTR_MAX) {
            rv_log(RV_WARN, "hardware spec: unknown device attribute %s", n->attrs[i].name);
            continue;
        }
        g_attr[a->value] = n->attrs[i].value;
        g_attr_known[a->value] = true;
    }
}

CUresult cuInit(unsigned int flags) {
    if (flags) return CUDA_ERROR_INVALID_VALUE;
    const struct rv_node *n = rv_node();
    if (!n->ok) {
        rv_log(RV_ERROR, "cuInit: %s", n->error);
        return CUDA_ERROR_NO_DEVICE;
    }
    pthread_mutex_lock(&rv_cuda_lock);
    if (!g_ready) load_attributes(n);
    g_ready = true;
    pthread_mutex_unlock(&rv_cuda_lock);
    return n->nvisible ? CUDA_SUCCESS : CUDA_ERROR_NO_DEVICE;
}

CUresult cuDriverGetVersion(int *v) { CHECK_PTR(v); *v = RV_DRIVER_VERSION; return CUDA_SUCCESS; }
CUresult cuDeviceGetCount(int *c) { CHECK_PTR(c); CHECK_INIT(); *c = rv_ndev(); return CUDA_SUCCESS; }
CUresult cuDeviceGet(CUdevice *d, int ordinal) { CHECK_PTR(d); CHECK_DEV(ordinal); *d = ordinal; return CUDA_SUCCESS; }
CUresult cuDeviceGetName(char *name, int len, CUdevice d) {
    CHECK_PTR(name); CHECK_DEV(d);
    snprintf(name, (size_t)len, "%s", rv_node()->name);
    return CUDA_SUCCESS;
}
CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice d) { CHECK_PTR(bytes); CHECK_DEV(d); *bytes = rv_node()->memory_bytes; return CUDA_SUCCESS; }
CUresult cuDeviceComputeCapability(int *major, int *minor, CUdevice d) {
    CHECK_DEV(d); *major = rv_node()->cc_major; *minor = rv_node()->cc_minor; return CUDA_SUCCESS;
}
CUresult cuDeviceGetUuid_v2(CUuuid *u, CUdevice d) { CHECK_PTR(u); CHECK_DEV(d); rv_gpu_uuid(rv_phys(d), (unsigned char *)u->bytes); return CUDA_SUCCESS; }
#undef cuDeviceGetUuid
CUresult cuDeviceGetUuid(CUuuid *u, CUdevice d) { return cuDeviceGetUuid_v2(u, d); }
CUresult cuDeviceGetLuid(char *luid, unsigned int *mask, CUdevice d) { CHECK_DEV(d); return CUDA_ERROR_NOT_SUPPORTED; /* Windows only */ }
CUresult cuDeviceGetPCIBusId(char *buf, int len, CUdevice d) {
    CHECK_PTR(buf); CHECK_DEV(d);
    char id[32];
    rv_gpu_pci_bus_id(rv_phys(d), id, sizeof id);
    snprintf(buf, (size_t)len, "%s", id);
    return CUDA_SUCCESS;
}
CUresult cuDeviceGetByPCIBusId(CUdevice *d, const char *id) {
    CHECK_PTR(d); CHECK_PTR(id); CHECK_INIT();
    unsigned dom = 0, bus = 0, dev = 0;
    if (sscanf(id, "%x:%x:%x", &dom, &bus, &dev) != 3 && sscanf(id, "%x:%x", &bus, &dev) != 2)
        return CUDA_ERROR_INVALID_VALUE;
    for (int i = 0; i < rv_ndev(); i++)
        if (rv_node()->pci_bus[rv_phys(i)] == (int)bus) { *d = i; return CUDA_SUCCESS; }
    return CUDA_ERROR_INVALID_DEVICE;
}

int rv_attr(int a, int dev, bool *known) {
    const struct rv_node *n = rv_node();
    *known = true;
    switch (a) {
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID: return n->pci_bus[rv_phys(dev)];
    case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID: return 0;
    case CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID: return 0;
    case CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD_GROUP_ID: return rv_phys(dev);
    default:
        if (a >= 0 && a < RV_ATTR_MAX && g_attr_known[a]) return g_attr[a];
        *known = false;
        return 0;
    }
}
CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute a, CUdevice d) {
    CHECK_PTR(pi); CHECK_DEV(d);
    bool known;
    int v = rv_attr((int)a, d, &known);
    if (!known) {
        char what[48];
        snprintf(what, sizeof what, "attribute %d", (int)a);
        rv_log_once("cuDeviceGetAttribute: not in the hardware spec", rv_intern(what));
        return CUDA_ERROR_INVALID_VALUE;
    }
    *pi = v;
    return CUDA_SUCCESS;
}
CUresult cuDeviceGetProperties(CUdevprop *p, CUdevice d) {
    CHECK_PTR(p); CHECK_DEV(d);
    bool k;
    memset(p, 0, sizeof *p);
    p->maxThreadsPerBlock = rv_attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, d, &k);
    p->maxThreadsDim[0] = rv_attr(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X, d, &k);
    p->maxThreadsDim[1] = rv_attr(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y, d, &k);
    p->maxThreadsDim[2] = rv_attr(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z, d, &k);
    p->maxGridSize[0] = rv_attr(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X, d, &k);
    p->maxGridSize[1] = rv_attr(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y, d, &k);
    p->maxGridSize[2] = rv_attr(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z, d, &k);
    p->sharedMemPerBlock = rv_attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, d, &k);
    p->totalConstantMemory = rv_attr(CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY, d, &k);
    p->SIMDWidth = rv_attr(CU_DEVICE_ATTRIBUTE_WARP_SIZE, d, &k);
    p->memPitch = rv_attr(CU_DEVICE_ATTRIBUTE_MAX_PITCH, d, &k);
    p->regsPerBlock = rv_attr(CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK, d, &k);
    p->clockRate = rv_attr(CU_DEVICE_ATTRIBUTE_CLOCK_RATE, d, &k);
    p->textureAlign = rv_attr(CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT, d, &k);
    return CUDA_SUCCESS;
}
/* One node, NVLink all-to-all: every pair of distinct GPUs is peer-capable. */
CUresult cuDeviceCanAccessPeer(int *can, CUdevice a, CUdevice b) {
    CHECK_PTR(can); CHECK_DEV(a); CHECK_DEV(b); *can = a != b; return CUDA_SUCCESS;
}
CUresult cuDeviceGetP2PAttribute(int *v, CUdevice_P2PAttribute attr, CUdevice a, CUdevice b) {
    CHECK_PTR(v); CHECK_DEV(a); CHECK_DEV(b);
    if (a == b) return CUDA_ERROR_INVALID_DEVICE;
    switch (attr) {
    case CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK: *v = 0; break;
    case CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED:
    case CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED:
    case CU_DEVICE_P2P_ATTRIBUTE_CUDA_ARRAY_ACCESS_SUPPORTED: *v = 1; break;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}
CUresult cuDeviceGetExecAffinitySupport(int *pi, CUexecAffinityType t, CUdevice d) { CHECK_PTR(pi); CHECK_DEV(d); *pi = 0; return CUDA_SUCCESS; }

/* ---- contexts ------------------------------------------------------------------ */
static struct rv_ctx g_primary[RV_MAX_GPUS];
static unsigned long long g_next_ctx_id = 1;
#define CTX_STACK 32
static __thread struct rv_ctx *t_ctx[CTX_STACK];
static __thread int t_depth;

struct rv_ctx *rv_primary_ctx(int dev) {
    struct rv_ctx *c = &g_primary[dev];
    pthread_mutex_lock(&rv_cuda_lock);
    if (c->magic != RV_MAGIC_CTX) {
        c->dev = dev;
        c->primary = true;
        c->id = g_next_ctx_id++;
        /* the real driver's defaults, as cuCtxGetLimit reports them on Hopper */
        c->limits[CU_LIMIT_STACK_SIZE] = 1024;
        c->limits[CU_LIMIT_PRINTF_FIFO_SIZE] = 1 << 20;
        c->limits[CU_LIMIT_MALLOC_HEAP_SIZE] = 8 << 20;
        c->limits[CU_LIMIT_DEV_RUNTIME_SYNC_DEPTH] = 2;
        c->limits[CU_LIMIT_DEV_RUNTIME_PENDING_LAUNCH_COUNT] = 2048;
        c->limits[CU_LIMIT_MAX_L2_FETCH_GRANULARITY] = 64;
        c->limits[CU_LIMIT_PERSISTING_L2_CACHE_SIZE] = 0;
        c->magic = RV_MAGIC_CTX;
    }
    pthread_mutex_unlock(&rv_cuda_lock);
    return c;
}
struct rv_ctx *rv_current_ctx(void) { return t_depth ? t_ctx[t_depth - 1] : NULL; }
int rv_current_dev(void) { struct rv_ctx *c = rv_current_ctx(); return c ? c->dev : 0; }
static struct rv_ctx *as_ctx(CUcontext c) {
    struct rv_ctx *x = c ? (struct rv_ctx *)c : rv_current_ctx();
    return x && x->magic == RV_MAGIC_CTX ? x : NULL;
}

CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice d) {
    CHECK_PTR(pctx); CHECK_DEV(d);
    struct rv_ctx *c = rv_primary_ctx(d);
    __atomic_add_fetch(&c->refcount, 1, __ATOMIC_SEQ_CST);
    *pctx = (CUcontext)c;
    return CUDA_SUCCESS;
}
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d) {
    CHECK_DEV(d);
    struct rv_ctx *c = rv_primary_ctx(d);
    if (__atomic_load_n(&c->refcount, __ATOMIC_SEQ_CST) <= 0) return CUDA_ERROR_INVALID_CONTEXT;
    __atomic_sub_fetch(&c->refcount, 1, __ATOMIC_SEQ_CST);
    return CUDA_SUCCESS;
}
#undef cuDevicePrimaryCtxRelease
CUresult cuDevicePrimaryCtxRelease(CUdevice d) { return cuDevicePrimaryCtxRelease_v2(d); }
CUresult cuDevicePrimaryCtxReset_v2(CUdevice d) { CHECK_DEV(d); return CUDA_SUCCESS; }
CUresult cuDevicePrimaryCtxSetFlags_v2(CUdevice d, unsigned f) { CHECK_DEV(d); rv_primary_ctx(d)->flags = f; return CUDA_SUCCESS; }
CUresult cuDevicePrimaryCtxGetState(CUdevice d, unsigned *flags, int *active) {
    CHECK_DEV(d);
    struct rv_ctx *c = rv_primary_ctx(d);
    if (flags) *flags = c->flags;
    if (active) *active = c->refcount > 0;
    return CUDA_SUCCESS;
}
CUresult cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *params, unsigned flags, CUdevice d) {
    CHECK_PTR(pctx); CHECK_DEV(d);
    if (t_depth >= CTX_STACK) return CUDA_ERROR_OUT_OF_MEMORY;
    struct rv_ctx *c = calloc(1, sizeof *c);
    *c = *rv_primary_ctx(d);
    c->primary = false;
    c->flags = flags;
    c->refcount = 1;
    pthread_mutex_lock(&rv_cuda_lock);
    c->id = g_next_ctx_id++;
    pthread_mutex_unlock(&rv_cuda_lock);
    t_ctx[t_depth++] = c;
    *pctx = (CUcontext)c;
    return CUDA_SUCCESS;
}
CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned flags, CUdevice d) { return cuCtxCreate_v4(pctx, NULL, flags, d); }
CUresult cuCtxDestroy_v2(CUcontext c) {
    struct rv_ctx *x = as_ctx(c);
    if (!c || !x || x->primary) return CUDA_ERROR_INVALID_CONTEXT;
    for (int i = 0; i < t_depth; i++)
        if (t_ctx[i] == x) { memmove(&t_ctx[i], &t_ctx[i + 1], (size_t)(t_depth - i - 1) * sizeof *t_ctx); t_depth--; i--; }
    x->magic = 0;  /* kept allocated: stale handles must fail, not crash */
    return CUDA_SUCCESS;
}
CUresult cuCtxGetCurrent(CUcontext *pctx) { CHECK_PTR(pctx); *pctx = (CUcontext)rv_current_ctx(); return CUDA_SUCCESS; }
CUresult cuCtxSetCurrent(CUcontext c) {
    if (!c) { if (t_depth) t_depth--; return CUDA_SUCCESS; }
    if (!as_ctx(c)) return CUDA_ERROR_INVALID_CONTEXT;
    if (t_depth) t_ctx[t_depth - 1] = (struct rv_ctx *)c;
    else t_ctx[t_depth++] = (struct rv_ctx *)c;
    return CUDA_SUCCESS;
}
CUresult cuCtxPushCurrent_v2(CUcontext c) {
    if (!as_ctx(c) || !c) return CUDA_ERROR_INVALID_CONTEXT;
    if (t_depth >= CTX_STACK) return CUDA_ERROR_OUT_OF_MEMORY;
    t_ctx[t_depth++] = (struct rv_ctx *)c;
    return CUDA_SUCCESS;
}
CUresult cuCtxPopCurrent_v2(CUcontext *pc) {
    if (!t_depth) return CUDA_ERROR_INVALID_CONTEXT;
    struct rv_ctx *c = t_ctx[--t_depth];
    if (pc) *pc = (CUcontext)c;
    return CUDA_SUCCESS;
}
CUresult cuCtxGetDevice(CUdevice *d) {
    CHECK_PTR(d);
    struct rv_ctx *c = rv_current_ctx();
    if (!c) return CUDA_ERROR_INVALID_CONTEXT;
    *d = c->dev;
    return CUDA_SUCCESS;
}
CUresult cuCtxGetDevice_v2(CUdevice *d, CUcontext cx) {
    CHECK_PTR(d);
    struct rv_ctx *c = as_ctx(cx);
    if (!c) return CUDA_ERROR_INVALID_CONTEXT;
    *d = c->dev;
    return CUDA_SUCCESS;
}
CUresult cuCtxGetFlags(unsigned *f) { struct rv_ctx *c = rv_current_ctx(); if (!c) return CUDA_ERROR_INVALID_CONTEXT; *f = c->flags; return CUDA_SUCCESS; }
CUresult cuCtxSetFlags(unsigned f) { struct rv_ctx *c = rv_current_ctx(); if (!c) return CUDA_ERROR_INVALID_CONTEXT; c->flags = f; return CUDA_SUCCESS; }
CUresult cuCtxGetId(CUcontext cx, unsigned long long *id) { struct rv_ctx *c = as_ctx(cx); if (!c) return CUDA_ERROR_INVALID_CONTEXT; *id = c->id; return CUDA_SUCCESS; }
CUresult cuCtxGetApiVersion(CUcontext cx, unsigned *v) { if (!as_ctx(cx)) return CUDA_ERROR_INVALID_CONTEXT; *v = 3020; return CUDA_SUCCESS; }
CUresult cuCtxGetLimit(size_t *v, CUlimit l) {
    struct rv_ctx *c = rv_current_ctx();
    if (!c) return CUDA_ERROR_INVALID_CONTEXT;
    if ((unsigned)l >= 16) return CUDA_ERROR_UNSUPPORTED_LIMIT;
    *v = c->limits[l];
    return CUDA_SUCCESS;
}
CUresult cuCtxSetLimit(CUlimit l, size_t v) {
    struct rv_ctx *c = rv_current_ctx();
    if (!c) return CUDA_ERROR_INVALID_CONTEXT;
    if ((unsigned)l >= 16) return CUDA_ERROR_UNSUPPORTED_LIMIT;
    if (l == CU_LIMIT_STACK_SIZE) rv_driver_stack(c->dev, c->limits[l], v);
    __atomic_store_n(&c->limits[l], v, __ATOMIC_RELEASE);   /* read without the lock at launch */
    return CUDA_SUCCESS;
}
CUresult cuCtxGetCacheConfig(CUfunc_cache *p) { *p = CU_FUNC_CACHE_PREFER_NONE; return CUDA_SUCCESS; }
CUresult cuCtxSetCacheConfig(CUfunc_cache p) { return CUDA_SUCCESS; /* a hint; no observable effect */ }
CUresult cuCtxGetSharedMemConfig(CUsharedconfig *p) { *p = CU_SHARED_MEM_CONFIG_FOUR_BYTE_BANK_SIZE; return CUDA_SUCCESS; }
CUresult cuCtxSetSharedMemConfig(CUsharedconfig p) { return CUDA_SUCCESS; /* a hint */ }
/* Hopper: priorities 0 (least) .. -5 (greatest) */
CUresult cuCtxGetStreamPriorityRange(int *least, int *greatest) { if (least) *least = 0; if (greatest) *greatest = -5; return CUDA_SUCCESS; }
CUresult cuCtxResetPersistingL2Cache(void) { return CUDA_SUCCESS; }
CUresult cuCtxEnablePeerAccess(CUcontext peer, unsigned f) { return as_ctx(peer) && peer ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT; }
CUresult cuCtxDisablePeerAccess(CUcontext peer) { return as_ctx(peer) && peer ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT; }

/* ---- modules, libraries, kernels ------------------------------------------------
 * Images are not parsed: a function handle is its mangled name, which is what the
 * predictor keys on. Kernel attributes are Hopper-typical values until the cubin's
 * .nv.info is read (libraries use them for occupancy choices, not for correctness). */
#define RV_MAGIC_MOD 0x52564d44u
struct rv_module {
    uint32_t magic;
    struct rv_func *funcs;
    struct rv_global *globals;
    struct rv_kernel_params *params;   /* from this GPU's cubin, or NULL */
};
struct rv_global { char *name; CUdeviceptr p; size_t size; struct rv_global *next; };
#define RV_GLOBAL_BYTES 65536  /* size unknown without parsing the cubin */

static struct rv_module *new_module(const void *image) {
    struct rv_module *m = calloc(1, sizeof *m);
    m->magic = RV_MAGIC_MOD;
    m->params = rv_cubin_params(image);
    return m;
}
static struct rv_module *as_mod(void *h) {
    struct rv_module *m = h;
    return m && m->magic == RV_MAGIC_MOD ? m : NULL;
}
static struct rv_func *as_func(void *h) {
    struct rv_func *f = h;
    return f && f->magic == RV_MAGIC_FUNC ? f : NULL;
}
const char *rv_func_name(CUfunction f) { struct rv_func *x = as_func(f); return x ? x->name : "?"; }
uint64_t rv_func_name_hash(CUfunction f) { struct rv_func *x = as_func(f); return x ? x->name_hash : 0; }

/* CUDA_MODULE_LOADING: LAZY (the default since CUDA 12.2) loads each kernel into a context
 * when it is first launched, EAGER with its module. */
static bool g_eager;
static pthread_once_t g_loading_once = PTHREAD_ONCE_INIT;
static void read_loading(void) {
    const char *v = getenv("CUDA_MODULE_LOADING");
    g_eager = v && !strcasecmp(v, "EAGER");
}
static bool eager(void) {
    pthread_once(&g_loading_once, read_loading);
    return g_eager;
}
bool rv_func_load(CUfunction f, int dev) {
    struct rv_func *x = as_func(f);
    if (!x || eager()) return false;
    uint32_t bit = 1u << dev;
    return !(__atomic_fetch_or(&x->loaded_on, bit, __ATOMIC_ACQ_REL) & bit);
}
bool rv_func_is_loaded(CUfunction f, int dev) {
    struct rv_func *x = as_func(f);
    return x && (eager() || (__atomic_load_n(&x->loaded_on, __ATOMIC_ACQUIRE) & (1u << dev)));
}

/* What the driver allocates when a kernel runs (rv_driver_*): its code the first time (and
 * the device-side system calls' set-up for the first kernel of a module that makes any), and
 * deeper thread stacks for a kernel whose frame exceeds the context's stack limit (the
 * driver raises the limit as needed, CUDA's cudaDeviceSetLimit documentation). */
static void charge_driver_memory(struct rv_func *x, const struct rv_kernel_params *k) {
    struct rv_ctx *c = rv_current_ctx();
    if (!c) return;
    size_t *limit = &c->limits[CU_LIMIT_STACK_SIZE];
    /* Every launch passes here, and after a kernel's first run nothing changes unless its
     * frame outgrows the stack limit: that common case reads two atomics, no lock. */
    if (__atomic_load_n(&x->code_loaded, __ATOMIC_ACQUIRE) &&
        (size_t)k->local_bytes <= __atomic_load_n(limit, __ATOMIC_ACQUIRE))
        return;
    pthread_mutex_lock(&rv_cuda_lock);
    bool first = !x->code_loaded;
    __atomic_store_n(&x->code_loaded, true, __ATOMIC_RELEASE);
    size_t stack = *limit;
    bool deeper = k->local_bytes > 0 && (size_t)k->local_bytes > stack;
    if (deeper) __atomic_store_n(limit, (size_t)k->local_bytes, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&rv_cuda_lock);
    if (first) rv_driver_code(c->dev, k->text_bytes);
    if (first && k->module_syscalls) rv_driver_syscalls(c->dev);
    if (deeper) rv_driver_stack(c->dev, stack, (size_t)k->local_bytes);
}

/* Bytes of a kernel's parameters (what a graph's kernel node keeps), 0 when unknown. */
int rv_func_param_bytes(CUfunction f) {
    struct rv_func *x = as_func(f);
    return x && x->params && x->params->count >= 0 ? x->params->param_bytes : 0;
}

/* Where each parameter's bytes are (cuLaunchKernel's kernelParams, or extra: CU_LAUNCH_PARAM_
 * BUFFER_POINTER, buffer, CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_END, the buffer
 * holding the parameters at the cubin's offsets); false when they cannot be found. */
static bool param_values(const struct rv_kernel_params *k, void **params, void **extra,
                         const void **values) {
    if (params) {
        for (int i = 0; i < k->count; i++) values[i] = params[i];
        return true;
    }
    const char *buf = NULL;
    size_t len = 0;
    for (void **e = extra; e && *e != CU_LAUNCH_PARAM_END; e += 2) {
        if (*e == CU_LAUNCH_PARAM_BUFFER_POINTER) buf = e[1];
        else if (*e == CU_LAUNCH_PARAM_BUFFER_SIZE) len = *(size_t *)e[1];
    }
    if (!buf && k->count > 0) return false;
    for (int i = 0; i < k->count; i++) {
        if ((size_t)k->offset[i] + k->size[i] > len) return false;
        values[i] = buf + k->offset[i];
    }
    return true;
}

void rv_func_launch_features(CUfunction f, void **params, void **extra, struct rv_launch *l) {
    struct rv_func *x = as_func(f);
    const struct rv_kernel_params *k = x ? x->params : NULL;
    if (k) l->shared_bytes += (uint32_t)k->static_smem;   /* CUPTI reports static + dynamic */
    if (k && x) charge_driver_memory(x, k);
    if (l->op != RV_OP_KERNEL) return;
    l->arg_max = l->arg_sum = -1;
    if (!k || k->count < 0) return;
    const void *values[RV_MAX_PARAMS];
    if (!param_values(k, params, extra, values)) return;
    rv_arg_sizes(k->arg_layout, l->grid, l->block, k->count, k->size, values, &l->arg_max,
                 &l->arg_sum);
    rv_moe_dims(k->arg_layout, k->count, k->size, values, &l->m, &l->n, &l->k);
}

bool rv_func_host_kernel(CUfunction f, void **params, void **extra, const unsigned grid[3],
                         bool capture, struct rv_host_launch **captured) {
    struct rv_func *x = as_func(f);
    const struct rv_kernel_params *k = x ? x->params : NULL;
    const void *values[RV_MAX_PARAMS];
    if (!x || !x->host_named || !k || k->count < 0 || !param_values(k, params, extra, values))
        return false;
    if (!capture) return rv_host_kernel(rv_func_name(f), k->count, k->size, values, grid);
    *captured = rv_host_kernel_capture(rv_func_name(f), k->count, k->size, values, grid);
    return *captured != NULL;
}

int rv_func_device_args(CUfunction f, void **params, void **extra, uintptr_t *out, int max) {
    struct rv_func *x = as_func(f);
    const struct rv_kernel_params *k = x ? x->params : NULL;
    const void *values[RV_MAX_PARAMS];
    if (!k || k->count < 0 || !param_values(k, params, extra, values)) return 0;
    int n = 0;
    /* pointers are 8-byte aligned, also inside structures passed by value (a ReduceOp's
     * dst, a TensorIterator's data array), and a parameter starts at its own alignment */
    for (int i = 0; i < k->count; i++)
        for (size_t at = 0; at + sizeof(uintptr_t) <= k->size[i] && n < max; at += sizeof(uintptr_t)) {
            uintptr_t p;
            memcpy(&p, (const char *)values[i] + at, sizeof p);
            if (p && rv_ptr_device(p) >= 0) out[n++] = p;
        }
    return n;
}

/* The attributes the real driver derives from a kernel's resource usage. Hopper: 64K
 * registers a block, allocated per warp in units of 256; 1024 threads a block at most. */
static void set_resource_attrs(int *attrs, const struct rv_kernel_params *k) {
    int max = 1024;
    if (k->regs >= 0) attrs[CU_FUNC_ATTRIBUTE_NUM_REGS] = k->regs;
    if (k->regs > 0) {
        int per_warp = (k->regs * 32 + 255) / 256 * 256;
        if (65536 / per_warp * 32 < max) max = 65536 / per_warp * 32;
    }
    if (k->max_threads > 0 && k->max_threads < max) max = k->max_threads;
    attrs[CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK] = max;
    attrs[CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES] = k->static_smem;
    attrs[CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES] = k->local_bytes;
    /* without opting in, static and dynamic shared memory share 48 KiB */
    attrs[CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES] = 49152 - k->static_smem;
}

static struct rv_func *get_func(struct rv_module *m, const char *name) {
    pthread_mutex_lock(&rv_cuda_lock);
    struct rv_func *f = m->funcs;
    while (f && strcmp(f->name, name)) f = f->next;
    if (!f) {
        f = calloc(1, sizeof *f);
        f->magic = RV_MAGIC_FUNC;
        f->name = strdup(name);
        f->name_hash = rv_kernel_hash(name);
        f->mod = m;
        f->host_named = rv_host_kernel_named(name);   /* not searched again at each launch */
        f->attrs[CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK] = 1024;
        f->attrs[CU_FUNC_ATTRIBUTE_NUM_REGS] = 32;
        f->attrs[CU_FUNC_ATTRIBUTE_PTX_VERSION] = 90;
        f->attrs[CU_FUNC_ATTRIBUTE_BINARY_VERSION] = 90;
        f->attrs[CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES] = 49152;
        f->attrs[CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT] = -1;
        for (f->params = m->params; f->params && strcmp(f->params->kernel, name);)
            f->params = f->params->next;
        if (f->params) set_resource_attrs(f->attrs, f->params);
        f->next = m->funcs;
        m->funcs = f;
    }
    pthread_mutex_unlock(&rv_cuda_lock);
    return f;
}
static CUresult get_global(CUdeviceptr *dp, size_t *bytes, struct rv_module *m, const char *name) {
    if (!m || !name) return CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_lock(&rv_cuda_lock);
    struct rv_global *g = m->globals;
    while (g && strcmp(g->name, name)) g = g->next;
    pthread_mutex_unlock(&rv_cuda_lock);
    if (!g) {
        g = calloc(1, sizeof *g);
        g->name = strdup(name);
        g->size = RV_GLOBAL_BYTES;
        CUresult r = rv_dev_alloc(&g->p, g->size, rv_current_dev());
        if (r) { free(g->name); free(g); return r; }
        pthread_mutex_lock(&rv_cuda_lock);
        g->next = m->globals;
        m->globals = g;
        pthread_mutex_unlock(&rv_cuda_lock);
    }
    if (dp) *dp = g->p;
    if (bytes) *bytes = g->size;
    return CUDA_SUCCESS;
}

CUresult cuModuleLoadData(CUmodule *pm, const void *image) { CHECK_PTR(pm); CHECK_PTR(image); *pm = (CUmodule)new_module(image); return CUDA_SUCCESS; }
CUresult cuModuleLoadDataEx(CUmodule *pm, const void *image, unsigned n, CUjit_option *o, void **v) { return cuModuleLoadData(pm, image); }
CUresult cuModuleLoadFatBinary(CUmodule *pm, const void *image) { return cuModuleLoadData(pm, image); }
static void *read_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = n > 0 ? calloc(1, (size_t)n + 1) : NULL;
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) { free(buf); buf = NULL; }
    fclose(f);
    return buf;
}
CUresult cuModuleLoad(CUmodule *pm, const char *path) {
    CHECK_PTR(pm); CHECK_PTR(path);
    void *image = read_file(path);
    if (!image) return CUDA_ERROR_FILE_NOT_FOUND;
    CUresult r = cuModuleLoadData(pm, image);
    free(image);   /* the module keeps its own copy of the cubin */
    return r;
}
CUresult cuModuleUnload(CUmodule m) { return as_mod(m) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE; }
CUresult cuModuleGetLoadingMode(CUmoduleLoadingMode *mode) { CHECK_PTR(mode); *mode = eager() ? CU_MODULE_EAGER_LOADING : CU_MODULE_LAZY_LOADING; return CUDA_SUCCESS; }
CUresult cuModuleGetFunction(CUfunction *pf, CUmodule m, const char *name) {
    CHECK_PTR(pf); CHECK_PTR(name);
    if (!as_mod(m)) return CUDA_ERROR_INVALID_HANDLE;
    *pf = (CUfunction)get_func(as_mod(m), name);
    return CUDA_SUCCESS;
}
CUresult cuModuleGetGlobal_v2(CUdeviceptr *dp, size_t *bytes, CUmodule m, const char *name) { return get_global(dp, bytes, as_mod(m), name); }
CUresult cuLibraryLoadData(CUlibrary *pl, const void *code, CUjit_option *jo, void **jv, unsigned nj,
                           CUlibraryOption *lo, void **lv, unsigned nl) {
    CHECK_PTR(pl); CHECK_PTR(code); *pl = (CUlibrary)new_module(code); return CUDA_SUCCESS;
}
CUresult cuLibraryLoadFromFile(CUlibrary *pl, const char *path, CUjit_option *jo, void **jv, unsigned nj,
                               CUlibraryOption *lo, void **lv, unsigned nl) {
    CHECK_PTR(pl); CHECK_PTR(path);
    void *image = read_file(path);
    if (!image) return CUDA_ERROR_FILE_NOT_FOUND;
    CUresult r = cuLibraryLoadData(pl, image, jo, jv, nj, lo, lv, nl);
    free(image);
    return r;
}
CUresult cuLibraryUnload(CUlibrary l) { return as_mod(l) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE; }
CUresult cuLibraryGetKernel(CUkernel *pk, CUlibrary l, const char *name) {
    CHECK_PTR(pk); CHECK_PTR(name);
    if (!as_mod(l)) return CUDA_ERROR_INVALID_HANDLE;
    *pk = (CUkernel)get_func(as_mod(l), name);
    return CUDA_SUCCESS;
}
CUresult cuLibraryGetModule(CUmodule *pm, CUlibrary l) { if (!as_mod(l)) return CUDA_ERROR_INVALID_HANDLE; *pm = (CUmodule)l; return CUDA_SUCCESS; }
CUresult cuLibraryGetGlobal(CUdeviceptr *dp, size_t *n, CUlibrary l, const char *name) { return get_global(dp, n, as_mod(l), name); }
CUresult cuLibraryGetManaged(CUdeviceptr *dp, size_t *n, CUlibrary l, const char *name) { return get_global(dp, n, as_mod(l), name); }
CUresult cuKernelGetFunction(CUfunction *pf, CUkernel k) { if (!as_func(k)) return CUDA_ERROR_INVALID_HANDLE; *pf = (CUfunction)k; return CUDA_SUCCESS; }
CUresult cuKernelGetLibrary(CUlibrary *pl, CUkernel k) { if (!as_func(k)) return CUDA_ERROR_INVALID_HANDLE; *pl = (CUlibrary)as_func(k)->mod; return CUDA_SUCCESS; }
CUresult cuKernelGetName(const char **n, CUkernel k) { if (!as_func(k)) return CUDA_ERROR_INVALID_HANDLE; *n = as_func(k)->name; return CUDA_SUCCESS; }
CUresult cuFuncGetName(const char **n, CUfunction f) { if (!as_func(f)) return CUDA_ERROR_INVALID_HANDLE; *n = as_func(f)->name; return CUDA_SUCCESS; }
CUresult cuFuncGetModule(CUmodule *m, CUfunction f) { if (!as_func(f)) return CUDA_ERROR_INVALID_HANDLE; *m = (CUmodule)as_func(f)->mod; return CUDA_SUCCESS; }
CUresult cuFuncLoad(CUfunction f) {
    if (!as_func(f)) return CUDA_ERROR_INVALID_HANDLE;
    rv_cuda_lazy_load(f, NULL);
    return CUDA_SUCCESS;
}
CUresult cuFuncIsLoaded(CUfunctionLoadingState *st, CUfunction f) {
    CHECK_PTR(st);
    if (!as_func(f)) return CUDA_ERROR_INVALID_HANDLE;
    *st = rv_func_is_loaded(f, rv_current_dev()) ? CU_FUNCTION_LOADING_STATE_LOADED
                                                 : CU_FUNCTION_LOADING_STATE_UNLOADED;
    return CUDA_SUCCESS;
}
CUresult cuFuncGetAttribute(int *pi, CUfunction_attribute a, CUfunction f) {
    struct rv_func *x = as_func(f);
    if (!x) return CUDA_ERROR_INVALID_HANDLE;
    if ((unsigned)a >= 32) return CUDA_ERROR_INVALID_VALUE;
    *pi = x->attrs[a];
    return CUDA_SUCCESS;
}
CUresult cuFuncSetAttribute(CUfunction f, CUfunction_attribute a, int v) {
    struct rv_func *x = as_func(f);
    if (!x) return CUDA_ERROR_INVALID_HANDLE;
    if ((unsigned)a >= 32) return CUDA_ERROR_INVALID_VALUE;
    bool k;
    if (a == CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES &&
        v > rv_attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, rv_current_dev(), &k))
        return CUDA_ERROR_INVALID_VALUE;
    x->attrs[a] = v;
    return CUDA_SUCCESS;
}
/* Parameter layout from the cubin's .nv.info (EIATTR_KPARAM_INFO). */
CUresult cuFuncGetParamInfo(CUfunction f, size_t index, size_t *offset, size_t *size) {
    struct rv_func *x = as_func(f);
    if (!x) return CUDA_ERROR_INVALID_HANDLE;
    if (!x->params || x->params->count < 0)
        return rv_unimplemented("cuFuncGetParamInfo (no cubin for this GPU)");
    if (index >= (size_t)x->params->count || !offset || !size) return CUDA_ERROR_INVALID_VALUE;
    *offset = x->params->offset[index];
    *size = x->params->size[index];
    return CUDA_SUCCESS;
}
CUresult cuKernelGetParamInfo(CUkernel k, size_t index, size_t *offset, size_t *size) {
    return cuFuncGetParamInfo((CUfunction)k, index, offset, size);
}
CUresult cuKernelGetAttribute(int *pi, CUfunction_attribute a, CUkernel k, CUdevice d) { return cuFuncGetAttribute(pi, a, (CUfunction)k); }
CUresult cuKernelSetAttribute(CUfunction_attribute a, int v, CUkernel k, CUdevice d) { return cuFuncSetAttribute((CUfunction)k, a, v); }
CUresult cuKernelSetCacheConfig(CUkernel k, CUfunc_cache c, CUdevice d) { return as_func(k) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE; }
CUresult cuFuncSetCacheConfig(CUfunction f, CUfunc_cache c) { return as_func(f) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE; }
CUresult cuFuncSetSharedMemConfig(CUfunction f, CUsharedconfig c) { return as_func(f) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE; }

/* ---- occupancy: from the spec's per-SM limits and the kernel's attributes ----------- */
static int blocks_per_sm(struct rv_func *f, int block, size_t dyn_smem) {
    bool k;
    int dev = rv_current_dev();
    int threads = rv_attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, dev, &k);
    int max_blocks = rv_attr(CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR, dev, &k);
    int regs = rv_attr(CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR, dev, &k);
    int smem = rv_attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, dev, &k);
    int reserved = rv_attr(CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK, dev, &k);
    if (block <= 0) return 0;
    int n = threads / block;
    if (n > max_blocks) n = max_blocks;
    int r = f ? f->attrs[CU_FUNC_ATTRIBUTE_NUM_REGS] * block : 0;
    if (r > 0 && regs / r < n) n = regs / r;
    size_t s = dyn_smem + (size_t)(f ? f->attrs[CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES] : 0) + (size_t)reserved;
    if ((size_t)smem / s < (size_t)n) n = (int)((size_t)smem / s);
    return n;
}
CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int *nb, CUfunction f, int block, size_t dyn) {
    CHECK_PTR(nb); if (!as_func(f)) return CUDA_ERROR_INVALID_HANDLE;
    *nb = blocks_per_sm(as_func(f), block, dyn);
    return CUDA_SUCCESS;
}
CUresult cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int *nb, CUfunction f, int block, size_t dyn, unsigned fl) {
    return cuOccupancyMaxActiveBlocksPerMultiprocessor(nb, f, block, dyn);
}
CUresult cuOccupancyMaxPotentialBlockSize(int *min_grid, int *block, CUfunction f, CUoccupancyB2DSize to_smem, size_t dyn, int limit) {
    CHECK_PTR(min_grid); CHECK_PTR(block);
    struct rv_func *x = as_func(f);
    if (!x) return CUDA_ERROR_INVALID_HANDLE;
    int best = 0, best_block = 32, max_block = x->attrs[CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK];
    if (limit > 0 && limit < max_block) max_block = limit;
    for (int b = 32; b <= max_block; b += 32) {
        int active = blocks_per_sm(x, b, to_smem ? to_smem(b) : dyn) * b;
        if (active >= best) { best = active; best_block = b; }
    }
    *block = best_block;
    *min_grid = rv_node()->sm_count * blocks_per_sm(x, best_block, to_smem ? to_smem(best_block) : dyn);
    return CUDA_SUCCESS;
}
CUresult cuOccupancyMaxPotentialBlockSizeWithFlags(int *g, int *b, CUfunction f, CUoccupancyB2DSize s, size_t dyn, int lim, unsigned fl) {
    return cuOccupancyMaxPotentialBlockSize(g, b, f, s, dyn, lim);
}
CUresult cuOccupancyAvailableDynamicSMemPerBlock(size_t *out, CUfunction f, int nblocks, int block) {
    CHECK_PTR(out); if (!as_func(f) || nblocks <= 0) return CUDA_ERROR_INVALID_VALUE;
    bool k;
    int dev = rv_current_dev();
    size_t per_sm = (size_t)rv_attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, dev, &k);
    size_t optin = (size_t)rv_attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, dev, &k);
    size_t reserved = (size_t)rv_attr(CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK, dev, &k);
    size_t v = per_sm / (size_t)nblocks;
    v = v > reserved ? v - reserved : 0;
    *out = v < optin ? v : optin;
    return CUDA_SUCCESS;
}
/* Hopper: portable cluster size 8; one cluster per GPC-sized group of SMs */
CUresult cuOccupancyMaxPotentialClusterSize(int *cs, CUfunction f, const CUlaunchConfig *c) { CHECK_PTR(cs); *cs = 8; return CUDA_SUCCESS; }
CUresult cuOccupancyMaxActiveClusters(int *nc, CUfunction f, const CUlaunchConfig *c) {
    CHECK_PTR(nc); CHECK_PTR(c);
    unsigned size = 1;
    for (unsigned i = 0; i < c->numAttrs; i++)
        if (c->attrs[i].id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION)
            size = c->attrs[i].value.clusterDim.x * c->attrs[i].value.clusterDim.y * c->attrs[i].value.clusterDim.z;
    int per_sm = blocks_per_sm(as_func(f), (int)(c->blockDimX * c->blockDimY * c->blockDimZ), c->sharedMemBytes);
    *nc = size ? rv_node()->sm_count * (per_sm ? per_sm : 1) / (int)size : 0;
    return CUDA_SUCCESS;
}

/* TMA descriptors are opaque 128-byte blobs only kernels read; kernels never run here,
 * so the descriptor only needs to exist (and carry its address for replacements). */
CUresult cuTensorMapEncodeTiled(CUtensorMap *m, CUtensorMapDataType t, cuuint32_t rank, void *addr,
                                const cuuint64_t *dims, const cuuint64_t *strides, const cuuint32_t *box,
                                const cuuint32_t *elem, CUtensorMapInterleave il, CUtensorMapSwizzle sw,
                                CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill oob) {
    CHECK_PTR(m); if (rank == 0 || rank > 5) return CUDA_ERROR_INVALID_VALUE;
    memset(m, 0, sizeof *m);
    memcpy(m, &addr, sizeof addr);
    return CUDA_SUCCESS;
}
CUresult cuTensorMapEncodeIm2col(CUtensorMap *m, CUtensorMapDataType t, cuuint32_t rank, void *addr,
                                 const cuuint64_t *dims, const cuuint64_t *strides, const int *lo, const int *hi,
                                 cuuint32_t ch, cuuint32_t px, const cuuint32_t *elem, CUtensorMapInterleave il,
                                 CUtensorMapSwizzle sw, CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill oob) {
    CHECK_PTR(m); if (rank < 3 || rank > 5) return CUDA_ERROR_INVALID_VALUE;
    memset(m, 0, sizeof *m);
    memcpy(m, &addr, sizeof addr);
    return CUDA_SUCCESS;
}
CUresult cuTensorMapReplaceAddress(CUtensorMap *m, void *addr) { CHECK_PTR(m); memcpy(m, &addr, sizeof addr); return CUDA_SUCCESS; }

/* ---- errors, logs, profiler -------------------------------------------------------- */
CUresult cuGetErrorName(CUresult e, const char **s) {
    CHECK_PTR(s);
    for (const struct rv_named_value *r = rv_result_names; r->name; r++)
        if (r->value == (int)e) { *s = r->name; return CUDA_SUCCESS; }
    *s = NULL;
    return CUDA_ERROR_INVALID_VALUE;
}
CUresult cuGetErrorString(CUresult e, const char **s) { return cuGetErrorName(e, s); }
CUresult cuLogsRegisterCallback(CUlogsCallback cb, void *ud, CUlogsCallbackHandle *h) {
    /* the emulated driver emits no driver log records, so a callback is never called */
    if (h) *h = (CUlogsCallbackHandle)(uintptr_t)1;
    return CUDA_SUCCESS;
}
CUresult cuLogsUnregisterCallback(CUlogsCallbackHandle h) { return CUDA_SUCCESS; }
CUresult cuProfilerStart(void) { return CUDA_SUCCESS; }
CUresult cuProfilerStop(void) { return CUDA_SUCCESS; }

/* ---- cuGetProcAddress ---------------------------------------------------------------
 * cudart asks for each name at the API version it was built for; the generated table
 * maps (name, version, per-thread flag) to the symbol with that ABI. */
struct rv_proc { const char *name; int version; int per_thread; void *fn; };
struct rv_sym { const char *name; void *fn; };
extern const struct rv_proc rv_proc_table[];  /* generated */
extern const struct rv_sym rv_sym_table[];    /* generated */

CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, cuuint64_t flags,
                             CUdriverProcAddressQueryResult *status) {
    if (!symbol || !pfn) return CUDA_ERROR_INVALID_VALUE;
    const struct rv_proc *legacy = NULL, *per_thread = NULL;
    bool named = false;
    for (const struct rv_proc *p = rv_proc_table; p->name; p++) {
        if (strcmp(p->name, symbol)) continue;
        named = true;
        if (p->version > version) continue;
        const struct rv_proc **best = p->per_thread ? &per_thread : &legacy;
        if (!*best || p->version > (*best)->version) *best = p;
    }
    void *fn = legacy ? legacy->fn : NULL;
    if ((flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) && per_thread &&
        (!legacy || per_thread->version >= legacy->version))
        fn = per_thread->fn;
    if (!named)
        for (const struct rv_sym *s = rv_sym_table; s->name; s++)
            if (!strcmp(s->name, symbol)) { fn = s->fn; break; }
    *pfn = fn;
    if (status)
        *status = fn ? CU_GET_PROC_ADDRESS_SUCCESS
                     : named ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return fn ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}
#undef cuGetProcAddress
CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags) {
    return cuGetProcAddress_v2(symbol, pfn, version, flags, NULL);
}

/* For `revati doctor`: how many of the exported driver entry points are implemented; the
 * others are the generated weak stubs (section rv_cuda_stubs), which log their name and
 * fail. */
extern const char __start_rv_cuda_stubs[], __stop_rv_cuda_stubs[];
RV_EXPORT void rv_cuda_coverage(int *implemented, int *total) {
    *implemented = *total = 0;
    for (const struct rv_sym *s = rv_sym_table; s->name; s++) {
        const char *fn = (const char *)s->fn;
        ++*total;
        if (fn < __start_rv_cuda_stubs || fn >= __stop_rv_cuda_stubs) ++*implemented;
    }
}
