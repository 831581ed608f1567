/* The launch queue of a stream: how far a CPU can run ahead of its GPU (lock_for_launch,
 * queue_note, called by cuda_stream.c). */
#include "cuda_internal.h"

#include <stdlib.h>

/* ---- the launch queue ----------------------------------------------------------------
 * A real stream takes launches into a bounded queue: with launch_queue of them waiting (the
 * H200: 1,021 kernels, copies or memsets; event records take no room), the next launch call
 * blocks its thread until the GPU has started the oldest (tools/calibrate/launch_queue_h200.py): a
 * CPU cannot run further ahead of its GPU than that. vLLM's prefill steps outside CUDA graphs
 * queue ~510 launches each and, with async scheduling, the next step's while one runs. */

/* When s can take one more launch (virtual time). Holds g_tl. */
static int64_t queue_room(const struct stream *s) {
    uint64_t q = (uint64_t)rv_node()->launch_queue;
    return q && s->starts && s->launched >= q ? s->starts[s->launched % q] : 0;
}

/* Remember the start of the launch just queued on s. Holds g_tl. */
void queue_note(struct stream *s, int64_t start) {
    uint64_t q = (uint64_t)rv_node()->launch_queue;
    if (!q) return;
    if (!s->starts) s->starts = calloc(q, sizeof *s->starts);
    s->starts[s->launched++ % q] = start;
}

/* Takes g_tl and resolves h, first waiting (time-warp sleep) while a stream that is not
 * capturing has no room for a launch. NULL, with g_tl released, if h is not a stream. */
struct stream *lock_for_launch(CUstream h) {
    pthread_mutex_lock(&g_tl);
    for (;;) {
        struct stream *s = resolve(h);
        if (!s) { pthread_mutex_unlock(&g_tl); return NULL; }
        int64_t room = s->capture ? 0 : queue_room(s);
        if (room <= rv_now_ns()) return s;
        pthread_mutex_unlock(&g_tl);
        rv_sleep_until(room, "launch queue full");
        pthread_mutex_lock(&g_tl);
    }
}
