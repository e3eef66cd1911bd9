// SPDX-License-Identifier: Apache-2.0
#include "plugin/numa.h"

#include <errno.h>
#include <linux/mempolicy.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "plugin/log.h"

static size_t page_round(size_t len)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);

	return (len + page - 1) & ~(page - 1);
}

void *braid_numa_alloc(size_t len, int node)
{
	size_t size = page_round(len ? len : 1);
	/* cppcheck-suppress invalidFunctionArg ; MAP_ANONYMOUS mappings take fd -1 */
	void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		return NULL;
	/* Before the first touch, so the pages are born there. glibc has no mbind wrapper and
	 * libnuma would be one more library the plugin must find at load time. */
	if (node >= 0 && node < 1024) {
		unsigned long mask[1024 / (8 * sizeof(unsigned long))] = { 0 };

		mask[node / (8 * sizeof(unsigned long))] = 1UL
							   << (node % (8 * sizeof(unsigned long)));
		if (syscall(SYS_mbind, p, size, MPOL_PREFERRED, mask, 1024UL, 0UL) != 0)
			BRAID_TRACE("numa: mbind to node %d: errno %d; memory stays where it lands",
				    node, errno);
	}
	return p; /* anonymous pages are zero */
}

void braid_numa_free(void *p, size_t len)
{
	if (p)
		munmap(p, page_round(len ? len : 1));
}
