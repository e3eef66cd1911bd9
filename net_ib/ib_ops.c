// SPDX-License-Identifier: Apache-2.0
/*
 * net_ib's entry points for the core. The table lives apart from the files it names, so
 * that none of them refers back to the others through it.
 */
#include "net_ib/ib.h"

const struct braid_backend_ops braid_ib_ops = {
	.name = "ib",
	.kind = BRAID_BACKEND_IB,
	.max_nics = BRAID_VDEV_MAX_NICS,
	.init = ib_init,
	.fini = ib_fini,
	.ndevs = ib_ndevs,
	.get_props = ib_get_props,
	.listen = ib_listen,
	.connect = ib_connect,
	.accept = ib_accept,
	.reg_mr = ib_reg_mr,
	.reg_mr_dmabuf = ib_reg_mr_dmabuf,
	.dereg_mr = ib_dereg_mr,
	.isend = ib_isend,
	.irecv = ib_irecv,
	.iflush = ib_iflush,
	.test = ib_test,
	.close_send = ib_close_send,
	.close_recv = ib_close_recv,
	.close_listen = ib_close_listen,
	.isend_ph = ib_isend_ph,
	.irecv_ph = ib_irecv_ph,
	.prof_attach = ib_prof_attach,
	.prof_detach = ib_prof_detach,
};
