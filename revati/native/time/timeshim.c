/* libc interposition: clocks read virtual time, and every blocking call becomes a
 * time-warp wait (docs/timewarp.md). Each wrapper passes straight through when the process
 * is not attached to a Timekeeper. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core_int.h"

#define EXPORT __attribute__((visibility("default")))
#define ATTACHED (rv_shm != NULL)
static const struct timespec zero_ts = {0, 0};
/* A call that wakes another thread (a send, write, post or signal): it stops a jump until
 * the receiver has run, and while inside it the caller, if the thread it woke preempts it on
 * a shared core, is not counted as waiting for a core (docs/timewarp.md, "Hand-offs on a
 * shared core"). */
#define SENT(call)                                                                           \
    do {                                                                                     \
        rv_send_begin();                                                                     \
        __typeof__(call) sent_r_ = (call);                                                   \
        rv_send_end();                                                                       \
        return sent_r_;                                                                      \
    } while (0)

/* ---- clocks -------------------------------------------------------------------------- */

EXPORT int clock_gettime(clockid_t clk, struct timespec *ts) {
    int r = REAL(clock_gettime)(clk, ts);
    if (r == 0 && ATTACHED && rv_warped_clock(clk)) {
        int64_t ns = rv_warp_ns(clk, rv_ts_to_ns(ts)) + rv_tl_lag;
        ts->tv_sec = ns / 1000000000LL;
        ts->tv_nsec = ns % 1000000000LL;
    }
    return r;
}

/* callers do pass tv == NULL (only the zone wanted), whatever glibc's nonnull says */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wnonnull-compare"
EXPORT int gettimeofday(struct timeval *tv, void *tz) {
    if (!ATTACHED || !tv) return REAL(gettimeofday)(tv, tz);
    if (tz) REAL(gettimeofday)(NULL, tz);
    int64_t ns = rv_virtual_ns(CLOCK_REALTIME);
    tv->tv_sec = ns / 1000000000LL;
    tv->tv_usec = (ns % 1000000000LL) / 1000;
    return 0;
}
#pragma GCC diagnostic pop

EXPORT time_t time(time_t *out) {
    if (!ATTACHED) return REAL(time)(out);
    time_t t = (time_t)(rv_virtual_ns(CLOCK_REALTIME) / 1000000000LL);
    if (out) *out = t;
    return t;
}

EXPORT int timespec_get(struct timespec *ts, int base) {
    if (base != TIME_UTC) return 0;
    return clock_gettime(CLOCK_REALTIME, ts) == 0 ? base : 0;
}

/* ---- sleeps ---------------------------------------------------------------------------- */

/* A zero-length sleep is a yield: it feeds the idle-poller detection. */
static int warped_sleep(int64_t vdeadline, struct timespec *rem, const char *call) {
    int64_t now = rv_now_ns();
    if (vdeadline <= now) {
        if (!rv_poll_idle()) REAL(sched_yield)();
        return 0;
    }
    rv_poll_busy();
    struct rv_wait *w = rv_block_begin_kind(vdeadline, call, RV_WAKE_FUTEX);
    int r = rv_futex_sleep(w, vdeadline);
    rv_block_end(w);
    if (r == EINTR && rem) *rem = rv_ns_to_ts(vdeadline - rv_now_ns());
    return r;
}

EXPORT int clock_nanosleep(clockid_t clk, int flags, const struct timespec *req,
                           struct timespec *rem) {
    if (!ATTACHED || !rv_warped_clock(clk)) return REAL(clock_nanosleep)(clk, flags, req, rem);
    if (req->tv_nsec < 0 || req->tv_nsec >= 1000000000L || req->tv_sec < 0) return EINVAL;
    int64_t deadline = (flags & TIMER_ABSTIME) ? rv_abs_to_mono_deadline(clk, req)
                                               : rv_now_ns() + rv_ts_to_ns(req);
    return warped_sleep(deadline, (flags & TIMER_ABSTIME) ? NULL : rem, "clock_nanosleep");
}

EXPORT int nanosleep(const struct timespec *req, struct timespec *rem) {
    int r = clock_nanosleep(CLOCK_MONOTONIC, 0, req, rem);
    if (r) {
        errno = r;
        return -1;
    }
    return 0;
}

EXPORT int usleep(useconds_t us) {
    struct timespec ts = rv_ns_to_ts((int64_t)us * 1000);
    return nanosleep(&ts, NULL);
}

EXPORT unsigned int sleep(unsigned int s) {
    struct timespec ts = {.tv_sec = s}, rem = {0, 0};
    if (nanosleep(&ts, &rem) < 0) return (unsigned)rem.tv_sec + (rem.tv_nsec > 0);
    return 0;
}

EXPORT int sched_yield(void) {
    if (ATTACHED && rv_poll_idle()) return 0;
    return REAL(sched_yield)();
}

/* ---- fd waits: poll, select, epoll ----------------------------------------------------- */

/* One attempt of the underlying wait with a real timeout (NULL = none) and a signal
 * mask under which the wake signal is deliverable. */
typedef int (*fd_wait_fn)(void *ctx, const struct timespec *timeout, const sigset_t *mask);

/* Run an fd wait until it has events, fails, or virtual time reaches user_deadline
 * (RV_NO_DEADLINE: wait forever). The wake signal interrupts the kernel wait after a
 * jump; a signal of the application's own is returned to it as EINTR. `fds` are the
 * descriptors waited on: armed timerfds among them (or behind an epoll fd) add their
 * deadlines, so the Timekeeper can jump to them. */
static int warped_fd_wait(void *ctx, fd_wait_fn fn, int64_t user_deadline,
                          const sigset_t *user_mask, const char *call, const int *fds, int nfds) {
    if (!ATTACHED) return -2; /* caller passes through */
    if (user_deadline != RV_NO_DEADLINE && user_deadline <= rv_now_ns())
        return fn(ctx, &zero_ts, user_mask);
    /* cheap first look: ready already means no wait at all */
    int r = fn(ctx, &zero_ts, user_mask);
    if (r != 0) return r;
    sigset_t mask;
    rv_wait_sigmask(user_mask, &mask);
    for (;;) {
        int64_t timer = rv_timers_deadline(fds, nfds);
        struct timespec left, *tp = NULL;
        if (user_deadline != RV_NO_DEADLINE) {
            int64_t l = user_deadline - rv_now_ns();
            if (l <= 0) return 0;
            left = rv_ns_to_ts(rv_real_wait_ns(l));
            tp = &left;
        }
        /* registered again after every wake: a timer's next deadline may differ */
        struct rv_wait *w = rv_block_begin_kind(timer < user_deadline ? timer : user_deadline,
                                                call, RV_WAKE_SIGNAL);
        r = fn(ctx, tp, &mask);
        int e = errno;
        rv_block_end(w);
        errno = e;
        if (r < 0 && e == EINTR && rv_tl_woken) {
            rv_tl_woken = 0;
            continue; /* our wake: re-evaluate the deadlines */
        }
        /* a kernel timeout before the virtual deadline: the clock rate changed meanwhile */
        if (r == 0 && (user_deadline == RV_NO_DEADLINE || rv_now_ns() < user_deadline)) continue;
        return r;
    }
}

static int64_t deadline_after_ms(int timeout_ms) {
    return timeout_ms < 0 ? RV_NO_DEADLINE : rv_now_ns() + (int64_t)timeout_ms * 1000000;
}

static int64_t deadline_after_ts(const struct timespec *ts) {
    return ts ? rv_now_ns() + rv_ts_to_ns(ts) : RV_NO_DEADLINE;
}

struct poll_ctx { struct pollfd *fds; nfds_t n; };
static int do_ppoll(void *c, const struct timespec *t, const sigset_t *m) {
    struct poll_ctx *p = c;
    return REAL(ppoll)(p->fds, p->n, t, m);
}

/* The descriptors of a pollfd array, for the timerfd lookup (the first 64 suffice: an
 * application polling more than that many fds with timers among them is not expected). */
static int poll_fds(const struct pollfd *fds, nfds_t n, int *out) {
    int k = 0;
    for (nfds_t i = 0; i < n && k < 64; i++) out[k++] = fds[i].fd;
    return k;
}

EXPORT int ppoll(struct pollfd *fds, nfds_t n, const struct timespec *t, const sigset_t *m) {
    struct poll_ctx c = {fds, n};
    int ids[64], k = poll_fds(fds, n, ids);
    int r = warped_fd_wait(&c, do_ppoll, deadline_after_ts(t), m, "ppoll", ids, k);
    return r == -2 ? REAL(ppoll)(fds, n, t, m) : r;
}

EXPORT int poll(struct pollfd *fds, nfds_t n, int timeout_ms) {
    struct poll_ctx c = {fds, n};
    int ids[64], k = poll_fds(fds, n, ids);
    int r = warped_fd_wait(&c, do_ppoll, deadline_after_ms(timeout_ms), NULL, "poll", ids, k);
    if (r != -2) return r;
    struct timespec ts = rv_ns_to_ts((int64_t)timeout_ms * 1000000);
    return REAL(ppoll)(fds, n, timeout_ms < 0 ? NULL : &ts, NULL);
}

struct select_ctx { int n; fd_set *r, *w, *e; fd_set r0, w0, e0; };
static int do_pselect(void *c, const struct timespec *t, const sigset_t *m) {
    struct select_ctx *s = c;
    /* select overwrites its sets: every attempt starts from the caller's sets */
    if (s->r) *s->r = s->r0;
    if (s->w) *s->w = s->w0;
    if (s->e) *s->e = s->e0;
    return REAL(pselect)(s->n, s->r, s->w, s->e, t, m);
}

static int warped_select(int n, fd_set *r, fd_set *w, fd_set *e, int64_t deadline,
                         const sigset_t *m, const char *call) {
    struct select_ctx c = {.n = n, .r = r, .w = w, .e = e};
    if (r) c.r0 = *r;
    if (w) c.w0 = *w;
    if (e) c.e0 = *e;
    int ids[64], k = 0;
    for (int fd = 0; fd < n && k < 64; fd++)
        if ((r && FD_ISSET(fd, r)) || (w && FD_ISSET(fd, w)) || (e && FD_ISSET(fd, e)))
            ids[k++] = fd;
    return warped_fd_wait(&c, do_pselect, deadline, m, call, ids, k);
}

EXPORT int pselect(int n, fd_set *r, fd_set *w, fd_set *e, const struct timespec *t,
                   const sigset_t *m) {
    int res = warped_select(n, r, w, e, deadline_after_ts(t), m, "pselect");
    return res == -2 ? REAL(pselect)(n, r, w, e, t, m) : res;
}

EXPORT int select(int n, fd_set *r, fd_set *w, fd_set *e, struct timeval *tv) {
    int64_t deadline = tv ? rv_now_ns() + tv->tv_sec * 1000000000LL + tv->tv_usec * 1000LL
                          : RV_NO_DEADLINE;
    int res = warped_select(n, r, w, e, deadline, NULL, "select");
    if (res == -2) {
        struct timespec ts = {0, 0};
        if (tv) ts = rv_ns_to_ts(tv->tv_sec * 1000000000LL + tv->tv_usec * 1000LL);
        return REAL(pselect)(n, r, w, e, tv ? &ts : NULL, NULL);
    }
    if (tv && res >= 0) tv->tv_sec = tv->tv_usec = 0; /* Linux reports the time left */
    return res;
}

struct epoll_ctx { int fd; struct epoll_event *ev; int max; };
static int do_epoll(void *c, const struct timespec *t, const sigset_t *m) {
    struct epoll_ctx *p = c;
    return REAL(epoll_pwait2)(p->fd, p->ev, p->max, t, m);
}

EXPORT int epoll_pwait2(int fd, struct epoll_event *ev, int max, const struct timespec *t,
                        const sigset_t *m) {
    struct epoll_ctx c = {fd, ev, max};
    int r = warped_fd_wait(&c, do_epoll, deadline_after_ts(t), m, "epoll_pwait2", &fd, 1);
    return r == -2 ? REAL(epoll_pwait2)(fd, ev, max, t, m) : r;
}

EXPORT int epoll_pwait(int fd, struct epoll_event *ev, int max, int timeout_ms,
                       const sigset_t *m) {
    struct epoll_ctx c = {fd, ev, max};
    int r = warped_fd_wait(&c, do_epoll, deadline_after_ms(timeout_ms), m, "epoll_wait", &fd, 1);
    if (r != -2) return r;
    struct timespec ts = rv_ns_to_ts((int64_t)timeout_ms * 1000000);
    return REAL(epoll_pwait2)(fd, ev, max, timeout_ms < 0 ? NULL : &ts, m);
}

EXPORT int epoll_wait(int fd, struct epoll_event *ev, int max, int timeout_ms) {
    return epoll_pwait(fd, ev, max, timeout_ms, NULL);
}

/* ---- semaphores (Python's locks, Event, Queue, Condition) ------------------------------- */

/* glibc returns EINTR from a semaphore wait interrupted by a handler installed without
 * SA_RESTART, so the wake signal is let through just around the wait. A wake that lands
 * between unmasking and sleeping is re-sent by the Timekeeper. */
static int warped_sem_wait(sem_t *sem, int64_t vdeadline, const char *call) {
    if (sem_trywait(sem) == 0) return 0;
    if (errno != EAGAIN) return -1;
    sigset_t open_mask, old;
    rv_wait_sigmask(NULL, &open_mask);
    struct rv_wait *w = rv_block_begin_kind(vdeadline, call, RV_WAKE_SIGNAL);
    int r;
    for (;;) {
        REAL(pthread_sigmask)(SIG_SETMASK, &open_mask, &old);
        if (vdeadline == RV_NO_DEADLINE) {
            r = REAL(sem_wait)(sem);
        } else {
            int64_t l = vdeadline - rv_now_ns();
            if (l <= 0) {
                REAL(pthread_sigmask)(SIG_SETMASK, &old, NULL);
                errno = ETIMEDOUT;
                r = -1;
                break;
            }
            struct timespec abs = rv_ns_to_ts(rv_real_ns(CLOCK_MONOTONIC) + rv_real_wait_ns(l));
            r = REAL(sem_clockwait)(sem, CLOCK_MONOTONIC, &abs);
        }
        int e = errno;
        REAL(pthread_sigmask)(SIG_SETMASK, &old, NULL);
        errno = e;
        if (r == 0) break;
        if (e == EINTR && rv_tl_woken) {
            rv_tl_woken = 0;
            continue;
        }
        if (e == ETIMEDOUT) continue; /* real timeout: re-check against virtual time */
        break;
    }
    int e = errno;
    rv_block_end(w);
    errno = e;
    return r;
}

EXPORT int sem_wait(sem_t *sem) {
    return ATTACHED ? warped_sem_wait(sem, RV_NO_DEADLINE, "sem_wait") : REAL(sem_wait)(sem);
}

EXPORT int sem_clockwait(sem_t *sem, clockid_t clk, const struct timespec *abs) {
    if (!ATTACHED) return REAL(sem_clockwait)(sem, clk, abs);
    if (abs->tv_nsec < 0 || abs->tv_nsec >= 1000000000L) {
        errno = EINVAL;
        return -1;
    }
    return warped_sem_wait(sem, rv_abs_to_mono_deadline(clk, abs), "sem_clockwait");
}

EXPORT int sem_timedwait(sem_t *sem, const struct timespec *abs) {
    if (!ATTACHED) return REAL(sem_clockwait)(sem, CLOCK_REALTIME, abs);
    return sem_clockwait(sem, CLOCK_REALTIME, abs);
}

EXPORT int sem_post(sem_t *sem) {
    SENT(REAL(sem_post)(sem));
}

/* ---- condition variables and mutexes -------------------------------------------------- */

/* glibc keeps the clock chosen by pthread_condattr_setclock in bit 1 of __wrefs (stable
 * since glibc 2.25); pthread_cond_timedwait's deadline is on that clock. */
static clockid_t cond_clock(pthread_cond_t *c) {
    return (c->__data.__wrefs & 2) ? CLOCK_MONOTONIC : CLOCK_REALTIME;
}

typedef int (*restarting_fn)(void *a, void *b, const struct timespec *real_abs_mono);
static int do_cond_wait(void *c, void *m, const struct timespec *abs) {
    return REAL(pthread_cond_clockwait)(c, m, CLOCK_MONOTONIC, abs);
}
static int do_mutex_lock(void *m, void *unused, const struct timespec *abs) {
    return REAL(pthread_mutex_clocklock)(m, CLOCK_MONOTONIC, abs);
}

/* Waits that glibc restarts after a signal (condition variables, timed mutex locks): it
 * re-reads the caller's deadline after every EINTR. The kernel gets the whole virtual wait
 * as a real timeout at the current clock rate, and the wake signal, let through just
 * around the wait, ends it early: its handler moves that deadline into the past
 * (on_wake_signal), so glibc's restarted wait times out at once. A wake that lands between
 * unmasking and sleeping finds the deadline already moved; one that lands before unmasking
 * stays pending until then. (These waits used to sleep in 1 ms slices to notice jumps:
 * the NCCL watchdog threads' 100 ms condition waits then woke 1,000 times a second each.)
 *
 * A condition variable's wait that ends before the virtual deadline returns 0, a spurious
 * wake-up (which POSIX allows and every caller handles by re-checking its predicate),
 * instead of waiting again: a signal sent while the waiter is between two waits (it has
 * left the condition's queue and is re-taking the mutex) wakes nobody, and only the
 * caller's predicate still knows about it. Waiting on would lose that wake-up until the
 * caller's timeout (gloo's collectives stalled until their 30-minute timeout, which the
 * time warp reaches in seconds). A timed mutex lock has no such predicate: its retry is the
 * lock itself, so it waits again. */
static int warped_restarting_wait(restarting_fn fn, void *a, void *b, int64_t vdeadline,
                                  const char *call, bool spurious_ok) {
    sigset_t open_mask, old;
    rv_wait_sigmask(NULL, &open_mask);
    struct rv_wait *w = rv_block_begin_kind(vdeadline, call, RV_WAKE_SIGNAL);
    int r;
    for (;;) {
        int64_t l = vdeadline - rv_now_ns();
        if (l <= 0) {
            r = ETIMEDOUT;
            break;
        }
        struct timespec abs = rv_ns_to_ts(rv_real_ns(CLOCK_MONOTONIC) + rv_real_wait_ns(l));
        /* a signal handler's own wait nests inside ours: restore our deadline after it */
        struct timespec *outer = rv_tl_wait_abs;
        rv_tl_wait_abs = &abs;
        REAL(pthread_sigmask)(SIG_SETMASK, &open_mask, &old);
        r = fn(a, b, &abs);
        REAL(pthread_sigmask)(SIG_SETMASK, &old, NULL);
        rv_tl_wait_abs = outer;
        rv_tl_woken = 0;
        if (r != ETIMEDOUT) break;
        /* timed out before the virtual deadline: our wake came early (a re-sent one) or
         * the clock rate fell since the timeout was computed */
        if (spurious_ok && rv_now_ns() < vdeadline) {
            r = 0;
            break;
        }
    }
    rv_block_end(w);
    return r;
}

EXPORT int pthread_cond_clockwait(pthread_cond_t *c, pthread_mutex_t *m, clockid_t clk,
                                  const struct timespec *abs) {
    if (!ATTACHED) return REAL(pthread_cond_clockwait)(c, m, clk, abs);
    if (abs->tv_nsec < 0 || abs->tv_nsec >= 1000000000L) return EINVAL;
    return warped_restarting_wait(do_cond_wait, c, m, rv_abs_to_mono_deadline(clk, abs),
                                  "pthread_cond_clockwait", true);
}

EXPORT int pthread_cond_timedwait(pthread_cond_t *c, pthread_mutex_t *m,
                                  const struct timespec *abs) {
    if (!ATTACHED) return REAL(pthread_cond_clockwait)(c, m, cond_clock(c), abs);
    return pthread_cond_clockwait(c, m, cond_clock(c), abs);
}

EXPORT int pthread_cond_wait(pthread_cond_t *c, pthread_mutex_t *m) {
    struct rv_wait *w = ATTACHED ? rv_block_begin_kind(RV_NO_DEADLINE, "pthread_cond_wait",
                                                       RV_WAKE_NONE)
                                 : NULL;
    int r = REAL(pthread_cond_wait)(c, m);
    rv_block_end(w);
    return r;
}

EXPORT int pthread_cond_signal(pthread_cond_t *c) {
    SENT(REAL(pthread_cond_signal)(c));
}

EXPORT int pthread_cond_broadcast(pthread_cond_t *c) {
    SENT(REAL(pthread_cond_broadcast)(c));
}

EXPORT int pthread_mutex_clocklock(pthread_mutex_t *m, clockid_t clk, const struct timespec *abs) {
    if (!ATTACHED) return REAL(pthread_mutex_clocklock)(m, clk, abs);
    if (pthread_mutex_trylock(m) == 0) return 0;
    return warped_restarting_wait(do_mutex_lock, m, NULL, rv_abs_to_mono_deadline(clk, abs),
                                  "pthread_mutex_timedlock", false);
}

EXPORT int pthread_mutex_timedlock(pthread_mutex_t *m, const struct timespec *abs) {
    return pthread_mutex_clocklock(m, CLOCK_REALTIME, abs);
}

/* ---- untimed blocking calls ------------------------------------------------------------- */

#define UNTIMED(call_name, expr)                                                             \
    do {                                                                                     \
        struct rv_wait *w_ = ATTACHED ? rv_block_begin_kind(RV_NO_DEADLINE, call_name,       \
                                                            RV_WAKE_NONE)                    \
                                      : NULL;                                                \
        __typeof__(expr) r_ = (expr);                                                        \
        int e_ = errno;                                                                      \
        rv_block_end(w_);                                                                    \
        errno = e_;                                                                          \
        return r_;                                                                           \
    } while (0)

/* Would a blocking receive on fd wait? Ready or non-blocking fds never count as a wait,
 * so ordinary file reads cost one extra zero-timeout poll and nothing else. */
static bool would_block(int fd, short events) {
    if (!ATTACHED) return false;
    struct pollfd p = {.fd = fd, .events = events};
    if (REAL(ppoll)(&p, 1, &zero_ts, NULL) != 0) return false;
    int fl = fcntl(fd, F_GETFL);
    return fl >= 0 && !(fl & O_NONBLOCK);
}

EXPORT ssize_t read(int fd, void *buf, size_t n) {
    if (!would_block(fd, POLLIN)) return REAL(read)(fd, buf, n);
    if (rv_timers_deadline(&fd, 1) != RV_NO_DEADLINE) { /* an armed timerfd */
        struct pollfd p = {.fd = fd, .events = POLLIN};
        struct poll_ctx c = {&p, 1};
        if (warped_fd_wait(&c, do_ppoll, RV_NO_DEADLINE, NULL, "read", &fd, 1) < 0) return -1;
        return REAL(read)(fd, buf, n);
    }
    UNTIMED("read", REAL(read)(fd, buf, n));
}

EXPORT ssize_t readv(int fd, const struct iovec *iov, int cnt) {
    if (!would_block(fd, POLLIN)) return REAL(readv)(fd, iov, cnt);
    UNTIMED("readv", REAL(readv)(fd, iov, cnt));
}

EXPORT ssize_t recv(int fd, void *buf, size_t n, int flags) {
    if ((flags & MSG_DONTWAIT) || !would_block(fd, POLLIN)) return REAL(recv)(fd, buf, n, flags);
    UNTIMED("recv", REAL(recv)(fd, buf, n, flags));
}

EXPORT ssize_t recvfrom(int fd, void *buf, size_t n, int flags, struct sockaddr *a, socklen_t *l) {
    if ((flags & MSG_DONTWAIT) || !would_block(fd, POLLIN))
        return REAL(recvfrom)(fd, buf, n, flags, a, l);
    UNTIMED("recvfrom", REAL(recvfrom)(fd, buf, n, flags, a, l));
}

EXPORT ssize_t recvmsg(int fd, struct msghdr *msg, int flags) {
    if ((flags & MSG_DONTWAIT) || !would_block(fd, POLLIN)) return REAL(recvmsg)(fd, msg, flags);
    UNTIMED("recvmsg", REAL(recvmsg)(fd, msg, flags));
}

EXPORT int accept(int fd, struct sockaddr *a, socklen_t *l) {
    if (!would_block(fd, POLLIN)) return REAL(accept)(fd, a, l);
    UNTIMED("accept", REAL(accept)(fd, a, l));
}

EXPORT int accept4(int fd, struct sockaddr *a, socklen_t *l, int flags) {
    if (!would_block(fd, POLLIN)) return REAL(accept4)(fd, a, l, flags);
    UNTIMED("accept4", REAL(accept4)(fd, a, l, flags));
}

EXPORT pid_t waitpid(pid_t pid, int *status, int options) {
    if (!ATTACHED || (options & WNOHANG)) return REAL(waitpid)(pid, status, options);
    UNTIMED("waitpid", REAL(waitpid)(pid, status, options));
}

EXPORT pid_t wait(int *status) { return waitpid(-1, status, 0); }

EXPORT pid_t wait4(pid_t pid, int *status, int options, struct rusage *ru) {
    if (!ATTACHED || (options & WNOHANG)) return REAL(wait4)(pid, status, options, ru);
    UNTIMED("wait4", REAL(wait4)(pid, status, options, ru));
}

EXPORT int waitid(idtype_t type, id_t id, siginfo_t *info, int options) {
    if (!ATTACHED || (options & WNOHANG)) return REAL(waitid)(type, id, info, options);
    UNTIMED("waitid", REAL(waitid)(type, id, info, options));
}

EXPORT int pthread_join(pthread_t th, void **ret) {
    UNTIMED("pthread_join", REAL(pthread_join)(th, ret));
}

/* ---- sends: a message in flight must stop a jump until its receiver has run ------------ */

EXPORT ssize_t write(int fd, const void *buf, size_t n) {
    SENT(REAL(write)(fd, buf, n));
}

EXPORT ssize_t writev(int fd, const struct iovec *iov, int cnt) {
    SENT(REAL(writev)(fd, iov, cnt));
}

EXPORT ssize_t send(int fd, const void *buf, size_t n, int flags) {
    SENT(REAL(send)(fd, buf, n, flags));
}

EXPORT ssize_t sendto(int fd, const void *buf, size_t n, int flags, const struct sockaddr *a,
                      socklen_t l) {
    SENT(REAL(sendto)(fd, buf, n, flags, a, l));
}

EXPORT ssize_t sendmsg(int fd, const struct msghdr *msg, int flags) {
    SENT(REAL(sendmsg)(fd, msg, flags));
}

/* ---- signal masks: the wake signal stays blocked outside our waits --------------------- */

static void keep_wake_blocked(int how, const sigset_t *in, sigset_t *out) {
    *out = *in;
    int s = rv_wake_signal();
    if (!s) return;
    if (how == SIG_UNBLOCK) sigdelset(out, s);
    else if (how == SIG_SETMASK) sigaddset(out, s);
}

EXPORT int pthread_sigmask(int how, const sigset_t *set, sigset_t *old) {
    if (!ATTACHED || !set) return REAL(pthread_sigmask)(how, set, old);
    sigset_t s;
    keep_wake_blocked(how, set, &s);
    return REAL(pthread_sigmask)(how, &s, old);
}

EXPORT int sigprocmask(int how, const sigset_t *set, sigset_t *old) {
    int r = pthread_sigmask(how, set, old);
    if (r) {
        errno = r;
        return -1;
    }
    return 0;
}

/* ---- threads ------------------------------------------------------------------------------ */

struct thread_start { void *(*fn)(void *); void *arg; };

static void *thread_trampoline(void *p) {
    struct thread_start s = *(struct thread_start *)p;
    free(p);
    rv_thread_started();
    return s.fn(s.arg);
}

EXPORT int pthread_create(pthread_t *th, const pthread_attr_t *attr, void *(*fn)(void *),
                          void *arg) {
    if (!ATTACHED || rv_proc_idx < 0) return REAL(pthread_create)(th, attr, fn, arg);
    struct thread_start *s = malloc(sizeof *s);
    if (!s) return EAGAIN;
    s->fn = fn;
    s->arg = arg;
    /* the new thread is runnable from now on: count it before it exists */
    atomic_fetch_add(&rv_shm->procs[rv_proc_idx].running, 1);
    int r = REAL(pthread_create)(th, attr, thread_trampoline, s);
    if (r) {
        atomic_fetch_sub(&rv_shm->procs[rv_proc_idx].running, 1);
        free(s);
    }
    return r;
}

/* ---- processes ------------------------------------------------------------------------------ */

EXPORT pid_t fork(void) {
    int idx = rv_reserve_child();
    rv_tl_in_fork = true;
    pid_t pid = REAL(fork)();
    rv_tl_in_fork = false;
    if (pid == 0) {
        rv_after_fork_in_child(idx);
    } else if (pid > 0) {
        rv_child_started(idx, pid);
    } else {
        rv_child_failed(idx);
    }
    return pid;
}

/* vfork's child borrows the parent's stack, which a wrapper function cannot allow; a
 * fork has the same observable behaviour for the exec-right-away pattern vfork serves. */
EXPORT pid_t vfork(void) { return fork(); }

/* The environment a child needs to stay emulated, even if the caller built a new one. */
static char *const *ensure_env(char *const *envp, char ***owned) {
    *owned = NULL;
    if (!ATTACHED || !envp) return envp;
    static const char *keys[] = {"LD_PRELOAD=", "REVATI_SHM=", "REVATI_LOG_LEVEL="};
    const char *missing[3];
    int nmiss = 0, n = 0;
    for (; envp[n]; n++) {
    }
    for (int k = 0; k < 3; k++) {
        size_t kl = strlen(keys[k]);
        bool found = false;
        for (int i = 0; i < n && !found; i++) found = strncmp(envp[i], keys[k], kl) == 0;
        if (found) continue;
        char name[32];
        memcpy(name, keys[k], kl - 1);
        name[kl - 1] = 0;
        const char *val = getenv(name);
        if (!val) continue;
        char *entry = malloc(kl + strlen(val) + 1);
        strcpy(entry, keys[k]);
        strcat(entry, val);
        missing[nmiss++] = entry;
    }
    if (!nmiss) return envp;
    char **e = malloc(sizeof(char *) * (n + nmiss + 1));
    memcpy(e, envp, sizeof(char *) * n);
    for (int i = 0; i < nmiss; i++) e[n + i] = (char *)missing[i];
    e[n + nmiss] = NULL;
    *owned = e;
    return e;
}

EXPORT int execve(const char *path, char *const argv[], char *const envp[]) {
    char **owned;
    char *const *env = ensure_env(envp, &owned);
    rv_exec_begin();
    int r = REAL(execve)(path, argv, env);
    int e = errno;
    rv_exec_failed();
    free(owned);
    errno = e;
    return r;
}

static int spawn_common(bool search, pid_t *pid, const char *path,
                        const posix_spawn_file_actions_t *fa, const posix_spawnattr_t *at,
                        char *const argv[], char *const envp[]) {
    char **owned;
    char *const *env = ensure_env(envp, &owned);
    int idx = rv_reserve_child();
    pid_t child = 0;
    int r = search ? REAL(posix_spawnp)(&child, path, fa, at, argv, env)
                   : REAL(posix_spawn)(&child, path, fa, at, argv, env);
    if (r == 0) rv_child_started(idx, child);
    else rv_child_failed(idx);
    if (pid) *pid = child;
    free(owned);
    return r;
}

EXPORT int posix_spawn(pid_t *pid, const char *path, const posix_spawn_file_actions_t *fa,
                       const posix_spawnattr_t *at, char *const argv[], char *const envp[]) {
    return spawn_common(false, pid, path, fa, at, argv, envp);
}

EXPORT int posix_spawnp(pid_t *pid, const char *file, const posix_spawn_file_actions_t *fa,
                        const posix_spawnattr_t *at, char *const argv[], char *const envp[]) {
    return spawn_common(true, pid, file, fa, at, argv, envp);
}

/* ---- raw syscalls that programs use instead of the libc wrappers ------------------------ */

/* futex(2) called through syscall(): Rust's std (parking, Mutex, Condvar), some C++ runtimes.
 * Waits become time-warp waits (timed ones woken by the wake signal); wakes
 * count as sends. Returns -2 for operations passed through unchanged. */
static long warped_futex(const long *a) {
    int op = (int)a[1], cmd = op & FUTEX_CMD_MASK;
    if (cmd == FUTEX_WAKE || cmd == FUTEX_WAKE_BITSET || cmd == FUTEX_REQUEUE ||
        cmd == FUTEX_CMP_REQUEUE || cmd == FUTEX_WAKE_OP) {
        SENT(REAL(syscall)(SYS_futex, a[0], a[1], a[2], a[3], a[4], a[5]));
    }
    if (cmd != FUTEX_WAIT && cmd != FUTEX_WAIT_BITSET) return -2;
    const struct timespec *ts = (const struct timespec *)a[3];
    uint32_t bitset = cmd == FUTEX_WAIT ? FUTEX_BITSET_MATCH_ANY : (uint32_t)a[5];
    int wait_op = FUTEX_WAIT_BITSET | (op & FUTEX_PRIVATE_FLAG); /* absolute, monotonic */
    int64_t deadline = RV_NO_DEADLINE;
    if (ts && cmd == FUTEX_WAIT) deadline = rv_now_ns() + rv_ts_to_ns(ts);
    else if (ts) deadline = rv_abs_to_mono_deadline(
                     (op & FUTEX_CLOCK_REALTIME) ? CLOCK_REALTIME : CLOCK_MONOTONIC, ts);
    /* a timed wait is woken by the wake signal (EINTR), let through just around it */
    sigset_t open_mask, old;
    if (deadline != RV_NO_DEADLINE) rv_wait_sigmask(NULL, &open_mask);
    struct rv_wait *w = rv_block_begin_kind(
        deadline, "futex", deadline == RV_NO_DEADLINE ? RV_WAKE_NONE : RV_WAKE_SIGNAL);
    long r;
    for (;;) {
        if (deadline == RV_NO_DEADLINE) {
            r = REAL(syscall)(SYS_futex, a[0], wait_op, a[2], NULL, NULL, bitset);
            break;
        }
        int64_t l = deadline - rv_now_ns();
        if (l <= 0) {
            errno = ETIMEDOUT;
            r = -1;
            break;
        }
        struct timespec abs = rv_ns_to_ts(rv_real_ns(CLOCK_MONOTONIC) + rv_real_wait_ns(l));
        REAL(pthread_sigmask)(SIG_SETMASK, &open_mask, &old);
        r = REAL(syscall)(SYS_futex, a[0], wait_op, a[2], &abs, NULL, bitset);
        int e = errno;
        REAL(pthread_sigmask)(SIG_SETMASK, &old, NULL);
        errno = e;
        if (r < 0 && e == EINTR && rv_tl_woken) {
            rv_tl_woken = 0;
            continue; /* our wake: re-check the virtual deadline */
        }
        /* a real timeout re-checks it too (the clock rate may have fallen meanwhile) */
        if (!(r < 0 && e == ETIMEDOUT)) break;
    }
    int e = errno;
    rv_block_end(w);
    errno = e;
    return r;
}

EXPORT long syscall(long nr, ...) {
    va_list ap;
    va_start(ap, nr);
    long a[6];
    for (int i = 0; i < 6; i++) a[i] = va_arg(ap, long);
    va_end(ap);
    if (ATTACHED) {
        switch (nr) {
        case SYS_clock_gettime:
            return clock_gettime((clockid_t)a[0], (struct timespec *)a[1]);
        case SYS_gettimeofday:
            return gettimeofday((struct timeval *)a[0], (void *)a[1]);
        case SYS_nanosleep:
            return nanosleep((const struct timespec *)a[0], (struct timespec *)a[1]);
        case SYS_futex: {
            long r = warped_futex(a);
            if (r != -2) return r;
            break;
        }
        case SYS_clock_nanosleep: {
            int r = clock_nanosleep((clockid_t)a[0], (int)a[1], (const struct timespec *)a[2],
                                    (struct timespec *)a[3]);
            if (r) {
                errno = r;
                return -1;
            }
            return 0;
        }
        default:
            break;
        }
    }
    return REAL(syscall)(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
}
