/* Time-warp core: the part of the preloaded shim that every intercepted library uses.
 *
 * Virtual time = real time + one global offset that only grows. The offset lives in a
 * shared-memory segment created by the Timekeeper, so every emulated process reads the
 * same clock without a round trip. A thread that blocks tells the core (rv_block_*), and
 * the Timekeeper jumps the offset to the earliest deadline once every emulated thread is
 * blocked and nothing is in flight (docs/timewarp.md).
 *
 * This header is the contract for the device shim (CUDA driver, NVML, NCCL, cuBLAS):
 * a host synchronisation is `rv_sleep_until(completion_ns, "cuStreamSynchronize")`.
 */
#ifndef REVATI_CORE_H
#define REVATI_CORE_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#define RV_EXPORT __attribute__((visibility("default")))

/* ---- clocks ---------------------------------------------------------------------- */

/* Real (host) time of a clock, bypassing the shim. */
RV_EXPORT int64_t rv_real_ns(clockid_t clk);
/* Virtual time of a clock (real + offset for the warped clocks, real for CPU clocks). */
RV_EXPORT int64_t rv_virtual_ns(clockid_t clk);
/* Virtual CLOCK_MONOTONIC in ns: the time base of GPU timelines. */
RV_EXPORT int64_t rv_now_ns(void);
/* Current warp offset in ns (0 when not attached to a Timekeeper). */
/* True when this process is attached to a Timekeeper (time is being warped). */
RV_EXPORT bool rv_attached(void);

/* ---- waits ----------------------------------------------------------------------- */

/* Block the calling thread until virtual CLOCK_MONOTONIC reaches deadline_ns. This is a
 * time-warp wait: the Timekeeper may jump straight to deadline_ns once every other
 * emulated thread is blocked. `call` names the waiting API for deadlock reports.
 * Returns immediately if the deadline has passed. */
RV_EXPORT void rv_sleep_until(int64_t deadline_ns, const char *call);

/* The end of a blocking call the shim brackets (rv_block_begin_kind in core_int.h);
 * deadlines are virtual CLOCK_MONOTONIC, or RV_NO_DEADLINE for an untimed wait. */
#define RV_NO_DEADLINE INT64_MAX
struct rv_wait;
RV_EXPORT void rv_block_end(struct rv_wait *w);

/* ---- CPU work at the node's speed (docs/timewarp.md, "GPU-driving threads") ----------- */

/* The calling thread's CPU work counts `ppm` / 1e6 times what the clock rate gives other
 * threads' (at most 1e6: a thread's factor only ever slows the clock while it runs; a
 * larger one is paid as a lag, rv_lag_add, by the device shim's dilate_cpu). */
RV_EXPORT void rv_set_cpu_factor(int64_t ppm);
/* The calling thread's work takes `ns` more of virtual time than the clock gave it (the node's
 * slower CPU; the device shim's dilate_cpu). The thread's own time then runs that far ahead
 * of the shared clock until it next blocks: its clock reads, the deadlines it computes and
 * its GPU launches are that much later. A wait runs on the shared clock, so a thread woken by
 * another before its own time resumes when woken (docs/timewarp.md, "GPU-driving threads").
 * A lag of 5 ms is waited out at once; not attached, a lag of 1 ms is slept in real time. */
RV_EXPORT void rv_lag_add(int64_t ns);
/* The clock rate's host factor now (the GPU node's CPU speed over this host's, less stolen
 * time), x 1e6; 1e6 when the rate is off or the process is not attached. */
RV_EXPORT int64_t rv_host_factor_ppm(void);

/* ---- logging and tracing --------------------------------------------------------- */

enum rv_level { RV_ERROR = 0, RV_WARN = 1, RV_INFO = 2, RV_DEBUG = 3 };
RV_EXPORT void rv_log(enum rv_level lvl, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Log `name` once per process at WARN level: for entry points that are not implemented.
 * Also appended to the run's notices file (REVATI_NOTICES), which `revati doctor` reads.
 * `name` must stay valid for the life of the process (the set of names logged keeps it). */
RV_EXPORT void rv_log_once(const char *what, const char *name);

/* Append one Chrome "complete" event (ph X) to this process's trace, when tracing is on.
 * track: a thread/track name ("stream 0x7f.. dev0"); times in virtual ns; args_json is
 * a JSON object text or NULL. Cheap no-op when tracing is off. */
RV_EXPORT void rv_trace_complete(const char *track, const char *name, int64_t start_ns,
                                 int64_t dur_ns, const char *args_json);
RV_EXPORT bool rv_tracing(void);

#endif
