// SPDX-License-Identifier: Apache-2.0
/*
 * net_ib's entry points for the core: the table, and isend and irecv with the profiler's
 * handle. The table lives apart from the files it names, so that none of them refers back
 * to the others through it (nor ib_prof.c, whose event helpers the data path calls, to
 * ib_post.c).
 */
#include "net_ib/ib.h"

#define COLD __attribute__((cold, noinline))

/* Out of line, with isend_ph's and irecv_ph's own arguments, so that both branches there
 * are a tail call that leaves the arguments in place. */
static COLD ncclResult_t isend_prof(void *send_comm, void *data, size_t size, int tag,
				    void *mhandle, void *phandle, void **request)
{
	struct ib_comm *c = to_ib_comm(send_comm);

	return braid_prof_isend(c->prof, &c->reqs, 0, ib_isend, c, data, size, tag, mhandle,
				phandle, request);
}

static COLD ncclResult_t irecv_prof(void *recv_comm, int n, void **data, const size_t *sizes,
				    const int *tags, void **mhandles, void **phandles,
				    void **request)
{
	struct ib_comm *c = to_ib_comm(recv_comm);

	return braid_prof_irecv(c->prof, &c->reqs, 0, ib_irecv, c, n, data, sizes, tags, mhandles,
				phandles, request);
}

/* With no callback, isend_ph and irecv_ph are a test and a jump to isend or irecv
 * (their arguments in NCCL's order, as the core's, so that neither moves them). */
static ncclResult_t ib_isend_ph(void *send_comm, void *data, size_t size, int tag, void *mhandle,
				void *phandle, void **request)
{
	if (__builtin_expect(!to_ib_comm(send_comm)->prof, 1))
		return ib_isend(send_comm, data, size, tag, mhandle, request);
	return isend_prof(send_comm, data, size, tag, mhandle, phandle, request);
}

static ncclResult_t ib_irecv_ph(void *recv_comm, int n, void **data, const size_t *sizes,
				const int *tags, void **mhandles, void **phandles, void **request)
{
	if (__builtin_expect(!to_ib_comm(recv_comm)->prof, 1))
		return ib_irecv(recv_comm, n, data, sizes, tags, mhandles, request);
	return irecv_prof(recv_comm, n, data, sizes, tags, mhandles, phandles, request);
}

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
