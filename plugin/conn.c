// SPDX-License-Identifier: Apache-2.0
#include "plugin/conn.h"

#include <errno.h>

#include "plugin/handle.h"

ncclResult_t braid_conn_connect(const struct braid_conn_ops *ops, const struct braid_vdev *vd,
				const struct braid_conn_opts *opts, void *handle, void **send_comm)
{
	void *comm = braid_handle_stage_get(handle);
	struct braid_link *lk;
	ncclResult_t res;
	int rc = 0;

	if (!comm) {
		res = braid_link_dial(ops->link, vd->nic[0], handle, &lk);
		if (res != ncclSuccess)
			return res;
		comm = ops->create(vd, opts, lk, &rc);
		if (!comm) {
			braid_link_close(lk, NULL);
			return braid_link_error(rc ? rc : -ENOMEM);
		}
		braid_handle_stage_set(handle, comm);
	}
	rc = braid_link_connect_step(ops->link_of(comm), ops->link, comm);
	if (rc == -EAGAIN)
		return ncclSuccess;
	braid_handle_stage_set(handle, NULL);
	if (rc) {
		ops->destroy(comm);
		return braid_link_error(rc);
	}
	ops->ready(comm, 1);
	*send_comm = comm;
	return ncclSuccess;
}

ncclResult_t braid_conn_accept(const struct braid_conn_ops *ops, void *listen_comm,
			       void **recv_comm)
{
	void *comm = NULL;
	ncclResult_t res;

	res = braid_listener_accept(&to_listen_comm(listen_comm)->lsn, ops->link, listen_comm,
				    &comm);
	if (res != ncclSuccess || !comm)
		return res;
	ops->ready(comm, 0);
	*recv_comm = comm;
	return ncclSuccess;
}
