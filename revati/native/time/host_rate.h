/* The host's factor in the clock rate: the GPU node's CPU speed over this host's, less the
 * time a hypervisor steals (host_rate.c). Used by the Timekeeper's loop only. */
#ifndef REVATI_HOST_RATE_H
#define REVATI_HOST_RATE_H

#include <stdint.h>

void rv_host_rate_reset(void);         /* a new Timekeeper: speed 1, no steal seen */
void rv_host_rate_sample(int64_t now); /* read /proc/stat when a sample is due */
int64_t rv_host_rate_ppm(void);        /* speed x (1 - steal share), x 1e6 */
int64_t rv_host_steal_ppm(void);       /* the steal share of the last window, x 1e6 */

#endif
