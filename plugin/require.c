// SPDX-License-Identifier: Apache-2.0
/*
 * Strict mode (require.h): parse BRAID_REQUIRE, decide from what init chose, and say in
 * one WARN per unmet requirement what is missing, what braid found and what to do.
 */
#include "plugin/require.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "plugin/counters.h"
#include "plugin/gpudirect.h"
#include "plugin/log.h"
#include "plugin/params.h"
#include "topo/topo.h"

#define KNOWN "rdma, gdr, rails=N, nics=N, nic_speed=GBPS, backend=ib|ofi, provider=NAME"
/* What NCCL does with a failed init (docs/strict.md quotes NCCL's code). */
#define CONSEQUENCE                                                                        \
	"braid's init fails: with NCCL_NET=braid the job stops at start; without it NCCL " \
	"runs on another network"

static const struct req_key {
	const char *key;
	enum braid_req_kind kind;
	int value;     /* 0 none, 1 a whole number, 2 a word */
	long min, max; /* for numbers */
	const char *usage;
} keys[] = {
	{ "rdma", BRAID_REQ_RDMA, 0, 0, 0, "rdma" },
	{ "gdr", BRAID_REQ_GDR, 0, 0, 0, "gdr" },
	{ "rails", BRAID_REQ_RAILS, 1, 1, 64, "rails=N (NICs per GPU, 1 to 64)" },
	{ "nics", BRAID_REQ_NICS, 1, 1, 1024, "nics=N (1 to 1024)" },
	{ "nic_speed", BRAID_REQ_NIC_SPEED, 1, 1, 100000, "nic_speed=GBPS (Gbit/s, 1 to 100000)" },
	{ "backend", BRAID_REQ_BACKEND, 2, 0, 0, "backend=ib or backend=ofi" },
	{ "provider", BRAID_REQ_PROVIDER, 2, 0, 0, "provider=NAME (a libfabric provider)" },
};

/* Append to a message, never past its end. */
static void __attribute__((format(printf, 3, 4))) put(char *buf, size_t len, const char *fmt, ...)
{
	size_t used = strnlen(buf, len);
	va_list ap;

	if (used >= len - 1)
		return;
	va_start(ap, fmt);
	vsnprintf(buf + used, len - used, fmt, ap);
	va_end(ap);
}

static int parse_entry(const char *s, size_t len, struct braid_req *r, char *why, size_t whylen)
{
	const char *eq = memchr(s, '=', len);
	size_t klen = eq ? (size_t)(eq - s) : len;
	const char *val = eq ? eq + 1 : NULL;
	size_t vlen = eq ? len - klen - 1 : 0;
	const struct req_key *k = NULL;

	/* blanks around '=' */
	while (klen && (s[klen - 1] == ' ' || s[klen - 1] == '\t'))
		klen--;
	while (vlen && (*val == ' ' || *val == '\t')) {
		val++;
		vlen--;
	}

	if (len >= sizeof(r->text)) {
		snprintf(why, whylen, "the entry \"%.40s...\" is longer than %zu characters", s,
			 sizeof(r->text) - 1);
		return -1;
	}
	memset(r, 0, sizeof(*r));
	snprintf(r->text, sizeof(r->text), "%.*s", (int)len, s);
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]) && !k; i++)
		if (strlen(keys[i].key) == klen && !strncasecmp(keys[i].key, s, klen))
			k = &keys[i];
	if (!k) {
		snprintf(why, whylen, "unknown requirement \"%s\" (braid knows " KNOWN ")",
			 r->text);
		return -1;
	}
	r->kind = k->kind;
	if (k->value == 0) {
		if (eq) {
			snprintf(why, whylen, "\"%s\": %s takes no value", r->text, k->key);
			return -1;
		}
		return 0;
	}
	if (!eq || vlen == 0) {
		snprintf(why, whylen, "\"%s\" needs a value: %s", r->text, k->usage);
		return -1;
	}
	if (k->value == 1) {
		char num[24], *end;

		snprintf(num, sizeof(num), "%.*s", (int)(vlen < 23 ? vlen : 23), val);
		errno = 0;
		r->num = strtol(num, &end, 10);
		if (vlen > 22 || num[0] < '0' || num[0] > '9' || *end || errno || r->num < k->min ||
		    r->num > k->max) {
			snprintf(why, whylen, "\"%s\" is not %s", r->text, k->usage);
			return -1;
		}
		return 0;
	}
	if (vlen >= sizeof(r->word) || strcspn(val, " \t") < vlen) {
		snprintf(why, whylen, "\"%s\" is not %s", r->text, k->usage);
		return -1;
	}
	snprintf(r->word, sizeof(r->word), "%.*s", (int)vlen, val);
	if (k->kind == BRAID_REQ_BACKEND) {
		if (strcasecmp(r->word, "ib") && strcasecmp(r->word, "ofi")) {
			snprintf(why, whylen, "\"%s\" is not %s", r->text, k->usage);
			return -1;
		}
		for (char *c = r->word; *c; c++)
			*c = (char)tolower((unsigned char)*c);
	}
	return 0;
}

int braid_require_parse(const char *text, struct braid_req_set *out, char *why, size_t whylen)
{
	const char *s = text ? text : "";
	size_t len;

	out->n = 0;
	s += strspn(s, " \t");
	len = strlen(s);
	while (len && (s[len - 1] == ' ' || s[len - 1] == '\t'))
		len--;
	if (len == 0 || (len == 4 && !strncasecmp(s, "none", 4)))
		return 0;
	for (;;) {
		size_t n = strcspn(s, ","), elen;
		const char *e = s + strspn(s, " \t");

		elen = (size_t)(e - s) < n ? n - (size_t)(e - s) : 0;
		while (elen && (e[elen - 1] == ' ' || e[elen - 1] == '\t'))
			elen--;
		if (elen == 0) {
			snprintf(why, whylen,
				 "an empty entry (two commas in a row, or a comma at the "
				 "start or the end)");
			return -1;
		}
		if (out->n == BRAID_REQ_MAX) {
			snprintf(why, whylen, "more than %d entries", BRAID_REQ_MAX);
			return -1;
		}
		if (parse_entry(e, elen, &out->r[out->n], why, whylen))
			return -1;
		out->n++;
		if (!s[n])
			return 0;
		s += n + 1;
	}
}

/* The core libfabric provider of a stack: "tcp" for "tcp;ofi_rxm". */
static int provider_is(const char *running, const char *want)
{
	size_t core = strcspn(running, ";");

	return !strcasecmp(running, want) ||
	       (strlen(want) == core && !strncasecmp(running, want, core));
}

static void need_rdma(const struct braid_req_facts *f, char *m, size_t len)
{
	if (f->backend == BRAID_BACKEND_OFI)
		put(m, len,
		    "braid runs over libfabric %s, which moves data through kernel sockets or "
		    "shared memory, not NIC RDMA (%.300s). Fix: ",
		    f->provider, f->why);
	else
		put(m, len, "braid runs the %s backend on a path it considers slow (%.300s). Fix: ",
		    f->backend_name, f->why);
	if (f->provider_named)
		put(m, len,
		    "unset BRAID_OFI_PROVIDER (it names %s) so that braid looks for RDMA "
		    "itself, and ",
		    f->provider);
	if (f->backend_named && f->backend == BRAID_BACKEND_OFI)
		put(m, len, "unset BRAID_BACKEND (it makes braid skip verbs), and ");
	put(m, len,
	    "make an RDMA NIC usable: load its driver (ibv_devinfo should show an active "
	    "port, fi_info -l an RDMA provider such as efa or verbs), and in a container "
	    "expose /dev/infiniband");
}

static void need_gdr(const struct braid_req_facts *f, char *m, size_t len)
{
	int ngpus = f->topo ? braid_topo_gpu_count(f->topo) : -1;

	put(m, len, "GPUDirect RDMA is off for %d of %d %s NIC(s) (first: %s): %s", f->gdr_off,
	    f->nnics, f->backend_name, f->gdr_dev ? f->gdr_dev : "?", f->gdr_why ? f->gdr_why : "");
	if (ngpus == 0)
		put(m, len, " (and the topology shows no GPU)");
	put(m, len, ". Fix: %s", f->gdr_fix && f->gdr_fix[0] ? f->gdr_fix : "see docs/ib.md");
}

/* Distinct NICs of braid's that sit in rail `rail`. */
static int nics_in_rail(const struct braid_req_facts *f, int rail)
{
	int used = 0;

	for (int i = 0; i < f->nnics; i++) {
		int dup = 0;

		if (braid_topo_nic_rail(f->topo, f->nics[i].name) != rail)
			continue;
		for (int j = 0; j < i && !dup; j++) /* ports of one NIC count once */
			dup = !strcmp(f->nics[j].name, f->nics[i].name);
		used += !dup;
	}
	return used;
}

/* One GPU short of NICs, for the message. */
static void describe_gpu(const struct braid_topo_gpu_info *gi, int in_topo, const char **names,
			 int used, char *m, size_t len)
{
	put(m, len, "%s%s%s%s: ", gi->bus_id, gi->osdev[0] ? " (" : "", gi->osdev,
	    gi->osdev[0] ? ")" : "");
	if (gi->rail < 0) {
		put(m, len, "no NIC in its rail");
		return;
	}
	put(m, len, "rail %d has %d NIC(s) in the topology (", gi->rail, in_topo);
	for (int i = 0; i < in_topo && i < 4; i++)
		put(m, len, "%s%s", i ? ", " : "", names[i]);
	put(m, len, "%s), braid uses %d", in_topo > 4 ? ", ..." : "", used);
}

/* 0 when met, else 1 with the message filled. */
static int check_rails(const struct braid_req *r, const struct braid_req_facts *f, char *m,
		       size_t len)
{
	int ngpus, short_gpus = 0, host_short = 0, braid_short = 0;
	char detail[600] = "";

	if (!f->topo) {
		put(m, len,
		    "cannot be checked: braid has no topology (hwloc could not load one; "
		    "NCCL_DEBUG=INFO or BRAID_DEBUG=INFO shows why). Fix: make hwloc see this machine "
		    "(`braid topo` shows what it finds), or take rails=%ld out of BRAID_REQUIRE",
		    r->num);
		return 1;
	}
	ngpus = braid_topo_gpu_count(f->topo);
	if (ngpus <= 0) {
		put(m, len,
		    "cannot be checked: the topology (%s) shows no GPU. Fix: make the GPUs visible "
		    "to hwloc (`braid topo`; in a container /sys/bus/pci must show them), or take "
		    "rails=%ld out of BRAID_REQUIRE on hosts without GPUs",
		    braid_topo_source(f->topo), r->num);
		return 1;
	}
	for (int g = 0; g < ngpus; g++) {
		struct braid_topo_gpu_info gi;
		const char *names[4];
		int in_topo = 0, used = 0;

		if (braid_topo_gpu_info(f->topo, g, &gi))
			continue;
		if (gi.rail >= 0) {
			in_topo = braid_topo_rail_nics(f->topo, gi.rail, names, 4);
			used = nics_in_rail(f, gi.rail);
		}
		if (used >= r->num)
			continue;
		if (in_topo < r->num)
			host_short = 1;
		else
			braid_short = 1;
		if (short_gpus++ < 3) {
			if (short_gpus > 1)
				put(detail, sizeof(detail), "; ");
			describe_gpu(&gi, in_topo, names, used, detail, sizeof(detail));
		}
	}
	if (!short_gpus)
		return 0;
	if (short_gpus > 3)
		put(detail, sizeof(detail), "; %d more", short_gpus - 3);
	put(m, len, "%d of %d GPU(s) have fewer than %ld of braid's NICs in their rail: %s. Fix: ",
	    short_gpus, ngpus, r->num, detail);
	if (host_short)
		put(m, len,
		    "this host has fewer NICs per GPU than asked: add NICs near the GPUs or lower N "
		    "(`braid topo` shows each GPU's rail)%s",
		    braid_short ? "; " : "");
	if (braid_short)
		put(m, len,
		    "braid does not use every NIC of the rail: check that their ports are "
		    "active (ibv_devinfo) and that BRAID_IB_HCA or the libfabric provider "
		    "includes them");
	return 1;
}

static void list_nics(const struct braid_req_facts *f, char *m, size_t len)
{
	for (int i = 0; i < f->nnics; i++) {
		if (i == 6) {
			put(m, len, ", ...");
			break;
		}
		put(m, len, "%s%s", i ? ", " : "", f->nics[i].name);
	}
}

static void need_nics(const struct braid_req *r, const struct braid_req_facts *f, char *m,
		      size_t len)
{
	put(m, len, "braid has %d NIC(s) (", f->nnics);
	list_nics(f, m, len);
	put(m, len, ") on the %s backend (%s), fewer than %ld. Fix: ", f->backend_name, f->provider,
	    r->num);
	if (f->backend == BRAID_BACKEND_IB)
		put(m, len,
		    "check that every NIC's port is active (ibv_devinfo: PORT_ACTIVE) and "
		    "that BRAID_IB_HCA (or NCCL_IB_HCA) leaves none out");
	else
		put(m, len,
		    "check that the NIC drivers are loaded and that `fi_info -p %.*s` lists "
		    "one domain per NIC",
		    (int)strcspn(f->provider, ";"), f->provider);
}

static int check_speed(const struct braid_req *r, const struct braid_req_facts *f, char *m,
		       size_t len)
{
	int slow = 0;

	for (int i = 0; i < f->nnics; i++) {
		if ((long)f->nics[i].speed_mbps >= r->num * 1000)
			continue;
		if (slow == 0)
			put(m, len, "NIC(s) below %ld Gbit/s: ", r->num);
		if (slow++ < 6)
			put(m, len, "%s%s at %.1f Gbit/s", slow > 1 ? ", " : "", f->nics[i].name,
			    f->nics[i].speed_mbps / 1000.0);
		else if (slow == 7)
			put(m, len, ", ...");
	}
	if (!slow)
		return 0;
	put(m, len,
	    " (%d of %d). Fix: check the links' speed and width (ibv_devinfo -v: active_speed, "
	    "active_width; ethtool), the cables and the switch ports, or lower nic_speed",
	    slow, f->nnics);
	return 1;
}

static void need_backend(const struct braid_req *r, const struct braid_req_facts *f, char *m,
			 size_t len)
{
	put(m, len, "braid runs the %s backend (%.300s). Fix: ", f->backend_name, f->why);
	if (!strcmp(r->word, "ib"))
		put(m, len,
		    "make a verbs device usable: load the NIC driver (ibv_devinfo must show "
		    "an active port), in a container expose /dev/infiniband%s",
		    f->backend_named ? ", and unset BRAID_BACKEND or set it to ib" : "");
	else
		put(m, len,
		    "set BRAID_BACKEND=ofi (braid prefers verbs where a verbs device has an "
		    "active port)");
}

static void need_provider(const struct braid_req *r, const struct braid_req_facts *f, char *m,
			  size_t len)
{
	if (f->backend == BRAID_BACKEND_OFI)
		put(m, len, "braid runs over libfabric %s (%.300s). ", f->provider, f->why);
	else
		put(m, len, "braid runs the %s backend (verbs on %s), not libfabric. ",
		    f->backend_name, f->provider);
	put(m, len, "Fix: set %sBRAID_OFI_PROVIDER=%s and check that `fi_info -p %s` lists it",
	    f->backend == BRAID_BACKEND_OFI ? "" : "BRAID_BACKEND=ofi ", r->word, r->word);
}

int braid_require_eval(const struct braid_req_set *reqs, const struct braid_req_facts *f,
		       struct braid_req_failure *fails, int max)
{
	int nfail = 0;

	for (int i = 0; i < reqs->n && nfail < max; i++) {
		const struct braid_req *r = &reqs->r[i];
		struct braid_req_failure *out = &fails[nfail];
		char *m = out->msg;
		size_t len = sizeof(out->msg);
		int failed = 0;

		out->req = r;
		m[0] = '\0';
		put(m, len, "BRAID_REQUIRE %s: not met: ", r->text);
		switch (r->kind) {
		case BRAID_REQ_RDMA:
			failed = f->slow_path != 0;
			if (failed)
				need_rdma(f, m, len);
			break;
		case BRAID_REQ_GDR:
			failed = f->gdr_off > 0;
			if (failed)
				need_gdr(f, m, len);
			break;
		case BRAID_REQ_RAILS: failed = check_rails(r, f, m, len); break;
		case BRAID_REQ_NICS:
			failed = f->nnics < r->num;
			if (failed)
				need_nics(r, f, m, len);
			break;
		case BRAID_REQ_NIC_SPEED: failed = check_speed(r, f, m, len); break;
		case BRAID_REQ_BACKEND:
			failed = strcmp(f->backend_name, r->word) != 0;
			if (failed)
				need_backend(r, f, m, len);
			break;
		case BRAID_REQ_PROVIDER:
			failed = f->backend != BRAID_BACKEND_OFI ||
				 !provider_is(f->provider, r->word);
			if (failed)
				need_provider(r, f, m, len);
			break;
		}
		if (!failed)
			continue;
		/* the consequence always fits: cut the detail before it if needed */
		if (strlen(m) + sizeof(". " CONSEQUENCE ".") > len)
			snprintf(m + len - sizeof("... " CONSEQUENCE "."),
				 sizeof("... " CONSEQUENCE "."), "... " CONSEQUENCE ".");
		else
			put(m, len, ". " CONSEQUENCE ".");
		nfail++;
	}
	return nfail;
}

/* Note the outcome after what the fallback record's why already says. */
static void record(const char *text, const struct braid_req_failure *fails, int nfail)
{
	struct braid_ctr_fallback *fb = &braid_counters()->fallback;

	put(fb->why, sizeof(fb->why), "%sBRAID_REQUIRE=%s: %s", fb->why[0] ? "; " : "", text,
	    nfail ? "NOT MET:" : "met");
	for (int i = 0; i < nfail; i++)
		put(fb->why, sizeof(fb->why), "%s%s", i ? ", " : " ", fails[i].req->text);
}

ncclResult_t braid_require_check(const struct braid_backend_ops *ops,
				 const struct braid_dev_props *nics, int nnics,
				 const struct braid_topo *topo)
{
	const char *text = braid_param_str(BRAID_P_REQUIRE);
	struct braid_ctr_fallback *fb = &braid_counters()->fallback;
	struct braid_gdr_in gin = {
		.backend = ops->kind,
		.nccl_dmabuf = braid_gdr_nccl_dmabuf(),
		.ngpus = topo ? braid_topo_gpu_count(topo) : -1,
	};
	struct braid_gdr_out gout, goff = { .mode = "none" };
	struct braid_req_facts f = {
		.backend = ops->kind,
		.backend_name = ops->name,
		.provider = fb->provider,
		.why = fb->why,
		.slow_path = fb->slow_path,
		.provider_named = strcmp(braid_param_source(BRAID_P_OFI_PROVIDER), "default") != 0,
		.backend_named = braid_param_int(BRAID_P_BACKEND) != 0,
		.nics = nics,
		.nnics = nnics,
		.topo = topo,
	};
	static struct braid_req_failure fails[BRAID_REQ_MAX]; /* under the init lock */
	struct braid_req_set reqs;
	char why[256], fb_why[sizeof(fb->why)];
	int nfail;

	if (getenv("BRAID_REQUIRE") &&
	    strcmp(braid_param_source(BRAID_P_REQUIRE), "BRAID_REQUIRE")) {
		BRAID_WARN(
			"BRAID_REQUIRE is too long for braid to read, so its requirements cannot "
			"be checked. Fix: shorten it (docs/strict.md). " CONSEQUENCE ".");
		return ncclInvalidUsage;
	}
	if (braid_require_parse(text, &reqs, why, sizeof(why))) {
		BRAID_WARN("BRAID_REQUIRE=\"%s\": %s. Write a comma list such as rdma,gdr,rails=2 "
			   "(docs/strict.md). " CONSEQUENCE ".",
			   text, why);
		return ncclInvalidUsage;
	}
	if (reqs.n == 0)
		return ncclSuccess;
	for (int d = 0; d < nnics; d++) {
		gin.ptr_support = nics[d].ptr_support;
		braid_gdr_decide(&gin, &gout);
		if (!gout.on && f.gdr_off++ == 0) {
			goff = gout;
			f.gdr_dev = nics[d].name;
		}
	}
	f.gdr_why = goff.why;
	f.gdr_fix = goff.fix;
	/* the messages quote why while record() appends to it */
	snprintf(fb_why, sizeof(fb_why), "%s", fb->why);
	f.why = fb_why;
	nfail = braid_require_eval(&reqs, &f, fails, BRAID_REQ_MAX);
	for (int i = 0; i < nfail; i++)
		BRAID_WARN("%s", fails[i].msg);
	record(text, fails, nfail);
	if (nfail)
		return ncclSystemError;
	BRAID_INFO(NCCL_INIT | NCCL_NET, "BRAID_REQUIRE=%s: every requirement met", text);
	return ncclSuccess;
}
