// SPDX-License-Identifier: Apache-2.0
/* This process's counter region, read-only (tools/ctr_self.h). */
#include "tools/ctr_self.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

int ctr_self_map(const struct braid_ctr_region **r, char *why, size_t why_len)
{
	const struct braid_ctr_region *m;
	char path[64];
	struct stat st;
	int fd, err;

	*r = NULL;
	snprintf(path, sizeof(path), BRAID_CTR_PATH_FMT, (int)getpid());
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		err = errno;
		snprintf(why, why_len, "%s: %s", path, strerror(err));
		return -err;
	}
	if (fstat(fd, &st) || (size_t)st.st_size < sizeof(*m)) {
		snprintf(why, why_len, "%s: %lld bytes, shorter than this braid's layout", path,
			 (long long)st.st_size);
		close(fd);
		return -EPROTO;
	}
	m = mmap(NULL, sizeof(*m), PROT_READ, MAP_SHARED, fd, 0);
	err = errno;
	close(fd);
	if (m == MAP_FAILED) {
		snprintf(why, why_len, "%s: mmap: %s", path, strerror(err));
		return -err;
	}
	if (m->magic != BRAID_CTR_MAGIC || m->version != BRAID_CTR_VERSION ||
	    m->dev_rec_size != sizeof(struct braid_ctr_dev) ||
	    m->comm_rec_size != sizeof(struct braid_ctr_comm)) {
		snprintf(why, why_len, "%s has layout version %u, this braid reads %u", path,
			 m->version, (unsigned)BRAID_CTR_VERSION);
		ctr_self_unmap(m);
		return -EPROTO;
	}
	*r = m;
	return 0;
}

void ctr_self_unmap(const struct braid_ctr_region *r)
{
	if (r)
		munmap((void *)r, sizeof(*r));
}
