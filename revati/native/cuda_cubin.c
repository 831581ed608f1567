/* Kernel parameter layouts from the images modules are loaded from.
 *
 * The driver is handed fatbins (cudart, with a wrapper or without), or bare cubins (Triton).
 * The cubin for this GPU's architecture is an ELF whose .nv.info.<kernel> section lists each
 * parameter's offset and size (EIATTR_KPARAM_INFO), which cuFuncGetParamInfo reports.
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
#define EIATTR_KPARAM_INFO 0x17
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
                }
            }
            q += vlen;
        } else if (fmt == EIFMT_HVAL) {
            q += 2;
        } else if (fmt == EIFMT_BVAL) {
            q += 1;
        } else if (fmt != EIFMT_NVAL) {
            return -1;
        }
    }
    return n;
}

struct rv_kernel_params *rv_cubin_params(const void *image) {
    size_t size = 0;
    unsigned char *elf = extract_cubin(image, &size);
    if (!elf || size < 0x40) { free(elf); return NULL; }
    struct rv_kernel_params *list = NULL;
    uint64_t shoff, strtab;
    uint16_t shentsize, shnum, shstrndx;
    memcpy(&shoff, elf + 0x28, 8);
    memcpy(&shentsize, elf + 0x3A, 2);
    memcpy(&shnum, elf + 0x3C, 2);
    memcpy(&shstrndx, elf + 0x3E, 2);
    if (shoff + (size_t)shentsize * shnum > size || shstrndx >= shnum) { free(elf); return NULL; }
    memcpy(&strtab, elf + shoff + (size_t)shstrndx * shentsize + 0x18, 8);
    for (uint16_t i = 0; i < shnum; i++) {
        const unsigned char *sh = elf + shoff + (size_t)i * shentsize;
        uint32_t name;
        uint64_t off, len;
        memcpy(&name, sh, 4);
        memcpy(&off, sh + 0x18, 8);
        memcpy(&len, sh + 0x20, 8);
        const char *sname = (const char *)elf + strtab + name;
        if (strtab + name >= size || strncmp(sname, ".nv.info.", 9) || off + len > size) continue;
        struct rv_kernel_params *k = calloc(1, sizeof *k);
        k->count = section_params(elf + off, len, k);
        k->kernel = strdup(sname + 9);
        k->next = list;
        list = k;
    }
    free(elf);   /* only the layouts are kept: cubins of big libraries take megabytes */
    return list;
}
