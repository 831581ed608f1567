/* Loopback-only binds for a deployment that cannot have a network namespace of its own
 * (revati/bench/network.py: creating one needs CAP_SYS_ADMIN). With REVATI_LOOPBACK_ONLY=1
 * in the environment, a socket bound to a wildcard address is bound to loopback instead, so
 * nothing an emulated engine opens is reachable from other hosts (vLLM's torch.distributed
 * store binds every interface whatever host it is given). An IPv6 wildcard becomes ::1 on a
 * v6-only socket and otherwise IPv4's loopback as a v4-mapped address (::ffff:127.0.0.1),
 * which is what a dual-stack wildcard was serving the engines' 127.0.0.1 clients through.
 * Other addresses, other families and processes without the variable bind unchanged. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "core_int.h"

#define EXPORT __attribute__((visibility("default")))

static int loopback_only(void)
{
    static int on = -1; /* the environment is read once: it does not change in a process */
    if (on < 0) {
        const char *v = getenv("REVATI_LOOPBACK_ONLY");
        on = v && !strcmp(v, "1");
    }
    return on;
}

EXPORT int bind(int fd, const struct sockaddr *addr, socklen_t len)
{
    if (!loopback_only() || !addr) return REAL(bind)(fd, addr, len);
    if (addr->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
        struct sockaddr_in in;
        memcpy(&in, addr, sizeof in);
        if (in.sin_addr.s_addr == htonl(INADDR_ANY)) {
            in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
            return REAL(bind)(fd, (const struct sockaddr *)&in, sizeof in);
        }
    } else if (addr->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6)) {
        struct sockaddr_in6 in6;
        memcpy(&in6, addr, sizeof in6);
        if (IN6_IS_ADDR_UNSPECIFIED(&in6.sin6_addr)) {
            int v6only = 0;
            socklen_t n = sizeof v6only;
            if (getsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, &n) == 0 && v6only)
                in6.sin6_addr = in6addr_loopback;
            else
                inet_pton(AF_INET6, "::ffff:127.0.0.1", &in6.sin6_addr);
            return REAL(bind)(fd, (const struct sockaddr *)&in6, sizeof in6);
        }
    }
    return REAL(bind)(fd, addr, len);
}
