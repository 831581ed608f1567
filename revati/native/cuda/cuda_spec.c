/* Reads the emulated node's spec once per process; see cuda_spec.h. */
#include "cuda_spec.h"

#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct rv_node g_node;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void fail(const char *fmt, const char *arg) {
    g_node.ok = false;
    snprintf(g_node.error, sizeof g_node.error, fmt, arg);
}

static bool set_field(const char *key, const char *val) {
    struct { const char *key; void *dst; char kind; size_t size; } fields[] = {
        {"name", g_node.name, 's', sizeof g_node.name},
        {"architecture", g_node.architecture, 's', sizeof g_node.architecture},
        {"cc_major", &g_node.cc_major, 'i', 0},
        {"cc_minor", &g_node.cc_minor, 'i', 0},
        {"sm_count", &g_node.sm_count, 'i', 0},
        {"memory_bytes", &g_node.memory_bytes, 'u', 0},
        {"context_reserved_bytes", &g_node.context_reserved_bytes, 'u', 0},
        {"nvml_memory_bytes", &g_node.nvml_memory_bytes, 'u', 0},
        {"clock_khz", &g_node.clock_khz, 'i', 0},
        {"memory_clock_khz", &g_node.memory_clock_khz, 'i', 0},
        {"memory_bus_width", &g_node.memory_bus_width, 'i', 0},
        {"l2_bytes", &g_node.l2_bytes, 'u', 0},
        {"nvlink_links", &g_node.nvlink_links, 'i', 0},
        {"pcie_generation", &g_node.pcie_generation, 'i', 0},
        {"pcie_link_width", &g_node.pcie_link_width, 'i', 0},
        {"power_limit_mw", &g_node.power_limit_mw, 'i', 0},
        {"pci_device_id", &g_node.pci_device_id, 'i', 0},
        {"pci_subsystem_id", &g_node.pci_subsystem_id, 'i', 0},
        {"launch_queue", &g_node.launch_queue, 'i', 0},
    };
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        if (strcmp(fields[i].key, key)) continue;
        if (fields[i].kind == 's') snprintf(fields[i].dst, fields[i].size, "%s", val);
        else if (fields[i].kind == 'u') *(uint64_t *)fields[i].dst = strtoull(val, NULL, 10);
        else *(int *)fields[i].dst = (int)strtoll(val, NULL, 10);
        return true;
    }
    return false;  /* keys the device libraries do not use (peak_flops.*, ...) */
}

static void load(void) {
    const char *path = getenv("REVATI_HW_SPEC");
    if (!path || !*path) { fail("%s", "REVATI_HW_SPEC is not set (no emulated GPU)"); return; }
    FILE *f = fopen(path, "r");
    if (!f) { fail("cannot open REVATI_HW_SPEC=%s", path); return; }
    char line[512];
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = 0;
        char *sp = strchr(line, ' ');
        if (!sp) continue;
        *sp = 0;
        const char *key = line, *val = sp + 1;
        if (!strncmp(key, "attr.", 5)) {
            if (g_node.nattrs < RV_MAX_SPEC_ATTRS) {
                struct rv_spec_attr *a = &g_node.attrs[g_node.nattrs++];
                snprintf(a->name, sizeof a->name, "%.63s", key + 5);
                a->value = (int)strtoll(val, NULL, 10);
            }
        } else if (!strncmp(key, "pci_bus_id.", 11)) {
            int i = atoi(key + 11);
            if (i >= 0 && i < RV_MAX_GPUS) g_node.pci_bus[i] = atoi(val);
        } else {
            set_field(key, val);
        }
    }
    fclose(f);
    if (!g_node.name[0] || !g_node.memory_bytes || !g_node.sm_count) {
        fail("REVATI_HW_SPEC=%s lacks name/memory_bytes/sm_count", path);
        return;
    }
    const char *n = getenv("REVATI_GPUS");
    g_node.gpus = n ? atoi(n) : 1;
    if (g_node.gpus < 1 || g_node.gpus > RV_MAX_GPUS) {
        fail("REVATI_GPUS=%s is out of range", n);
        return;
    }
    const char *vis = getenv("CUDA_VISIBLE_DEVICES");
    if (vis) {
        g_node.nvisible = rv_parse_visible(vis, g_node.gpus, g_node.visible);
    } else {
        g_node.nvisible = g_node.gpus;
        for (int i = 0; i < g_node.gpus; i++) g_node.visible[i] = i;
    }
    g_node.ok = true;
}

const struct rv_node *rv_node(void) {
    pthread_once(&g_once, load);
    return &g_node;
}

/* FNV-1a over the GPU name, so GPUs of different kinds never share a UUID. */
void rv_gpu_uuid(int phys, unsigned char out[16]) {
    /* g_node, not rv_node(): CUDA_VISIBLE_DEVICES is parsed (by UUID) while loading */
    uint64_t h = rv_fnv1a(g_node.name);
    memcpy(out, "REVATI", 6);       /* recognisable as emulated in any log */
    memcpy(out + 6, &h, 8);
    out[14] = 0;
    out[15] = (unsigned char)phys;
}

void rv_gpu_uuid_string(int phys, char *buf, size_t len) {
    unsigned char u[16];
    rv_gpu_uuid(phys, u);
    snprintf(buf, len, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
             u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12],
             u[13], u[14], u[15]);
}

void rv_gpu_pci_bus_id(int phys, char *buf, size_t len) {
    snprintf(buf, len, "00000000:%02X:00.0", rv_node()->pci_bus[phys]);
}

/* As the real driver: entries are indices or (prefixes of) UUIDs, separated by commas;
 * the list ends at the first entry that is invalid, out of range, or a repeat. */
int rv_parse_visible(const char *value, int gpus, int out[RV_MAX_GPUS]) {
    int n = 0;
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", value);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok && n < RV_MAX_GPUS;
         tok = strtok_r(NULL, ",", &save)) {
        while (isspace((unsigned char)*tok)) tok++;
        char *end = tok + strlen(tok);
        while (end > tok && isspace((unsigned char)end[-1])) *--end = 0;
        int phys = -1;
        if (!strncmp(tok, "GPU-", 4)) {
            for (int i = 0; i < gpus; i++) {
                char u[64];
                rv_gpu_uuid_string(i, u, sizeof u);
                if (!strncmp(u, tok, strlen(tok))) {
                    if (phys >= 0) return n;  /* ambiguous prefix */
                    phys = i;
                }
            }
        } else {
            char *e;
            long v = strtol(tok, &e, 10);
            if (e != tok && *e == 0 && v >= 0 && v < gpus) phys = (int)v;
        }
        if (phys < 0) return n;
        for (int i = 0; i < n; i++)
            if (out[i] == phys) return n;
        out[n++] = phys;
    }
    return n;
}
