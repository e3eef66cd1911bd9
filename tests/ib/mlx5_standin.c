// SPDX-License-Identifier: Apache-2.0
/*
 * A libmlx5 stand-in (libmlx5.so.1, never shipped or installed) for net_ib's data-direct
 * path (net_ib/ib_mlx5.c, tests/ib/data-direct.sh): the three direct-verbs entry points
 * NCCL's IB transport takes, with rdma-core's symbol versions (mlx5_standin.map), over
 * whatever libibverbs the process loaded (softverbs in tests).
 *   MLX5_STANDIN_DD=DEV=PATH[,DEV=PATH...]  the devices with a data-direct device, and the
 *       sysfs path mlx5dv_get_data_direct_sysfs_path gives (others: ENODEV, as an mlx5
 *       NIC without data direct)
 *   MLX5_STANDIN_LOG=FILE  one line per mlx5dv_reg_dmabuf_mr with an fd:
 *       "reg_dmabuf_mr data_direct=0|1 len=N"
 * Every device counts as mlx5 (mlx5dv_is_supported). mlx5dv_reg_dmabuf_mr registers with
 * ibv_reg_dmabuf_mr, so dma-buf support (and the fd -1 probe's errno) is the device's.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/verbs.h>

#define DATA_DIRECT (1 << 0) /* MLX5DV_REG_DMABUF_ACCESS_DATA_DIRECT */

typedef struct ibv_mr *(*reg_dmabuf_fn)(struct ibv_pd *pd, uint64_t offset, size_t length,
					uint64_t iova, int fd, int access);

bool mlx5dv_is_supported(struct ibv_device *device);
int mlx5dv_get_data_direct_sysfs_path(struct ibv_context *context, char *buf, size_t buf_len);
struct ibv_mr *mlx5dv_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset, size_t length,
				    uint64_t iova, int fd, int access, int mlx5_access);

__attribute__((visibility("default"))) bool mlx5dv_is_supported(struct ibv_device *device)
{
	return device != NULL;
}

__attribute__((visibility("default"))) int
mlx5dv_get_data_direct_sysfs_path(struct ibv_context *context, char *buf, size_t buf_len)
{
	const char *spec = getenv("MLX5_STANDIN_DD"), *name = context->device->name;
	size_t n = strlen(name);

	for (const char *p = spec; p && *p;) {
		const char *end = strchr(p, ','), *eq = strchr(p, '=');
		size_t len = end ? (size_t)(end - p) : strlen(p);

		if (eq && eq < p + len && (size_t)(eq - p) == n && !strncmp(p, name, n)) {
			size_t plen = len - n - 1;

			if (plen + 1 > buf_len)
				return ENOSPC;
			memcpy(buf, eq + 1, plen);
			buf[plen] = '\0';
			return 0;
		}
		p = end ? end + 1 : NULL;
	}
	return ENODEV;
}

__attribute__((visibility("default"))) struct ibv_mr *
mlx5dv_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset, size_t length, uint64_t iova, int fd,
		     int access, int mlx5_access)
{
	void *verbs = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_NOLOAD);
	reg_dmabuf_fn reg = verbs ? (reg_dmabuf_fn)dlsym(verbs, "ibv_reg_dmabuf_mr") : NULL;
	const char *log = getenv("MLX5_STANDIN_LOG");
	struct ibv_mr *mr;
	int err;

	if (!reg) {
		if (verbs)
			dlclose(verbs);
		errno = EOPNOTSUPP;
		return NULL;
	}
	mr = reg(pd, offset, length, iova, fd, access);
	err = errno; /* the caller's probe reads it */
	if (fd >= 0 && log) {
		FILE *f = fopen(log, "a");

		if (f) {
			fprintf(f, "reg_dmabuf_mr data_direct=%d len=%zu ok=%d\n",
				!!(mlx5_access & DATA_DIRECT), length, mr != NULL);
			fclose(f);
		}
	}
	dlclose(verbs); /* the NOLOAD reference only */
	errno = err;
	return mr;
}
