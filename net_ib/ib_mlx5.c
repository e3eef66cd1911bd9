// SPDX-License-Identifier: Apache-2.0
/*
 * mlx5 data-direct DMA (NCCL_IB_DATA_DIRECT), as NCCL's IB transport uses it (init.cc,
 * reg.cc): on Grace-based systems a ConnectX NIC reaches GPU memory over a PCIe path of
 * its own (the data-direct device) while its control path goes over C2C. libmlx5 names
 * that path and registers dma-buf memory for it. libmlx5 is opened here at run time,
 * never linked, and only its versioned entry points of rdma-core 52 (MLX5_1.25) are
 * taken, as NCCL does: an older libmlx5 (Debian 12 ships MLX5_1.24) means no data direct.
 * Like libibverbs (ibv_dl.c), the library stays mapped until exit.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "net_ib/ib.h"
#include "plugin/log.h"
#include "plugin/params.h"

#define MLX5_LIB "libmlx5.so.1"
#define MLX5DV_REG_DMABUF_ACCESS_DATA_DIRECT (1 << 0) /* mlx5dv.h, rdma-core 52 */

static struct {
	int tried;
	void *lib;
	bool (*is_supported)(struct ibv_device *dev);
	int (*dd_sysfs_path)(struct ibv_context *ctx, char *buf, size_t len);
	struct ibv_mr *(*reg_dmabuf_mr)(struct ibv_pd *pd, uint64_t offset, size_t len,
					uint64_t iova, int fd, int access, int mlx5_access);
} mlx5;

/* Called from ib_init only (one thread). */
static int mlx5_open(void)
{
	if (mlx5.tried)
		return mlx5.lib ? 0 : -1;
	mlx5.tried = 1;
	mlx5.lib = dlopen(MLX5_LIB, RTLD_NOW | RTLD_LOCAL);
	if (!mlx5.lib) {
		BRAID_INFO(NCCL_INIT | NCCL_NET, "ib: no data direct: cannot open %s (%s)",
			   MLX5_LIB, dlerror());
		return -1;
	}
	*(void **)&mlx5.is_supported = dlvsym(mlx5.lib, "mlx5dv_is_supported", "MLX5_1.0");
	*(void **)&mlx5.dd_sysfs_path = dlvsym(mlx5.lib, "mlx5dv_get_data_direct_sysfs_path",
					       "MLX5_1.25");
	*(void **)&mlx5.reg_dmabuf_mr = dlvsym(mlx5.lib, "mlx5dv_reg_dmabuf_mr", "MLX5_1.25");
	if (!mlx5.is_supported || !mlx5.dd_sysfs_path || !mlx5.reg_dmabuf_mr) {
		BRAID_INFO(NCCL_INIT | NCCL_NET,
			   "ib: no data direct: %s has no mlx5dv_get_data_direct_sysfs_path and "
			   "mlx5dv_reg_dmabuf_mr of MLX5_1.25 (rdma-core 52 or later)",
			   MLX5_LIB);
		dlclose(mlx5.lib);
		mlx5.lib = NULL;
		return -1;
	}
	return 0;
}

/*
 * Does HCA h (verbs device dev) DMA through a data-direct device? As NCCL: an mlx5 device
 * that registers dma-buf through libmlx5 (a probe with fd -1 fails with anything but
 * EOPNOTSUPP / EPROTONOSUPPORT) and whose data-direct sysfs path libmlx5 names (ENODEV:
 * none, not an error). Sets h->dd_path ("/sys" + that path) and returns 1.
 */
int ib_mlx5_data_direct(struct ib_hca *h, struct ibv_device *dev)
{
	char path[sizeof(h->dd_path) - 4];
	struct ibv_mr *mr;
	int rc;

	if (!braid_param_int(BRAID_P_IB_DATA_DIRECT) || mlx5_open() || !mlx5.is_supported(dev))
		return 0;
	errno = 0;
	mr = mlx5.reg_dmabuf_mr(h->pd, 0, 0, 0, -1, 0, 0);
	if (mr)
		ibv.dereg_mr(mr); /* cannot happen with fd -1 */
	else if (errno == EOPNOTSUPP || errno == EPROTONOSUPPORT)
		return 0;
	rc = mlx5.dd_sysfs_path(h->ctx, path, sizeof(path));
	if (rc) {
		if (rc != ENODEV)
			BRAID_WARN("ib: %s: mlx5dv_get_data_direct_sysfs_path failed: %s; the "
				   "device is used without data direct",
				   h->name, strerror(rc));
		return 0;
	}
	snprintf(h->dd_path, sizeof(h->dd_path), "/sys%s", path);
	BRAID_INFO(NCCL_INIT | NCCL_NET,
		   "ib: %s: data-direct DMA through %s (NCCL_IB_DATA_DIRECT=%d)", h->name,
		   h->dd_path, (int)braid_param_int(BRAID_P_IB_DATA_DIRECT));
	return 1;
}

/* A dma-buf registration for the data-direct path, as NCCL's reg.cc makes it. */
struct ibv_mr *ib_mlx5_reg_dmabuf_dd(struct ibv_pd *pd, uint64_t offset, size_t len, uint64_t iova,
				     int fd, int access)
{
	if (!mlx5.reg_dmabuf_mr) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	return mlx5.reg_dmabuf_mr(pd, offset, len, iova, fd, access,
				  MLX5DV_REG_DMABUF_ACCESS_DATA_DIRECT);
}
