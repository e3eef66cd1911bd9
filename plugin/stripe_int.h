/* SPDX-License-Identifier: Apache-2.0 */
/* Inside the striping policy: what stripe.c and stripe_pick.c share. */
#ifndef BRAID_STRIPE_INT_H
#define BRAID_STRIPE_INT_H

#include <stddef.h>

#include "plugin/stripe.h"

/* The lane for a whole message of size bytes (stripe_pick.c); moves the round robin. */
int braid_stripe_pick_one(struct braid_stripe *st, size_t size);

/* The weights moved (every writer of a lane's weight calls it): the inverses the pick
 * compares by. */
void braid_stripe_weights_set(struct braid_stripe *st);

#endif
