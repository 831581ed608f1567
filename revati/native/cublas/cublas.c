/* GEMM-shape observation for cuBLAS and cuBLASLt (librevati_cublas.so, preloaded).
 *
 * The real cuBLAS runs unmodified on the emulated driver: it picks its kernel and launches
 * it, and the launch alone says little about the work (an nvjet kernel's grid depends on
 * the tile, not on k). This library interposes the GEMM entry points torch and the engines
 * call, tells the driver shim the problem's shape (rv_cuda_gemm_begin) and calls the real
 * function, so the kernel it launches reaches the predictor as RV_OP_GEMM with m, n, k.
 *
 * torch binds these symbols through its RPATH, in a local scope, so the real functions are
 * looked up in the already loaded libcublas/libcublasLt by SONAME, not with RTLD_NEXT. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>

#include "core.h"
#include "cuda_device_api.h"

#define EXPORT __attribute__((visibility("default")))
#define CUBLAS "libcublas.so.13"
#define CUBLASLT "libcublasLt.so.13"

typedef int cublasStatus_t;
typedef void *cublasHandle_t;
typedef void *cublasLtHandle_t;
typedef void *cublasLtMatmulDesc_t;
typedef void *cublasLtMatrixLayout_t;
typedef int cublasOperation_t;     /* CUBLAS_OP_N = 0, T = 1, C = 2 */
typedef int cudaDataType;
typedef void *cudaStream_t;

enum { CUDA_R_32F = 0, CUDA_R_64F = 1, CUDA_R_16F = 2, CUDA_R_8I = 3, CUDA_R_32I = 10,
       CUDA_R_16BF = 14, CUDA_R_8F_E4M3 = 28, CUDA_R_8F_E5M2 = 29 };
enum { LT_LAYOUT_TYPE = 0, LT_LAYOUT_ROWS = 2, LT_LAYOUT_COLS = 3, LT_LAYOUT_BATCH_COUNT = 5 };
enum { LT_DESC_TRANSA = 3, LT_DESC_TRANSB = 4 };

static void *real(const char *lib, const char *name) {
    void *h = dlopen(lib, RTLD_LAZY | RTLD_NOLOAD);
    void *f = h ? dlsym(h, name) : NULL;
    if (!f) f = dlsym(RTLD_NEXT, name);
    if (!f) {
        rv_log(RV_ERROR, "cuBLAS shim: the real %s is not loaded", name);
        abort();
    }
    return f;
}
#define REAL(lib, name) \
    static __typeof__(&name) real_fn; \
    if (!real_fn) real_fn = (__typeof__(&name))real(lib, #name)

static int dtype(cudaDataType t) {
    switch (t) {
    case CUDA_R_32F: return RV_DT_F32;
    case CUDA_R_64F: return RV_DT_F64;
    case CUDA_R_16F: return RV_DT_F16;
    case CUDA_R_16BF: return RV_DT_BF16;
    case CUDA_R_8F_E4M3: return RV_DT_FP8_E4M3;
    case CUDA_R_8F_E5M2: return RV_DT_FP8_E5M2;
    case CUDA_R_8I: return RV_DT_I8;
    case CUDA_R_32I: return RV_DT_I32;
    default: return RV_DT_NONE;
    }
}

static void begin(int64_t m, int64_t n, int64_t k, int64_t batch, int a, int b, int c, int ta, int tb) {
    struct rv_launch l = {.op = RV_OP_GEMM, .m = m, .n = n, .k = k, .batch = batch,
                          .dtype_a = a, .dtype_b = b, .dtype_c = c, .trans_a = ta != 0, .trans_b = tb != 0};
    rv_cuda_gemm_begin(&l);
}

/* ---- cuBLAS -------------------------------------------------------------------------------- */
EXPORT cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                                   int k, const void *alpha, const void *A, cudaDataType at, int lda, const void *B,
                                   cudaDataType bt, int ldb, const void *beta, void *C, cudaDataType ct, int ldc,
                                   int compute, int algo) {
    REAL(CUBLAS, cublasGemmEx);
    begin(m, n, k, 1, dtype(at), dtype(bt), dtype(ct), ta, tb);
    cublasStatus_t r = real_fn(h, ta, tb, m, n, k, alpha, A, at, lda, B, bt, ldb, beta, C, ct, ldc, compute, algo);
    rv_cuda_gemm_end();
    return r;
}
EXPORT cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb,
                                                 int m, int n, int k, const void *alpha, const void *A,
                                                 cudaDataType at, int lda, long long sa, const void *B,
                                                 cudaDataType bt, int ldb, long long sb, const void *beta, void *C,
                                                 cudaDataType ct, int ldc, long long sc, int batch, int compute,
                                                 int algo) {
    REAL(CUBLAS, cublasGemmStridedBatchedEx);
    begin(m, n, k, batch, dtype(at), dtype(bt), dtype(ct), ta, tb);
    cublasStatus_t r = real_fn(h, ta, tb, m, n, k, alpha, A, at, lda, sa, B, bt, ldb, sb, beta, C, ct, ldc, sc,
                               batch, compute, algo);
    rv_cuda_gemm_end();
    return r;
}
EXPORT cublasStatus_t cublasSgemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                                    int k, const float *alpha, const void *A, cudaDataType at, int lda,
                                    const void *B, cudaDataType bt, int ldb, const float *beta, void *C,
                                    cudaDataType ct, int ldc) {
    REAL(CUBLAS, cublasSgemmEx);
    begin(m, n, k, 1, dtype(at), dtype(bt), dtype(ct), ta, tb);
    cublasStatus_t r = real_fn(h, ta, tb, m, n, k, alpha, A, at, lda, B, bt, ldb, beta, C, ct, ldc);
    rv_cuda_gemm_end();
    return r;
}
EXPORT cublasStatus_t cublasSgemm_v2(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                                     int k, const float *alpha, const float *A, int lda, const float *B, int ldb,
                                     const float *beta, float *C, int ldc) {
    REAL(CUBLAS, cublasSgemm_v2);
    begin(m, n, k, 1, RV_DT_F32, RV_DT_F32, RV_DT_F32, ta, tb);
    cublasStatus_t r = real_fn(h, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
    rv_cuda_gemm_end();
    return r;
}
EXPORT cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb,
                                                int m, int n, int k, const float *alpha, const float *A, int lda,
                                                long long sa, const float *B, int ldb, long long sb,
                                                const float *beta, float *C, int ldc, long long sc, int batch) {
    REAL(CUBLAS, cublasSgemmStridedBatched);
    begin(m, n, k, batch, RV_DT_F32, RV_DT_F32, RV_DT_F32, ta, tb);
    cublasStatus_t r = real_fn(h, ta, tb, m, n, k, alpha, A, lda, sa, B, ldb, sb, beta, C, ldc, sc, batch);
    rv_cuda_gemm_end();
    return r;
}
EXPORT cublasStatus_t cublasDgemm_v2(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                                     int k, const double *alpha, const double *A, int lda, const double *B, int ldb,
                                     const double *beta, double *C, int ldc) {
    REAL(CUBLAS, cublasDgemm_v2);
    begin(m, n, k, 1, RV_DT_F64, RV_DT_F64, RV_DT_F64, ta, tb);
    cublasStatus_t r = real_fn(h, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
    rv_cuda_gemm_end();
    return r;
}

/* ---- cuBLASLt: the shape lives in the matrix layouts and the operation descriptor --------- */
cublasStatus_t cublasLtMatrixLayoutGetAttribute(cublasLtMatrixLayout_t l, int attr, void *buf, size_t size,
                                                size_t *written);
cublasStatus_t cublasLtMatmulDescGetAttribute(cublasLtMatmulDesc_t d, int attr, void *buf, size_t size,
                                              size_t *written);

static int64_t layout_attr(cublasLtMatrixLayout_t l, int attr, size_t size) {
    REAL(CUBLASLT, cublasLtMatrixLayoutGetAttribute);
    uint64_t v = 0;   /* rows/cols are uint64, type uint32, batch count int32 */
    size_t written;
    if (!l || real_fn(l, attr, &v, size, &written) != 0) return 0;
    return size == 4 ? (int64_t)(int32_t)(uint32_t)v : (int64_t)v;
}
static int desc_trans(cublasLtMatmulDesc_t d, int attr) {
    REAL(CUBLASLT, cublasLtMatmulDescGetAttribute);
    int32_t v = 0;
    size_t written;
    return d && real_fn(d, attr, &v, sizeof v, &written) == 0 ? v : 0;
}

EXPORT cublasStatus_t cublasLtMatmul(cublasLtHandle_t h, cublasLtMatmulDesc_t desc, const void *alpha,
                                     const void *A, cublasLtMatrixLayout_t Al, const void *B,
                                     cublasLtMatrixLayout_t Bl, const void *beta, const void *C,
                                     cublasLtMatrixLayout_t Cl, void *D, cublasLtMatrixLayout_t Dl,
                                     const void *algo, void *workspace, size_t ws, cudaStream_t stream) {
    REAL(CUBLASLT, cublasLtMatmul);
    int ta = desc_trans(desc, LT_DESC_TRANSA), tb = desc_trans(desc, LT_DESC_TRANSB);
    int64_t m = layout_attr(Dl, LT_LAYOUT_ROWS, 8), n = layout_attr(Dl, LT_LAYOUT_COLS, 8);
    int64_t k = layout_attr(Al, ta ? LT_LAYOUT_ROWS : LT_LAYOUT_COLS, 8);
    int64_t batch = layout_attr(Dl, LT_LAYOUT_BATCH_COUNT, 4);
    begin(m, n, k, batch > 0 ? batch : 1, dtype((int)layout_attr(Al, LT_LAYOUT_TYPE, 4)),
          dtype((int)layout_attr(Bl, LT_LAYOUT_TYPE, 4)), dtype((int)layout_attr(Dl, LT_LAYOUT_TYPE, 4)), ta, tb);
    cublasStatus_t r = real_fn(h, desc, alpha, A, Al, B, Bl, beta, C, Cl, D, Dl, algo, workspace, ws, stream);
    rv_cuda_gemm_end();
    return r;
}
