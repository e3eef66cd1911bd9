// SPDX-License-Identifier: Apache-2.0
/* This process's counter region (plugin/counters.h), read as braid stat reads it: the
 * scenarios check what the plugin counted against what they moved. */
#include "tests/conformance/conf.h"

#include <fcntl.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

#include "plugin/counters.h"

const struct braid_ctr_region *ctr_map(void)
{
	char path[64];
	const struct braid_ctr_region *r;
	int fd;

	snprintf(path, sizeof(path), BRAID_CTR_PATH_FMT, (int)getpid());
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	r = mmap(NULL, sizeof(*r), PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (r == MAP_FAILED)
		return NULL;
	if (r->magic != BRAID_CTR_MAGIC || r->version < 4 ||
	    r->dev_rec_size != sizeof(struct braid_ctr_dev) ||
	    r->comm_rec_size != sizeof(struct braid_ctr_comm)) {
		ctr_unmap(r);
		return NULL;
	}
	return r;
}

void ctr_unmap(const struct braid_ctr_region *r)
{
	if (r)
		munmap((void *)r, sizeof(*r));
}
