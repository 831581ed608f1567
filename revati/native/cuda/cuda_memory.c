/* Split-state device memory (docs/limits.md, "Values computed by kernels do not exist").
 *
 * Each emulated GPU is one MAP_NORESERVE reservation of its full capacity: allocations are
 * address space only, so weights, KV cache and activations cost no RAM. Device pointers
 * are host addresses, so what the host can observe (H2D metadata, D2H read-backs, memsets
 * of small buffers) is kept in real pages and round-trips exactly. Bulk device-to-device
 * copies and non-zero memsets above RV_REAL_DATA_LIMIT would only produce values that no
 * kernel computes anyway, and would cost RAM, so they are timed but not performed. Host data
 * lasts until a kernel is handed a pointer into it; from then on copies out of it read zero
 * (rv_device_computed), while the few kernels computed on the host still read it
 * (cuda_host_kernels.c). */
#include "cuda_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define RV_ALIGN 512u
#define RV_REAL_DATA_LIMIT (64u << 20)

/* ---- per-device heap: first fit over an address-ordered block list ------------------
 * What an allocation costs the device is not its size: the H200's driver (cudaMalloc outside
 * torch, tools/calibrate/driver_memory_torch.py allocs) took 2 MiB for a first allocation of 512
 * bytes, then nothing for 4 KiB, 100 KiB, 100 KiB and 1 MiB more; 2 MiB for a second 1 MiB
 * and for 1.5 MiB (each no longer fitting a page begun before), 4 MiB for 3 MiB, 66 MiB for
 * 64.2 MiB (cuBLAS's handle: the shim had charged 64.2) and nothing for 200 KiB. So
 * allocations of 2 MiB or more take whole 2 MiB pages, and smaller ones share pages, each
 * going to the first page it still fits in; a page is given back when nothing is left in it.
 * `used` counts what the pages cost. */
#define RV_PAGE ((size_t)2 << 20)
struct page { size_t used; struct page *next; };
struct block { uintptr_t start; size_t size; bool free; struct page *page; struct block *next; };
/* `live`: the allocated blocks in address order (the list's order), for lookups by address;
 * rebuilt after an allocation or a free (`stale`), which a warm caching allocator rarely
 * makes, while PyTorch asks about pointers with every copy it pins. */
struct heap {
    char *base; size_t size; size_t used; struct block *blocks; struct page *pages;
    struct block **live; size_t nlive, caplive; bool stale;
};
static struct heap g_heap[RV_MAX_GPUS];
static pthread_mutex_t g_mem_lock = PTHREAD_MUTEX_INITIALIZER;

static bool heap_init(int dev) {
    struct heap *h = &g_heap[dev];
    if (h->base) return true;
    size_t size = rv_node()->memory_bytes;
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
        rv_log(RV_ERROR, "cannot reserve %zu bytes of address space for GPU %d", size, dev);
        return false;
    }
    h->base = p;
    h->size = size;
    h->blocks = calloc(1, sizeof *h->blocks);
    *h->blocks = (struct block){(uintptr_t)p, size, true, NULL, NULL};
    h->stale = true;
    return true;
}

/* Capacity the allocator may hand out: what cuMemGetInfo calls total minus the context. */
static size_t capacity(void) { return rv_node()->memory_bytes - rv_node()->context_reserved_bytes; }

/* ---- memory the driver takes for itself --------------------------------------------
 * Engines size their KV cache from cuMemGetInfo after profiling, so whatever the driver
 * allocates for itself meanwhile is KV cache the engine does not get. What the H200's driver
 * (580.159.04, CUDA 13.0) took, as free-memory drops minus torch's reservations, each point
 * in a fresh process (tools/calibrate/driver_memory.py; data in
 * validation/calibration/driver-memory/):
 * - kernel code, when a kernel first runs (loading a module takes nothing: lazy loading):
 *   max(3 KiB, 16/15 of its .text + 1,475 bytes) per kernel, from a pool that grows in 2 MiB
 *   steps and starts empty (torch's first kernel, randn's, took 2 MiB; 400 copies of kernels
 *   with 8.4, 33 and 131 KB of code: 4, 14 and 54 MiB; 2,000 one-kernel modules of 384 bytes
 *   of code: 6 MiB; Llama-3.1-8B's cuBLAS GEMMs at 8,192 to 256 tokens fit what was left,
 *   the 512-token ones took a step);
 * - executable graphs, from three pools that each grow in 2 MiB steps and keep a destroyed
 *   graph's memory for the next one (re-instantiating took nothing, destroying gave nothing
 *   back): 64 KiB a graph from one that starts with 512 KiB free, 48 KiB a graph from one
 *   that streams share and that starts with 1,720 KiB free (one-node graphs after torch's
 *   stream pool grow them at the 9th, 41st, 73rd... and at the 36th, 79th, 122nd... graph:
 *   tools/calibrate/driver_memory_graph_pools.py), and the nodes from one that starts with 2 MiB
 *   free, by the size of their kernel parameters (8,000-node graphs: 2,097 bytes a node up
 *   to 1 KiB of parameters, 3,146 up to 2 KiB, 8,651 up to 4 KiB, 33,817 up to 8 KiB; graphs
 *   of 10-100 nodes took ~10 % less a node), 786 bytes more for a kernel launched with
 *   programmatic dependent launch (cuBLASLt's split-K reduction, 224 bytes of parameters:
 *   16,000 nodes of it and its GEMM took 46 MiB, 22 beyond the GEMMs), as much as a small
 *   kernel for a copy (16 KiB) or a memset of 8 KiB or more, and nothing for a memset of up
 *   to 4 KiB (8,000 of them, alone or between kernels: tools/calibrate/driver_memory_graphs.py).
 *   Where each pool starts decides which of vLLM's profiling captures pays a step: two
 *   captures of 35 ten-node graphs and two of a 450-node one took 2, 4, 2 and 0 MiB on the
 *   H200, and under a single pool of 112 KiB a graph that started empty 6, 4, 2 and 0;
 * - streams: 504 KiB each from a pool that starts with 768 KiB free, and 48 KiB from the
 *   pool that graphs take 48 KiB from (1, 2, 3, 35, 67 streams: 0, 2, 2, 18, 36 MiB; 8 and
 *   then torch's pool of 4 x 32 streams: 4 and 70; 8 streams made before one-node graphs
 *   moved that pool's steps 8 graphs earlier);
 * - device-side system calls: 90 MiB once, and 1,664 KiB of the code pool (what was left of
 *   its first step for the kernels above), when the first kernel of a module that calls
 *   assert, printf or malloc (EIATTR_EXTERNS) runs, whichever kernel of it that is (PyTorch's
 *   fill, copy, mul, sum and index_select each took it alone in a fresh process, none of them
 *   after another; softmax's and randn's modules call none and took nothing);
 * - thread stacks: 264 MiB per KiB of per-thread stack above the default 1 KiB (one stack
 *   per resident thread: 132 SMs x 2,048 threads), returned when the limit goes down. */
#define RV_DRIVER_STEP ((size_t)2 << 20)
#define RV_GRAPH_BYTES ((size_t)64 << 10)
#define RV_OBJECT_BYTES ((size_t)48 << 10)   /* a graph's or a stream's share of one pool */
#define RV_GRAPH_POOL_START ((size_t)512 << 10)
#define RV_OBJECT_POOL_START ((size_t)1720 << 10)
#define RV_NODE_POOL_START RV_DRIVER_STEP
#define RV_STREAM_BYTES ((size_t)504 << 10)
#define RV_SYSCALL_BYTES ((size_t)90 << 20)
#define RV_SYSCALL_CODE_BYTES ((size_t)1664 << 10)
#define RV_STREAM_POOL_START ((size_t)768 << 10)
struct driver_pool { size_t free; bool started; };
static size_t g_driver[RV_MAX_GPUS];
static bool g_syscalls[RV_MAX_GPUS];
static struct driver_pool g_code_pool[RV_MAX_GPUS], g_graph_pool[RV_MAX_GPUS],
    g_object_pool[RV_MAX_GPUS], g_node_pool[RV_MAX_GPUS], g_stream_pool[RV_MAX_GPUS];

/* Take bytes from one of the driver's pools (growing it in 2 MiB steps), or give them back to
 * it for reuse: the driver keeps what it grew. `start`: what the pool holds free at first. */
static void pool_use(struct driver_pool *p, size_t start, int dev, size_t bytes, bool take) {
    pthread_mutex_lock(&g_mem_lock);
    if (!p->started) *p = (struct driver_pool){start, true};
    if (!take) {
        p->free += bytes;
    } else {
        if (bytes > p->free) {
            size_t grow = (bytes - p->free + RV_DRIVER_STEP - 1) / RV_DRIVER_STEP * RV_DRIVER_STEP;
            g_driver[dev] += grow;
            p->free += grow;
        }
        p->free -= bytes;
    }
    pthread_mutex_unlock(&g_mem_lock);
}

void rv_driver_code(int dev, int text_bytes) {
    size_t bytes = (size_t)text_bytes * 16 / 15 + 1475;
    pool_use(&g_code_pool[dev], 0, dev, bytes > 3072 ? bytes : 3072, true);
}

#define RV_PDL_NODE_BYTES 786
#define RV_INLINE_MEMSET_BYTES 4096

size_t rv_graph_node_bytes(const struct rv_launch *l, int param_bytes, bool pdl) {
    static const struct { int params; size_t node; } measured[] = {
        {1032, 2097}, {2056, 3146}, {4104, 8651}, {8200, 33817}};
    if (l->op == RV_OP_MEMSET && l->bytes <= RV_INLINE_MEMSET_BYTES) return 0;
    size_t extra = pdl ? RV_PDL_NODE_BYTES : 0;
    for (size_t i = 0; i < sizeof measured / sizeof *measured; i++)
        if (param_bytes <= measured[i].params) return measured[i].node + extra;
    /* beyond the measurements: proportional */
    return (size_t)param_bytes * 33817 / 8200 + extra;
}

void rv_driver_graph(int dev, size_t node_bytes, bool instantiate) {
    pool_use(&g_graph_pool[dev], RV_GRAPH_POOL_START, dev, RV_GRAPH_BYTES, instantiate);
    pool_use(&g_object_pool[dev], RV_OBJECT_POOL_START, dev, RV_OBJECT_BYTES, instantiate);
    pool_use(&g_node_pool[dev], RV_NODE_POOL_START, dev, node_bytes, instantiate);
}

void rv_driver_stream(int dev, bool create) {
    pool_use(&g_stream_pool[dev], RV_STREAM_POOL_START, dev, RV_STREAM_BYTES, create);
    pool_use(&g_object_pool[dev], RV_OBJECT_POOL_START, dev, RV_OBJECT_BYTES, create);
}

void rv_driver_syscalls(int dev) {
    pthread_mutex_lock(&g_mem_lock);
    bool first = !g_syscalls[dev];
    if (first) g_driver[dev] += RV_SYSCALL_BYTES;
    g_syscalls[dev] = true;
    pthread_mutex_unlock(&g_mem_lock);
    if (first) pool_use(&g_code_pool[dev], 0, dev, RV_SYSCALL_CODE_BYTES, true);
}

void rv_driver_stack(int dev, size_t from_bytes, size_t to_bytes) {
    bool known;
    size_t threads = (size_t)rv_node()->sm_count *
                     (size_t)rv_attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, dev, &known);
    size_t base = 1024;   /* the default stack is part of the context */
    size_t from = (from_bytes > base ? from_bytes - base : 0) * threads;
    size_t to = (to_bytes > base ? to_bytes - base : 0) * threads;
    pthread_mutex_lock(&g_mem_lock);
    g_driver[dev] = g_driver[dev] - from + to;
    pthread_mutex_unlock(&g_mem_lock);
}

/* Device memory in use: allocations plus the driver's own. */
static size_t in_use(int dev) { return g_heap[dev].used + g_driver[dev]; }

static size_t pages_of(size_t size) { return (size + RV_PAGE - 1) / RV_PAGE * RV_PAGE; }

/* Charge an allocation of sz bytes: whole pages, or room in a shared page (returned). */
static struct page *charge(struct heap *h, size_t sz) {
    if (sz >= RV_PAGE) {
        h->used += pages_of(sz);
        return NULL;
    }
    struct page **at = &h->pages;
    while (*at && (*at)->used + sz > RV_PAGE) at = &(*at)->next;
    if (!*at) {
        *at = calloc(1, sizeof **at);
        h->used += RV_PAGE;
    }
    (*at)->used += sz;
    return *at;
}

static void uncharge(struct heap *h, struct block *b) {
    if (!b->page) {
        h->used -= pages_of(b->size);
        return;
    }
    struct page *page = b->page;
    b->page = NULL;
    if ((page->used -= b->size) > 0) return;
    for (struct page **at = &h->pages; *at; at = &(*at)->next)
        if (*at == page) {
            *at = page->next;
            free(page);
            h->used -= RV_PAGE;
            break;
        }
}

CUresult rv_dev_alloc(CUdeviceptr *dp, size_t size, int dev) {
    if (!dp) return CUDA_ERROR_INVALID_VALUE;
    if (!size) return CUDA_ERROR_INVALID_VALUE;
    size_t sz = (size + RV_ALIGN - 1) & ~(size_t)(RV_ALIGN - 1);
    pthread_mutex_lock(&g_mem_lock);
    struct heap *h = &g_heap[dev];
    if (!heap_init(dev) || in_use(dev) + pages_of(sz) > capacity()) {
        pthread_mutex_unlock(&g_mem_lock);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    for (struct block *b = h->blocks; b; b = b->next) {
        if (!b->free || b->size < sz) continue;
        if (b->size > sz) {
            struct block *rest = calloc(1, sizeof *rest);
            *rest = (struct block){b->start + sz, b->size - sz, true, NULL, b->next};
            b->next = rest;
            b->size = sz;
        }
        b->free = false;
        b->page = charge(h, sz);
        h->stale = true;
        *dp = (CUdeviceptr)b->start;
        pthread_mutex_unlock(&g_mem_lock);
        return CUDA_SUCCESS;
    }
    pthread_mutex_unlock(&g_mem_lock);
    return CUDA_ERROR_OUT_OF_MEMORY;
}

/* Memory opened from another process's IPC handle: address space of its own, outside this
 * process's heap (importing does not take from the importer's free memory). */
struct import { uintptr_t base; size_t size; int dev; struct import *next; };
static struct import *g_imports;

static struct import *find_import(uintptr_t p) {
    for (struct import *i = g_imports; i; i = i->next)
        if (p >= i->base && p < i->base + i->size) return i;
    return NULL;
}

int rv_ptr_device(uintptr_t p) {
    for (int d = 0; d < RV_MAX_GPUS; d++)
        if (g_heap[d].base && p >= (uintptr_t)g_heap[d].base && p < (uintptr_t)g_heap[d].base + g_heap[d].size)
            return d;
    struct import *i = find_import(p);
    return i ? i->dev : -1;
}

/* Brings h->live up to date; false where there is no memory for it. g_mem_lock held. */
static bool index_live(struct heap *h) {
    if (!h->stale) return true;
    size_t n = 0;
    for (struct block *b = h->blocks; b; b = b->next) n += !b->free;
    if (n > h->caplive) {
        struct block **a = realloc(h->live, n * sizeof *a);
        if (!a) return false;
        h->live = a;
        h->caplive = n;
    }
    n = 0;
    for (struct block *b = h->blocks; b; b = b->next)
        if (!b->free) h->live[n++] = b;
    h->nlive = n;
    h->stale = false;
    return true;
}

static struct block *find_block(uintptr_t p, int dev) {
    struct heap *h = &g_heap[dev];
    if (index_live(h)) {
        size_t lo = 0, hi = h->nlive;   /* to the first block that starts after p */
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (h->live[mid]->start <= p) lo = mid + 1;
            else hi = mid;
        }
        if (lo && p < h->live[lo - 1]->start + h->live[lo - 1]->size) return h->live[lo - 1];
    } else {
        for (struct block *b = h->blocks; b; b = b->next)
            if (!b->free && p >= b->start && p < b->start + b->size) return b;
    }
    struct import *i = find_import(p);   /* an import reads as one block */
    static __thread struct block view;
    if (!i) return NULL;
    view = (struct block){i->base, i->size, false, NULL, NULL};
    return &view;
}

/* Give touched pages back to the OS so freed memory costs no RAM. */
static void drop_pages(uintptr_t start, size_t size) {
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    uintptr_t a = (start + page - 1) & ~(uintptr_t)(page - 1), e = (start + size) & ~(uintptr_t)(page - 1);
    if (e > a) madvise((void *)a, e - a, MADV_DONTNEED);
}

CUresult rv_dev_free(CUdeviceptr dp) {
    if (!dp) return CUDA_SUCCESS;
    pthread_mutex_lock(&g_mem_lock);
    int dev = rv_ptr_device(dp);
    struct block *prev = NULL;
    for (struct block *b = dev >= 0 ? g_heap[dev].blocks : NULL; b; prev = b, b = b->next) {
        if (b->free || b->start != dp) continue;
        b->free = true;
        g_heap[dev].stale = true;
        uncharge(&g_heap[dev], b);
        drop_pages(b->start, b->size);
        if (b->next && b->next->free) {
            struct block *n = b->next;
            b->size += n->size;
            b->next = n->next;
            free(n);
        }
        if (prev && prev->free) {
            prev->size += b->size;
            prev->next = b->next;
            free(b);
        }
        pthread_mutex_unlock(&g_mem_lock);
        return CUDA_SUCCESS;
    }
    pthread_mutex_unlock(&g_mem_lock);
    return CUDA_ERROR_INVALID_VALUE;
}

#define NEED_CTX() do { if (!rv_cuda_ready()) return CUDA_ERROR_NOT_INITIALIZED; if (!rv_current_ctx()) return CUDA_ERROR_INVALID_CONTEXT; } while (0)

CUresult cuMemAlloc_v2(CUdeviceptr *dp, size_t size) { NEED_CTX(); return rv_dev_alloc(dp, size, rv_current_dev()); }
CUresult cuMemAllocPitch_v2(CUdeviceptr *dp, size_t *pitch, size_t width, size_t height, unsigned elem) {
    NEED_CTX();
    if (!pitch || !width || !height || (elem != 4 && elem != 8 && elem != 16)) return CUDA_ERROR_INVALID_VALUE;
    *pitch = (width + RV_ALIGN - 1) & ~(size_t)(RV_ALIGN - 1);
    return rv_dev_alloc(dp, *pitch * height, rv_current_dev());
}
CUresult cuMemAllocManaged(CUdeviceptr *dp, size_t size, unsigned flags) { NEED_CTX(); return rv_dev_alloc(dp, size, rv_current_dev()); }
CUresult cuMemFree_v2(CUdeviceptr dp) { return rv_dev_free(dp); }
CUresult cuMemAllocAsync(CUdeviceptr *dp, size_t size, CUstream s) {
    NEED_CTX();
    CUresult r = rv_check_stream(s);
    return r ? r : rv_dev_alloc(dp, size, rv_stream_device(s));
}
CUresult cuMemFreeAsync(CUdeviceptr dp, CUstream s) { CUresult r = rv_check_stream(s); return r ? r : rv_dev_free(dp); }
CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dp, size_t size, CUmemoryPool pool, CUstream s) { return cuMemAllocAsync(dp, size, s); }
CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total) {
    NEED_CTX();
    int dev = rv_current_dev();
    if (total) *total = rv_node()->memory_bytes;
    if (free_bytes) *free_bytes = in_use(dev) < capacity() ? capacity() - in_use(dev) : 0;
    return CUDA_SUCCESS;
}
CUresult cuMemGetAddressRange_v2(CUdeviceptr *base, size_t *size, CUdeviceptr p) {
    pthread_mutex_lock(&g_mem_lock);
    int dev = rv_ptr_device(p);
    struct block *b = dev >= 0 ? find_block(p, dev) : NULL;
    pthread_mutex_unlock(&g_mem_lock);
    if (!b) return CUDA_ERROR_NOT_FOUND;
    if (base) *base = b->start;
    if (size) *size = b->size;
    return CUDA_SUCCESS;
}

/* ---- virtual memory management: reservations come from the device heap, and mapping
 * is bookkeeping because the heap is already readable and writable. ------------------ */
struct mapping { CUdeviceptr p; size_t size; CUmemGenericAllocationHandle h; struct mapping *next; };
struct phys_alloc { size_t size; CUmemAllocationProp prop; };
static struct mapping *g_maps;
#define RV_GRANULARITY (2u << 20)

CUresult cuMemGetAllocationGranularity(size_t *g, const CUmemAllocationProp *prop, CUmemAllocationGranularity_flags o) {
    if (!g || !prop) return CUDA_ERROR_INVALID_VALUE;
    *g = RV_GRANULARITY;
    return CUDA_SUCCESS;
}
CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t align, CUdeviceptr addr, unsigned long long flags) {
    if (!ptr || !size) return CUDA_ERROR_INVALID_VALUE;
    if (!rv_cuda_ready()) return CUDA_ERROR_NOT_INITIALIZED;
    if (!align) align = RV_GRANULARITY;
    CUdeviceptr base;
    /* over-allocate so an aligned start exists; the block is freed as a whole */
    CUresult r = rv_dev_alloc(&base, size + align, rv_current_dev());
    if (r) return r;
    if (base % align) {
        rv_dev_free(base);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *ptr = base;
    return CUDA_SUCCESS;
}
CUresult cuMemAddressFree(CUdeviceptr p, size_t size) { return rv_dev_free(p); }
CUresult cuMemCreate(CUmemGenericAllocationHandle *h, size_t size, const CUmemAllocationProp *prop, unsigned long long flags) {
    if (!h || !prop || !size || size % RV_GRANULARITY) return CUDA_ERROR_INVALID_VALUE;
    struct phys_alloc *a = calloc(1, sizeof *a);
    a->size = size;
    a->prop = *prop;
    *h = (CUmemGenericAllocationHandle)(uintptr_t)a;
    return CUDA_SUCCESS;
}
CUresult cuMemRelease(CUmemGenericAllocationHandle h) { return h ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE; }
CUresult cuMemMap(CUdeviceptr p, size_t size, size_t offset, CUmemGenericAllocationHandle h, unsigned long long flags) {
    if (!p || !h) return CUDA_ERROR_INVALID_VALUE;
    struct mapping *m = calloc(1, sizeof *m);
    *m = (struct mapping){p, size, h, NULL};
    pthread_mutex_lock(&g_mem_lock);
    m->next = g_maps;
    g_maps = m;
    pthread_mutex_unlock(&g_mem_lock);
    return CUDA_SUCCESS;
}
CUresult cuMemUnmap(CUdeviceptr p, size_t size) {
    pthread_mutex_lock(&g_mem_lock);
    for (struct mapping **mp = &g_maps; *mp; mp = &(*mp)->next) {
        if ((*mp)->p != p) continue;
        struct mapping *m = *mp;
        *mp = m->next;
        free(m);
        pthread_mutex_unlock(&g_mem_lock);
        drop_pages(p, size);
        return CUDA_SUCCESS;
    }
    pthread_mutex_unlock(&g_mem_lock);
    return CUDA_ERROR_INVALID_VALUE;
}
CUresult cuMemSetAccess(CUdeviceptr p, size_t size, const CUmemAccessDesc *d, size_t n) { return d ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE; }
CUresult cuMemGetAccess(unsigned long long *f, const CUmemLocation *l, CUdeviceptr p) { *f = CU_MEM_ACCESS_FLAGS_PROT_READWRITE; return CUDA_SUCCESS; }
CUresult cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp *prop, CUmemGenericAllocationHandle h) {
    if (!prop || !h) return CUDA_ERROR_INVALID_VALUE;
    *prop = ((struct phys_alloc *)(uintptr_t)h)->prop;
    return CUDA_SUCCESS;
}
CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *h, void *addr) {
    pthread_mutex_lock(&g_mem_lock);
    for (struct mapping *m = g_maps; m; m = m->next)
        if ((uintptr_t)addr >= m->p && (uintptr_t)addr < m->p + m->size) {
            *h = m->h;
            pthread_mutex_unlock(&g_mem_lock);
            return CUDA_SUCCESS;
        }
    pthread_mutex_unlock(&g_mem_lock);
    return CUDA_ERROR_INVALID_VALUE;
}

/* ---- sharing memory between processes ------------------------------------------------
 * A handle names an allocation's GPU and size. The importer gets fresh address space of
 * that size on the same GPU: kernels never run, so no process can tell that the two
 * mappings do not alias (host copies into shared device memory are not seen across). */
#define RV_IPC_MAGIC 0x52564950u
struct ipc_handle { uint32_t magic; int32_t phys; uint64_t size; };

CUresult cuIpcGetMemHandle(CUipcMemHandle *h, CUdeviceptr p) {
    if (!h) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g_mem_lock);
    int dev = rv_ptr_device(p);
    struct block *b = dev >= 0 ? find_block(p, dev) : NULL;
    struct ipc_handle ih = {RV_IPC_MAGIC, dev >= 0 ? rv_phys(dev) : -1, b ? b->size : 0};
    pthread_mutex_unlock(&g_mem_lock);
    if (!b || b->start != p) return CUDA_ERROR_INVALID_VALUE;
    memset(h, 0, sizeof *h);
    memcpy(h->reserved, &ih, sizeof ih);
    return CUDA_SUCCESS;
}
CUresult cuIpcOpenMemHandle_v2(CUdeviceptr *pdptr, CUipcMemHandle h, unsigned flags) {
    struct ipc_handle ih;
    memcpy(&ih, h.reserved, sizeof ih);
    if (!pdptr || ih.magic != RV_IPC_MAGIC || !ih.size) return CUDA_ERROR_INVALID_VALUE;
    if (!rv_cuda_ready()) return CUDA_ERROR_NOT_INITIALIZED;
    int dev = rv_current_dev();
    for (int d = 0; d < rv_ndev(); d++)
        if (rv_phys(d) == ih.phys) dev = d;
    void *p = mmap(NULL, ih.size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
    struct import *i = calloc(1, sizeof *i);
    *i = (struct import){(uintptr_t)p, ih.size, dev, NULL};
    pthread_mutex_lock(&g_mem_lock);
    i->next = g_imports;
    g_imports = i;
    pthread_mutex_unlock(&g_mem_lock);
    *pdptr = (CUdeviceptr)p;
    return CUDA_SUCCESS;
}
CUresult cuIpcCloseMemHandle(CUdeviceptr p) {
    pthread_mutex_lock(&g_mem_lock);
    for (struct import **ip = &g_imports; *ip; ip = &(*ip)->next) {
        if ((*ip)->base != p) continue;
        struct import *i = *ip;
        *ip = i->next;
        pthread_mutex_unlock(&g_mem_lock);
        munmap((void *)i->base, i->size);
        free(i);
        return CUDA_SUCCESS;
    }
    pthread_mutex_unlock(&g_mem_lock);
    return CUDA_ERROR_INVALID_VALUE;
}

/* VMM handles travel as a file descriptor (sent over a Unix socket by the application);
 * the descriptor is a small memfd holding the allocation's size and properties. */
CUresult cuMemExportToShareableHandle(void *out, CUmemGenericAllocationHandle h, CUmemAllocationHandleType type,
                                      unsigned long long flags) {
    if (!out || !h) return CUDA_ERROR_INVALID_VALUE;
    if (type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) return CUDA_ERROR_NOT_SUPPORTED;
    int fd = memfd_create("revati-cumem", MFD_CLOEXEC);
    if (fd < 0) return CUDA_ERROR_OPERATING_SYSTEM;
    const struct phys_alloc *a = (const struct phys_alloc *)(uintptr_t)h;
    if (pwrite(fd, a, sizeof *a, 0) != (ssize_t)sizeof *a) { close(fd); return CUDA_ERROR_OPERATING_SYSTEM; }
    *(int *)out = fd;
    return CUDA_SUCCESS;
}
CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *h, void *handle, CUmemAllocationHandleType type) {
    if (!h) return CUDA_ERROR_INVALID_VALUE;
    if (type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) return CUDA_ERROR_NOT_SUPPORTED;
    struct phys_alloc *a = calloc(1, sizeof *a);
    if (pread((int)(intptr_t)handle, a, sizeof *a, 0) != (ssize_t)sizeof *a || !a->size) {
        free(a);
        return CUDA_ERROR_INVALID_VALUE;
    }
    *h = (CUmemGenericAllocationHandle)(uintptr_t)a;
    return CUDA_SUCCESS;
}

/* ---- memory pools: a pool is a set of attributes; memory comes from the heap -------- */
struct pool { int dev; CUmemPoolProps props; cuuint64_t release_threshold; };
static struct pool g_default_pool[RV_MAX_GPUS];
CUresult cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *props) {
    if (!pool || !props) return CUDA_ERROR_INVALID_VALUE;
    struct pool *p = calloc(1, sizeof *p);
    p->props = *props;
    p->dev = props->location.id;
    *pool = (CUmemoryPool)p;
    return CUDA_SUCCESS;
}
CUresult cuMemPoolDestroy(CUmemoryPool pool) { return pool ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE; }
CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool, CUdevice d) {
    if (!pool) return CUDA_ERROR_INVALID_VALUE;
    if (d < 0 || d >= rv_ndev()) return CUDA_ERROR_INVALID_DEVICE;
    g_default_pool[d].dev = d;
    *pool = (CUmemoryPool)&g_default_pool[d];
    return CUDA_SUCCESS;
}
CUresult cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice d) { return cuDeviceGetDefaultMemPool(pool, d); }
CUresult cuDeviceSetMemPool(CUdevice d, CUmemoryPool pool) { return pool ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE; }
CUresult cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute a, void *v) {
    if (!pool || !v) return CUDA_ERROR_INVALID_VALUE;
    if (a == CU_MEMPOOL_ATTR_RELEASE_THRESHOLD) ((struct pool *)pool)->release_threshold = *(cuuint64_t *)v;
    return CUDA_SUCCESS;
}
CUresult cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute a, void *v) {
    if (!pool || !v) return CUDA_ERROR_INVALID_VALUE;
    switch (a) {
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES: *(int *)v = 1; break;
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: *(cuuint64_t *)v = ((struct pool *)pool)->release_threshold; break;
    default: *(cuuint64_t *)v = 0;
    }
    return CUDA_SUCCESS;
}
CUresult cuMemPoolSetAccess(CUmemoryPool pool, const CUmemAccessDesc *m, size_t n) { return pool ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE; }
CUresult cuMemPoolGetAccess(CUmemAccess_flags *f, CUmemoryPool pool, CUmemLocation *l) { *f = CU_MEM_ACCESS_FLAGS_PROT_READWRITE; return CUDA_SUCCESS; }
CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t keep) { return pool ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE; }

/* ---- page-locked host memory: real memory, registered so pointer queries know it ---- */
/* Disjoint and sorted by start, so that a lookup is a binary search: PyTorch asks whether
 * a host tensor is pinned (cudaPointerGetAttributes) each time it pins one, about pageable
 * memory that no range holds, and a walk of vLLM's pinned buffers took a tenth of its engine
 * core's CPU time. A pointer into g_host is valid only while g_mem_lock is held. */
struct host_range { void *p; size_t n; bool owned; unsigned flags; };
static struct host_range *g_host;
static size_t g_nhost, g_caphost;

/* The index of the first range that starts after p; g_mem_lock held. */
static size_t host_after(uintptr_t p) {
    size_t lo = 0, hi = g_nhost;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if ((uintptr_t)g_host[mid].p <= p) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}
static struct host_range *find_host(uintptr_t p) {
    size_t i = host_after(p);
    return i && p < (uintptr_t)g_host[i - 1].p + g_host[i - 1].n ? &g_host[i - 1] : NULL;
}
/* Registers [p, p + n): like the driver, a range that overlaps a registered one is refused. */
static CUresult add_host(void *p, size_t n, bool owned, unsigned flags) {
    uintptr_t a = (uintptr_t)p;
    pthread_mutex_lock(&g_mem_lock);
    size_t i = host_after(a);
    CUresult r = CUDA_SUCCESS;
    if ((i && a < (uintptr_t)g_host[i - 1].p + g_host[i - 1].n) ||
        (i < g_nhost && (uintptr_t)g_host[i].p < a + n)) {
        r = CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
    } else if (g_nhost == g_caphost) {
        size_t cap = g_caphost ? 2 * g_caphost : 64;
        struct host_range *grown = realloc(g_host, cap * sizeof *grown);
        if (grown) {
            g_host = grown;
            g_caphost = cap;
        } else {
            r = CUDA_ERROR_OUT_OF_MEMORY;
        }
    }
    if (!r) {
        memmove(&g_host[i + 1], &g_host[i], (g_nhost - i) * sizeof *g_host);
        g_host[i] = (struct host_range){p, n, owned, flags};
        g_nhost++;
    }
    pthread_mutex_unlock(&g_mem_lock);
    return r;
}
size_t rv_bytes_from(uintptr_t p) {
    pthread_mutex_lock(&g_mem_lock);
    int dev = rv_ptr_device(p);
    struct block *b = dev >= 0 ? find_block(p, dev) : NULL;
    struct host_range *h = b ? NULL : find_host(p);
    size_t n = b ? b->start + b->size - p : h ? (uintptr_t)h->p + h->n - p : 0;
    pthread_mutex_unlock(&g_mem_lock);
    return n;
}
CUresult cuMemHostAlloc(void **pp, size_t n, unsigned flags) {
    if (!pp) return CUDA_ERROR_INVALID_VALUE;
    if (!rv_cuda_ready()) return CUDA_ERROR_NOT_INITIALIZED;
    void *p = mmap(NULL, n ? n : 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult r = add_host(p, n ? n : 1, true, flags);
    if (r) {
        munmap(p, n ? n : 1);
        return r;
    }
    *pp = p;
    return CUDA_SUCCESS;
}
CUresult cuMemAllocHost_v2(void **pp, size_t n) { return cuMemHostAlloc(pp, n, 0); }
static CUresult remove_host(void *p, bool owned) {
    pthread_mutex_lock(&g_mem_lock);
    size_t i = host_after((uintptr_t)p);
    if (!i || g_host[i - 1].p != p || g_host[i - 1].owned != owned) {
        pthread_mutex_unlock(&g_mem_lock);
        return owned ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
    }
    struct host_range h = g_host[i - 1];
    memmove(&g_host[i - 1], &g_host[i], (g_nhost - i) * sizeof *g_host);
    g_nhost--;
    pthread_mutex_unlock(&g_mem_lock);
    if (owned) munmap(h.p, h.n);
    return CUDA_SUCCESS;
}
CUresult cuMemFreeHost(void *p) { return remove_host(p, true); }
CUresult cuMemHostRegister_v2(void *p, size_t n, unsigned flags) {
    if (!p || !n) return CUDA_ERROR_INVALID_VALUE;
    return add_host(p, n, false, flags);
}
CUresult cuMemHostUnregister(void *p) { return remove_host(p, false); }
/* unified addressing: a pinned host pointer is its own device pointer */
CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *dp, void *p, unsigned f) {
    pthread_mutex_lock(&g_mem_lock);
    bool known = find_host((uintptr_t)p) != NULL;
    pthread_mutex_unlock(&g_mem_lock);
    if (!known) return CUDA_ERROR_INVALID_VALUE;
    *dp = (CUdeviceptr)(uintptr_t)p;
    return CUDA_SUCCESS;
}
CUresult cuMemHostGetFlags(unsigned *f, void *p) {
    pthread_mutex_lock(&g_mem_lock);
    struct host_range *h = find_host((uintptr_t)p);
    if (h) *f = h->flags;
    pthread_mutex_unlock(&g_mem_lock);
    return h ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* ---- copies and memsets -------------------------------------------------------------- */
/* Ranges of device memory that hold host-written data (see rv_device_computed), disjoint
 * and sorted by start. PyTorch's caching allocator hands a freed block to the next tensor
 * without the driver seeing it, so without this a kernel's output (argmax's token ids) read
 * back what an earlier tensor's copy left there: positions, cache slots, out of vocabulary.
 * A range a kernel was handed is `touched`: it keeps its bytes, for the kernels computed on
 * the host that read it (vLLM's V2 runner passes the same request indices to predicted
 * sampling kernels and then to its host-computed bookkeeping), and reads zero to every copy
 * out of it, which zeroes it then (observe). A `blank` range holds no host data: it marks a
 * kernel's pointer outside the others (rv_device_computed). */
struct range { uintptr_t start, end; bool touched, blank; };
static struct range *g_written;
static size_t g_nwritten, g_capwritten;
static pthread_mutex_t g_written_lock = PTHREAD_MUTEX_INITIALIZER;

/* Room for `more` ranges; g_written_lock held. */
static bool reserve(size_t more) {
    if (g_nwritten + more <= g_capwritten) return true;
    size_t cap = g_capwritten ? 2 * g_capwritten : 256;
    struct range *grown = realloc(g_written, cap * sizeof *g_written);
    if (!grown) {
        rv_log_once("device shim: out of memory for host-written ranges; kernel outputs "
                    "may read stale data", "written");
        return false;
    }
    g_written = grown;
    g_capwritten = cap;
    return true;
}

/* The first range ending after p (g_nwritten when none does); g_written_lock held. */
static size_t first_ending_after(uintptr_t p) {
    size_t lo = 0, hi = g_nwritten;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (g_written[mid].end <= p) lo = mid + 1; else hi = mid;
    }
    return lo;
}

/* Forget [start, end) (trimming the ranges it overlaps) and, with `host`, record it. */
static void host_written(uintptr_t start, uintptr_t end, bool host) {
    if (start >= end) return;
    pthread_mutex_lock(&g_written_lock);
    if (!reserve(2)) {
        pthread_mutex_unlock(&g_written_lock);
        return;
    }
    size_t i = first_ending_after(start), j = i;   /* [i, j): ranges overlapping [start, end) */
    while (j < g_nwritten && g_written[j].start < end) j++;
    struct range keep[3];
    size_t nkeep = 0;
    if (i < j && g_written[i].start < start)
        keep[nkeep++] = (struct range){g_written[i].start, start, g_written[i].touched,
                                       g_written[i].blank};
    if (host) keep[nkeep++] = (struct range){start, end, false, false};
    if (i < j && g_written[j - 1].end > end)
        keep[nkeep++] = (struct range){end, g_written[j - 1].end, g_written[j - 1].touched,
                                       g_written[j - 1].blank};
    memmove(&g_written[i + nkeep], &g_written[j], (g_nwritten - j) * sizeof *g_written);
    memcpy(&g_written[i], keep, nkeep * sizeof *keep);
    g_nwritten = g_nwritten - (j - i) + nkeep;
    pthread_mutex_unlock(&g_written_lock);
}

/* A pointer outside every range still marks its byte as a kernel's (a `blank` range of one
 * byte, which holds no host data): the tensor there may reach into ranges an earlier tensor's
 * copies left further on, and a copy out of it must read none of them (zero_touched). Only
 * where such a range begins within RV_REAL_DATA_LIMIT: no tensor the host reads back is
 * larger, and the weights' and KV cache's pointers would otherwise each keep a mark. */
void rv_device_computed(const uintptr_t *ptrs, int n) {
    pthread_mutex_lock(&g_written_lock);
    for (int k = 0; k < n && g_nwritten; k++) {
        uintptr_t p = ptrs[k];
        if (p >= g_written[g_nwritten - 1].end) continue;
        size_t lo = first_ending_after(p);   /* < g_nwritten: p is below the last end */
        if (g_written[lo].start <= p) g_written[lo].touched = true;
        else if (g_written[lo].start - p <= RV_REAL_DATA_LIMIT && reserve(1)) {
            memmove(&g_written[lo + 1], &g_written[lo], (g_nwritten - lo) * sizeof *g_written);
            g_written[lo] = (struct range){p, p + 1, true, true};
            g_nwritten++;
        }
    }
    pthread_mutex_unlock(&g_written_lock);
}

void rv_host_computed(uintptr_t p, size_t n) { host_written(p, p + n, true); }

size_t rv_host_written_from(uintptr_t p) {
    pthread_mutex_lock(&g_written_lock);
    size_t i = first_ending_after(p);
    bool host = i < g_nwritten && g_written[i].start <= p && !g_written[i].blank;
    size_t n = host ? g_written[i].end - p : 0;
    pthread_mutex_unlock(&g_written_lock);
    return n;
}

/* Zero what a copy out of [start, end) reads that a kernel made. A copy reads one tensor, and
 * a kernel handed the tensor's first byte since the host last wrote it made all of it: the
 * earlier copies whose ranges the tensor spans count for nothing then. Without that, a
 * tensor over several such ranges (the caching allocator hands out blocks that held smaller
 * tensors) kept all but the first: vLLM at 4 pipeline stages read sampled token ids 2^30 and
 * 2^32 + 1 out of what earlier 2-byte copies and sampled-token counts had left there.
 * Plain memset, not fill()'s madvise for large ranges: the host writes these buffers again
 * at the engine's next step, and pages dropped here would fault back in then (SGLang's
 * scheduler: TPOT +39 % from page faults alone on the moderate mixed load). */
static void zero_touched(uintptr_t start, uintptr_t end) {
    pthread_mutex_lock(&g_written_lock);
    size_t i = first_ending_after(start), j = i, out = i;   /* [i, j): overlapping */
    bool made = i < g_nwritten && g_written[i].start <= start && g_written[i].touched;
    if (made) memset((void *)start, 0, end - start);
    for (; j < g_nwritten && g_written[j].start < end; j++) {
        struct range r = g_written[j];
        if (r.touched) memset((void *)r.start, 0, r.end - r.start);
        else if (!made) g_written[out++] = r;
        else if (r.end > end) g_written[out++] = (struct range){end, r.end, false, false};  /* the next tensor's */
    }
    memmove(&g_written[out], &g_written[j], (g_nwritten - j) * sizeof *g_written);
    g_nwritten -= j - out;
    pthread_mutex_unlock(&g_written_lock);
}

static int copy_kind(uintptr_t dst, uintptr_t src) {
    int dd = rv_ptr_device(dst), sd = rv_ptr_device(src);
    if (dd >= 0 && sd >= 0) return dd == sd ? RV_COPY_D2D : RV_COPY_P2P;
    if (dd >= 0) return RV_COPY_H2D;
    if (sd >= 0) return RV_COPY_D2H;
    return RV_COPY_H2H;
}
static void move_data(uintptr_t dst, uintptr_t src, size_t n, int kind) {
    if (!n) return;
    if ((kind == RV_COPY_D2D || kind == RV_COPY_P2P) && n > RV_REAL_DATA_LIMIT) {
        rv_log_once("device shim: large device-to-device copies are timed, not performed", "memcpy");
        return;
    }
    if (kind != RV_COPY_H2D && kind != RV_COPY_H2H) zero_touched(src, src + n);
    memmove((void *)dst, (const void *)src, n);
    if (kind != RV_COPY_D2H && kind != RV_COPY_H2H) host_written(dst, dst + n, true);
}
static CUresult copy(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s, bool sync, const char *call) {
    if (n && (!dst || !src)) return CUDA_ERROR_INVALID_VALUE;
    int kind = copy_kind(dst, src);
    CUresult r = rv_enqueue_transfer(s, RV_OP_MEMCPY, (int64_t)n, kind, false, call);
    if (r) return r;
    move_data(dst, src, n, kind);
    return sync ? rv_stream_sync(s, call) : CUDA_SUCCESS;
}
/* Synchronous copies run on the NULL stream (legacy, or this thread's under _ptds). */
CUresult cuMemcpy(CUdeviceptr d, CUdeviceptr s, size_t n) { return copy(d, s, n, NULL, true, "cuMemcpy"); }
CUresult cuMemcpyHtoD_v2(CUdeviceptr d, const void *s, size_t n) { return copy(d, (CUdeviceptr)s, n, NULL, true, "cuMemcpyHtoD"); }
CUresult cuMemcpyDtoH_v2(void *d, CUdeviceptr s, size_t n) { return copy((CUdeviceptr)d, s, n, NULL, true, "cuMemcpyDtoH"); }
CUresult cuMemcpyDtoD_v2(CUdeviceptr d, CUdeviceptr s, size_t n) { return copy(d, s, n, NULL, false, "cuMemcpyDtoD"); }
CUresult cuMemcpyAsync(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st) { return copy(d, s, n, st, false, "cuMemcpyAsync"); }
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr d, const void *s, size_t n, CUstream st) { return copy(d, (CUdeviceptr)s, n, st, false, "cuMemcpyHtoDAsync"); }
CUresult cuMemcpyDtoHAsync_v2(void *d, CUdeviceptr s, size_t n, CUstream st) { return copy((CUdeviceptr)d, s, n, st, false, "cuMemcpyDtoHAsync"); }
CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st) { return copy(d, s, n, st, false, "cuMemcpyDtoDAsync"); }
CUresult cuMemcpyPeer(CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc, size_t n) { return copy(d, s, n, NULL, true, "cuMemcpyPeer"); }
CUresult cuMemcpyPeerAsync(CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc, size_t n, CUstream st) { return copy(d, s, n, st, false, "cuMemcpyPeerAsync"); }

static CUresult copy2d(const CUDA_MEMCPY2D *p, CUstream s, bool sync, const char *call) {
    if (!p) return CUDA_ERROR_INVALID_VALUE;
    const char *src = p->srcMemoryType == CU_MEMORYTYPE_HOST ? (const char *)p->srcHost : (const char *)p->srcDevice;
    char *dst = p->dstMemoryType == CU_MEMORYTYPE_HOST ? (char *)p->dstHost : (char *)p->dstDevice;
    if (!src || !dst) return CUDA_ERROR_INVALID_VALUE;
    int kind = copy_kind((uintptr_t)dst, (uintptr_t)src);
    CUresult r = rv_enqueue_transfer(s, RV_OP_MEMCPY, (int64_t)(p->WidthInBytes * p->Height), kind, false, call);
    if (r) return r;
    for (size_t y = 0; y < p->Height; y++)
        move_data((uintptr_t)(dst + (p->dstY + y) * p->dstPitch + p->dstXInBytes),
                  (uintptr_t)(src + (p->srcY + y) * p->srcPitch + p->srcXInBytes), p->WidthInBytes, kind);
    return sync ? rv_stream_sync(s, call) : CUDA_SUCCESS;
}
CUresult cuMemcpy2D_v2(const CUDA_MEMCPY2D *p) { return copy2d(p, NULL, true, "cuMemcpy2D"); }
CUresult cuMemcpy2DUnaligned_v2(const CUDA_MEMCPY2D *p) { return copy2d(p, NULL, true, "cuMemcpy2DUnaligned"); }
CUresult cuMemcpy2DAsync_v2(const CUDA_MEMCPY2D *p, CUstream s) { return copy2d(p, s, false, "cuMemcpy2DAsync"); }
CUresult cuMemcpyBatchAsync_v2(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count,
                               CUmemcpyAttributes *attrs, size_t *attr_idx, size_t nattrs, CUstream s) {
    if (!dsts || !srcs || !sizes) return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < count; i++) {
        CUresult r = copy(dsts[i], srcs[i], sizes[i], s, false, "cuMemcpyBatchAsync");
        if (r) return r;
    }
    return CUDA_SUCCESS;
}

/* A zero fill of untouched pages is already true; dropping whole pages makes it true
 * for touched ones too, at no RAM cost. Other large fills are timed only. */
static void fill(uintptr_t d, unsigned v, size_t elem, size_t n) {
    size_t bytes = elem * n;
    if (!bytes) return;
    if (v == 0) {
        size_t page = (size_t)sysconf(_SC_PAGESIZE);
        if (bytes < 2 * page) { memset((void *)d, 0, bytes); return; }
        uintptr_t a = (d + page - 1) & ~(uintptr_t)(page - 1), e = (d + bytes) & ~(uintptr_t)(page - 1);
        memset((void *)d, 0, a - d);
        madvise((void *)a, e - a, MADV_DONTNEED);
        memset((void *)e, 0, d + bytes - e);
        return;
    }
    host_written(d, d + bytes, bytes <= RV_REAL_DATA_LIMIT);
    if (bytes > RV_REAL_DATA_LIMIT) {
        rv_log_once("device shim: large non-zero memsets are timed, not performed", "memset");
        return;
    }
    if (elem == 1) { memset((void *)d, (int)v, n); return; }
    for (size_t i = 0; i < n; i++) {
        if (elem == 2) ((uint16_t *)d)[i] = (uint16_t)v;
        else ((uint32_t *)d)[i] = v;
    }
}

/* cuda_device_api.h. The bytes are zeroed now, when the operation is queued: what the
 * program reads out of the buffer comes after it in stream order. */
void rv_cuda_received(CUdeviceptr p, size_t n) {
    if (!p || !n || rv_ptr_device(p) < 0) return;
    host_written(p, p + n, false);
    fill(p, 0, 1, n);
}
static CUresult memset_op(CUdeviceptr d, unsigned v, size_t elem, size_t n, CUstream s, bool sync, const char *call) {
    if (!d || rv_ptr_device(d) < 0) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = rv_enqueue_transfer(s, RV_OP_MEMSET, (int64_t)(elem * n), 0, false, call);
    if (r) return r;
    fill(d, v, elem, n);
    return sync ? rv_stream_sync(s, call) : CUDA_SUCCESS;
}
CUresult cuMemsetD8_v2(CUdeviceptr d, unsigned char v, size_t n) { return memset_op(d, v, 1, n, NULL, false, "cuMemsetD8"); }
CUresult cuMemsetD16_v2(CUdeviceptr d, unsigned short v, size_t n) { return memset_op(d, v, 2, n, NULL, false, "cuMemsetD16"); }
CUresult cuMemsetD32_v2(CUdeviceptr d, unsigned int v, size_t n) { return memset_op(d, v, 4, n, NULL, false, "cuMemsetD32"); }
CUresult cuMemsetD8Async(CUdeviceptr d, unsigned char v, size_t n, CUstream s) { return memset_op(d, v, 1, n, s, false, "cuMemsetD8Async"); }
CUresult cuMemsetD16Async(CUdeviceptr d, unsigned short v, size_t n, CUstream s) { return memset_op(d, v, 2, n, s, false, "cuMemsetD16Async"); }
CUresult cuMemsetD32Async(CUdeviceptr d, unsigned int v, size_t n, CUstream s) { return memset_op(d, v, 4, n, s, false, "cuMemsetD32Async"); }
static CUresult memset2d(CUdeviceptr d, size_t pitch, unsigned v, size_t elem, size_t w, size_t h, CUstream s, const char *call) {
    for (size_t y = 0; y < h; y++) {
        CUresult r = memset_op(d + y * pitch, v, elem, w, s, false, call);
        if (r) return r;
    }
    return CUDA_SUCCESS;
}
CUresult cuMemsetD2D8_v2(CUdeviceptr d, size_t pitch, unsigned char v, size_t w, size_t h) { return memset2d(d, pitch, v, 1, w, h, NULL, "cuMemsetD2D8"); }
CUresult cuMemsetD2D32_v2(CUdeviceptr d, size_t pitch, unsigned int v, size_t w, size_t h) { return memset2d(d, pitch, v, 4, w, h, NULL, "cuMemsetD2D32"); }
CUresult cuMemsetD2D8Async(CUdeviceptr d, size_t pitch, unsigned char v, size_t w, size_t h, CUstream s) { return memset2d(d, pitch, v, 1, w, h, s, "cuMemsetD2D8Async"); }
CUresult cuMemsetD2D32Async(CUdeviceptr d, size_t pitch, unsigned int v, size_t w, size_t h, CUstream s) { return memset2d(d, pitch, v, 4, w, h, s, "cuMemsetD2D32Async"); }
/* Hints without observable effect on an emulated GPU. */
CUresult cuMemPrefetchAsync_v2(CUdeviceptr p, size_t n, CUmemLocation l, unsigned f, CUstream s) { return rv_check_stream(s); }
CUresult cuMemAdvise_v2(CUdeviceptr p, size_t n, CUmem_advise a, CUmemLocation l) { return CUDA_SUCCESS; }

/* ---- pointer attributes ------------------------------------------------------------ */
/* What one pointer query found: copies, since the lists may change once the lock is let go.
 * One lookup serves every attribute cuPointerGetAttributes asks for. */
struct pointer_info {
    int dev;
    const struct block *b;   /* &bv when p is device memory, else NULL */
    const struct host_range *h;   /* &hv when p is registered or pinned host memory */
    struct block bv;
    struct host_range hv;
};

static void pointer_lookup(CUdeviceptr p, struct pointer_info *x) {
    pthread_mutex_lock(&g_mem_lock);
    x->dev = rv_ptr_device(p);
    struct block *b = x->dev >= 0 ? find_block(p, x->dev) : NULL;
    struct host_range *h = x->dev < 0 ? find_host(p) : NULL;
    if (b) x->bv = *b;
    if (h) x->hv = *h;
    pthread_mutex_unlock(&g_mem_lock);
    x->b = b ? &x->bv : NULL;
    x->h = h ? &x->hv : NULL;
}

static CUresult pointer_attribute(void *data, CUpointer_attribute a, CUdeviceptr p,
                                  const struct pointer_info *x) {
    const struct block *b = x->b;
    const struct host_range *h = x->h;
    int dev = x->dev;
    bool known = b || h;
    switch (a) {
    case CU_POINTER_ATTRIBUTE_CONTEXT: *(CUcontext *)data = b ? (CUcontext)rv_primary_ctx(dev) : NULL; break;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE: *(unsigned *)data = b ? CU_MEMORYTYPE_DEVICE : h ? CU_MEMORYTYPE_HOST : 0; break;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER: *(CUdeviceptr *)data = known ? p : 0; break;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER: *(void **)data = h ? (void *)p : NULL; break;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED: *(unsigned *)data = 0; break;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: *(int *)data = b ? dev : h ? rv_current_dev() : -2; break;
    case CU_POINTER_ATTRIBUTE_BUFFER_ID: *(unsigned long long *)data = b ? b->start : h ? (uintptr_t)h->p : 0; break;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR: *(CUdeviceptr *)data = b ? b->start : h ? (uintptr_t)h->p : 0; break;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE: *(size_t *)data = b ? b->size : h ? h->n : 0; break;
    case CU_POINTER_ATTRIBUTE_MAPPED: *(unsigned *)data = known; break;
    case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS: *(unsigned *)data = 1; break;
    case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE: *(unsigned *)data = b != NULL; break;
    case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES: *(unsigned long long *)data = 0; break;
    case CU_POINTER_ATTRIBUTE_ACCESS_FLAGS: *(unsigned *)data = CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READWRITE; break;
    case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE: *(void **)data = NULL; break;
    case CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE: *(unsigned *)data = 0; break;
    case CU_POINTER_ATTRIBUTE_P2P_TOKENS: memset(data, 0, sizeof(CUDA_POINTER_ATTRIBUTE_P2P_TOKENS)); break;
    default: {
        char what[48];
        snprintf(what, sizeof what, "pointer attribute %d", (int)a);
        rv_log_once("cuPointerGetAttribute: not implemented", rv_intern(what));
        return CUDA_ERROR_INVALID_VALUE;
    }
    }
    return CUDA_SUCCESS;
}
CUresult cuPointerGetAttribute(void *data, CUpointer_attribute a, CUdeviceptr p) {
    if (!data) return CUDA_ERROR_INVALID_VALUE;
    struct pointer_info x;
    pointer_lookup(p, &x);
    if (!x.b && !x.h) return CUDA_ERROR_INVALID_VALUE;
    return pointer_attribute(data, a, p, &x);
}
/* Like the real driver, unknown (pageable host) pointers get zeroed attributes here. */
CUresult cuPointerGetAttributes(unsigned n, CUpointer_attribute *as, void **data, CUdeviceptr p) {
    if (!as || !data) return CUDA_ERROR_INVALID_VALUE;
    struct pointer_info x;
    pointer_lookup(p, &x);
    for (unsigned i = 0; i < n; i++) {
        CUresult r = pointer_attribute(data[i], as[i], p, &x);
        if (r) return r;
    }
    return CUDA_SUCCESS;
}
CUresult cuPointerSetAttribute(const void *v, CUpointer_attribute a, CUdeviceptr p) {
    return a == CU_POINTER_ATTRIBUTE_SYNC_MEMOPS ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
