/* The GPU node's host CPU: CPU dilation of the threads that drive a GPU
 * (REVATI_CPU_DILATION; dilate_cpu, called by cuda_stream.c before it queues work or
 * waits for the GPU). */
#include "cuda_internal.h"

#include <stdlib.h>

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* ---- the GPU node's host CPU --------------------------------------------------------- */
/* CPU work counts in virtual time at the clock rate's speed, the node's over this host's for
 * revati.hostspeed's Python workload; the engine thread that launches a step's kernels does
 * other work, PyTorch's operator dispatch, whose speeds compare otherwise: the H200 node
 * dispatched 1.4x slower than one development VM where Python ran about as fast, and took 2x
 * its CPU time for a step that runs outside CUDA graphs (validation/vllm/llama3_8b/
 * 2026-12-02-real-steps/), which then starves its GPU; the same kind of VM on another day
 * dispatched 1.6x slower than the node where Python ran 1.2x slower (docs/timewarp.md,
 * "GPU-driving threads"). REVATI_CPU_DILATION=f makes every thread that drives a GPU count
 * f times what the rate gives its CPU time:
 * - f > 1: when it queues work or waits for the GPU, its own time moves (f - 1) x the virtual
 *   time the rate's host factor (rv_host_factor_ppm: speed, less steal; not the contention
 *   share, which a thread's own CPU clock already leaves out) gives the CPU time it used since
 *   its last such call (rv_lag_add): its launches reach the timelines, and its waits for them
 *   end, when they would on the slower node. Not a sleep per debt: each sleep handed the core
 *   to other processes, and vLLM's engine thread ran its steps 15-55 % slower for it
 *   (docs/timewarp.md, "GPU-driving threads");
 * - f < 1: its own time cannot fall behind the shared clock, so the thread tells the
 *   Timekeeper its factor at its GPU calls, and the clock runs f times slower while no thread
 *   without such a factor does work (timekeeper.c, sample_contention).
 * Only GPU-driving threads pay: an API server or a load generator never calls here. */
/* A long stretch of CPU between two GPU calls is not launch work: SGLang's scheduler thread,
 * which launches the GPU work too, busy-polls for requests between steps, and charging that
 * spin delayed each prefill after an idle gap by (f - 1) x the gap (mean TTFT +62 % on the
 * prefill-heavy load at f = 1.58). A step's launch work comes in short pieces (vLLM's mixed
 * steps: ~450 launches in 17 ms of CPU; between steps a few ms of scheduling), so at most this
 * much CPU counts per interval. */
#define DILATION_MAX_STRETCH_NS 5000000
static double g_dilation = 1.0;
static pthread_once_t g_dilation_once = PTHREAD_ONCE_INIT;
static __thread int64_t t_cpu_seen = -1;

static void read_dilation(void) {
    const char *v = getenv("REVATI_CPU_DILATION");
    if (!v || !*v) return;
    char *end;
    double f = strtod(v, &end);
    if (*end || !(f >= 0.1 && f <= 100.0)) {
        rv_log(RV_ERROR, "REVATI_CPU_DILATION=%s: expected a number from 0.1 to 100", v);
        abort();
    }
    g_dilation = f;
}

void dilate_cpu(void) {
    pthread_once(&g_dilation_once, read_dilation);
    if (g_dilation == 1.0) return;
    if (g_dilation < 1.0) { /* every call, not once: a forked child's thread has a new slot */
        rv_set_cpu_factor((int64_t)(g_dilation * 1e6 + 0.5));
        return;
    }
    int64_t cpu = rv_real_ns(CLOCK_THREAD_CPUTIME_ID);
    if (t_cpu_seen >= 0) {
        int64_t used = min64(cpu - t_cpu_seen, DILATION_MAX_STRETCH_NS);
        rv_lag_add((int64_t)((double)used * (g_dilation - 1.0) *
                             (double)rv_host_factor_ppm() / 1e6));
    }
    t_cpu_seen = cpu;
}
