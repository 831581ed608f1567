/* X-macro list of the libc functions the shim wraps: RV_REAL(return type, name, params).
 * Included by core_int.h (declarations) and core.c (definitions). */
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <spawn.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <time.h>

RV_REAL(int, clock_gettime, clockid_t, struct timespec *)
RV_REAL(int, gettimeofday, struct timeval *, void *)
RV_REAL(time_t, time, time_t *)
RV_REAL(int, clock_nanosleep, clockid_t, int, const struct timespec *, struct timespec *)
RV_REAL(int, ppoll, struct pollfd *, nfds_t, const struct timespec *, const sigset_t *)
RV_REAL(int, pselect, int, fd_set *, fd_set *, fd_set *, const struct timespec *, const sigset_t *)
RV_REAL(int, epoll_pwait2, int, struct epoll_event *, int, const struct timespec *, const sigset_t *)
RV_REAL(int, sem_clockwait, sem_t *, clockid_t, const struct timespec *)
RV_REAL(int, sem_wait, sem_t *)
RV_REAL(int, sem_post, sem_t *)
RV_REAL(int, pthread_cond_clockwait, pthread_cond_t *, pthread_mutex_t *, clockid_t, const struct timespec *)
RV_REAL(int, pthread_cond_wait, pthread_cond_t *, pthread_mutex_t *)
RV_REAL(int, pthread_cond_signal, pthread_cond_t *)
RV_REAL(int, pthread_cond_broadcast, pthread_cond_t *)
RV_REAL(int, pthread_mutex_clocklock, pthread_mutex_t *, clockid_t, const struct timespec *)
RV_REAL(int, pthread_join, pthread_t, void **)
RV_REAL(int, pthread_create, pthread_t *, const pthread_attr_t *, void *(*)(void *), void *)
RV_REAL(int, pthread_sigmask, int, const sigset_t *, sigset_t *)
RV_REAL(ssize_t, read, int, void *, size_t)
RV_REAL(ssize_t, readv, int, const struct iovec *, int)
RV_REAL(ssize_t, recv, int, void *, size_t, int)
RV_REAL(ssize_t, recvfrom, int, void *, size_t, int, struct sockaddr *, socklen_t *)
RV_REAL(ssize_t, recvmsg, int, struct msghdr *, int)
RV_REAL(int, bind, int, const struct sockaddr *, socklen_t)
RV_REAL(int, accept, int, struct sockaddr *, socklen_t *)
RV_REAL(int, accept4, int, struct sockaddr *, socklen_t *, int)
RV_REAL(ssize_t, write, int, const void *, size_t)
RV_REAL(ssize_t, writev, int, const struct iovec *, int)
RV_REAL(ssize_t, send, int, const void *, size_t, int)
RV_REAL(ssize_t, sendto, int, const void *, size_t, int, const struct sockaddr *, socklen_t)
RV_REAL(ssize_t, sendmsg, int, const struct msghdr *, int)
RV_REAL(pid_t, waitpid, pid_t, int *, int)
RV_REAL(pid_t, wait4, pid_t, int *, int, struct rusage *)
RV_REAL(int, waitid, idtype_t, id_t, siginfo_t *, int)
RV_REAL(pid_t, fork, void)
RV_REAL(int, posix_spawn, pid_t *, const char *, const posix_spawn_file_actions_t *, const posix_spawnattr_t *, char *const[], char *const[])
RV_REAL(int, posix_spawnp, pid_t *, const char *, const posix_spawn_file_actions_t *, const posix_spawnattr_t *, char *const[], char *const[])
RV_REAL(int, execve, const char *, char *const[], char *const[])
RV_REAL(int, sched_yield, void)
RV_REAL(int, timerfd_create, int, int)
RV_REAL(int, timerfd_settime, int, int, const struct itimerspec *, struct itimerspec *)
RV_REAL(int, timerfd_gettime, int, struct itimerspec *)
RV_REAL(int, epoll_ctl, int, int, int, struct epoll_event *)
RV_REAL(int, close, int)
RV_REAL(long, syscall, long, ...)
