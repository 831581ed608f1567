/* Layout of the shared-memory segment one Timekeeper shares with every emulated process.
 *
 * Private to the native code; bump RV_SHM_VERSION on any change.
 *
 * Accounting model (docs/timewarp.md): each emulated process has a proc slot whose `running`
 * counts its threads that can act now; each thread has a slot saying whether it runs or
 * waits, and until which virtual deadline. When the last running thread of the last
 * busy process blocks, it wakes the Timekeeper (futex on tk_futex), which verifies that
 * nothing is in flight and jumps virtual time to the earliest deadline.
 *
 * Virtual CLOCK_MONOTONIC is a piecewise-linear map of the real one:
 *     virtual = base_virt + (real - base_real) * rate_ppm / 1e6
 * A jump re-bases it further ahead; a rate change (CPU contention, see timekeeper.c)
 * re-bases it where it stands, so it stays continuous and never goes back. The
 * Timekeeper is its only writer; readers take it under the `map_seq` seqlock. Other
 * warped clocks keep their real distance to the monotonic one.
 */
#ifndef REVATI_SHM_H
#define REVATI_SHM_H

#include <stdatomic.h>
#include <stdint.h>

#define RV_SHM_MAGIC 0x5245564154493031ULL /* "REVATI01" */
#define RV_SHM_VERSION 4
#define RV_MAX_PROCS 512
#define RV_MAX_THREADS 8192
#define RV_CALL_LEN 32
#define RV_CMD_LEN 64

enum rv_thread_state {
    RV_T_FREE = 0,
    RV_T_RUNNING = 1,  /* counted in its proc's `running` */
    RV_T_BLOCKED = 2,  /* in a wrapped blocking call; not counted */
    RV_T_WAKING = 3,   /* woken by the Timekeeper, counted again before it runs */
};

/* How the Timekeeper wakes a blocked thread whose deadline a jump reached. */
enum rv_wake_kind {
    RV_WAKE_FUTEX = 0,  /* sleeping on its slot's `wake` futex word */
    RV_WAKE_SIGNAL = 1, /* in poll/epoll/select/sem: the wake signal makes it return EINTR */
    RV_WAKE_NONE = 2,   /* an untimed wait: no deadline for the Timekeeper to reach */
};

enum rv_proc_state {
    RV_P_FREE = 0,
    RV_P_PENDING = 1, /* reserved by a parent for a child that has not started yet */
    RV_P_LIVE = 2,
    RV_P_EXEC = 3,    /* between execve and the new image's shim constructor */
};

struct rv_thread {
    _Atomic int32_t state;
    _Atomic int32_t pid;
    int32_t tid;
    int32_t proc;             /* index in procs[] */
    _Atomic int64_t deadline; /* virtual CLOCK_MONOTONIC ns, INT64_MAX = none */
    _Atomic uint32_t wake;    /* futex word, bumped by the Timekeeper */
    _Atomic int32_t kind;     /* enum rv_wake_kind */
    _Atomic uint32_t gen;     /* bumped at every block: tells one wait from the next */
    _Atomic uint32_t sends;   /* bumped before and after each wrapped send, write, post or
                               * signal: odd while the thread is inside one */
    _Atomic int64_t since_real; /* real CLOCK_MONOTONIC ns when it blocked */
    _Atomic int32_t cpu_factor_ppm; /* its CPU counts this x the rate's, x 1e6; 0: 1 (set by
                                     * the thread, rv_set_cpu_factor; read by the Timekeeper) */
    char call[RV_CALL_LEN];
};

struct rv_proc {
    _Atomic int32_t state;
    _Atomic int32_t pid;
    _Atomic int32_t owner;    /* pid of the parent that reserved this slot */
    _Atomic int32_t running;  /* threads of this process that can act */
    _Atomic int64_t stamp_real; /* real ns of the last state change (pending/exec expiry) */
    char cmd[RV_CMD_LEN];
};

struct rv_shm {
    uint64_t magic;
    uint32_t version;
    int32_t wake_signal;        /* signal number used to interrupt fd/sem waits */
    _Atomic uint32_t map_seq;   /* seqlock of the clock map: odd while it changes */
    int32_t _pad0;
    _Atomic int64_t base_real;  /* real CLOCK_MONOTONIC ns ... */
    _Atomic int64_t base_virt;  /* ... and the virtual ns it maps to */
    _Atomic int64_t rate_ppm;   /* virtual ns per real ns, x 1e6 (1000000: real speed) */
    _Atomic int64_t host_ppm;   /* the rate's host factor (host_rate.c), x 1e6 */
    _Atomic uint32_t tk_futex;  /* the Timekeeper sleeps on this */
    _Atomic uint32_t jumps;
    _Atomic uint64_t activity;  /* bumped at every block and wrapped write/post */
    _Atomic int64_t last_write_real; /* real ns of the last wrapped write/send/post */
    _Atomic int32_t thread_hwm; /* slots [0, hwm) may be in use */
    _Atomic int32_t proc_hwm;
    _Atomic int32_t pollers;    /* threads sleeping as confirmed-idle pollers */
    _Atomic uint32_t poll_futex; /* idle pollers sleep on this; bumped on activity */
    int32_t trace_on;
    int32_t log_level;
    char trace_dir[256];
    struct rv_proc procs[RV_MAX_PROCS];
    struct rv_thread threads[RV_MAX_THREADS];
};

#endif
