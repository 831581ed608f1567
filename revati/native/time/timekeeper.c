/* The Timekeeper's decision loop (runs in the `revati run` / `revati timekeeper` process,
 * called through ctypes). It owns the shared segment and is the only writer of the
 * clock map (shm.h), so jumps and rate changes never race each other.
 *
 * A jump is allowed when (1) no emulated process has a running thread, (2) no wrapped
 * send happened in the last RV_GRACE_NS (loopback delivery can finish after send()
 * returns), (3) no blocked thread that something other than the Timekeeper could wake is
 * runnable in the kernel (/proc/<pid>/task/<tid>/stat state R: woken but not yet run),
 * and (4) nothing changed while (1)-(3) were checked. It then jumps to the earliest
 * deadline and hands the threads due there back to `running` before waking them.
 *
 * CPU contention (optional, rv_tk_set_cores): emulated threads do real CPU work, which
 * counts in virtual time. On the target host every engine process has a core of its own;
 * here a thread that must share its core, with other emulated threads or with anything else
 * this host runs, does its work more slowly in real time. Every RV_SAMPLE_NS the Timekeeper
 * looks at the emulated threads that are running and sets the rate of virtual time for the
 * next interval to the share of a core each gets: cores/runnable while the threads the
 * kernel has runnable (state R) outnumber the cores (instant, but blind to other programs),
 * times the share that other programs left them over the last RV_SHARE_WINDOW_NS, their time
 * on a CPU over their time runnable, from the kernel's per-thread schedstat (on-CPU and
 * run-queue wait time; it sees every cause, other programs and CPU affinity included), less
 * the wait cores/runnable explains (sample_contention). So a thread's work costs it the
 * virtual time it would take with a core to itself. A thread whose CPU work is faster on the
 * node than the rate's workload says (a GPU-driving thread: PyTorch's dispatch) carries a
 * factor below 1 (rv_set_cpu_factor), and the rate is multiplied by the largest factor of
 * the runnable threads. Time a hypervisor steals from a virtual
 * CPU shows in neither estimate (host_rate.c counts it). A woken thread waiting for a CPU
 * while no emulated thread runs holds the clock (held_since). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <linux/futex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core_int.h"
#include "host_rate.h"

#define RV_GRACE_NS 30000LL         /* after the last send */
#define RV_RETRY_NS 20000LL         /* a thread was runnable: look again soon */
#define RV_REAP_NS 2000000LL        /* dead processes are noticed within this */
#define RV_PENDING_LIMIT_NS 5000000000LL /* a child that never attaches is not emulated */
#define RV_RESEND_NS 1000000LL      /* re-send a wake signal that may have been lost */
#define RV_SAMPLE_NS 2000000LL      /* CPU contention is sampled this often */
/* The measured share is taken over this much real time: schedstat's counters move at the
 * scheduler's ticks and context switches (4 ms at HZ=250), so one sample says little. */
#define RV_SHARE_WINDOW_NS 20000000LL
/* A share above this reads as a core of its own: on an idle host the Timekeeper's own polls
 * and short-lived helpers delay running threads by a few per cent, which is not contention. */
#define RV_SHARE_FULL_PPM 900000LL
/* A woken thread that has not had a CPU for this long, with no emulated thread running,
 * waits behind other programs: the clock holds until it runs (see held_since). About a
 * kernel wake-up's latency on the GPU node's host, which the clock keeps. */
#define RV_HANDOFF_NS 50000LL

enum tk_result { TK_STOPPED = 0, TK_DEADLOCK = 1 };
enum step { STEP_JUMPED, STEP_BUSY, STEP_RETRY, STEP_HELD, STEP_IDLE };

static struct rv_shm *S;
static volatile int stop_flag;
static FILE *jump_trace;
static int64_t stall_ns = 20000000LL; /* real time before unwrapped sleepers count as blocked */

struct task_fd { int fd, pid, tid; };
static struct task_fd task_fds[RV_MAX_THREADS], sched_fds[RV_MAX_THREADS];
/* each process slot's pidfd, and its owner's (pid_alive), with the slot's stamp_real when
 * opened: a slot claimed again may hold a recycled pid (pid_max can be 32768) */
struct pid_fd { int fd1, pid; int64_t stamp; }; /* fd + 1: the arrays start zeroed */
static struct pid_fd proc_pidfds[RV_MAX_PROCS], owner_pidfds[RV_MAX_PROCS];
/* A running thread's schedstat at the last sample (run and wait ns, the sample's number,
 * its counts of blocks and of sends then) */
static struct { int64_t run, wait, sample; int pid, tid; uint32_t gen, sends; } sched_seen[RV_MAX_THREADS];
static int64_t woken_at[RV_MAX_THREADS];
/* 0: no contention correction. Atomic: a run moved onto fewer CPUs sets it while the loop
 * reads it (Timekeeper.set_cores). */
static _Atomic int cores;
/* contention statistics: real time sampled, of it under contention, and the virtual time
 * that real time became; runnable thread counts summed over samples */
static int64_t sampled_real, dilated_real, dilated_virt, samples, runnable_sum;
/* CPU-bound time: the real time sampled with an emulated thread running, the virtual time it
 * became, and the lowest and highest rate such an interval ran at (ppm) */
static int64_t busy_real, busy_virt, busy_rate_min = INT64_MAX, busy_rate_max;
/* the contention share the last sample set (the rate's other factor is the host's) */
static int64_t last_share = RV_RATE_ONE;
/* the measured share: on-CPU and run-queue ns of running threads in each of the last
 * RV_SHARE_SAMPLES samples (a ring, `at` the next to overwrite) and the share they give
 * (ppm). A sliding window: a tumbling one applied each window's share through the whole
 * next window, so contention that began or ended counted late by a window on average. */
#define RV_SHARE_SAMPLES (RV_SHARE_WINDOW_NS / RV_SAMPLE_NS)
static struct { int64_t run, wait; } window[RV_SHARE_SAMPLES];
static int window_at;
static int64_t share_ppm = RV_RATE_ONE;
static int last_runnable; /* runnable emulated threads at the last sample */
/* the host's factor (host_rate.c) over CPU-bound time: lowest, highest, and summed x real
 * ns, as is the steal share */
static int64_t host_min, host_max;
static __int128 host_sum, steal_sum;
/* hand-offs: real time with no emulated thread running in which the clock could not jump (a
 * send's grace period, a thread woken but not yet on a CPU), and the virtual time it became */
static int64_t handoff_real, handoff_virt, handoffs;

/* A blocked thread that the kernel has runnable (woken by a socket, a futex, a signal) and
 * that is not running yet: its CPU time and block count when first seen so (0: not so).
 * On the GPU node it would start at once on a core of its own; here, with no emulated thread
 * running, it can only be waiting behind another program (a busy host), so the clock holds
 * (`held`, at the rate floor) until it runs, and the rate the samples set meanwhile waits in
 * `held_rate`. Without it, each wake-up that waited for another program's time slice (a
 * busy host: milliseconds) counted in virtual time. */
static int64_t held_since[RV_MAX_THREADS], held_run[RV_MAX_THREADS];
static uint32_t held_gen[RV_MAX_THREADS];
static bool held;
static int64_t held_rate;

/* Virtual now of real CLOCK_MONOTONIC ns (the only writer reads its own map). */
static int64_t virt_at(int64_t real) {
    return rv_map_virt(atomic_load(&S->base_real), atomic_load(&S->base_virt),
                       atomic_load(&S->rate_ppm), real);
}

static void set_map(int64_t base_real, int64_t base_virt, int64_t rate_ppm) {
    atomic_fetch_add_explicit(&S->map_seq, 1, memory_order_relaxed); /* odd: changing */
    atomic_thread_fence(memory_order_release);
    atomic_store_explicit(&S->base_real, base_real, memory_order_relaxed);
    atomic_store_explicit(&S->base_virt, base_virt, memory_order_relaxed);
    atomic_store_explicit(&S->rate_ppm, rate_ppm, memory_order_relaxed);
    atomic_fetch_add_explicit(&S->map_seq, 1, memory_order_release);
}

/* Run the clock at `rate` from where it stands now. Not from a `now` read before a pass over
 * the threads' /proc files: with hundreds of threads that pass takes milliseconds, readers
 * kept the old map meanwhile, and a lower rate based at the earlier instant set their clock
 * back by the pass's length times the drop (1.7 ms). What is left, readers that ran on with
 * the old map while the Timekeeper was preempted between reading the time and publishing,
 * each process's clock absorbs (not_back in core.c). */
static void set_rate(int64_t rate) {
    int64_t t = rv_real_ns(CLOCK_MONOTONIC);
    set_map(t, virt_at(t), rate);
}

RV_EXPORT int rv_tk_create(const char *path, int wake_signal, const char *trace_dir) {
    int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) return -errno;
    if (ftruncate(fd, sizeof(struct rv_shm)) < 0) {
        int e = errno;
        REAL(close)(fd);
        return -e;
    }
    void *m = mmap(NULL, sizeof(struct rv_shm), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    REAL(close)(fd);
    if (m == MAP_FAILED) return -errno;
    S = m;
    /* A process may run several Timekeepers, one after another (the test suite's
     * deployments): each starts unstopped, with its own statistics and thread files. */
    stop_flag = 0;
    if (jump_trace) {
        fclose(jump_trace);
        jump_trace = NULL;
    }
    static bool fds_set; /* task_fds start zeroed: fd 0 is not ours to close */
    for (int i = 0; i < RV_MAX_THREADS; i++) {
        if (fds_set && task_fds[i].fd >= 0) REAL(close)(task_fds[i].fd);
        if (fds_set && sched_fds[i].fd >= 0) REAL(close)(sched_fds[i].fd);
        task_fds[i].fd = sched_fds[i].fd = -1;
        sched_seen[i].sample = -1;
        woken_at[i] = 0;
        held_since[i] = 0;
    }
    for (int i = 0; i < RV_MAX_PROCS && fds_set; i++) {
        if (proc_pidfds[i].fd1) REAL(close)(proc_pidfds[i].fd1 - 1);
        if (owner_pidfds[i].fd1) REAL(close)(owner_pidfds[i].fd1 - 1);
        proc_pidfds[i].fd1 = owner_pidfds[i].fd1 = 0;
    }
    fds_set = true;
    sampled_real = dilated_real = dilated_virt = samples = runnable_sum = 0;
    busy_real = busy_virt = busy_rate_max = 0;
    busy_rate_min = INT64_MAX;
    memset(window, 0, sizeof window);
    window_at = 0;
    share_ppm = last_share = RV_RATE_ONE;
    last_runnable = 0;
    host_min = host_max = 0;
    host_sum = steal_sum = 0;
    handoff_real = handoff_virt = handoffs = 0;
    held = false;
    rv_host_rate_reset();
    S->version = RV_SHM_VERSION;
    atomic_store(&S->host_ppm, RV_RATE_ONE);
    int64_t now = rv_real_ns(CLOCK_MONOTONIC);
    set_map(now, now, RV_RATE_ONE); /* virtual time starts at real time */
    S->wake_signal = wake_signal;
    if (trace_dir && *trace_dir) {
        S->trace_on = 1;
        snprintf(S->trace_dir, sizeof S->trace_dir, "%s", trace_dir);
        char p[320];
        snprintf(p, sizeof p, "%s/timekeeper.jsonl", trace_dir);
        jump_trace = fopen(p, "we");
    }
    atomic_thread_fence(memory_order_seq_cst);
    S->magic = RV_SHM_MAGIC; /* last: processes check it before trusting the segment */
    return 0;
}

/* Attach to a segment another Timekeeper created (for reports only). */
RV_EXPORT void *rv_tk_segment(void) { return S; }

RV_EXPORT void rv_tk_stop(void) {
    stop_flag = 1;
    if (S) {
        atomic_fetch_add(&S->tk_futex, 1);
        REAL(syscall)(SYS_futex, &S->tk_futex, FUTEX_WAKE, 1, NULL, NULL, 0);
    }
}

/* Reserve the slot of the top-level command before it is spawned, so that the clock
 * cannot move between its spawn and its shim's start. */
RV_EXPORT int rv_tk_reserve(int owner_pid) {
    for (int i = 0; i < RV_MAX_PROCS; i++) {
        struct rv_proc *p = &S->procs[i];
        int32_t expect = RV_P_FREE;
        if (!atomic_compare_exchange_strong(&p->state, &expect, RV_P_PENDING)) continue;
        atomic_store(&p->pid, 0);
        atomic_store(&p->owner, owner_pid);
        atomic_store(&p->running, 1);
        atomic_store(&p->stamp_real, rv_real_ns(CLOCK_MONOTONIC));
        int32_t hwm = atomic_load(&S->proc_hwm);
        if (hwm <= i) atomic_store(&S->proc_hwm, i + 1);
        return i;
    }
    return -1;
}

RV_EXPORT void rv_tk_child_started(int idx, int pid) {
    int32_t zero = 0;
    atomic_compare_exchange_strong(&S->procs[idx].pid, &zero, pid);
}

/* Read the thread's /proc/<pid>/task/<tid>/FILE into buf (fd cached in c); false if gone. */
static bool task_read(struct task_fd *c, const struct rv_thread *t, const char *file,
                      char *buf, size_t len) {
    int pid = atomic_load(&t->pid), tid = t->tid;
    if (c->fd < 0 || c->pid != pid || c->tid != tid) {
        if (c->fd >= 0) REAL(close)(c->fd);
        char path[64];
        snprintf(path, sizeof path, "/proc/%d/task/%d/%s", pid, tid, file);
        c->fd = open(path, O_RDONLY | O_CLOEXEC);
        c->pid = pid;
        c->tid = tid;
        if (c->fd < 0) return false;
    }
    ssize_t n = pread(c->fd, buf, len - 1, 0);
    if (n <= 0) return false;
    buf[n] = 0;
    return true;
}

/* Kernel scheduling state of a thread ('R', 'S', 'D', ...), 0 if it no longer exists. */
static char task_state(int i, const struct rv_thread *t) {
    char buf[512];
    if (!task_read(&task_fds[i], t, "stat", buf, sizeof buf)) return 0;
    char *p = strrchr(buf, ')');
    return (p && p[1] == ' ') ? p[2] : 0;
}

/* Thread i's schedstat: ns on a CPU and waiting for one, over its life; false if gone. */
static bool read_schedstat(int i, const struct rv_thread *t, int64_t *run, int64_t *wait) {
    char buf[128];
    long long r, w;
    if (!task_read(&sched_fds[i], t, "schedstat", buf, sizeof buf) ||
        sscanf(buf, "%lld %lld", &r, &w) != 2)
        return false;
    *run = r;
    *wait = w;
    return true;
}

/* Add what running thread i spent on a CPU and waiting for one since the last sample to
 * *run and *wait, when it was running then too and has not blocked or sent since: the wait of
 * a thread woken by anything but the Timekeeper (a socket, a futex) and not yet on a CPU is a
 * hand-off's, which a sample cannot see (the thread counts as blocked until it runs), and so
 * is the wait of a sender that the thread it woke preempted (`sends`, below), which the
 * kernel adds to schedstat only when the sender runs again. */
static void add_sched_time(int i, const struct rv_thread *t, uint32_t sends, int64_t *run_ns,
                           int64_t *wait_ns) {
    int64_t run, wait;
    if (!read_schedstat(i, t, &run, &wait)) return;
    int pid = atomic_load(&t->pid);
    uint32_t gen = atomic_load(&t->gen);
    if (sched_seen[i].sample == samples - 1 && sched_seen[i].pid == pid &&
        sched_seen[i].tid == t->tid && sched_seen[i].gen == gen &&
        sched_seen[i].sends == sends && !(sends & 1)) {
        *run_ns += run - sched_seen[i].run;
        *wait_ns += wait - sched_seen[i].wait;
    }
    sched_seen[i].run = run;
    sched_seen[i].wait = wait;
    sched_seen[i].sample = samples;
    sched_seen[i].pid = pid;
    sched_seen[i].tid = t->tid;
    sched_seen[i].gen = gen;
    sched_seen[i].sends = sends;
}

/* Whether a process is alive (neither gone nor a zombie), from its /proc stat. */
static bool pid_alive_proc(int pid) {
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    ssize_t n = REAL(read)(fd, buf, sizeof buf - 1);
    REAL(close)(fd);
    if (n <= 0) return false;
    buf[n] = 0;
    char *p = strrchr(buf, ')');
    return p && p[1] == ' ' && p[2] != 'Z' && p[2] != 'X';
}

/* The same, asked of every emulated process every RV_REAP_NS (reap): a pidfd per process
 * slot (c), opened once per pid and state of the slot (stamp), polls readable once the
 * process has exited, one syscall where the /proc stat costs an open, a formatted read and
 * a close. /proc is the fallback where pidfd_open is missing (Linux < 5.3). */
static bool pid_alive(struct pid_fd *c, int pid, int64_t stamp) {
    if (c->pid != pid || c->stamp != stamp || !c->fd1) {
        if (c->fd1) REAL(close)(c->fd1 - 1);
        c->pid = pid;
        c->stamp = stamp;
        int fd = (int)REAL(syscall)(SYS_pidfd_open, pid, 0);
        c->fd1 = fd >= 0 ? fd + 1 : 0;
        if (fd < 0) return errno == ESRCH ? false : pid_alive_proc(pid);
    }
    struct pollfd p = {.fd = c->fd1 - 1, .events = POLLIN};
    return REAL(ppoll)(&p, 1, &(struct timespec){0}, NULL) == 0;
}

static void free_proc(int i, const char *why) {
    struct rv_proc *p = &S->procs[i];
    int pid = atomic_load(&p->pid);
    if (why) rv_log(RV_WARN, "process %d (%s) %s", pid, p->cmd, why);
    int32_t hwm = atomic_load(&S->thread_hwm);
    for (int j = 0; j < hwm; j++) {
        struct rv_thread *t = &S->threads[j];
        if (t->proc == i && atomic_load(&t->state) != RV_T_FREE && atomic_load(&t->pid) == pid) {
            atomic_store(&t->pid, 0);
            atomic_store(&t->state, RV_T_FREE);
        }
    }
    atomic_store(&p->running, 0);
    atomic_store(&p->state, RV_P_FREE);
}

/* Free the slots of processes that are gone, and of children that never attached. */
static void reap(void) {
    int64_t now = rv_real_ns(CLOCK_MONOTONIC);
    int32_t hwm = atomic_load(&S->proc_hwm);
    for (int i = 0; i < hwm; i++) {
        struct rv_proc *p = &S->procs[i];
        int32_t st = atomic_load(&p->state);
        if (st == RV_P_FREE) continue;
        int pid = atomic_load(&p->pid);
        int64_t stamp = atomic_load(&p->stamp_real), age = now - stamp;
        if (st == RV_P_PENDING) {
            if (pid > 0 && !pid_alive(&proc_pidfds[i], pid, stamp)) free_proc(i, NULL);
            else if (pid == 0 && !pid_alive(&owner_pidfds[i], atomic_load(&p->owner), stamp))
                free_proc(i, NULL);
            else if (age > RV_PENDING_LIMIT_NS)
                free_proc(i, "never attached to the Timekeeper: it runs unemulated");
        } else if (!pid_alive(&proc_pidfds[i], pid, stamp)) {
            free_proc(i, NULL);
        } else if (st == RV_P_EXEC && age > RV_PENDING_LIMIT_NS) {
            free_proc(i, "exec'd a program without the shim: it runs unemulated");
        }
    }
    /* re-send wake signals that may have landed before their wait began */
    int32_t th = atomic_load(&S->thread_hwm);
    for (int j = 0; j < th; j++) {
        struct rv_thread *t = &S->threads[j];
        if (atomic_load(&t->state) == RV_T_WAKING && atomic_load(&t->kind) == RV_WAKE_SIGNAL &&
            now - woken_at[j] > RV_RESEND_NS) {
            REAL(syscall)(SYS_tgkill, atomic_load(&t->pid), t->tid, S->wake_signal);
            woken_at[j] = now;
        }
    }
}

static bool any_running(void) {
    int32_t hwm = atomic_load(&S->proc_hwm);
    for (int i = 0; i < hwm; i++) {
        struct rv_proc *p = &S->procs[i];
        if (atomic_load(&p->state) != RV_P_FREE && atomic_load(&p->running) > 0) return true;
    }
    return false;
}

/* Threads counted as running that the kernel has kept asleep for stall_ns (in calls the
 * shim does not wrap: pthread_mutex_lock contention, io_uring, ...) are treated as untimed
 * waiters, so such calls cost stall_ns of real time per jump instead of freezing the clock.
 * Judged per thread, so that the activity of other threads cannot postpone it forever.
 * Returns true when every thread counted as running is such a sleeper. */
static int64_t asleep_since[RV_MAX_THREADS], asleep_run[RV_MAX_THREADS];
static uint32_t asleep_gen[RV_MAX_THREADS];

static bool running_threads_stalled(int64_t now) {
    bool all = true;
    int32_t hwm = atomic_load(&S->thread_hwm);
    int32_t seen[RV_MAX_PROCS] = {0}; /* RUNNING slots per process */
    for (int j = 0; j < hwm; j++) {
        struct rv_thread *t = &S->threads[j];
        int32_t s = atomic_load(&t->state);
        if (s == RV_T_WAKING) return false;
        if (s != RV_T_RUNNING) {
            asleep_since[j] = 0;
            continue;
        }
        seen[t->proc]++;
        /* CPU time that moved since the last look is work: schedstat says so for a fraction
         * of what formatting the thread's whole stat costs, and the loop asks on each turn */
        int64_t run, wait;
        if (!read_schedstat(j, t, &run, &wait)) continue; /* it exited without telling us */
        if (run != asleep_run[j]) {
            asleep_run[j] = run;
            asleep_since[j] = 0;
            all = false;
            continue;
        }
        char st = task_state(j, t);
        uint32_t gen = atomic_load(&t->gen);
        if (st == 0) continue;
        /* 'D' is a wait for the disk (page faults of a cold import, reads): work that takes
         * real time on the node too, never an untimed waiter. Counted as one, it would let
         * the clock jump while a thread reads; the suspected cause (not reproduced) of vLLM
         * 0.33.0's first start from a cold page cache jumping ~590 s to a start-up timeout. */
        if (st == 'R' || st == 'D') {
            asleep_since[j] = 0;
            all = false;
        } else if (!asleep_since[j] || asleep_gen[j] != gen) {
            asleep_since[j] = now;
            asleep_gen[j] = gen;
            all = false;
        } else if (now - asleep_since[j] < stall_ns) {
            all = false;
        }
    }
    /* a process counting more runnable threads than it has slots for is starting a thread
     * (counted by pthread_create, not yet registered) or a child: it is not stalled */
    int32_t phwm = atomic_load(&S->proc_hwm);
    for (int i = 0; i < phwm && all; i++) {
        struct rv_proc *p = &S->procs[i];
        if (atomic_load(&p->state) != RV_P_FREE && atomic_load(&p->running) > seen[i]) all = false;
    }
    return all;
}

static void trace_jump(int64_t from, int64_t to, int woken) {
    if (!jump_trace) return;
    fprintf(jump_trace,
            "{\"ph\":\"X\",\"pid\":0,\"tid\":\"jumps\",\"name\":\"jump\",\"ts\":%.3f,"
            "\"dur\":%.3f,\"args\":{\"from_ns\":%lld,\"to_ns\":%lld,\"woken\":%d}}\n",
            from / 1e3, (to - from) / 1e3, (long long)from, (long long)to, woken);
}

/* Wake every blocked thread whose deadline virtual time has reached (by a jump, or by
 * real time passing afterwards: a jump leaves the kernel timeouts of the other waiters
 * too long by its size). Returns the earliest deadline still ahead. */
static int64_t wake_due(int64_t now_v) {
    int32_t hwm = atomic_load(&S->thread_hwm);
    int64_t real = rv_real_ns(CLOCK_MONOTONIC), next = RV_NO_DEADLINE;
    for (int j = 0; j < hwm; j++) {
        struct rv_thread *t = &S->threads[j];
        if (atomic_load(&t->state) != RV_T_BLOCKED) continue;
        int64_t d = atomic_load(&t->deadline);
        if (d > now_v) {
            if (d < next) next = d;
            continue;
        }
        int32_t expect = RV_T_BLOCKED;
        if (!atomic_compare_exchange_strong(&t->state, &expect, RV_T_WAKING)) continue;
        atomic_fetch_add(&S->procs[t->proc].running, 1);
        switch (atomic_load(&t->kind)) {
        case RV_WAKE_FUTEX:
            atomic_fetch_add(&t->wake, 1);
            REAL(syscall)(SYS_futex, &t->wake, FUTEX_WAKE, 1, NULL, NULL, 0);
            break;
        case RV_WAKE_SIGNAL:
            woken_at[j] = real;
            REAL(syscall)(SYS_tgkill, atomic_load(&t->pid), t->tid, S->wake_signal);
            break;
        default: /* RV_WAKE_NONE has no deadline */
            break;
        }
    }
    return next;
}

/* Set the clock rate for the next interval: the running emulated threads' share of a core
 * (see the top of this file) times the host's factor (host_rate.c). The interval just ended
 * ran at the rate set by the previous sample. */
static void sample_contention(int64_t now, int64_t interval) {
    int runnable = 0, running = 0;
    int64_t run_ns = 0, wait_ns = 0;
    /* the largest CPU factor among the runnable threads (docs/timewarp.md, "GPU-driving
     * threads"): the clock runs slower only while every thread doing work counts its CPU
     * slower, so no thread's work ever counts below its own factor */
    int64_t factor = 0;
    int32_t hwm = atomic_load(&S->thread_hwm);
    for (int j = 0; j < hwm; j++) {
        struct rv_thread *t = &S->threads[j];
        int32_t st = atomic_load(&t->state);
        if (st != RV_T_RUNNING && st != RV_T_WAKING) continue;
        running++;
        /* A thread inside a send (odd `sends`) that is runnable but off a CPU was, almost
         * always, preempted by the thread it woke, on the way out of the call: on the node
         * the two run on cores of their own, so it is not counted as competing for one. */
        uint32_t sends = atomic_load(&t->sends);
        if (!(sends & 1) && task_state(j, t) == 'R') {
            runnable++;
            int64_t f = atomic_load_explicit(&t->cpu_factor_ppm, memory_order_relaxed);
            f = f > 0 ? f : RV_RATE_ONE;
            if (f > factor) factor = f;
        }
        add_sched_time(j, t, sends, &run_ns, &wait_ns);
    }
    /* The measured share is for what N/runnable cannot see (other programs, affinity), so
     * the wait N/runnable explains is taken out of it: in an interval that began and ended
     * with r > N emulated threads runnable, a thread that got the share N/r got all it
     * could, and only what it got less counts (its wait becomes max(0, N/r x (run + wait) -
     * run)). An interval where contention began or ended is left out: the kernel adds a wait
     * to schedstat only once the thread runs again, so the waits of a burst of contention
     * show after it, where they would go on slowing the clock for up to the window's length
     * after the threads had cores again (a thread spinning 1 s of CPU beside 5 ms bursts
     * every 25 ms read 0.87 s). */
    if (runnable <= cores && last_runnable <= cores) {
        window[window_at].run += run_ns;
        window[window_at].wait += wait_ns;
    } else if (runnable > cores && last_runnable > cores) {
        int r = runnable > last_runnable ? runnable : last_runnable;
        int64_t unexplained = (run_ns + wait_ns) * cores / r - run_ns;
        window[window_at].run += run_ns;
        window[window_at].wait += unexplained > 0 ? unexplained : 0;
    }
    last_runnable = runnable;
    rv_host_rate_sample(now);
    int64_t host = rv_host_rate_ppm();
    atomic_store_explicit(&S->host_ppm, host, memory_order_relaxed);
    int64_t rate = atomic_load(&S->rate_ppm);
    sampled_real += interval;
    if (running) { /* the interval's virtual time was CPU work's, at this rate */
        busy_real += interval;
        busy_virt += rv_map_virt(0, 0, rate, interval);
        if (rate < busy_rate_min) busy_rate_min = rate;
        if (rate > busy_rate_max) busy_rate_max = rate;
        if (!host_min || host < host_min) host_min = host;
        if (host > host_max) host_max = host;
        host_sum += (__int128)host * interval;
        steal_sum += (__int128)rv_host_steal_ppm() * interval;
    }
    if (last_share < RV_RATE_ONE) {
        dilated_real += interval;
        dilated_virt += rv_map_virt(0, 0, last_share, interval);
    }
    samples++;
    runnable_sum += runnable;
    int64_t run = 0, wait = 0;
    for (int k = 0; k < RV_SHARE_SAMPLES; k++) {
        run += window[k].run;
        wait += window[k].wait;
    }
    /* threads runnable for under a millisecond in all over the window are no evidence of
     * contention: the share returns to a core each. (Keeping the last share instead let one
     * hand-off's wait slow the clock for the rest of a run: where threads take turns, the
     * samples fall in step with their blocking and see one running at two consecutive
     * samples only now and then.) */
    if (run + wait >= 1000000) {
        int64_t got = RV_RATE_ONE * run / (run + wait);
        share_ppm = got >= RV_SHARE_FULL_PPM ? RV_RATE_ONE
                    : got < RV_RATE_ONE / 100 ? RV_RATE_ONE / 100 : got;
    } else {
        share_ppm = RV_RATE_ONE;
    }
    window_at = (window_at + 1) % RV_SHARE_SAMPLES;
    window[window_at].run = window[window_at].wait = 0;
    /* the emulated threads' share of the cores, times what other programs leave them */
    int64_t share = runnable > cores ? RV_RATE_ONE * cores / runnable : RV_RATE_ONE;
    share = share * share_ppm / RV_RATE_ONE;
    last_share = share;
    int64_t next = share * host / RV_RATE_ONE;
    if (factor) next = next * factor / RV_RATE_ONE;
    if (next < RV_RATE_ONE / 100) next = RV_RATE_ONE / 100;
    if (held) held_rate = next;
    else if (next != rate) set_rate(next);
}

/* Whether blocked thread j, runnable in the kernel, has waited RV_HANDOFF_NS for a CPU: its
 * CPU time has not moved since it was first seen runnable in this wait. */
static bool waits_for_cpu(int j, const struct rv_thread *t, int64_t now) {
    int64_t run, wait;
    if (!read_schedstat(j, t, &run, &wait)) return false;
    uint32_t gen = atomic_load(&t->gen);
    if (!held_since[j] || held_gen[j] != gen || held_run[j] != run) {
        held_since[j] = now;
        held_gen[j] = gen;
        held_run[j] = run;
        return false;
    }
    return now - held_since[j] >= RV_HANDOFF_NS;
}

/* One attempt at a jump. `ignore_running` treats threads counted as running as untimed
 * waiters (the stall rule). */
static enum step try_jump(bool ignore_running, int64_t *retry_ns) {
    if (!ignore_running && any_running()) return STEP_BUSY;
    int64_t since = rv_real_ns(CLOCK_MONOTONIC) - atomic_load(&S->last_write_real);
    if (since < RV_GRACE_NS) {
        *retry_ns = RV_GRACE_NS - since;
        return STEP_RETRY;
    }
    uint64_t act = atomic_load(&S->activity);
    int64_t min_d = RV_NO_DEADLINE;
    int blocked = 0;
    int32_t hwm = atomic_load(&S->thread_hwm);
    for (int j = 0; j < hwm; j++) {
        struct rv_thread *t = &S->threads[j];
        int32_t s = atomic_load(&t->state);
        if (s == RV_T_WAKING) return STEP_BUSY;
        if (s != RV_T_BLOCKED) continue;
        int64_t d = atomic_load(&t->deadline);
        bool only_tk_wakes = atomic_load(&t->kind) == RV_WAKE_FUTEX && d != RV_NO_DEADLINE;
        if (!only_tk_wakes) {
            if (task_state(j, t) == 'R') {
                *retry_ns = RV_RETRY_NS;
                return waits_for_cpu(j, t, rv_real_ns(CLOCK_MONOTONIC)) ? STEP_HELD : STEP_RETRY;
            }
            held_since[j] = 0;
        }
        blocked++;
        if (d < min_d) min_d = d;
    }
    if (atomic_load(&S->activity) != act || (!ignore_running && any_running())) {
        *retry_ns = 0;
        return STEP_RETRY;
    }
    if (min_d == RV_NO_DEADLINE) return blocked ? STEP_IDLE : STEP_BUSY;
    int64_t now = rv_real_ns(CLOCK_MONOTONIC), now_v = virt_at(now);
    if (min_d > now_v) {
        set_map(now, min_d, atomic_load(&S->rate_ppm));
        atomic_fetch_add(&S->jumps, 1);
        trace_jump(now_v, min_d, 0);
        now_v = min_d;
    }
    wake_due(now_v);
    return STEP_JUMPED;
}

/* Run until rv_tk_stop() (TK_STOPPED) or until every emulated thread has waited with no
 * deadline and nothing in flight for deadlock_ns of real time (TK_DEADLOCK; 0 = never). */
RV_EXPORT int rv_tk_run(int64_t deadlock_ns, int64_t stall_limit_ns) {
    if (stall_limit_ns > 0) stall_ns = stall_limit_ns;
    int64_t last_reap = 0, idle_since = 0, last_sample = rv_real_ns(CLOCK_MONOTONIC);
    int64_t handoff_at = 0;
    bool in_handoff = false;
    while (!stop_flag) {
        uint32_t seen = atomic_load(&S->tk_futex);
        int64_t now = rv_real_ns(CLOCK_MONOTONIC);
        if (now - last_reap > RV_REAP_NS) {
            reap();
            last_reap = now;
        }
        if (cores > 0 && now - last_sample >= RV_SAMPLE_NS) {
            sample_contention(now, now - last_sample);
            last_sample = now;
        }
        int64_t now_v = virt_at(now), next = wake_due(now_v);
        int64_t left = next == RV_NO_DEADLINE
                           ? RV_REAP_NS
                           : rv_real_for_virt(next - now_v, atomic_load(&S->rate_ppm));
        int64_t retry = left < RV_REAP_NS ? left : RV_REAP_NS;
        if (handoff_at) {
            handoff_real += now - handoff_at;
            handoff_virt += rv_map_virt(0, 0, atomic_load(&S->rate_ppm), now - handoff_at);
            handoff_at = 0;
        }
        enum step st = try_jump(false, &retry);
        if (st == STEP_BUSY && running_threads_stalled(now)) st = try_jump(true, &retry);
        if (st == STEP_HELD) {
            if (!held) {
                held_rate = atomic_load(&S->rate_ppm);
                set_rate(RV_RATE_ONE / 100);
                held = true;
            }
            st = STEP_RETRY;
        } else if (held) {
            set_rate(held_rate);
            held = false;
        }
        if (st == STEP_RETRY && retry > 0) {
            if (!in_handoff) handoffs++;
            in_handoff = true;
            handoff_at = now;
        } else {
            in_handoff = false;
        }
        if (st == STEP_JUMPED) {
            idle_since = 0;
            continue;
        }
        if (st == STEP_IDLE) {
            if (!idle_since) idle_since = now;
            if (deadlock_ns > 0 && now - idle_since > deadlock_ns) return TK_DEADLOCK;
        } else if (st != STEP_RETRY || retry > 0) {
            idle_since = 0;
        }
        if (st == STEP_RETRY && retry == 0) continue;
        struct timespec ts = rv_ns_to_ts(retry);
        REAL(syscall)(SYS_futex, &S->tk_futex, FUTEX_WAIT, seen, &ts, NULL, 0);
    }
    if (jump_trace) fflush(jump_trace);
    return TK_STOPPED;
}

/* Text report of every emulated thread: one line "pid tid state deadline call cmd". */
RV_EXPORT int rv_tk_report(char *buf, int len) {
    int n = 0;
    int32_t hwm = atomic_load(&S->thread_hwm);
    int64_t now_v = virt_at(rv_real_ns(CLOCK_MONOTONIC));
    static const char *names[] = {"free", "running", "blocked", "waking"};
    for (int j = 0; j < hwm && n < len - 256; j++) {
        struct rv_thread *t = &S->threads[j];
        int32_t s = atomic_load(&t->state);
        if (s == RV_T_FREE) continue;
        int64_t d = atomic_load(&t->deadline);
        char dl[32];
        if (d == RV_NO_DEADLINE) snprintf(dl, sizeof dl, "none");
        else snprintf(dl, sizeof dl, "%+.6fs", (d - now_v) / 1e9);
        n += snprintf(buf + n, len - n, "%d\t%d\t%s\t%s\t%s\t%s\n", atomic_load(&t->pid), t->tid,
                      names[s & 3], dl, t->call, S->procs[t->proc].cmd);
    }
    return n;
}

RV_EXPORT int64_t rv_tk_now(void) { return virt_at(rv_real_ns(CLOCK_MONOTONIC)); }

RV_EXPORT void rv_tk_set_cores(int n) { cores = n > 0 ? n : 0; }

/* Clock-rate statistics: out[0] real seconds sampled, out[1] of them with the emulated
 * threads short of a core each (contention), out[2] the virtual seconds those would have
 * become at the contention share alone, out[3] the mean number of runnable emulated threads;
 * out[4] the real seconds sampled with an emulated thread running (CPU-bound), out[5] the
 * virtual seconds those became, out[6] and out[7] the lowest and highest rate of virtual
 * time in them (1: real time); out[8], out[9] and out[10] the host's factor in them (lowest,
 * mean, highest; host_rate.c) and out[11] the mean share of CPU time stolen (0 when none);
 * out[12] and out[13] the real and virtual seconds of hand-offs (no thread running, no jump
 * possible: a send's grace period or a woken thread not yet on a CPU), out[14] their number. */
RV_EXPORT void rv_tk_contention(double *out) {
    out[0] = sampled_real / 1e9;
    out[1] = dilated_real / 1e9;
    out[2] = dilated_virt / 1e9;
    out[3] = samples ? (double)runnable_sum / samples : 0.0;
    out[4] = busy_real / 1e9;
    out[5] = busy_virt / 1e9;
    out[6] = busy_real ? (double)busy_rate_min / RV_RATE_ONE : 0.0;
    out[7] = busy_real ? (double)busy_rate_max / RV_RATE_ONE : 0.0;
    out[8] = busy_real ? (double)host_min / RV_RATE_ONE : 0.0;
    out[9] = busy_real ? (double)(host_sum / busy_real) / RV_RATE_ONE : 0.0;
    out[10] = busy_real ? (double)host_max / RV_RATE_ONE : 0.0;
    out[11] = busy_real ? (double)(steal_sum / busy_real) / RV_RATE_ONE : 0.0;
    out[12] = handoff_real / 1e9;
    out[13] = handoff_virt / 1e9;
    out[14] = (double)handoffs;
}
RV_EXPORT uint32_t rv_tk_jumps(void) { return atomic_load(&S->jumps); }

/* Pids of every live emulated process, for cleanup at the end of a run. */
RV_EXPORT int rv_tk_pids(int *out, int max) {
    int n = 0;
    int32_t hwm = atomic_load(&S->proc_hwm);
    for (int i = 0; i < hwm && n < max; i++) {
        int pid = atomic_load(&S->procs[i].pid);
        if (atomic_load(&S->procs[i].state) != RV_P_FREE && pid > 0) out[n++] = pid;
    }
    return n;
}
