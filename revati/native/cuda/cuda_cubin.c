/* Kernel parameter layouts and resource usage from the images modules are loaded from.
 *
 * The driver is handed fatbins (cudart, with a wrapper or without), or bare cubins (Triton).
 * The cubin for this GPU's architecture is an ELF: its .nv.info.<kernel> section lists each
 * parameter's offset and size (EIATTR_KPARAM_INFO), which cuFuncGetParamInfo reports, and
 * the launch bounds (EIATTR_MAX_THREADS); the module-wide .nv.info section gives each
 * kernel (by symbol) its registers (EIATTR_REGCOUNT) and stack frame (EIATTR_FRAME_SIZE);
 * .nv.shared.<kernel> is the static shared memory. cuFuncGetAttribute reports those, so
 * libraries that size launches by occupancy choose as on the real GPU.
 * Fatbin entries are usually zstd-compressed; libzstd is loaded when first needed, and
 * without it (or for LZ4 entries) parameter layouts are simply unknown. */
#include "cuda_internal.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FATBIN_MAGIC 0xBA55ED50u
#define WRAPPER_MAGIC 0x466243B1u
#define ENTRY_ELF 2
#define ZSTD_MAGIC 0xFD2FB528u
#define EIATTR_MAX_THREADS 0x05
#define EIATTR_EXTERNS 0x0f
#define EIATTR_FRAME_SIZE 0x11
#define EIATTR_KPARAM_INFO 0x17
#define EIATTR_REGCOUNT 0x2f
#define EIFMT_NVAL 1
#define EIFMT_BVAL 2
#define EIFMT_HVAL 3
#define EIFMT_SVAL 4

static size_t (*zstd_decompress)(void *, size_t, const void *, size_t);
static unsigned long long (*zstd_content_size)(const void *, size_t);
static size_t (*zstd_frame_size)(const void *, size_t);
static pthread_once_t g_zstd_once = PTHREAD_ONCE_INIT;

static void load_zstd(void) {
    void *h = dlopen("libzstd.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        rv_log_once("libzstd.so.1 not found: kernel parameter layouts unknown", "cubin");
        return;
    }
    zstd_decompress = (size_t (*)(void *, size_t, const void *, size_t))dlsym(h, "ZSTD_decompress");
    zstd_content_size = (unsigned long long (*)(const void *, size_t))dlsym(h, "ZSTD_getFrameContentSize");
    zstd_frame_size = (size_t (*)(const void *, size_t))dlsym(h, "ZSTD_findFrameCompressedSize");
}

static size_t elf_size(const unsigned char *elf) {
    uint64_t shoff;
    uint16_t shentsize, shnum;
    memcpy(&shoff, elf + 0x28, 8);
    memcpy(&shentsize, elf + 0x3A, 2);
    memcpy(&shnum, elf + 0x3C, 2);
    size_t end = shoff + (size_t)shentsize * shnum;
    for (uint16_t i = 0; i < shnum; i++) {
        uint64_t off, size;
        uint32_t type;
        memcpy(&type, elf + shoff + (size_t)i * shentsize + 4, 4);
        memcpy(&off, elf + shoff + (size_t)i * shentsize + 0x18, 8);
        memcpy(&size, elf + shoff + (size_t)i * shentsize + 0x20, 8);
        if (type != 8 /* SHT_NOBITS */ && off + size > end) end = off + size;
    }
    return end;
}

static void *copy_elf(const unsigned char *elf, size_t *size) {
    *size = elf_size(elf);
    void *out = malloc(*size);
    memcpy(out, elf, *size);
    return out;
}

/* The best ELF entry of a fatbin for compute capability `arch` (90 for 9.0): the same
 * architecture, else the newest older one. */
static void *from_fatbin(const unsigned char *fb, int arch, size_t *size) {
    uint32_t magic;
    uint16_t header;
    uint64_t total;
    memcpy(&magic, fb, 4);
    memcpy(&header, fb + 6, 2);
    memcpy(&total, fb + 8, 8);
    if (magic != FATBIN_MAGIC) return NULL;
    const unsigned char *best = NULL;
    uint32_t best_arch = 0, best_hsize = 0;
    uint64_t best_psize = 0, best_raw = 0;
    for (uint64_t p = header; p + 64 <= header + total;) {
        uint16_t kind;
        uint32_t hsize, entry_arch;
        uint64_t psize, raw;
        memcpy(&kind, fb + p, 2);
        memcpy(&hsize, fb + p + 4, 4);
        memcpy(&psize, fb + p + 8, 8);
        memcpy(&entry_arch, fb + p + 28, 4);
        memcpy(&raw, fb + p + 56, 8);
        if (!hsize) break;
        if (kind == ENTRY_ELF && entry_arch <= (uint32_t)arch && entry_arch >= best_arch) {
            best = fb + p;
            best_arch = entry_arch;
            best_hsize = hsize;
            best_psize = psize;
            best_raw = raw;
        }
        p += hsize + psize;
    }
    if (!best) return NULL;
    const unsigned char *payload = best + best_hsize;
    uint32_t head;
    memcpy(&head, payload, 4);
    if (!memcmp(payload, "\x7f" "ELF", 4)) return copy_elf(payload, size);
    if (head != ZSTD_MAGIC) return NULL;   /* LZ4: not decoded */
    pthread_once(&g_zstd_once, load_zstd);
    if (!zstd_decompress || !zstd_content_size || !zstd_frame_size) return NULL;
    size_t frame = zstd_frame_size(payload, best_psize);   /* the entry is padded */
    if (frame > best_psize) return NULL;                   /* an error code */
    unsigned long long n = zstd_content_size(payload, best_psize);
    if (n > (1ULL << 32)) n = best_raw;    /* unknown/error codes are huge values */
    if (!n) return NULL;
    void *out = malloc(n);
    size_t got = zstd_decompress(out, n, payload, frame);
    if (got != n) { free(out); return NULL; }
    *size = n;
    return out;
}

static void *extract_cubin(const void *image, size_t *size) {
    const unsigned char *p = image;
    if (!p) return NULL;
    int arch = rv_node()->cc_major * 10 + rv_node()->cc_minor;
    uint32_t magic;
    memcpy(&magic, p, 4);
    if (magic == WRAPPER_MAGIC) {   /* __fatBinC_Wrapper_t { magic, version, data, ... } */
        const void *data;
        memcpy(&data, p + 8, sizeof data);
        return data ? from_fatbin(data, arch, size) : NULL;
    }
    if (magic == FATBIN_MAGIC) return from_fatbin(p, arch, size);
    if (!memcmp(p, "\x7f" "ELF", 4)) return copy_elf(p, size);
    return NULL;   /* PTX text, or a file name */
}

/* KPARAM_INFO entries of one .nv.info.<kernel> section; -1 if malformed. */
static int section_params(const unsigned char *s, uint64_t len, struct rv_kernel_params *out) {
    int n = 0;
    for (uint64_t q = 0; q + 2 <= len;) {
        uint8_t fmt = s[q], attr = s[q + 1];
        q += 2;
        if (fmt == EIFMT_SVAL) {
            uint16_t vlen;
            memcpy(&vlen, s + q, 2);
            q += 2;
            if (attr == EIATTR_KPARAM_INFO && vlen >= 12) {
                uint16_t ordinal, offset;   /* { u32 index; u16 ordinal, offset; u32 bits } */
                uint32_t bits;
                memcpy(&ordinal, s + q + 4, 2);
                memcpy(&offset, s + q + 6, 2);
                memcpy(&bits, s + q + 8, 4);
                if (ordinal < RV_MAX_PARAMS) {
                    out->size[ordinal] = (uint16_t)(bits >> 18);   /* bits 18..31: bytes */
                    out->offset[ordinal] = offset;
                    if (ordinal + 1 > n) n = ordinal + 1;
                    if (offset + out->size[ordinal] > out->param_bytes)
                        out->param_bytes = offset + out->size[ordinal];
                }
            }
            if (attr == EIATTR_EXTERNS) out->module_syscalls = true;   /* the module's: below */
            if (attr == EIATTR_MAX_THREADS && vlen >= 12) {   /* { u32 x, y, z } */
                uint32_t xyz[3];
                memcpy(xyz, s + q, 12);
                out->max_threads = (int)(xyz[0] * xyz[1] * xyz[2]);
            }
            q += vlen;
        } else if (fmt == EIFMT_HVAL || fmt == EIFMT_BVAL) {
            q += 2;   /* records are 4-byte aligned: a byte value is padded to two */
        } else if (fmt != EIFMT_NVAL) {
            return -1;
        }
    }
    return n;
}

/* The kernels of one image by name while it is read: big libraries' cubins hold thousands
 * (open addressing, sized for every section and symbol of the image). */
struct kernel_table {
    struct rv_kernel_params **slot, *list;
    size_t cap;
};

static struct rv_kernel_params *kernel_entry(struct kernel_table *t, const char *name) {
    size_t i = rv_fnv1a(name) % t->cap;
    for (; t->slot[i]; i = (i + 1) % t->cap)
        if (!strcmp(t->slot[i]->kernel, name)) return t->slot[i];
    struct rv_kernel_params *k = calloc(1, sizeof *k);
    k->kernel = strdup(name);
    k->regs = -1;
    k->arg_layout = rv_arg_layout(name);
    k->next = t->list;
    t->list = k;
    t->slot[i] = k;
    return k;
}

/* The module-wide .nv.info: per-kernel {symbol index, value} entries. */
static void module_info(const unsigned char *elf, size_t size, uint64_t off, uint64_t len,
                        const unsigned char *symtab, const unsigned char *symstr,
                        struct kernel_table *table) {
    uint64_t sym_off, sym_len, str_off, str_len;
    memcpy(&sym_off, symtab + 0x18, 8);
    memcpy(&sym_len, symtab + 0x20, 8);
    memcpy(&str_off, symstr + 0x18, 8);
    memcpy(&str_len, symstr + 0x20, 8);
    if (sym_off + sym_len > size || str_off + str_len > size) return;
    const unsigned char *s = elf + off;
    for (uint64_t q = 0; q + 2 <= len;) {
        uint8_t fmt = s[q], attr = s[q + 1];
        q += 2;
        if (fmt != EIFMT_SVAL) {
            if (fmt != EIFMT_NVAL && fmt != EIFMT_HVAL && fmt != EIFMT_BVAL) return;
            q += fmt == EIFMT_NVAL ? 0 : 2;
            continue;
        }
        uint16_t vlen;
        memcpy(&vlen, s + q, 2);
        q += 2;
        if (q + vlen > len) return;
        if ((attr == EIATTR_REGCOUNT || attr == EIATTR_FRAME_SIZE) && vlen >= 8) {
            uint32_t sym, value, name;
            memcpy(&sym, s + q, 4);
            memcpy(&value, s + q + 4, 4);
            if ((uint64_t)sym * 24 + 24 <= sym_len) {
                memcpy(&name, elf + sym_off + (uint64_t)sym * 24, 4);   /* Elf64_Sym.st_name */
                if (name < str_len) {
                    struct rv_kernel_params *k =
                        kernel_entry(table, (const char *)elf + str_off + name);
                    if (attr == EIATTR_REGCOUNT) k->regs = (int)value;
                    else k->local_bytes = (int)value;
                }
            }
        }
        q += vlen;
    }
}

struct rv_kernel_params *rv_cubin_params(const void *image) {
    size_t size = 0;
    unsigned char *elf = extract_cubin(image, &size);
    if (!elf || size < 0x40) { free(elf); return NULL; }
    uint64_t shoff, strtab;
    uint16_t shentsize, shnum, shstrndx;
    memcpy(&shoff, elf + 0x28, 8);
    memcpy(&shentsize, elf + 0x3A, 2);
    memcpy(&shnum, elf + 0x3C, 2);
    memcpy(&shstrndx, elf + 0x3E, 2);
    if (shoff + (size_t)shentsize * shnum > size || shstrndx >= shnum) { free(elf); return NULL; }
    memcpy(&strtab, elf + shoff + (size_t)shstrndx * shentsize + 0x18, 8);
    uint64_t info_off = 0, info_len = 0, symbols = 0;
    const unsigned char *symtab = NULL, *symstr = NULL;
    for (uint16_t i = 0; i < shnum; i++) {   /* every entry names a section or a symbol */
        uint32_t type;
        uint64_t len;
        memcpy(&type, elf + shoff + (size_t)i * shentsize + 4, 4);
        memcpy(&len, elf + shoff + (size_t)i * shentsize + 0x20, 8);
        if (type == 2 /* SHT_SYMTAB */) symbols += len / 24;
    }
    struct kernel_table table = {.cap = 2 * (shnum + symbols) + 16};
    table.slot = calloc(table.cap, sizeof *table.slot);
    /* on sm_90 a kernel's .nv.shared section also holds the block's reserved system shared
     * memory, which the driver reports apart (reservedSharedMemPerBlock) */
    bool known;
    int reserved = rv_attr(CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK, rv_current_dev(),
                           &known);
    for (uint16_t i = 0; i < shnum; i++) {
        const unsigned char *sh = elf + shoff + (size_t)i * shentsize;
        uint32_t name;
        uint64_t off, len;
        memcpy(&name, sh, 4);
        memcpy(&off, sh + 0x18, 8);
        memcpy(&len, sh + 0x20, 8);
        const char *sname = (const char *)elf + strtab + name;
        if (strtab + name >= size) continue;
        if (!strncmp(sname, ".nv.info.", 9) && off + len <= size) {
            struct rv_kernel_params *k = kernel_entry(&table, sname + 9);
            k->count = section_params(elf + off, len, k);
        } else if (!strcmp(sname, ".nv.info") && off + len <= size) {
            info_off = off;
            info_len = len;
        } else if (!strcmp(sname, ".symtab")) {
            uint32_t link;
            memcpy(&link, sh + 0x28, 4);
            symtab = sh;
            symstr = link < shnum ? elf + shoff + (size_t)link * shentsize : NULL;
        } else if (!strncmp(sname, ".text.", 6)) {
            kernel_entry(&table, sname + 6)->text_bytes = (int)len;
        } else if (!strncmp(sname, ".nv.shared.", 11) && strncmp(sname, ".nv.shared.reserved", 19)) {
            kernel_entry(&table, sname + 11)->static_smem =
                (int)len >= reserved ? (int)len - reserved : (int)len;
        }
    }
    if (info_len && symtab && symstr)
        module_info(elf, size, info_off, info_len, symtab, symstr, &table);
    /* The driver sets device-side system calls up when the first kernel of a module that
     * makes any runs, whether or not that kernel makes them (cuda_memory.c) */
    bool syscalls = false;
    for (struct rv_kernel_params *k = table.list; k; k = k->next) syscalls |= k->module_syscalls;
    for (struct rv_kernel_params *k = table.list; k; k = k->next) k->module_syscalls = syscalls;
    free(table.slot);
    free(elf);   /* only the layouts are kept: cubins of big libraries take megabytes */
    return table.list;
}
