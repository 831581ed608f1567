/* Emulated NVML (librevati_nvml.so, SONAME libnvidia-ml.so.1), as pynvml, torch, vLLM,
 * SGLang and NCCL use it. NVML lists every physical GPU of the node whatever
 * CUDA_VISIBLE_DEVICES says, as the real library does; identities (UUID, PCI bus id) come
 * from cuda/cuda_spec.c so they match what the emulated CUDA driver reports.
 *
 * No nvml.h exists on the build machine: the few types used are declared here with the
 * layouts of the public NVML API (the same as pynvml's ctypes structures). Functions not
 * written here are absent, so callers see "function not found" (pynvml raises
 * NVMLError_FunctionNotFound, NCCL's dlsym gets NULL) rather than a fake success. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "cuda_spec.h"

typedef int nvmlReturn_t;
enum {
    NVML_SUCCESS = 0, NVML_ERROR_UNINITIALIZED = 1, NVML_ERROR_INVALID_ARGUMENT = 2,
    NVML_ERROR_NOT_SUPPORTED = 3, NVML_ERROR_NOT_FOUND = 6, NVML_ERROR_INSUFFICIENT_SIZE = 7,
    NVML_ERROR_DRIVER_NOT_LOADED = 9, NVML_ERROR_UNKNOWN = 999,
};
struct gpu { int index; };
typedef struct gpu *nvmlDevice_t;
typedef struct { unsigned long long total, free, used; } nvmlMemory_t;
typedef struct { unsigned version; unsigned long long total, reserved, free, used; } nvmlMemory_v2_t;
typedef struct {
    char busIdLegacy[16];
    unsigned domain, bus, device, pciDeviceId, pciSubSystemId;
    char busId[32];
} nvmlPciInfo_t;
typedef struct { unsigned gpu, memory; } nvmlUtilization_t;

#define NVML_P2P_STATUS_OK 0
#define NVML_P2P_STATUS_NOT_SUPPORTED 5
#define NVML_TOPOLOGY_INTERNAL 0
#define NVML_TOPOLOGY_SINGLE 10   /* NVSwitch-connected GPUs report SINGLE in NVML */
#define NVML_FEATURE_ENABLED 1
#define NVML_BRAND_NVIDIA 14
#define NVML_DEVICE_ARCH_HOPPER 9
#define NVML_DEVICE_ARCH_UNKNOWN 0xffffffff
#define NVML_COMPUTEMODE_DEFAULT 0
#define DRIVER_VERSION "580.159.04"  /* the H200 machine's driver (a CUDA 13.0 branch) */

#define EXPORT __attribute__((visibility("default")))

static struct gpu g_gpus[RV_MAX_GPUS];
static int g_init_count;

static const struct rv_node *node(void) { return rv_node(); }
static int gpu_index(nvmlDevice_t h) {
    if (h < g_gpus || h >= g_gpus + node()->gpus) return -1;
    return h->index;
}
#define GPU(h, i) int i = gpu_index(h); if (!g_init_count) return NVML_ERROR_UNINITIALIZED; \
    if (i < 0) return NVML_ERROR_INVALID_ARGUMENT
#define OUT(p) do { if (!(p)) return NVML_ERROR_INVALID_ARGUMENT; } while (0)

static nvmlReturn_t copy_string(char *buf, unsigned len, const char *s) {
    OUT(buf);
    if (strlen(s) + 1 > len) return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(buf, s, strlen(s) + 1);
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlInit_v2(void) {
    if (!node()->ok) {
        rv_log(RV_ERROR, "nvmlInit: %s", node()->error);
        return NVML_ERROR_DRIVER_NOT_LOADED;
    }
    for (int i = 0; i < RV_MAX_GPUS; i++) g_gpus[i].index = i;
    __atomic_add_fetch(&g_init_count, 1, __ATOMIC_SEQ_CST);
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlInit(void) { return nvmlInit_v2(); }
EXPORT nvmlReturn_t nvmlInitWithFlags(unsigned flags) { return nvmlInit_v2(); }
EXPORT nvmlReturn_t nvmlShutdown(void) {
    if (!g_init_count) return NVML_ERROR_UNINITIALIZED;
    __atomic_sub_fetch(&g_init_count, 1, __ATOMIC_SEQ_CST);
    return NVML_SUCCESS;
}
EXPORT const char *nvmlErrorString(nvmlReturn_t r) {
    switch (r) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    default: return "Unknown Error";
    }
}

/* ---- system ---------------------------------------------------------------------- */
EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char *buf, unsigned len) { return copy_string(buf, len, DRIVER_VERSION); }
EXPORT nvmlReturn_t nvmlSystemGetNVMLVersion(char *buf, unsigned len) { return copy_string(buf, len, "13." DRIVER_VERSION); }
EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *v) { OUT(v); *v = 13000; return NVML_SUCCESS; }
EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *v) { return nvmlSystemGetCudaDriverVersion(v); }

/* ---- enumeration and identity ----------------------------------------------------- */
EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned *count) {
    OUT(count);
    if (!g_init_count) return NVML_ERROR_UNINITIALIZED;
    *count = (unsigned)node()->gpus;
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetCount(unsigned *count) { return nvmlDeviceGetCount_v2(count); }
EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned i, nvmlDevice_t *h) {
    OUT(h);
    if (!g_init_count) return NVML_ERROR_UNINITIALIZED;
    if (i >= (unsigned)node()->gpus) return NVML_ERROR_INVALID_ARGUMENT;
    *h = &g_gpus[i];
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned i, nvmlDevice_t *h) { return nvmlDeviceGetHandleByIndex_v2(i, h); }
EXPORT nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *h) {
    OUT(uuid); OUT(h);
    if (!g_init_count) return NVML_ERROR_UNINITIALIZED;
    for (int i = 0; i < node()->gpus; i++) {
        char u[64];
        rv_gpu_uuid_string(i, u, sizeof u);
        if (!strcmp(u, uuid)) { *h = &g_gpus[i]; return NVML_SUCCESS; }
    }
    return NVML_ERROR_NOT_FOUND;
}
EXPORT nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *id, nvmlDevice_t *h) {
    OUT(id); OUT(h);
    if (!g_init_count) return NVML_ERROR_UNINITIALIZED;
    unsigned dom = 0, bus = 0, dev = 0;
    if (sscanf(id, "%x:%x:%x", &dom, &bus, &dev) != 3) return NVML_ERROR_INVALID_ARGUMENT;
    for (int i = 0; i < node()->gpus; i++)
        if (node()->pci_bus[i] == (int)bus) { *h = &g_gpus[i]; return NVML_SUCCESS; }
    return NVML_ERROR_NOT_FOUND;
}
EXPORT nvmlReturn_t nvmlDeviceGetHandleByPciBusId(const char *id, nvmlDevice_t *h) { return nvmlDeviceGetHandleByPciBusId_v2(id, h); }
EXPORT nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t h, unsigned *i) { GPU(h, g); OUT(i); *i = (unsigned)g; return NVML_SUCCESS; }
EXPORT nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t h, unsigned *m) { GPU(h, g); OUT(m); *m = (unsigned)g; return NVML_SUCCESS; }
EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t h, char *buf, unsigned len) { GPU(h, g); return copy_string(buf, len, node()->name); }
EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t h, char *buf, unsigned len) {
    GPU(h, g);
    char u[64];
    rv_gpu_uuid_string(g, u, sizeof u);
    return copy_string(buf, len, u);
}
EXPORT nvmlReturn_t nvmlDeviceGetSerial(nvmlDevice_t h, char *buf, unsigned len) {
    GPU(h, g);
    char s[32];
    snprintf(s, sizeof s, "REVATI%07d", g);
    return copy_string(buf, len, s);
}
EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t h, nvmlPciInfo_t *p) {
    GPU(h, g); OUT(p);
    memset(p, 0, sizeof *p);
    p->bus = (unsigned)node()->pci_bus[g];
    p->pciDeviceId = node()->pci_device_id;
    p->pciSubSystemId = node()->pci_subsystem_id;
    rv_gpu_pci_bus_id(g, p->busId, sizeof p->busId);
    snprintf(p->busIdLegacy, sizeof p->busIdLegacy, "0000:%02X:00.0", p->bus);
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v2(nvmlDevice_t h, nvmlPciInfo_t *p) { return nvmlDeviceGetPciInfo_v3(h, p); }
EXPORT nvmlReturn_t nvmlDeviceGetPciInfo(nvmlDevice_t h, nvmlPciInfo_t *p) { return nvmlDeviceGetPciInfo_v3(h, p); }
EXPORT nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t h, int *major, int *minor) {
    GPU(h, g); OUT(major); OUT(minor);
    *major = node()->cc_major;
    *minor = node()->cc_minor;
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetArchitecture(nvmlDevice_t h, unsigned *arch) {
    GPU(h, g); OUT(arch);
    *arch = strcmp(node()->architecture, "hopper") ? NVML_DEVICE_ARCH_UNKNOWN : NVML_DEVICE_ARCH_HOPPER;
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetBrand(nvmlDevice_t h, int *brand) { GPU(h, g); OUT(brand); *brand = NVML_BRAND_NVIDIA; return NVML_SUCCESS; }
EXPORT nvmlReturn_t nvmlDeviceGetNumGpuCores(nvmlDevice_t h, unsigned *n) {
    GPU(h, g); OUT(n);
    *n = (unsigned)node()->sm_count * 128;   /* 128 FP32 cores per Hopper SM */
    return NVML_SUCCESS;
}

/* ---- memory: NVML's total includes the driver's reserve; free is what one CUDA context
 * leaves, as measured on the real GPU. Allocations are not shared between emulated
 * processes, so NVML does not see them. ----------------------------------------------- */
static uint64_t nvml_free(void) { return node()->memory_bytes - node()->context_reserved_bytes; }
EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t h, nvmlMemory_t *m) {
    GPU(h, g); OUT(m);
    m->total = node()->nvml_memory_bytes;
    m->free = nvml_free();
    m->used = m->total - m->free;
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t h, nvmlMemory_v2_t *m) {
    GPU(h, g); OUT(m);
    m->total = node()->nvml_memory_bytes;
    m->reserved = node()->nvml_memory_bytes - node()->memory_bytes;
    m->free = nvml_free();
    m->used = m->total - m->reserved - m->free;
    return NVML_SUCCESS;
}

/* ---- topology: one node, every GPU pair on NVLink through NVSwitch ----------------- */
EXPORT nvmlReturn_t nvmlDeviceGetP2PStatus(nvmlDevice_t a, nvmlDevice_t b, int caps_index, int *status) {
    GPU(a, i); GPU(b, j); OUT(status);
    *status = i == j ? NVML_P2P_STATUS_NOT_SUPPORTED : NVML_P2P_STATUS_OK;
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetTopologyCommonAncestor(nvmlDevice_t a, nvmlDevice_t b, int *level) {
    GPU(a, i); GPU(b, j); OUT(level);
    *level = i == j ? NVML_TOPOLOGY_INTERNAL : NVML_TOPOLOGY_SINGLE;
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t h, unsigned link, int *active) {
    GPU(h, g); OUT(active);
    if (link >= (unsigned)node()->nvlink_links) return NVML_ERROR_INVALID_ARGUMENT;
    *active = node()->gpus > 1 ? NVML_FEATURE_ENABLED : 0;
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetNvLinkVersion(nvmlDevice_t h, unsigned link, unsigned *version) {
    GPU(h, g); OUT(version);
    if (link >= (unsigned)node()->nvlink_links) return NVML_ERROR_INVALID_ARGUMENT;
    *version = 4;   /* NVLink 4 (Hopper) */
    return NVML_SUCCESS;
}

#define NVML_NVLINK_DEVICE_TYPE_SWITCH 2
EXPORT nvmlReturn_t nvmlDeviceGetNvLinkRemoteDeviceType(nvmlDevice_t h, unsigned link, int *type) {
    GPU(h, g); OUT(type);
    if (link >= (unsigned)node()->nvlink_links) return NVML_ERROR_INVALID_ARGUMENT;
    *type = NVML_NVLINK_DEVICE_TYPE_SWITCH;   /* every link goes to an NVSwitch */
    return NVML_SUCCESS;
}
/* The emulated node models no NVSwitch PCI identities and no multi-node NVLink fabric;
 * the real library answers NOT_SUPPORTED for these on HGX boards without a fabric too. */
static nvmlReturn_t unsupported(const char *name) {
    rv_log_once("NVML: not supported on the emulated node", name);
    return NVML_ERROR_NOT_SUPPORTED;
}
EXPORT nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t h, unsigned link, nvmlPciInfo_t *p) {
    GPU(h, g);
    return unsupported("nvmlDeviceGetNvLinkRemotePciInfo_v2");
}
EXPORT nvmlReturn_t nvmlDeviceGetGpuFabricInfoV(nvmlDevice_t h, void *info) {
    GPU(h, g);
    return unsupported("nvmlDeviceGetGpuFabricInfoV");
}

/* ---- live state of an idle, healthy GPU ------------------------------------------- */
EXPORT nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t h, nvmlUtilization_t *u) { GPU(h, g); OUT(u); u->gpu = u->memory = 0; return NVML_SUCCESS; }
EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t h, unsigned *n, void *infos) { GPU(h, g); OUT(n); *n = 0; return NVML_SUCCESS; }
EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t h, unsigned *n, void *infos) { return nvmlDeviceGetComputeRunningProcesses_v3(h, n, infos); }
EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t h, unsigned *n, void *infos) { return nvmlDeviceGetComputeRunningProcesses_v3(h, n, infos); }
EXPORT nvmlReturn_t nvmlDeviceGetPowerManagementLimit(nvmlDevice_t h, unsigned *mw) { GPU(h, g); OUT(mw); *mw = node()->power_limit_mw; return NVML_SUCCESS; }
EXPORT nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t h, unsigned *mw) { return nvmlDeviceGetPowerManagementLimit(h, mw); }
EXPORT nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t h, int type, unsigned *mhz) {
    GPU(h, g); OUT(mhz);
    *mhz = (unsigned)(type == 2 ? node()->memory_clock_khz : node()->clock_khz) / 1000;
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetMaxClockInfo(nvmlDevice_t h, int type, unsigned *mhz) { return nvmlDeviceGetClockInfo(h, type, mhz); }
EXPORT nvmlReturn_t nvmlDeviceGetPersistenceMode(nvmlDevice_t h, int *mode) { GPU(h, g); OUT(mode); *mode = NVML_FEATURE_ENABLED; return NVML_SUCCESS; }
EXPORT nvmlReturn_t nvmlDeviceGetComputeMode(nvmlDevice_t h, int *mode) { GPU(h, g); OUT(mode); *mode = NVML_COMPUTEMODE_DEFAULT; return NVML_SUCCESS; }
EXPORT nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t h, unsigned *current, unsigned *pending) {
    GPU(h, g); OUT(current); OUT(pending);
    *current = *pending = 0;
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetMultiGpuBoard(nvmlDevice_t h, unsigned *board) { GPU(h, g); OUT(board); *board = 0; return NVML_SUCCESS; }
EXPORT nvmlReturn_t nvmlDeviceGetCurrPcieLinkGeneration(nvmlDevice_t h, unsigned *gen) { GPU(h, g); OUT(gen); *gen = (unsigned)node()->pcie_generation; return NVML_SUCCESS; }
EXPORT nvmlReturn_t nvmlDeviceGetMaxPcieLinkGeneration(nvmlDevice_t h, unsigned *gen) { return nvmlDeviceGetCurrPcieLinkGeneration(h, gen); }
EXPORT nvmlReturn_t nvmlDeviceGetCurrPcieLinkWidth(nvmlDevice_t h, unsigned *w) { GPU(h, g); OUT(w); *w = (unsigned)node()->pcie_link_width; return NVML_SUCCESS; }
EXPORT nvmlReturn_t nvmlDeviceGetMaxPcieLinkWidth(nvmlDevice_t h, unsigned *w) { return nvmlDeviceGetCurrPcieLinkWidth(h, w); }
/* all CPUs: the emulation host's cores stand in for the target host's */
EXPORT nvmlReturn_t nvmlDeviceGetCpuAffinity(nvmlDevice_t h, unsigned n, unsigned long *set) {
    GPU(h, g); OUT(set);
    for (unsigned i = 0; i < n; i++) set[i] = ~0UL;
    return NVML_SUCCESS;
}
