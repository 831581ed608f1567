/* Time-warp core: attaching to the Timekeeper's shared memory, the virtual clock, the
 * thread/process registry and the blocking protocol. See shm.h for the accounting model. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core_int.h"

#define RV_REAL(ret, name, ...) rv_##name##_fn rv_real_##name;
#include "real_fns.h"
#undef RV_REAL

struct rv_shm *rv_shm;
int rv_proc_idx = -1;
_Thread_local volatile sig_atomic_t rv_tl_woken;
_Thread_local int64_t rv_tl_lag;
_Thread_local struct timespec *volatile rv_tl_wait_abs;

static _Thread_local struct rv_thread *tl_slot;
static _Thread_local struct rv_wait tl_wait;
static int log_level = RV_WARN;
static pid_t my_pid;
static int wake_sig;
static FILE *trace_file;
static pthread_mutex_t trace_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_key_t thread_key;

void *rv_resolve(const char *name) {
    void *p = dlsym(RTLD_NEXT, name);
    if (!p) {
        fprintf(stderr, "[revati] fatal: cannot resolve libc symbol %s\n", name);
        abort();
    }
    return p;
}

/* ---- logging ------------------------------------------------------------------- */

void rv_log(enum rv_level lvl, const char *fmt, ...) {
    if ((int)lvl > log_level) return;
    static const char *names[] = {"error", "warn", "info", "debug"};
    char buf[1024];
    int n = snprintf(buf, sizeof buf, "[revati %s pid=%d tid=%ld] ", names[lvl], (int)getpid(),
                     (long)REAL(syscall)(SYS_gettid));
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + n, sizeof buf - n, fmt, ap);
    va_end(ap);
    size_t len = strlen(buf);
    if (len < sizeof buf - 1) buf[len++] = '\n';
    /* the real write: logging must not count as an emulated write */
    REAL(write)(2, buf, len);
}

void rv_log_once(const char *what, const char *name) {
    /* A small open-addressed set of names already logged; lossy on overflow (logs again). */
    static const char *seen[512];
    unsigned h = 5381;
    for (const char *c = name; *c; c++) h = h * 33 + (unsigned char)*c;
    for (unsigned i = 0; i < 512; i++) {
        const char **s = &seen[(h + i) % 512];
        const char *cur = __atomic_load_n(s, __ATOMIC_ACQUIRE);
        if (cur == NULL) {
            if (__atomic_compare_exchange_n(s, &cur, name, false, __ATOMIC_ACQ_REL,
                                            __ATOMIC_ACQUIRE))
                break;
        }
        if (cur == name || strcmp(cur, name) == 0) return;
    }
    rv_log(RV_WARN, "%s: %s", what, name);
    /* and for `revati doctor`: the run's notices file (REVATI_NOTICES), one line each */
    const char *path = getenv("REVATI_NOTICES");
    int fd = path ? open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644) : -1;
    if (fd >= 0) {
        char line[512];
        int n = snprintf(line, sizeof line, "%d\t%s\t%s\n", (int)getpid(), what, name);
        REAL(write)(fd, line, n < (int)sizeof line ? (size_t)n : sizeof line - 1);
        REAL(close)(fd);
    }
}

/* ---- clocks -------------------------------------------------------------------- */

int64_t rv_ts_to_ns(const struct timespec *ts) {
    return (int64_t)ts->tv_sec * 1000000000LL + ts->tv_nsec;
}

struct timespec rv_ns_to_ts(int64_t ns) {
    if (ns < 0) ns = 0;
    struct timespec ts = {.tv_sec = ns / 1000000000LL, .tv_nsec = ns % 1000000000LL};
    return ts;
}

bool rv_warped_clock(clockid_t clk) {
    switch (clk) {
    case CLOCK_REALTIME: case CLOCK_MONOTONIC: case CLOCK_MONOTONIC_RAW:
    case CLOCK_REALTIME_COARSE: case CLOCK_MONOTONIC_COARSE: case CLOCK_BOOTTIME:
    case CLOCK_REALTIME_ALARM: case CLOCK_BOOTTIME_ALARM: case CLOCK_TAI:
        return true;
    default:
        return false; /* CPU-time clocks keep real values */
    }
}

int64_t rv_real_ns(clockid_t clk) {
    struct timespec ts;
    REAL(clock_gettime)(clk, &ts);
    return rv_ts_to_ns(&ts);
}

/* The clock map, read consistently (seqlock; the Timekeeper writes it). */
struct clock_map { int64_t base_real, base_virt, rate_ppm; };

static struct clock_map read_map(void) {
    struct clock_map m;
    uint32_t s0, s1;
    do {
        s0 = atomic_load_explicit(&rv_shm->map_seq, memory_order_acquire);
        m.base_real = atomic_load_explicit(&rv_shm->base_real, memory_order_relaxed);
        m.base_virt = atomic_load_explicit(&rv_shm->base_virt, memory_order_relaxed);
        m.rate_ppm = atomic_load_explicit(&rv_shm->rate_ppm, memory_order_relaxed);
        atomic_thread_fence(memory_order_acquire);
        s1 = atomic_load_explicit(&rv_shm->map_seq, memory_order_relaxed);
    } while (s0 != s1 || (s0 & 1));
    return m;
}

int64_t rv_map_virt(int64_t base_real, int64_t base_virt, int64_t rate_ppm, int64_t real) {
    int64_t d = real - base_real;
    if (d <= 0) return base_virt; /* a real time read just before a re-base */
    if (rate_ppm == RV_RATE_ONE) return base_virt + d;
    return base_virt + (int64_t)((__int128)d * rate_ppm / RV_RATE_ONE);
}

uint32_t rv_map_gen(void) {
    return rv_shm ? atomic_load_explicit(&rv_shm->map_seq, memory_order_acquire) : 0;
}

/* The latest virtual CLOCK_MONOTONIC any thread of this process has read. A re-base can
 * leave a reader that used the old map a little ahead of the new one (the Timekeeper
 * preempted between reading the time and publishing: readers went back up to 3.8 ms, 9 times
 * in 4 s of six processes taking turns on 2 cores); the clock then holds there until the new
 * map catches up. Without it, CUDA events recorded before a synchronisation read as not
 * completed after it, and Inductor's autotuning failed at start-up. Readers do not wait for
 * the Timekeeper instead: one preempted mid-change would have them spin, and their spinning
 * would count as CPU work. The other clocks are not held: realtime may go back anyway. */
static _Atomic int64_t last_monotonic;

static int64_t not_back(int64_t v) {
    int64_t seen = atomic_load_explicit(&last_monotonic, memory_order_relaxed);
    while (v > seen && !atomic_compare_exchange_weak_explicit(&last_monotonic, &seen, v,
                                                              memory_order_relaxed,
                                                              memory_order_relaxed)) {
    }
    return v > seen ? v : seen;
}

int64_t rv_warp_ns(clockid_t clk, int64_t real) {
    struct clock_map m = read_map();
    /* CLOCK_MONOTONIC through rv_map_virt even at real speed: a real time read before a
     * re-base maps to the new base, not behind it (readers went back 37 us after a held
     * clock's release); at real speed the other clocks are their real value plus one offset */
    if (clk == CLOCK_MONOTONIC) return not_back(rv_map_virt(m.base_real, m.base_virt, m.rate_ppm, real));
    if (m.rate_ppm == RV_RATE_ONE) return real + (m.base_virt - m.base_real);
    int64_t mono = rv_real_ns(CLOCK_MONOTONIC);
    return real + rv_map_virt(m.base_real, m.base_virt, m.rate_ppm, mono) - mono;
}

int64_t rv_now_ns(void) {
    int64_t real = rv_real_ns(CLOCK_MONOTONIC);
    return rv_shm ? rv_warp_ns(CLOCK_MONOTONIC, real) + rv_tl_lag : real;
}

int64_t rv_virtual_ns(clockid_t clk) {
    int64_t t = rv_real_ns(clk);
    return rv_shm && rv_warped_clock(clk) ? rv_warp_ns(clk, t) + rv_tl_lag : t;
}

int64_t rv_real_for_virt(int64_t vleft, int64_t rate_ppm) {
    if (vleft <= 0 || vleft == RV_NO_DEADLINE || rate_ppm == RV_RATE_ONE || rate_ppm <= 0)
        return vleft;
    /* slower virtual time: the same virtual wait takes longer in real time; faster: shorter
     * (rounded up, so it never ends before its virtual deadline) */
    return (int64_t)((__int128)vleft * RV_RATE_ONE / rate_ppm) + 1;
}

int64_t rv_real_wait_ns(int64_t vleft) {
    if (!rv_shm) return vleft;
    return rv_real_for_virt(vleft, atomic_load_explicit(&rv_shm->rate_ppm, memory_order_relaxed));
}

bool rv_attached(void) { return rv_shm != NULL; }

int64_t rv_abs_to_mono_deadline(clockid_t clk, const struct timespec *abs) {
    int64_t a = rv_ts_to_ns(abs);
    if (clk == CLOCK_MONOTONIC) return a;
    /* every warped clock keeps its distance to the monotonic one */
    return rv_now_ns() + (a - rv_virtual_ns(clk));
}

/* ---- futex helpers ------------------------------------------------------------- */

static long futex(_Atomic uint32_t *addr, int op, uint32_t val, const struct timespec *ts) {
    return REAL(syscall)(SYS_futex, addr, op, val, ts, NULL, 0);
}

static void kick_timekeeper(void) {
    atomic_fetch_add(&rv_shm->tk_futex, 1);
    futex(&rv_shm->tk_futex, FUTEX_WAKE, 1, NULL);
}

/* ---- registry ------------------------------------------------------------------ */

static struct rv_proc *my_proc(void) { return &rv_shm->procs[rv_proc_idx]; }

static void bump_hwm(_Atomic int32_t *hwm, int32_t idx) {
    int32_t cur = atomic_load(hwm);
    while (cur <= idx && !atomic_compare_exchange_weak(hwm, &cur, idx + 1)) {
    }
}

static int claim_proc(int32_t state, int32_t pid, int32_t owner, int32_t running) {
    for (int i = 0; i < RV_MAX_PROCS; i++) {
        struct rv_proc *p = &rv_shm->procs[i];
        int32_t expect = RV_P_FREE;
        if (atomic_load(&p->state) != RV_P_FREE) continue;
        /* claim with a transient state so the Timekeeper never sees half-filled slots */
        if (!atomic_compare_exchange_strong(&p->state, &expect, RV_P_PENDING)) continue;
        atomic_store(&p->pid, pid);
        atomic_store(&p->owner, owner);
        atomic_store(&p->running, running);
        atomic_store(&p->stamp_real, rv_real_ns(CLOCK_MONOTONIC));
        p->cmd[0] = 0;
        bump_hwm(&rv_shm->proc_hwm, i);
        atomic_store(&p->state, state);
        return i;
    }
    rv_log(RV_ERROR, "too many emulated processes (max %d)", RV_MAX_PROCS);
    return -1;
}

static void read_cmdline(char *out, size_t len) {
    int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
    out[0] = 0;
    if (fd < 0) return;
    ssize_t n = REAL(read)(fd, out, len - 1);
    REAL(close)(fd);
    if (n <= 0) return;
    for (ssize_t i = 0; i < n - 1; i++)
        if ((unsigned char)out[i] < ' ') out[i] = ' '; /* NULs, and newlines of `-c` code */
    out[n] = 0;
}

static void thread_exit(void *slot);

/* Register the calling thread; `counted` says whether its proc's `running` already
 * includes it (a creator counts a new thread before it exists, see pthread_create). */
static struct rv_thread *register_thread(bool counted) {
    for (int i = 0; i < RV_MAX_THREADS; i++) {
        struct rv_thread *t = &rv_shm->threads[i];
        int32_t expect = RV_T_FREE;
        if (atomic_load_explicit(&t->state, memory_order_relaxed) != RV_T_FREE) continue;
        if (!atomic_compare_exchange_strong(&t->state, &expect, RV_T_RUNNING)) continue;
        t->tid = (int32_t)REAL(syscall)(SYS_gettid);
        t->proc = rv_proc_idx;
        atomic_store(&t->deadline, RV_NO_DEADLINE);
        atomic_store(&t->cpu_factor_ppm, 0);
        atomic_store(&t->pid, my_pid);
        strcpy(t->call, "-");
        bump_hwm(&rv_shm->thread_hwm, i);
        if (!counted) atomic_fetch_add(&my_proc()->running, 1);
        tl_slot = t;
        pthread_setspecific(thread_key, t);
        return t;
    }
    rv_log(RV_ERROR, "too many emulated threads (max %d)", RV_MAX_THREADS);
    return NULL;
}

void rv_thread_started(void) {
    if (rv_shm && rv_proc_idx >= 0) register_thread(true); /* its creator counted it */
}

static void release_thread(struct rv_thread *t) {
    int32_t s = atomic_exchange(&t->state, RV_T_FREE);
    atomic_store(&t->pid, 0);
    if (s == RV_T_RUNNING || s == RV_T_WAKING) {
        if (atomic_fetch_sub(&my_proc()->running, 1) == 1) kick_timekeeper();
    }
}

static void thread_exit(void *slot) {
    if (rv_shm && slot && tl_slot == slot) {
        release_thread(slot);
        tl_slot = NULL;
    }
}

/* The slot of the calling thread, registering it on first use (threads made before the
 * shim initialised, or by raw clone, register lazily and count as running from then). */
static struct rv_thread *self_slot(void) {
    if (tl_slot) return tl_slot;
    if (!rv_shm || rv_proc_idx < 0) return NULL;
    return register_thread(false);
}

void rv_set_cpu_factor(int64_t ppm) {
    struct rv_thread *t = self_slot();
    if (!t) return;
    if (ppm > RV_RATE_ONE) ppm = RV_RATE_ONE;
    if (ppm < RV_RATE_ONE / 10) ppm = RV_RATE_ONE / 10;
    atomic_store_explicit(&t->cpu_factor_ppm, (int32_t)ppm, memory_order_relaxed);
}

int64_t rv_host_factor_ppm(void) {
    if (!rv_shm) return RV_RATE_ONE;
    int64_t h = atomic_load_explicit(&rv_shm->host_ppm, memory_order_relaxed);
    return h > 0 ? h : RV_RATE_ONE;
}

/* ---- blocking protocol ---------------------------------------------------------- */

struct rv_wait *rv_block_begin_kind(int64_t deadline, const char *call, int kind) {
    struct rv_thread *t = self_slot();
    if (!t) return NULL;
    struct rv_wait *w = &tl_wait;
    if (w->depth++ > 0) return w; /* nested (a signal handler blocking inside a wait) */
    /* a wait runs on the shared clock: the thread's lag went into the deadline its caller
     * computed from the thread's own clock (rv_lag_add) */
    rv_tl_lag = 0;
    w->t = t;
    w->deadline = deadline;
    atomic_store(&t->deadline, deadline);
    atomic_store(&t->kind, kind);
    atomic_fetch_add(&t->gen, 1);
    atomic_store(&t->since_real, rv_real_ns(CLOCK_MONOTONIC));
    strncpy(t->call, call, RV_CALL_LEN - 1);
    rv_tl_woken = 0;
    atomic_store_explicit(&t->state, RV_T_BLOCKED, memory_order_release);
    atomic_fetch_add(&rv_shm->activity, 1);
    if (atomic_load(&rv_shm->pollers) > 0) {
        atomic_fetch_add(&rv_shm->poll_futex, 1);
        futex(&rv_shm->poll_futex, FUTEX_WAKE, INT32_MAX, NULL);
    }
    if (atomic_fetch_sub(&my_proc()->running, 1) == 1) kick_timekeeper();
    return w;
}

void rv_block_end(struct rv_wait *w) {
    if (!w || --w->depth > 0) return;
    struct rv_thread *t = w->t;
    int32_t expect = RV_T_BLOCKED;
    /* If the Timekeeper woke us it moved BLOCKED->WAKING and counted us already. */
    if (atomic_compare_exchange_strong(&t->state, &expect, RV_T_RUNNING))
        atomic_fetch_add(&my_proc()->running, 1);
    else
        atomic_store(&t->state, RV_T_RUNNING);
    atomic_store(&t->deadline, RV_NO_DEADLINE);
}

int rv_futex_sleep(struct rv_wait *w, int64_t vdeadline) {
    struct rv_thread *t = w->t;
    for (;;) {
        uint32_t seen = atomic_load(&t->wake);
        int64_t left = vdeadline - rv_now_ns();
        if (left <= 0) return 0;
        struct timespec ts = rv_ns_to_ts(rv_real_wait_ns(left));
        long r = futex(&t->wake, FUTEX_WAIT, seen, vdeadline == RV_NO_DEADLINE ? NULL : &ts);
        if (r < 0 && errno == EINTR) return EINTR;
    }
}

void rv_sleep_until(int64_t deadline, const char *call) {
    if (rv_now_ns() >= deadline) return;
    struct rv_wait *w = rv_block_begin_kind(deadline, call, RV_WAKE_FUTEX);
    if (!w) { /* not attached: a real sleep on the real clock */
        struct timespec ts = rv_ns_to_ts(deadline);
        while (REAL(clock_nanosleep)(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
        }
        return;
    }
    while (rv_futex_sleep(w, deadline) == EINTR) {
    }
    rv_block_end(w);
}

/* A lag this large is waited out at once: a thread whose GPU work ends before its own time
 * has no wait that takes it up, and what it sends would leave that much early. */
#define RV_LAG_MAX_NS 5000000
/* Not attached, the lag is a real sleep, once it is worth a wake-up (~50-65 us here). */
#define RV_LAG_REAL_SLEEP_NS 1000000

void rv_lag_add(int64_t ns) {
    if (ns <= 0) return;
    rv_tl_lag += ns;
    if (rv_tl_lag < (rv_shm ? RV_LAG_MAX_NS : RV_LAG_REAL_SLEEP_NS)) return;
    int64_t own = rv_now_ns() + (rv_shm ? 0 : rv_tl_lag); /* attached, the lag is in the clock */
    rv_tl_lag = 0;
    rv_sleep_until(own, "CPU at the node's speed");
}

void rv_send_begin(void) {
    if (!rv_shm) return;
    atomic_store_explicit(&rv_shm->last_write_real, rv_real_ns(CLOCK_MONOTONIC),
                          memory_order_relaxed);
    atomic_fetch_add_explicit(&rv_shm->activity, 1, memory_order_release);
    /* no lazy registration here: a thread that only sends never blocks, and registering it
     * would count it as running for good */
    if (tl_slot) atomic_fetch_add_explicit(&tl_slot->sends, 1, memory_order_release);
}

void rv_send_end(void) {
    if (rv_shm && tl_slot) atomic_fetch_add_explicit(&tl_slot->sends, 1, memory_order_release);
}

/* ---- idle pollers --------------------------------------------------------------- */

/* A thread that spins (sched_yield, zero-timeout waits) never blocks. It counts as idle
 * once it has spun RV_POLL_CONFIRM times with no activity anywhere in between: it has then
 * looked at the world since the last thing that could have changed it. An idle poller
 * sleeps (counted as blocked, no deadline) until the next activity or jump, or at most
 * RV_POLL_NAP_NS of real time, so it never freezes the clock and never lets it run past
 * work it would have picked up. */
#define RV_POLL_CONFIRM 3
#define RV_POLL_NAP_NS 200000
static _Thread_local uint64_t tl_poll_activity;
static _Thread_local int tl_poll_quiet;

bool rv_poll_idle(void) {
    if (!rv_shm) return false;
    uint64_t a = atomic_load(&rv_shm->activity);
    uint32_t jumps = atomic_load(&rv_shm->jumps);
    if (a + jumps != tl_poll_activity) {
        tl_poll_activity = a + jumps;
        tl_poll_quiet = 0;
        return false;
    }
    if (++tl_poll_quiet < RV_POLL_CONFIRM) return false;
    uint32_t seen = atomic_load(&rv_shm->poll_futex);
    atomic_fetch_add(&rv_shm->pollers, 1);
    struct rv_wait *w = rv_block_begin_kind(RV_NO_DEADLINE, "idle-poll", RV_WAKE_FUTEX);
    /* our own block bumped activity; remember that so the next spin stays quiet */
    tl_poll_activity = atomic_load(&rv_shm->activity) + atomic_load(&rv_shm->jumps);
    struct timespec nap = rv_ns_to_ts(RV_POLL_NAP_NS);
    futex(&rv_shm->poll_futex, FUTEX_WAIT, seen, &nap);
    atomic_fetch_sub(&rv_shm->pollers, 1);
    rv_block_end(w);
    uint64_t now = atomic_load(&rv_shm->activity) + atomic_load(&rv_shm->jumps);
    if (now != tl_poll_activity) tl_poll_quiet = 0;
    tl_poll_activity = now;
    return true;
}

void rv_poll_busy(void) { tl_poll_quiet = 0; }

/* ---- signals ----------------------------------------------------------------------- */

static void on_wake_signal(int sig) {
    rv_tl_woken = 1;
    volatile struct timespec *abs = rv_tl_wait_abs;
    if (abs) { /* the kernel reads it whole at the restart: no torn value */
        abs->tv_sec = 0;
        abs->tv_nsec = 0;
    }
}

int rv_wake_signal(void) { return wake_sig; }

void rv_wait_sigmask(const sigset_t *base, sigset_t *out) {
    if (base)
        *out = *base;
    else
        REAL(pthread_sigmask)(SIG_BLOCK, NULL, out);
    if (wake_sig) sigdelset(out, wake_sig);
}

/* ---- process lifecycle ---------------------------------------------------------------- */

int rv_reserve_child(void) {
    if (!rv_shm) return -1;
    return claim_proc(RV_P_PENDING, 0, my_pid, 1);
}

void rv_child_started(int idx, pid_t pid) {
    if (idx < 0) return;
    int32_t zero = 0;
    atomic_compare_exchange_strong(&rv_shm->procs[idx].pid, &zero, pid);
}

void rv_child_failed(int idx) {
    if (idx < 0) return;
    atomic_store(&rv_shm->procs[idx].running, 0);
    atomic_store(&rv_shm->procs[idx].state, RV_P_FREE);
}

void rv_after_fork_in_child(int idx) {
    my_pid = getpid();
    tl_slot = NULL;
    tl_wait.depth = 0;
    if (idx < 0) return;
    int parent_idx = rv_proc_idx;
    rv_proc_idx = idx;
    struct rv_proc *p = my_proc();
    if (parent_idx >= 0) memcpy(p->cmd, rv_shm->procs[parent_idx].cmd, RV_CMD_LEN);
    atomic_store(&p->pid, my_pid);
    atomic_store(&p->stamp_real, rv_real_ns(CLOCK_MONOTONIC));
    atomic_store(&p->state, RV_P_LIVE);
    register_thread(true); /* the parent counted us in `running` when it reserved the slot */
}

void rv_exec_begin(void) {
    if (!rv_shm || rv_proc_idx < 0) return;
    atomic_store(&my_proc()->stamp_real, rv_real_ns(CLOCK_MONOTONIC));
    atomic_store(&my_proc()->state, RV_P_EXEC);
}

void rv_exec_failed(void) {
    if (rv_shm && rv_proc_idx >= 0) atomic_store(&my_proc()->state, RV_P_LIVE);
}

/* On start: a process made by exec keeps its slot; a child reserved by its parent
 * (posix_spawn, or revati run itself) adopts that reservation; anything else (a process
 * whose parent is not emulated) takes a new slot. */
static int adopt_proc_slot(void) {
    pid_t ppid = getppid();
    int32_t hwm = atomic_load(&rv_shm->proc_hwm);
    for (int i = 0; i < hwm; i++) { /* exec of an emulated process */
        struct rv_proc *p = &rv_shm->procs[i];
        int32_t s = atomic_load(&p->state);
        if ((s == RV_P_EXEC || s == RV_P_LIVE) && atomic_load(&p->pid) == my_pid) {
            /* the old image's threads are gone; only this one runs */
            for (int j = 0; j < atomic_load(&rv_shm->thread_hwm); j++) {
                struct rv_thread *t = &rv_shm->threads[j];
                if (atomic_load(&t->pid) == my_pid) {
                    atomic_store(&t->pid, 0);
                    atomic_store(&t->state, RV_T_FREE);
                }
            }
            atomic_store(&p->running, 1);
            atomic_store(&p->state, RV_P_LIVE);
            return i;
        }
    }
    for (int i = 0; i < hwm; i++) { /* reserved by our parent */
        struct rv_proc *p = &rv_shm->procs[i];
        int32_t pid = atomic_load(&p->pid);
        if (atomic_load(&p->state) == RV_P_PENDING && atomic_load(&p->owner) == ppid &&
            (pid == 0 || pid == my_pid) &&
            atomic_compare_exchange_strong(&p->pid, &pid, my_pid)) {
            atomic_store(&p->state, RV_P_LIVE);
            return i;
        }
    }
    return claim_proc(RV_P_LIVE, my_pid, ppid, 0);
}

/* ---- tracing ------------------------------------------------------------------------- */

bool rv_tracing(void) { return trace_file != NULL; }

/* Write s as the body of a JSON string (kernel names are C++ signatures: quotes,
 * backslashes and the like must be escaped). */
static void json_string(FILE *f, const char *s) {
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c < 0x20) fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
}

void rv_trace_complete(const char *track, const char *name, int64_t start_ns, int64_t dur_ns,
                       const char *args_json) {
    if (!trace_file) return;
    pthread_mutex_lock(&trace_lock);
    fprintf(trace_file, "{\"ph\":\"X\",\"pid\":%d,\"tid\":\"", (int)my_pid);
    json_string(trace_file, track);
    fputs("\",\"name\":\"", trace_file);
    json_string(trace_file, name);
    fprintf(trace_file, "\",\"ts\":%.3f,\"dur\":%.3f,\"args\":%s}\n", start_ns / 1e3,
            dur_ns / 1e3, args_json ? args_json : "{}");
    pthread_mutex_unlock(&trace_lock);
}

static void open_trace(void) {
    if (!rv_shm->trace_on) return;
    char path[320];
    snprintf(path, sizeof path, "%s/proc-%d.jsonl", rv_shm->trace_dir, (int)getpid());
    trace_file = fopen(path, "ae");
}

/* A forked child must not share its parent's trace stream: flush it before the fork (so
 * no buffered event is written twice) and give the child a file of its own. */
static void trace_prepare_fork(void) {
    pthread_mutex_lock(&trace_lock);
    if (trace_file) fflush(trace_file);
}

static void trace_parent_after_fork(void) { pthread_mutex_unlock(&trace_lock); }

static void trace_child_after_fork(void) {
    pthread_mutex_unlock(&trace_lock);
    if (!trace_file) return;
    fclose(trace_file); /* nothing buffered: flushed in prepare */
    trace_file = NULL;
    open_trace();
}

/* ---- init / fini ----------------------------------------------------------------------- */

_Thread_local bool rv_tl_in_fork;
static void trace_child_after_fork(void);

static void at_fork_child(void) {
    trace_child_after_fork();
    /* For forks that bypass our fork() wrapper (glibc-internal callers): such a child is
     * not registered and runs outside the accounting until it execs. */
    if (!rv_tl_in_fork && getpid() != my_pid) {
        rv_shm = NULL;
        my_pid = getpid();
    }
}

__attribute__((constructor(101))) static void rv_init(void) {
    my_pid = getpid();
    const char *lvl = getenv("REVATI_LOG_LEVEL");
    if (lvl) {
        if (!strcmp(lvl, "error")) log_level = RV_ERROR;
        else if (!strcmp(lvl, "info")) log_level = RV_INFO;
        else if (!strcmp(lvl, "debug")) log_level = RV_DEBUG;
    }
    const char *path = getenv("REVATI_SHM");
    if (!path || !*path) return;
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) {
        rv_log(RV_ERROR, "cannot open Timekeeper segment %s: %s (time is not warped)", path,
               strerror(errno));
        return;
    }
    void *m = mmap(NULL, sizeof(struct rv_shm), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    REAL(close)(fd);
    if (m == MAP_FAILED) return;
    struct rv_shm *s = m;
    if (s->magic != RV_SHM_MAGIC || s->version != RV_SHM_VERSION) {
        rv_log(RV_ERROR, "Timekeeper segment %s has the wrong version", path);
        munmap(m, sizeof *s);
        return;
    }
    pthread_key_create(&thread_key, thread_exit);
    pthread_atfork(trace_prepare_fork, trace_parent_after_fork, at_fork_child);
    wake_sig = s->wake_signal;
    struct sigaction sa = {.sa_handler = on_wake_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(wake_sig, &sa, NULL); /* no SA_RESTART: waits must return EINTR */
    sigset_t blk;
    sigemptyset(&blk);
    sigaddset(&blk, wake_sig);
    /* kept blocked outside waits, so that it can never interrupt anything but our waits */
    REAL(pthread_sigmask)(SIG_BLOCK, &blk, NULL);
    rv_shm = s;
    rv_proc_idx = adopt_proc_slot();
    if (rv_proc_idx < 0) {
        rv_shm = NULL;
        return;
    }
    read_cmdline(my_proc()->cmd, RV_CMD_LEN);
    register_thread(true);
    open_trace();
    rv_log(RV_DEBUG, "attached to %s as proc %d", path, rv_proc_idx);
}

__attribute__((destructor)) static void rv_fini(void) {
    if (!rv_shm || rv_proc_idx < 0 || getpid() != my_pid) return;
    if (trace_file) fflush(trace_file);
    /* Leave the slot to the Timekeeper's reaper (it frees it once the process is gone):
     * output flushed after this point still counts as this process running. */
}
