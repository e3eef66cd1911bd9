// SPDX-License-Identifier: MIT
/*
 * softverbs-stat: print the live counters of every softverbs process on a
 * fabric: bytes per uplink (summed over processes), per device and per QP.
 *
 *   softverbs-stat [-f FABRIC_DIR] [-a]
 *
 * FABRIC_DIR defaults to $SOFTVERBS_FABRIC, then /tmp/softverbs-fabric.
 * Stats files of processes that are gone are skipped unless -a is given.
 * A process removes its file when it closes its last device, so -a shows a
 * finished run's final counts only if it ran with SOFTVERBS_STATS_KEEP=1
 * (which also keeps the rows of destroyed QPs), or if it died first.
 * Output, one record per line, space separated key=value pairs:
 *   uplink id=U tx_bytes=N tx_msgs=N
 *   qp pid=P qpn=0xQ dest_qpn=0xQ sport=S uplink=U sip=A dip=A tx_bytes=N rx_bytes=N
 *      tx_msgs=N rx_msgs=N tc=T ece=0xE inline_msgs=N imm_msgs=N
 *   device pid=P name=NAME rate_mbps=R tx_bytes=N tx_msgs=N   (R 0: no limit)
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "tests/softverbs/sv_stats.h"

static uint64_t ul_bytes[SV_STATS_MAX_UPLINKS], ul_msgs[SV_STATS_MAX_UPLINKS];
static unsigned int nuplinks;

static uint64_t ld(const uint64_t *p)
{
	return __atomic_load_n(p, __ATOMIC_RELAXED);
}

static void show_file(const char *path, int all)
{
	const struct sv_stats_file *f;
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return;
	if (fstat(fd, &st) || (size_t)st.st_size < sizeof(*f)) {
		close(fd);
		return;
	}
	f = mmap(NULL, sizeof(*f), PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (f == MAP_FAILED)
		return;
	if (f->magic != SV_STATS_MAGIC || f->version != SV_STATS_VERSION ||
	    (!all && kill(f->pid, 0) && errno == ESRCH)) {
		munmap((void *)f, sizeof(*f));
		return;
	}
	if (f->nuplinks > nuplinks)
		nuplinks = f->nuplinks > SV_STATS_MAX_UPLINKS ? SV_STATS_MAX_UPLINKS : f->nuplinks;
	for (int u = 0; u < SV_STATS_MAX_UPLINKS; u++) {
		ul_bytes[u] += ld(&f->uplink[u].tx_bytes);
		ul_msgs[u] += ld(&f->uplink[u].tx_msgs);
	}
	for (int i = 0; i < SV_STATS_MAX_QPS; i++) {
		const struct sv_stats_qp *q = &f->qp[i];
		char sip[INET_ADDRSTRLEN], dip[INET_ADDRSTRLEN];

		if (!__atomic_load_n(&q->qpn, __ATOMIC_ACQUIRE))
			continue;
		inet_ntop(AF_INET, &q->sip, sip, sizeof(sip));
		inet_ntop(AF_INET, &q->dip, dip, sizeof(dip));
		printf("qp pid=%d qpn=0x%06x dest_qpn=0x%06x sport=%u uplink=%d sip=%s dip=%s "
		       "tx_bytes=%llu rx_bytes=%llu tx_msgs=%llu rx_msgs=%llu tc=%u ece=%#x "
		       "inline_msgs=%llu imm_msgs=%llu\n",
		       f->pid, q->qpn, q->dest_qpn, q->sport, q->uplink, sip, dip,
		       (unsigned long long)ld(&q->tx_bytes), (unsigned long long)ld(&q->rx_bytes),
		       (unsigned long long)ld(&q->tx_msgs), (unsigned long long)ld(&q->rx_msgs),
		       q->tc, q->ece, (unsigned long long)ld(&q->inline_msgs),
		       (unsigned long long)ld(&q->imm_msgs));
	}
	for (unsigned int i = 0; i < f->ndevices && i < SV_STATS_MAX_DEVICES; i++) {
		const struct sv_stats_device *d = &f->device[i];

		printf("device pid=%d name=%.*s rate_mbps=%llu tx_bytes=%llu tx_msgs=%llu\n",
		       f->pid, (int)sizeof(d->name), d->name,
		       (unsigned long long)(d->rate / 1000000),
		       (unsigned long long)ld(&d->tx_bytes), (unsigned long long)ld(&d->tx_msgs));
	}
	munmap((void *)f, sizeof(*f));
}

int main(int argc, char **argv)
{
	const char *fabric = getenv("SOFTVERBS_FABRIC");
	char dir[4096];
	struct dirent *e;
	int all = 0, opt;
	DIR *d;

	while ((opt = getopt(argc, argv, "f:ah")) != -1) {
		switch (opt) {
		case 'f': fabric = optarg; break;
		case 'a': all = 1; break;
		default:
			fprintf(stderr, "usage: %s [-f FABRIC_DIR] [-a]\n", argv[0]);
			return opt == 'h' ? 0 : 2;
		}
	}
	if (!fabric || !*fabric)
		fabric = "/tmp/softverbs-fabric";
	snprintf(dir, sizeof(dir), "%s/stats", fabric);
	d = opendir(dir);
	if (!d) {
		fprintf(stderr, "softverbs-stat: %s: %s\n", dir, strerror(errno));
		return 1;
	}
	while ((e = readdir(d))) {
		char path[8192];
		size_t n = strlen(e->d_name);

		if (n < 5 || strcmp(e->d_name + n - 5, ".stat"))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		show_file(path, all);
	}
	closedir(d);
	for (unsigned int u = 0; u < (nuplinks ? nuplinks : 1); u++)
		printf("uplink id=%u tx_bytes=%llu tx_msgs=%llu\n", u,
		       (unsigned long long)ul_bytes[u], (unsigned long long)ul_msgs[u]);
	return 0;
}
