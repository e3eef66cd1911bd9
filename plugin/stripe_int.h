/* SPDX-License-Identifier: Apache-2.0 */
/* Inside the striping policy: what stripe.c and stripe_pick.c share. */
#ifndef BRAID_STRIPE_INT_H
#define BRAID_STRIPE_INT_H

#include <stddef.h>

#include "plugin/stripe.h"

/* The lane for a whole message of size bytes (stripe_pick.c); moves the round robin. */
int braid_stripe_pick_one(struct braid_stripe *st, size_t size);

#endif
