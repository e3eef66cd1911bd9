// SPDX-License-Identifier: Apache-2.0
/*
 * A counting allocator for the memory-per-comm measurement (issue 13), LD_PRELOADed into
 * the conformance harness by tests/conformance/mem.sh. Every malloc family call and every
 * anonymous mmap is attributed by its immediate caller's address to a group of shared
 * objects the test names (memcount_watch: braid's plugin, the provider's libraries), and
 * the live bytes of each group are kept. Memory that libc allocates on a watched
 * object's behalf (strdup, fopen ...) counts as "other": the figures are a lower bound.
 * It allocates nothing itself: glibc's __libc_* entry points do the work and a fixed
 * open-addressing table remembers who owns each live block.
 */

#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MC_GROUPS 4
#define MC_RANGES 32
#define MC_SLOTS (1u << 22) /* live blocks of watched groups; 64 MiB of table, lazily paged */

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void __libc_free(void *);
extern void *__libc_memalign(size_t, size_t);

struct mc_range {
	uintptr_t lo, hi;
	int group;
};

struct mc_slot {
	uintptr_t ptr; /* 0 empty, 1 deleted */
	size_t size;
	int group;
};

static pthread_mutex_t mc_lock = PTHREAD_MUTEX_INITIALIZER; /* the table and the totals */
static struct mc_range ranges[MC_RANGES];
static int nranges;
static struct mc_slot *table;
static long long live[MC_GROUPS], peak[MC_GROUPS], calls[MC_GROUPS];

static int group_of(const void *caller)
{
	uintptr_t a = (uintptr_t)caller;

	for (int i = 0; i < __atomic_load_n(&nranges, __ATOMIC_ACQUIRE); i++)
		if (a >= ranges[i].lo && a < ranges[i].hi)
			return ranges[i].group;
	return -1;
}

static size_t slot_of(uintptr_t p)
{
	return (size_t)((p >> 4) * 0x9e3779b97f4a7c15ULL >> 42) & (MC_SLOTS - 1);
}

static void mc_add(void *p, size_t size, int group)
{
	if (!p || group < 0)
		return;
	pthread_mutex_lock(&mc_lock);
	if (!table) {
		void *t = (void *)syscall(SYS_mmap, NULL, MC_SLOTS * sizeof(*table),
					  PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1,
					  0);
		table = t == MAP_FAILED ? NULL : t;
	}
	for (size_t i = slot_of((uintptr_t)p), n = 0; table && n < MC_SLOTS;
	     i = (i + 1) & (MC_SLOTS - 1), n++)
		if (table[i].ptr <= 1) {
			table[i] = (struct mc_slot){ (uintptr_t)p, size, group };
			live[group] += (long long)size;
			calls[group]++;
			if (live[group] > peak[group])
				peak[group] = live[group];
			break;
		}
	pthread_mutex_unlock(&mc_lock);
}

/* Forget p; its size when it was a watched block (else 0). */
static size_t mc_del(void *p)
{
	size_t size = 0;

	if (!p || !table)
		return 0;
	pthread_mutex_lock(&mc_lock);
	for (size_t i = slot_of((uintptr_t)p), n = 0; n < MC_SLOTS;
	     i = (i + 1) & (MC_SLOTS - 1), n++) {
		if (table[i].ptr == 0)
			break;
		if (table[i].ptr == (uintptr_t)p) {
			size = table[i].size;
			live[table[i].group] -= (long long)size;
			table[i].ptr = 1;
			break;
		}
	}
	pthread_mutex_unlock(&mc_lock);
	return size;
}

void *malloc(size_t n)
{
	void *p = __libc_malloc(n);

	mc_add(p, n, group_of(__builtin_return_address(0)));
	return p;
}

void *calloc(size_t a, size_t b)
{
	void *p = __libc_calloc(a, b);

	mc_add(p, a * b, group_of(__builtin_return_address(0)));
	return p;
}

void *realloc(void *old, size_t n)
{
	void *p;

	mc_del(old);
	p = __libc_realloc(old, n);
	mc_add(p, n, group_of(__builtin_return_address(0)));
	return p;
}

void free(void *p)
{
	mc_del(p);
	__libc_free(p);
}

int posix_memalign(void **out, size_t align, size_t n)
{
	void *p = __libc_memalign(align, n);

	if (!p)
		return ENOMEM;
	mc_add(p, n, group_of(__builtin_return_address(0)));
	*out = p;
	return 0;
}

void *aligned_alloc(size_t align, size_t n)
{
	void *p = __libc_memalign(align, n);

	mc_add(p, n, group_of(__builtin_return_address(0)));
	return p;
}

void *memalign(size_t align, size_t n)
{
	void *p = __libc_memalign(align, n);

	mc_add(p, n, group_of(__builtin_return_address(0)));
	return p;
}

void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	void *p = (void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off);

	if (p == MAP_FAILED) /* syscall() has set errno */
		return MAP_FAILED;
	if (flags & MAP_ANONYMOUS)
		mc_add(p, len, group_of(__builtin_return_address(0)));
	return p;
}

int munmap(void *addr, size_t len)
{
	long rc;

	mc_del(addr);
	rc = syscall(SYS_munmap, addr, len);
	return rc ? -1 : 0;
}

/* ---- the test's side (found with dlsym(RTLD_DEFAULT)) ---- */

void memcount_watch(uintptr_t lo, uintptr_t hi, int group);
long long memcount_live(int group, long long *peak_out, long long *calls_out);

/* Attribute calls from [lo, hi) to group g. */
void memcount_watch(uintptr_t lo, uintptr_t hi, int group)
{
	pthread_mutex_lock(&mc_lock);
	if (nranges < MC_RANGES && group >= 0 && group < MC_GROUPS) {
		ranges[nranges] = (struct mc_range){ lo, hi, group };
		__atomic_store_n(&nranges, nranges + 1, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&mc_lock);
}

/* Live bytes of group g now; *peak_out its peak, *calls_out its allocations so far. */
long long memcount_live(int group, long long *peak_out, long long *calls_out)
{
	long long v = 0;

	pthread_mutex_lock(&mc_lock);
	if (group >= 0 && group < MC_GROUPS) {
		v = live[group];
		if (peak_out)
			*peak_out = peak[group];
		if (calls_out)
			*calls_out = calls[group];
	}
	pthread_mutex_unlock(&mc_lock);
	return v;
}
