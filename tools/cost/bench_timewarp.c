/* Micro-benchmarks of the time shim, driven by bench_timewarp.py.
 *   clock N      : ns per clock_gettime(CLOCK_MONOTONIC) call
 *   jumps N      : real us of each of N 1-ms sleeps (one jump round trip each when the
 *                  process is alone), as "median p99" */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int64_t mono(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int cmp(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    int n = atoi(argv[2]);
    if (!strcmp(argv[1], "clock")) {
        int64_t t0 = mono(), sink = 0;
        for (int i = 0; i < n; i++) sink += mono();
        printf("%.2f\n", (double)(mono() - t0) / n + 0 * (double)sink);
        return 0;
    }
    /* real time even under the shim: the shim exports rv_real_ns */
    int64_t (*real)(clockid_t) = (int64_t(*)(clockid_t))dlsym(RTLD_DEFAULT, "rv_real_ns");
    if (!real) {
        fprintf(stderr, "run under revati run\n");
        return 1;
    }
    int64_t *lat = malloc(sizeof(int64_t) * n);
    struct timespec ms = {0, 1000000};
    for (int i = 0; i < n; i++) {
        int64_t a = real(CLOCK_MONOTONIC);
        nanosleep(&ms, NULL);
        lat[i] = real(CLOCK_MONOTONIC) - a;
    }
    qsort(lat, n, sizeof *lat, cmp);
    printf("%.1f %.1f\n", lat[n / 2] / 1e3, lat[(int)(n * 0.99)] / 1e3);
    return 0;
}
