// SPDX-License-Identifier: MIT
/*
 * softverbs: Enhanced Connection Establishment (ibv_query_ece, ibv_set_ece). A device
 * offers a set of ECE options; a QP starts with all of them, and ibv_set_ece, before the
 * QP leaves INIT, keeps the ones both the caller asks for and the device offers: the
 * responder's reduction of rdma-core's man page, after which ibv_query_ece returns what
 * was accepted. A device that offers none answers both calls EOPNOTSUPP, as devices
 * without ECE do. The options a QP ends with are in its stats row (ece=).
 *
 * SOFTVERBS_ECE=DEV:OPTIONS[,DEV:OPTIONS] (e.g. svroce0:0x7) gives DEV that set; other
 * devices have no ECE. Per process, so the two ends of a connection can differ.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/softverbs/sv_internal.h"

#define SV_ECE_VENDOR 0x15b3 /* the vendor id mlx5 reports (Mellanox) */

void sv_ece_load(struct sv_device *devs, int ndevs)
{
	static const char var[] = "SOFTVERBS_ECE";
	const char *v = getenv(var);
	char buf[512], *save = NULL, *tok;

	for (int d = 0; d < ndevs; d++)
		devs[d].ece_options = 0;
	if (!v || !*v)
		return;
	snprintf(buf, sizeof(buf), "%s", v);
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		char *colon = strchr(tok, ':'), *end = NULL;
		unsigned long opt = colon ? strtoul(colon + 1, &end, 0) : 0;
		int d;

		if (colon)
			*colon = '\0';
		for (d = 0; d < ndevs && strcmp(devs[d].ibdev.name, tok); d++)
			;
		if (!colon || d == ndevs || !end || *end || !opt || opt > 0xffffffffUL) {
			sv_log("%s: bad entry '%s' (want DEV:OPTIONS, non-zero, of a device): ignored",
			       var, tok);
			continue;
		}
		devs[d].ece_options = (uint32_t)opt;
		sv_debug("device %s: ECE options %#lx", tok, opt);
	}
}

static struct sv_qp *to_qp(struct ibv_qp *q)
{
	return sv_container_of(q, struct sv_qp, ibqp);
}

static uint32_t qp_ece(const struct sv_qp *qp)
{
	return qp->ece_set ? qp->ece_options : qp->ctx->dev->ece_options;
}

SV_EXPORT int ibv_query_ece(struct ibv_qp *ibqp, struct ibv_ece *ece)
{
	struct sv_qp *qp = to_qp(ibqp);

	if (!qp->ctx->dev->ece_options)
		return EOPNOTSUPP;
	ece->vendor_id = SV_ECE_VENDOR;
	ece->options = qp_ece(qp);
	ece->comp_mask = 0;
	return 0;
}

SV_EXPORT int ibv_set_ece(struct ibv_qp *ibqp, struct ibv_ece *ece)
{
	struct sv_qp *qp = to_qp(ibqp);

	if (!qp->ctx->dev->ece_options)
		return EOPNOTSUPP;
	if (ece->vendor_id != SV_ECE_VENDOR || ece->comp_mask ||
	    (qp->attr.qp_state != IBV_QPS_RESET && qp->attr.qp_state != IBV_QPS_INIT))
		return EINVAL;
	qp->ece_options = ece->options & qp->ctx->dev->ece_options;
	qp->ece_set = true;
	if (qp->stats)
		qp->stats->ece = qp->ece_options;
	return 0;
}
