// SPDX-License-Identifier: Apache-2.0
/* The goodbye's window: which of the buffers [base, upto) a comm wrote or filled, as its
 * goodbye tells the peer (plugin/link.h). Apart from link.c: no socket, no link. */
#include <string.h>

#include "plugin/link.h"

void braid_bye_init(struct braid_link_bye *b, uint64_t base, uint64_t upto)
{
	memset(b, 0, sizeof(*b));
	b->base = base;
	b->upto = upto < base ? base : upto;
}

void braid_bye_add(struct braid_link_bye *b, uint64_t buf)
{
	if (buf >= b->base && buf < b->upto && buf - b->base < BRAID_BYE_WINDOW)
		b->bits[(buf - b->base) / 64] |= 1ULL << ((buf - b->base) % 64);
}

void braid_bye_del(struct braid_link_bye *b, uint64_t buf)
{
	if (buf >= b->base && buf < b->upto && buf - b->base < BRAID_BYE_WINDOW)
		b->bits[(buf - b->base) / 64] &= ~(1ULL << ((buf - b->base) % 64));
}

int braid_bye_has(const struct braid_link_bye *b, uint64_t buf)
{
	if (buf < b->base)
		return 1;
	if (buf >= b->upto || buf - b->base >= BRAID_BYE_WINDOW)
		return 0;
	return !!(b->bits[(buf - b->base) / 64] & (1ULL << ((buf - b->base) % 64)));
}
