// SPDX-License-Identifier: Apache-2.0
/* This process's counter region, read-only (tools/ctr_self.h). */
#include "tools/ctr_self.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* 1 when this build reads m's layout; else 0, and why. */
static int layout_read(const struct braid_ctr_region *m, const char *path, char *why,
		       size_t why_len)
{
	if (m->magic != BRAID_CTR_MAGIC)
		snprintf(why, why_len, "%s: not a braid counter region (magic %#llx)", path,
			 (unsigned long long)m->magic);
	else if (m->version != BRAID_CTR_VERSION)
		snprintf(why, why_len, "%s has layout version %u, this braid reads %u", path,
			 m->version, (unsigned)BRAID_CTR_VERSION);
	else if (m->header_size != offsetof(struct braid_ctr_region, devs) ||
		 m->dev_rec_size != sizeof(struct braid_ctr_dev) ||
		 m->comm_rec_size != sizeof(struct braid_ctr_comm) ||
		 m->max_devs != BRAID_CTR_MAX_DEVS || m->max_comms != BRAID_CTR_MAX_COMMS)
		snprintf(why, why_len,
			 "%s: version %u with a header of %u bytes, records of %u and %u bytes "
			 "for %u devices and %u comms; this braid's are %zu, %zu and %zu for %d "
			 "and %d (another build of the same version)",
			 path, m->version, (unsigned)m->header_size, (unsigned)m->dev_rec_size,
			 (unsigned)m->comm_rec_size, (unsigned)m->max_devs, (unsigned)m->max_comms,
			 offsetof(struct braid_ctr_region, devs), sizeof(struct braid_ctr_dev),
			 sizeof(struct braid_ctr_comm), BRAID_CTR_MAX_DEVS, BRAID_CTR_MAX_COMMS);
	else
		return 1;
	return 0;
}

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
	if (fstat(fd, &st)) {
		err = errno;
		snprintf(why, why_len, "%s: fstat: %s", path, strerror(err));
		close(fd);
		return -err;
	}
	if ((size_t)st.st_size < sizeof(*m)) {
		snprintf(why, why_len, "%s: %lld bytes, shorter than this braid's layout (%zu)",
			 path, (long long)st.st_size, sizeof(*m));
		close(fd);
		return -EPROTO;
	}
	m = mmap(NULL, sizeof(*m), PROT_READ, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED) {
		err = errno;
		snprintf(why, why_len, "%s: mmap: %s", path, strerror(err));
		close(fd);
		return -err;
	}
	close(fd);
	if (!layout_read(m, path, why, why_len)) {
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
