/* The emulated node as both device libraries see it: the hardware spec (REVATI_HW_SPEC,
 * the flat file written by revati/device/spec.py), how many GPUs it has (REVATI_GPUS),
 * each GPU's identity (UUID, PCI bus id), and which of them CUDA_VISIBLE_DEVICES exposes.
 * Compiled into librevati_cuda.so and librevati_nvml.so alike so that the CUDA driver and
 * NVML agree on every identity, exactly as the real pair does. */
#ifndef REVATI_CUDA_SPEC_H
#define REVATI_CUDA_SPEC_H

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>

#define RV_MAX_GPUS 16
#define RV_MAX_SPEC_ATTRS 256

struct rv_spec_attr { char name[64]; int value; };

struct rv_node {
    bool ok;                      /* false: no or bad spec; `error` says why */
    char error[256];
    char name[96];
    int cc_major, cc_minor;
    int sm_count;
    uint64_t memory_bytes;
    uint64_t context_reserved_bytes;
    uint64_t nvml_memory_bytes;      /* NVML's total: memory_bytes plus the driver's reserve */
    int clock_khz, memory_clock_khz, memory_bus_width;
    uint64_t l2_bytes;
    int nvlink_links, pcie_generation, pcie_link_width;
    unsigned power_limit_mw, pci_device_id, pci_subsystem_id;
    int launch_queue;             /* launches a stream holds before the next blocks; 0: unbounded */
    char architecture[32];
    int gpus;                     /* physical GPUs of this emulated node (REVATI_GPUS) */
    int pci_bus[RV_MAX_GPUS];
    int nattrs;
    struct rv_spec_attr attrs[RV_MAX_SPEC_ATTRS];
    /* CUDA_VISIBLE_DEVICES: visible ordinal -> physical index */
    int nvisible;
    int visible[RV_MAX_GPUS];
};

/* FNV-1a of a string (stable across processes and runs). */
static inline uint64_t rv_fnv1a(const char *s) {
    uint64_t h = 1469598103934665603ULL;
    while (*s) h = (h ^ (unsigned char)*s++) * 1099511628211ULL;
    return h;
}

/* Loaded once per process (thread-safe). Never NULL; check ->ok. */
const struct rv_node *rv_node(void);
/* 16-byte UUID of physical GPU `phys` (stable across processes and runs). */
void rv_gpu_uuid(int phys, unsigned char out[16]);
/* "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" as NVML and nvidia-smi print it. */
void rv_gpu_uuid_string(int phys, char *buf, size_t len);
/* "00000000:18:00.0" (NVML busId) for physical GPU `phys`. */
void rv_gpu_pci_bus_id(int phys, char *buf, size_t len);
/* Parse a CUDA_VISIBLE_DEVICES value into physical indices; returns how many. */
int rv_parse_visible(const char *value, int gpus, int out[RV_MAX_GPUS]);

#endif
