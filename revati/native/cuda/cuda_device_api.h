/* What librevati_cuda.so offers the other device libraries of the shim (NCCL), beyond the
 * CUDA driver API itself.
 *
 * A collective's completion depends on every rank: rv_cuda_enqueue_joined() queues one on
 * a stream. It calls join(ctx, arrival, &busy) with the virtual time at which the stream
 * can start the operation; join waits for the other ranks (it may block), and returns the
 * completion time, setting busy to the predicted duration. The stream's tail moves to the
 * completion. While the stream captures a CUDA graph, the operation is recorded instead
 * (*captured is set) and join is called at every replay, so ctx must then stay valid as long
 * as the graph; otherwise join has run before the call returns and ctx may be freed. */
#ifndef REVATI_CUDA_DEVICE_API_H
#define REVATI_CUDA_DEVICE_API_H

#include <cuda.h>
#include <stdbool.h>
#include <stdint.h>

#include "predict.h"

typedef int64_t (*rv_join_fn)(void *ctx, int64_t arrival_ns, int64_t *busy_ns);

__attribute__((visibility("default")))
CUresult rv_cuda_enqueue_joined(CUstream stream, const char *name, rv_join_fn join, void *ctx,
                                bool *captured);

/* cuBLAS/cuBLASLt calls (the cuBLAS shim): between begin and end, the first kernel the
 * calling thread launches is the GEMM `gemm` describes (op RV_OP_GEMM with m, n, k, batch,
 * dtypes, transposes), so the predictor sees the problem's shape, not only the kernel's
 * launch shape; further kernels of the same call (split-K reductions) stay plain kernels. */
__attribute__((visibility("default"))) void rv_cuda_gemm_begin(const struct rv_launch *gemm);
__attribute__((visibility("default"))) void rv_cuda_gemm_end(void);

/* What a collective receives (the NCCL shim): [p, p + n) of device memory now holds what
 * other ranks' kernels computed, which no kernel computes here, so it reads zero, to copies
 * and to the kernels computed on the host alike, never what an earlier tensor left there. */
__attribute__((visibility("default"))) void rv_cuda_received(CUdeviceptr p, size_t n);

#endif
