/* Sustained power: the power-limit slowdown of compute-bound work (predict_int.h). */
#include "predict_int.h"

/* ---------------------------------------------------------------- sustained power */

/* Compute-bound work slows down once the GPU holds its power limit: on the H200 the SM clock
 * fell from 1,980 to about 1,470 MHz within some 50 ms of back-to-back compute-bound GEMMs,
 * which then took 1.18-1.27x their time at boost clock (attention prefill 1.31-1.36x), while
 * memory-bound GEMMs, copies and element-wise kernels kept their speed (the HBM clock stays);
 * a GEMM busy less than ~63 % of the time did not slow down at all (rv_power_throttle).
 * The profile measured every kernel at boost clock, cold. How compute-bound a launch is comes
 * from its roofline on this GPU: with r = compute time / memory time at peak rates, GEMMs with
 * r below 0.3 kept their speed and those above 1 slowed fully; between, linearly. Kernels
 * whose work the emulator does not know (plain launches) count as memory-bound.
 * Memory-bound kernels do not slow down, but they draw power: a serving GPU fills the time
 * between its compute-bound prefills with decode steps, not with idling, and the spec's
 * memory_load (measured: tools/calibrate/power_h200.py measure-fill) is the power load they
 * put on the power state, where an idle GPU puts 0 and compute-bound work 1. Copies and
 * memsets run on the copy engines and count as idle.
 * Returns the launch's load (0..1, for the power state the device shim keeps), *hot_extra the
 * fraction it slows down by at the power limit, and *tau_ns the power state's time constant
 * (0: sustained power not modelled). */
EXPORT double rv_power_load(const struct rv_launch *l, double *hot_extra, double *tau_ns)
{
    pthread_once(&g_once, init);
    *hot_extra = 0;
    *tau_ns = g_power[PW_TAU_MS] * 1e6;
    if (g_power[PW_TAU_MS] <= 0) return 0;
    if (l->op == RV_OP_MEMCPY || l->op == RV_OP_MEMSET) return 0;
    double memory = g_power[PW_MEMORY];
    double tc, tm, slowdown;
    if (l->op == RV_OP_GEMM) {
        gemm_times(l, g_spec, &tc, &tm);
        slowdown = g_power[PW_GEMM];
    } else if (rv_predict_by_batch(l)) {
        struct rv_attn_shape part[2], whole;
        int n = batch_now(part, &whole);
        if (n == 0) return memory;
        attn_times(n == 2 ? &whole : &part[0], g_spec, &tc, &tm);
        slowdown = g_power[PW_ATTENTION];
    } else {
        return memory;
    }
    double share = tm > 0 ? (tc / tm - 0.3) / 0.7 : 1;
    share = share < 0 ? 0 : share > 1 ? 1 : share;
    *hot_extra = (slowdown - 1) * share;
    return memory + (1 - memory) * share;
}

/* How far the GPU is throttled (0..1) at power state h: not at all while the recent power
 * draw stays under the limit, fully from the spec's throttle_full on. Measured on the H200
 * with a compute-bound GEMM run at duty cycles from 12 to 97 %: no slowdown up to 63 % busy,
 * 69 % of the full slowdown at 73 %, 94 % at 86 %. */
EXPORT double rv_power_throttle(double h)
{
    if (g_power[PW_TAU_MS] <= 0) return 0;
    double f = (h - g_power[PW_ONSET]) / (g_power[PW_FULL] - g_power[PW_ONSET]);
    return f < 0 ? 0 : f > 1 ? 1 : f;
}

/* The device shim's power-limit slowdown of a launch (ns beyond its prediction), counted
 * with the measured models' GPU time: it is a measured effect on modelled launches. */
EXPORT void rv_power_count(int64_t extra_ns)
{
    count_prediction(extra_ns, RV_SRC_MODEL, false);
}
