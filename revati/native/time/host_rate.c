/* The host's side of the clock rate (docs/timewarp.md, "One rate for CPU work"): how much
 * CPU progress this host's cores make now against the GPU node's host, apart from contention
 * between threads (which timekeeper.c measures per thread).
 *
 * Two factors, multiplied:
 * - speed: the GPU node's time for a fixed workload over this host's, measured on a core
 *   (thread CPU time, so waiting for a core does not count) and pushed here by the
 *   Timekeeper's probe thread (revati/timewarp/host_probe.py); 1 until it is.
 * - steal: the share of the time this host's vCPUs wanted to run that the hypervisor gave
 *   to someone else (/proc/stat). The kernel leaves stolen time out of every thread's CPU
 *   time and run-queue wait (CONFIG_PARAVIRT_TIME_ACCOUNTING), so neither the per-thread
 *   share nor the probe sees it: a thread that was on a vCPU for 10 ms of which 4 were
 *   stolen made 6 ms of progress. /proc/stat counts in 10 ms ticks, so the share is taken
 *   over the last RV_STEAL_WINDOW samples, one every RV_STEAL_SAMPLE_NS. */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>

#include "core_int.h"
#include "host_rate.h"

#define RV_STEAL_SAMPLE_NS 250000000LL
#define RV_STEAL_WINDOW 4 /* samples: 1 s of real time, ~100 ticks per busy vCPU */

static _Atomic int64_t speed_ppm = RV_RATE_ONE;
static int64_t steal_ppm; /* of the last window */
/* cumulative (stolen, wanted) ticks of all CPUs at the last RV_STEAL_WINDOW + 1 samples */
static struct { long long steal, wanted; } ring[RV_STEAL_WINDOW + 1];
static int ring_n, ring_at;
static int64_t last_sample = -RV_STEAL_SAMPLE_NS;

/* Summed over /proc/stat's first line (all CPUs): ticks stolen, and ticks a CPU wanted to
 * run (everything but idle and iowait: user nice system irq softirq steal). */
static bool read_steal(long long *steal, long long *wanted) {
    char buf[512];
    int fd = open("/proc/stat", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    ssize_t n = REAL(read)(fd, buf, sizeof buf - 1);
    REAL(close)(fd);
    if (n <= 0) return false;
    buf[n] = 0;
    long long v[8] = {0};
    if (sscanf(buf, "cpu %lld %lld %lld %lld %lld %lld %lld %lld", &v[0], &v[1], &v[2], &v[3],
               &v[4], &v[5], &v[6], &v[7]) < 8)
        return false;
    *steal = v[7];
    *wanted = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
    return true;
}

void rv_host_rate_reset(void) {
    atomic_store(&speed_ppm, RV_RATE_ONE);
    steal_ppm = 0;
    ring_n = ring_at = 0;
    last_sample = -RV_STEAL_SAMPLE_NS;
}

void rv_host_rate_sample(int64_t now) {
    if (now - last_sample < RV_STEAL_SAMPLE_NS) return;
    last_sample = now;
    long long steal, wanted;
    if (!read_steal(&steal, &wanted)) return;
    ring[ring_at].steal = steal;
    ring[ring_at].wanted = wanted;
    ring_at = (ring_at + 1) % (RV_STEAL_WINDOW + 1);
    if (ring_n < RV_STEAL_WINDOW + 1) ring_n++;
    if (ring_n < 2) return;
    int oldest = ring_n <= RV_STEAL_WINDOW ? 0 : ring_at;
    long long ds = steal - ring[oldest].steal, dw = wanted - ring[oldest].wanted;
    /* under ~20 ticks the host was nearly idle: one stolen tick would read as 5 % */
    if (dw >= 20) steal_ppm = RV_RATE_ONE * ds / dw;
}

int64_t rv_host_rate_ppm(void) {
    return atomic_load(&speed_ppm) * (RV_RATE_ONE - steal_ppm) / RV_RATE_ONE;
}

int64_t rv_host_steal_ppm(void) { return steal_ppm; }

/* The GPU node's CPU speed over this host's, x 1e6 (the probe's reading); kept within
 * 1/10-10, beyond which the reading is wrong, not the host. */
RV_EXPORT void rv_tk_set_speed(int64_t ppm) {
    if (ppm < RV_RATE_ONE / 10) ppm = RV_RATE_ONE / 10;
    if (ppm > RV_RATE_ONE * 10) ppm = RV_RATE_ONE * 10;
    atomic_store(&speed_ppm, ppm);
}
