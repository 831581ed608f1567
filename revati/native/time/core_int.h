/* Internals shared by core.c (shared memory, thread registry, waits), timeshim.c (libc
 * wrappers) and timekeeper.c (the jump decision). Not part of the device-shim contract. */
#ifndef REVATI_CORE_INT_H
#define REVATI_CORE_INT_H

#include <signal.h>
#include <sys/types.h>

#include "core.h"
#include "shm.h"

extern struct rv_shm *rv_shm;            /* NULL when not attached */
extern int rv_proc_idx;                  /* this process's slot in rv_shm->procs */
extern _Thread_local volatile sig_atomic_t rv_tl_woken; /* set by the wake-signal handler */
extern _Thread_local int64_t rv_tl_lag; /* rv_lag_add: how far this thread's own time is ahead */
/* The real deadline of a wait that glibc restarts after EINTR (condition variables, timed
 * mutex locks): the wake-signal handler moves it into the past to end that wait. */
extern _Thread_local struct timespec *volatile rv_tl_wait_abs;

/* Thread-local state of the wait in progress (waits do not nest; see rv_block_begin_kind). */
struct rv_wait {
    struct rv_thread *t;
    int64_t deadline;
    int depth;
};

/* Real libc entry points, resolved with dlsym(RTLD_NEXT) on first use. */
void *rv_resolve(const char *name);
#define RV_REAL(ret, name, ...)                                                          \
    typedef ret (*rv_##name##_fn)(__VA_ARGS__);                                          \
    extern rv_##name##_fn rv_real_##name;                                                \
    static inline rv_##name##_fn rv_get_##name(void) {                                   \
        if (!rv_real_##name) rv_real_##name = (rv_##name##_fn)rv_resolve(#name);        \
        return rv_real_##name;                                                           \
    }
#include "real_fns.h"
#undef RV_REAL
#define REAL(name) (rv_get_##name())

bool rv_warped_clock(clockid_t clk);
int64_t rv_ts_to_ns(const struct timespec *ts);
struct timespec rv_ns_to_ts(int64_t ns);
/* Virtual CLOCK_MONOTONIC deadline for an absolute time `abs` on clock `clk` (virtual). */
int64_t rv_abs_to_mono_deadline(clockid_t clk, const struct timespec *abs);
/* Real CLOCK_MONOTONIC time at which the virtual monotonic deadline falls, if no jump. */
#define RV_RATE_ONE 1000000LL /* rate_ppm of real speed */
/* virtual CLOCK_MONOTONIC ns of real CLOCK_MONOTONIC ns `real` under a clock map */
int64_t rv_map_virt(int64_t base_real, int64_t base_virt, int64_t rate_ppm, int64_t real);
uint32_t rv_map_gen(void);         /* changes whenever the clock map does */
int64_t rv_warp_ns(clockid_t clk, int64_t real); /* virtual value of a warped clock's reading */
int64_t rv_real_for_virt(int64_t vleft, int64_t rate_ppm); /* real ns of vleft at a rate */
int64_t rv_real_wait_ns(int64_t vleft); /* real ns a wait of vleft virtual ns takes now */

/* Waits with an explicit wake kind (enum rv_wake_kind). */
struct rv_wait *rv_block_begin_kind(int64_t deadline_ns, const char *call, int kind);
/* Sleep on the slot futex until woken or until real_deadline (real CLOCK_MONOTONIC ns).
 * Returns 0, or EINTR when an application signal handler ran. */
int rv_futex_sleep(struct rv_wait *w, int64_t vdeadline);
/* Around a wrapped send, write, post or signal (a wake of another thread): notes the write
 * for the jump rule and marks the calling thread as inside a wake (docs/timewarp.md,
 * "Hand-offs on a shared core"). */
void rv_send_begin(void);
void rv_send_end(void);
/* Signal mask to use inside a wait so that the wake signal can interrupt it. */
void rv_wait_sigmask(const sigset_t *base, sigset_t *out);
int rv_wake_signal(void);

/* Process lifecycle (fork/spawn/exec) */
int rv_reserve_child(void);                 /* -1 when not attached */
void rv_child_started(int idx, pid_t pid);  /* in the parent, after fork/spawn */
void rv_child_failed(int idx);
extern _Thread_local bool rv_tl_in_fork; /* inside our fork() wrapper */
void rv_after_fork_in_child(int idx);
void rv_thread_started(void);             /* first thing a new thread runs */
void rv_exec_begin(void);
void rv_exec_failed(void);
/* Earliest virtual deadline of the timerfds behind fds (timerfd.c). */
int64_t rv_timers_deadline(const int *fds, int n);
/* Idle-poller accounting for spinning threads (sched_yield, zero timeouts). */
bool rv_poll_idle(void);
void rv_poll_busy(void);

#endif
