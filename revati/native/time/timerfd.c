/* timerfd in virtual time.
 *
 * A timerfd is armed in the kernel in real time. The shim keeps each timer's deadline in
 * virtual time and, whenever the clock map has changed (a jump, a change of rate) since
 * the kernel timer was armed, re-arms it with the real time that is left, so it fires
 * when the virtual clock says. A thread waiting on fds (poll, select, epoll, read) that include an armed timerfd
 * registers the timer's deadline with the Timekeeper, which can then jump to it.
 * Limits: a periodic timer crossed by a jump of several periods reports one expiration;
 * while virtual time runs slower than real (CPU contention) the kernel repeats a periodic
 * timer at its real interval, early in virtual time, until the next re-arm. */
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>

#include "core_int.h"

#define EXPORT __attribute__((visibility("default")))
#define MAX_TIMERS 256
#define MAX_EPOLLS 8

struct vtimer {
    int fd;               /* -1: free */
    clockid_t clock;
    int64_t deadline;     /* virtual CLOCK_MONOTONIC ns of the next expiration, 0 = disarmed */
    int64_t interval;
    uint32_t armed_gen;   /* clock map generation when the kernel timer was last armed */
    int epolls[MAX_EPOLLS]; /* epoll instances watching this timer */
};

static struct vtimer timers[MAX_TIMERS];
static int ntimers;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static struct vtimer *find(int fd) {
    for (int i = 0; i < ntimers; i++)
        if (timers[i].fd == fd) return &timers[i];
    return NULL;
}

/* Re-arm the kernel timer if a jump or a change of clock rate made it stale (armed for a
 * real time that no longer matches the virtual deadline; a deadline the jump reached or
 * passed fires at once), then return the timer's next virtual deadline. */
static int64_t refresh(struct vtimer *t) {
    if (!t->deadline) return RV_NO_DEADLINE;
    int64_t now = rv_now_ns();
    uint32_t gen = rv_map_gen();
    if (gen != t->armed_gen) {
        int64_t left = rv_real_wait_ns(t->deadline - now);
        struct itimerspec its = {.it_interval = rv_ns_to_ts(t->interval),
                                 .it_value = rv_ns_to_ts(left > 0 ? left : 1)};
        REAL(timerfd_settime)(t->fd, 0, &its, NULL);
        t->armed_gen = gen;
    }
    while (t->interval && t->deadline <= now) t->deadline += t->interval;
    if (!t->interval && t->deadline <= now) return RV_NO_DEADLINE; /* fired: fd is readable */
    return t->deadline;
}

EXPORT int timerfd_create(int clock, int flags) {
    int fd = REAL(timerfd_create)(clock, flags);
    if (fd < 0 || !rv_attached() || !rv_warped_clock(clock)) return fd;
    pthread_mutex_lock(&lock);
    struct vtimer *t = NULL;
    for (int i = 0; i < ntimers && !t; i++)
        if (timers[i].fd < 0) t = &timers[i];
    if (!t && ntimers < MAX_TIMERS) t = &timers[ntimers++];
    if (t) {
        memset(t, 0, sizeof *t);
        t->fd = fd;
        t->clock = clock;
        for (int i = 0; i < MAX_EPOLLS; i++) t->epolls[i] = -1;
    } else {
        rv_log_once("too many timerfds, these run in real time", "timerfd_create");
    }
    pthread_mutex_unlock(&lock);
    return fd;
}

EXPORT int timerfd_settime(int fd, int flags, const struct itimerspec *nv, struct itimerspec *old) {
    pthread_mutex_lock(&lock);
    struct vtimer *t = rv_attached() ? find(fd) : NULL;
    if (!t) {
        pthread_mutex_unlock(&lock);
        return REAL(timerfd_settime)(fd, flags, nv, old);
    }
    int64_t now = rv_now_ns();
    if (old) {
        int64_t left = t->deadline ? t->deadline - now : 0;
        old->it_value = rv_ns_to_ts(left > 0 ? left : (t->deadline ? 1 : 0));
        old->it_interval = rv_ns_to_ts(t->interval);
    }
    int64_t v = rv_ts_to_ns(&nv->it_value);
    t->interval = rv_ts_to_ns(&nv->it_interval);
    if (v == 0) t->deadline = 0;
    else if (flags & TFD_TIMER_ABSTIME) t->deadline = rv_abs_to_mono_deadline(t->clock, &nv->it_value);
    else t->deadline = now + v;
    struct itimerspec real = *nv;
    if (t->deadline) {
        int64_t left = rv_real_wait_ns(t->deadline - now);
        real.it_value = rv_ns_to_ts(left > 0 ? left : 1);
    }
    t->armed_gen = rv_map_gen();
    int r = REAL(timerfd_settime)(fd, 0, &real, NULL);
    pthread_mutex_unlock(&lock);
    return r;
}

EXPORT int timerfd_gettime(int fd, struct itimerspec *cur) {
    pthread_mutex_lock(&lock);
    struct vtimer *t = rv_attached() ? find(fd) : NULL;
    if (!t) {
        pthread_mutex_unlock(&lock);
        return REAL(timerfd_gettime)(fd, cur);
    }
    int64_t d = refresh(t), now = rv_now_ns();
    cur->it_value = rv_ns_to_ts(d == RV_NO_DEADLINE ? 0 : d - now);
    cur->it_interval = rv_ns_to_ts(t->interval);
    pthread_mutex_unlock(&lock);
    return 0;
}

EXPORT int close(int fd) {
    if (ntimers) {
        pthread_mutex_lock(&lock);
        for (int i = 0; i < ntimers; i++) {
            struct vtimer *t = &timers[i];
            if (t->fd == fd) t->fd = -1;
            for (int j = 0; j < MAX_EPOLLS; j++)
                if (t->epolls[j] == fd) t->epolls[j] = -1;
        }
        pthread_mutex_unlock(&lock);
    }
    return REAL(close)(fd);
}

EXPORT int epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev) {
    int r = REAL(epoll_ctl)(epfd, op, fd, ev);
    if (r != 0 || !ntimers) return r;
    pthread_mutex_lock(&lock);
    struct vtimer *t = find(fd);
    for (int j = 0; t && j < MAX_EPOLLS; j++) {
        if (op == EPOLL_CTL_DEL && t->epolls[j] == epfd) t->epolls[j] = -1;
        if (op == EPOLL_CTL_ADD && t->epolls[j] < 0) {
            t->epolls[j] = epfd;
            break;
        }
    }
    pthread_mutex_unlock(&lock);
    return r;
}

/* Earliest virtual deadline among the timerfds behind these fds (timerfds themselves, or
 * epoll instances watching them), re-arming stale kernel timers on the way. */
int64_t rv_timers_deadline(const int *fds, int n) {
    if (!ntimers) return RV_NO_DEADLINE;
    int64_t best = RV_NO_DEADLINE;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < ntimers; i++) {
        struct vtimer *t = &timers[i];
        if (t->fd < 0) continue;
        bool watched = false;
        for (int k = 0; k < n && !watched; k++) {
            if (fds[k] == t->fd) watched = true;
            for (int j = 0; j < MAX_EPOLLS && !watched; j++) watched = t->epolls[j] == fds[k];
        }
        if (!watched) continue;
        int64_t d = refresh(t);
        if (d < best) best = d;
    }
    pthread_mutex_unlock(&lock);
    return best;
}
