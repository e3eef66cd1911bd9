/* SPDX-License-Identifier: Apache-2.0 */
/*
 * This process's counter region (plugin/counters.h), mapped read-only: the plugin a
 * driver loads counts into /dev/shm/braid-<pid>, and braid perf and the conformance
 * scenarios read what it counted beside what they moved.
 */
#ifndef BRAID_TOOLS_CTR_SELF_H
#define BRAID_TOOLS_CTR_SELF_H

#include <stddef.h>

#include "plugin/counters.h"

/* Map it into *r: 0; -ENOENT when there is no file (counters off, or no plugin loaded
 * yet); another -errno (-EPROTO: a layout this build does not read), with the reason in
 * why. */
int ctr_self_map(const struct braid_ctr_region **r, char *why, size_t why_len);
void ctr_self_unmap(const struct braid_ctr_region *r);

#endif
