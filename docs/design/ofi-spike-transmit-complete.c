/* Spike: does tcp;ofi_rxm (1.17) honour FI_TRANSMIT_COMPLETE / FI_DELIVERY_COMPLETE, i.e.
 * does a send's completion wait for the peer, when the peer stops progressing after a
 * warm-up exchange? argv[1]: recv|send, argv[2]: 0 default, 1 transmit, 2 delivery */
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_tagged.h>
#include <rdma/fi_cm.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}
#define CK(x)                                                                     \
	do {                                                                      \
		int _r = (x);                                                     \
		if (_r) {                                                         \
			fprintf(stderr, "%s: %d %s\n", #x, _r, fi_strerror(-_r)); \
			exit(1);                                                  \
		}                                                                 \
	} while (0)
int main(int argc, char **argv)
{
	int recv = !strcmp(argv[1], "recv"), mode = atoi(argv[2]);
	uint64_t flags = mode == 1 ? FI_TRANSMIT_COMPLETE : mode == 2 ? FI_DELIVERY_COMPLETE : 0;
	struct fi_info *hints = fi_allocinfo(), *info;
	struct fid_fabric *fab;
	struct fid_domain *dom;
	struct fid_ep *ep;
	struct fid_cq *cq;
	struct fid_av *av;
	struct fi_cq_attr cqa = { .format = FI_CQ_FORMAT_TAGGED };
	struct fi_av_attr ava = { .type = FI_AV_TABLE };
	struct fi_cq_tagged_entry e;
	static char buf[4096];
	char addr[128];
	size_t alen = sizeof(addr);
	fi_addr_t peer = 0;
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_TAGGED;
	hints->fabric_attr->prov_name = strdup("tcp;ofi_rxm");
	hints->domain_attr->name = strdup("lo");
	hints->tx_attr->op_flags = flags;
	CK(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info));
	CK(fi_fabric(info->fabric_attr, &fab, NULL));
	CK(fi_domain(fab, info, &dom, NULL));
	CK(fi_endpoint(dom, info, &ep, NULL));
	CK(fi_cq_open(dom, &cqa, &cq, NULL));
	CK(fi_av_open(dom, &ava, &av, NULL));
	CK(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV));
	CK(fi_ep_bind(ep, &av->fid, 0));
	CK(fi_enable(ep));
	CK(fi_getname(&ep->fid, addr, &alen));
	FILE *f = fopen(recv ? "/tmp/spike/r.addr" : "/tmp/spike/s.addr", "w");
	fwrite(addr, 1, alen, f);
	fclose(f);
	while (access(recv ? "/tmp/spike/s.addr" : "/tmp/spike/r.addr", F_OK))
		usleep(10000);
	usleep(100000);
	f = fopen(recv ? "/tmp/spike/s.addr" : "/tmp/spike/r.addr", "r");
	alen = fread(addr, 1, sizeof(addr), f);
	fclose(f);
	if (fi_av_insert(av, addr, 1, &peer, 0, NULL) != 1)
		exit(2);
	/* warm-up both ways: the connection is up, both progressing */
	if (recv) {
		CK(fi_trecv(ep, buf, sizeof(buf), NULL, peer, 1, 0, NULL));
		while (fi_cq_read(cq, &e, 1) != 1)
			;
		CK(fi_trecv(ep, buf, sizeof(buf), NULL, peer, 2, 0, NULL));
		sleep(3); /* no progress at all */
		double t = now();
		while (fi_cq_read(cq, &e, 1) != 1)
			;
		printf("recv: 2nd message read %.3f s after progress resumed\n", now() - t);
		sleep(1);
	} else {
		{
			int r;
			while ((r = (int)fi_tsend(ep, buf, 64, NULL, peer, 1, NULL)) == -FI_EAGAIN)
				fi_cq_read(cq, &e, 0);
			CK(r);
		}
		while (fi_cq_read(cq, &e, 1) != 1)
			;
		sleep(1); /* the receiver has stopped progressing by now */
		double t = now();
		int got = 0;
		struct fi_msg_tagged m = { 0 };
		struct iovec io = { buf, 64 };
		m.msg_iov = &io;
		m.iov_count = 1;
		m.addr = peer;
		m.tag = 2;
		{
			int r;
			while ((r = (int)fi_tsendmsg(ep, &m, FI_COMPLETION | flags)) == -FI_EAGAIN)
				fi_cq_read(cq, &e, 0);
			CK(r);
		}
		while (now() - t < 5 && !got)
			got = fi_cq_read(cq, &e, 1) == 1;
		printf("send (mode %d, op_flags %#llx): completed %s after %.3f s (the receiver resumes at about 2 s)\n",
		       mode, (unsigned long long)info->tx_attr->op_flags, got ? "yes" : "NO",
		       now() - t);
	}
	return 0;
}
