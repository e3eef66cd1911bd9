// SPDX-License-Identifier: Apache-2.0
/*
 * `braid doctor`'s checks of what is not a host file: the libraries (libibverbs,
 * libfabric and its providers, NCCL), the plugin NCCL would load (NCCL_NET_PLUGIN, as
 * NCCL resolves it) and NCCL_* variables that name devices this host does not have.
 */
#include "tools/doctor.h"

#include <dirent.h>
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <rdma/fabric.h>

#include "plugin/ncclib_env.h"
#include "tools/cmds.h"

/* The file a dlopen() handle came from. */
static void handle_path(void *h, char *buf, size_t len)
{
	struct link_map *lm = NULL;

	if (dlinfo(h, RTLD_DI_LINKMAP, &lm) == 0 && lm && lm->l_name && lm->l_name[0])
		snprintf(buf, len, "%s", lm->l_name);
	else
		snprintf(buf, len, "?");
}

/* ---- libraries ----
 * Opened RTLD_NODELETE: libfabric and NCCL keep allocations in their static data, which a
 * real unmap would turn into leaks under LeakSanitizer (make SAN=1). */

static void check_verbs(struct doctor *d)
{
	void *h = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
	char path[1024];

	if (!h) {
		doc_add(d, d->nrdma > 0 ? DOC_FAIL : DOC_WARN, "lib.ibverbs",
			"install libibverbs1 and ibverbs-providers (rdma-core)",
			"libibverbs.so.1 does not load (%s): braid's ib backend cannot run%s",
			dlerror(), d->nrdma > 0 ? ", though this host has RDMA devices" : "");
		return;
	}
	d->verbs_loaded = true;
	d->verbs_dmabuf = dlsym(h, "ibv_reg_dmabuf_mr") != NULL;
	handle_path(h, path, sizeof(path));
	doc_add(d, DOC_PASS, "lib.ibverbs", NULL, "libibverbs.so.1 loads from %s (%s)", path,
		d->verbs_dmabuf ? "with ibv_reg_dmabuf_mr" : "no ibv_reg_dmabuf_mr: no dma-buf");
	dlclose(h);
}

typedef int (*fi_getinfo_fn)(uint32_t, const char *, const char *, uint64_t, const struct fi_info *,
			     struct fi_info **);
typedef void (*fi_freeinfo_fn)(struct fi_info *);
typedef uint32_t (*fi_version_fn)(void);

static void check_fabric(struct doctor *d)
{
	void *h = dlopen("libfabric.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
	fi_getinfo_fn getinfo;
	fi_freeinfo_fn freeinfo;
	fi_version_fn version;
	struct fi_info *info = NULL, *i;
	char provs[512] = "", path[1024];
	size_t off = 0;
	int efa = 0, efa_dev = d->nefa > 0;
	uint32_t v;

	if (!h) {
		doc_add(d, efa_dev ? DOC_FAIL : DOC_WARN, "lib.libfabric",
			"install libfabric1 (or the EFA installer's libfabric on AWS)",
			"libfabric.so.1 does not load (%s): braid's ofi backend cannot run",
			dlerror());
		return;
	}
	handle_path(h, path, sizeof(path));
	getinfo = (fi_getinfo_fn)dlsym(h, "fi_getinfo");
	freeinfo = (fi_freeinfo_fn)dlsym(h, "fi_freeinfo");
	version = (fi_version_fn)dlsym(h, "fi_version");
	if (!getinfo || !freeinfo || !version) {
		doc_add(d, DOC_FAIL, "lib.libfabric", "reinstall libfabric1",
			"%s lacks fi_getinfo/fi_freeinfo/fi_version", path);
		dlclose(h);
		return;
	}
	v = version();
	if (getinfo(v, NULL, NULL, 0, NULL, &info) == 0) {
		for (i = info; i; i = i->next) {
			const char *name = i->fabric_attr ? i->fabric_attr->prov_name : NULL;

			if (!name || strstr(provs, name)) /* a provider has many entries */
				continue;
			if (!strcmp(name, "efa"))
				efa = 1;
			if (off < sizeof(provs) - 2) {
				int w = snprintf(provs + off, sizeof(provs) - off, "%s%s",
						 off ? ", " : "", name);

				off += w > 0 ? (size_t)w : 0;
			}
		}
		freeinfo(info);
	}
	if (efa_dev && !efa)
		doc_add(d, DOC_FAIL, "lib.libfabric",
			"install the EFA libfabric (aws-efa-installer), put its lib on "
			"LD_LIBRARY_PATH",
			"libfabric %u.%u (%s) has no efa provider, but this host has EFA devices; "
			"providers: %s",
			FI_MAJOR(v), FI_MINOR(v), path, provs[0] ? provs : "none");
	else
		doc_add(d, DOC_PASS, "lib.libfabric", NULL,
			"libfabric %u.%u from %s; providers: %s%s", FI_MAJOR(v), FI_MINOR(v), path,
			provs[0] ? provs : "none", efa ? "" : " (no efa: not an EFA host)");
	dlclose(h);
}

typedef int (*nccl_version_fn)(int *);

/* The NCCL on the library path: its version code (2.28.9: 22809), 0 when none or unknown. */
static int nccl_version(void)
{
	void *h = dlopen("libnccl.so.2", RTLD_LAZY | RTLD_LOCAL | RTLD_NODELETE);
	nccl_version_fn ver;
	int v = 0;

	if (!h)
		return 0;
	ver = (nccl_version_fn)dlsym(h, "ncclGetVersion");
	if (!ver || ver(&v) != 0)
		v = 0;
	dlclose(h);
	return v;
}

static void check_nccl(struct doctor *d)
{
	void *h = dlopen("libnccl.so.2", RTLD_LAZY | RTLD_LOCAL | RTLD_NODELETE);
	char path[1024];
	int v;

	if (!h) {
		doc_add(d, DOC_INFO, "lib.nccl", NULL,
			"libnccl.so.2 is not on the library path (%s): fine when the application "
			"brings its own NCCL (PyTorch's nvidia-nccl wheel)",
			dlerror());
		return;
	}
	handle_path(h, path, sizeof(path));
	v = nccl_version();
	if (v)
		doc_add(d, DOC_PASS, "lib.nccl", NULL, "libnccl.so.2 %d.%d.%d from %s", v / 10000,
			(v / 100) % 100, v % 100, path);
	else
		doc_add(d, DOC_PASS, "lib.nccl", NULL, "libnccl.so.2 from %s (version unknown)",
			path);
	dlclose(h);
}

/* ---- the plugin NCCL would load ---- */

/*
 * NCCL >= 2.24 (src/plugin/net.cc, src/plugin/plugin_open.cc; docs/doctor.md quotes it):
 * NCCL_NET_PLUGIN unset: "libnccl-net.so"; "none": no plugin; else a comma list, each
 * name tried as given, then (no '/', and not "lib*.so") as "libnccl-net-NAME.so", each
 * with dlopen(RTLD_NOW | RTLD_LOCAL). Writes the candidates into names[]; returns their
 * count.
 */
static int plugin_candidates(const char *env, char names[][256], int max)
{
	char list[1024];
	char *save = NULL, *tok;
	int n = 0;

	if (!env) {
		snprintf(names[n++], 256, "libnccl-net.so");
		return n;
	}
	if (!strcasecmp(env, "none"))
		return 0;
	snprintf(list, sizeof(list), "%s", env);
	for (tok = strtok_r(list, ",", &save); tok && n < max; tok = strtok_r(NULL, ",", &save)) {
		size_t len = strlen(tok);

		if (!len)
			continue;
		snprintf(names[n++], 256, "%s", tok);
		if (n < max && !strchr(tok, '/') &&
		    (strncmp(tok, "lib", 3) || len < 3 || strcmp(tok + len - 3, ".so")))
			snprintf(names[n++], 256, "libnccl-net-%s.so", tok);
	}
	return n;
}

static void check_plugin(struct doctor *d)
{
	static const char *const syms[] = { "ncclNetPlugin_v12", "ncclNetPlugin_v11",
					    "ncclNetPlugin_v10", "ncclNetPlugin_v9",
					    "ncclNetPlugin_v8" };
	const char *env = getenv("NCCL_NET_PLUGIN");
	char names[16][256], tried[1024] = "", path[1024], exports[128] = "", fix[512];
	char braid_so[1024], dir[1024];
	const char *pname = NULL;
	int n = plugin_candidates(env, names, 16);
	void *h = NULL;
	int i;

	braid_default_plugin(braid_so, sizeof(braid_so));
	snprintf(dir, sizeof(dir), "%s", braid_so);
	if (strrchr(dir, '/'))
		*strrchr(dir, '/') = '\0';
	else
		snprintf(dir, sizeof(dir), "<dir of libnccl-net-braid.so>");
	snprintf(fix, sizeof(fix),
		 "export NCCL_NET_PLUGIN=braid LD_LIBRARY_PATH=%.300s:$LD_LIBRARY_PATH "
		 "(or `make install` into the library path)",
		 dir);
	if (n == 0) {
		doc_add(d, DOC_FAIL, "plugin", fix,
			"NCCL_NET_PLUGIN=%s: NCCL loads no plugin and uses its own IB/Socket "
			"transports",
			env);
		return;
	}
	for (i = 0; i < n && !h; i++) {
		h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
		if (!h) {
			size_t off = strlen(tried);

			snprintf(tried + off, sizeof(tried) - off, "%s%.200s", off ? ", " : "",
				 names[i]);
		}
	}
	if (!h) {
		doc_add(d, DOC_FAIL, "plugin", fix,
			"NCCL_NET_PLUGIN=%s: NCCL would find no plugin (tried %s) and silently "
			"fall back to its own transports",
			env ? env : "(unset)", tried);
		return;
	}
	handle_path(h, path, sizeof(path));
	for (size_t k = 0; k < sizeof(syms) / sizeof(syms[0]); k++) {
		/* Every ncclNet_vN starts with `const char *name`. */
		const char *const *s = dlsym(h, syms[k]);

		if (!s)
			continue;
		if (!pname)
			pname = *s;
		snprintf(exports + strlen(exports), sizeof(exports) - strlen(exports), "%s%s",
			 exports[0] ? " " : "", syms[k] + strlen("ncclNetPlugin_"));
	}
	if (!exports[0])
		doc_add(d, DOC_FAIL, "plugin", fix,
			"NCCL would load %s (as %s), which exports no ncclNetPlugin_v8..v12: "
			"NCCL ignores it and uses its own transports",
			path, names[i - 1]);
	else if (!pname || strcmp(pname, "braid"))
		doc_add(d, DOC_FAIL, "plugin", fix,
			"NCCL would load %s (as %s), plugin \"%s\", not braid; exports %s", path,
			names[i - 1], pname ? pname : "?", exports);
	else
		doc_add(d, DOC_PASS, "plugin", NULL,
			"NCCL_NET_PLUGIN=%s: NCCL would load %s (as %s), braid, exports %s",
			env ? env : "(unset)", path, names[i - 1], exports);
	dlclose(h);
}

/* ---- environment ---- */

/* NCCL's prefix list (NCCL_IB_HCA, NCCL_SOCKET_IFNAME): "^" excludes, "=" exact, ":port"
 * cut. Writes the names of the list that match no entry of dir into missing; returns
 * how many; *nlisted: the names listed. Exclusion lists are not checked (0). */
static int list_missing(struct doctor *d, const char *val, const char *dir, bool ports,
			char *missing, size_t len, int *nlisted)
{
	char list[1024], full[4096];
	char *save = NULL, *tok;
	bool exact = false;
	int nmiss = 0;
	const char *p = val;

	missing[0] = '\0';
	*nlisted = 0;
	if (*p == '^')
		return 0;
	if (*p == '=') {
		exact = true;
		p++;
	}
	snprintf(list, sizeof(list), "%s", p);
	if (doc_path(d, full, sizeof(full), dir))
		return 0;
	for (tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		struct dirent **ents = NULL;
		int ne, found = 0;

		if (ports && strchr(tok, ':'))
			*strchr(tok, ':') = '\0';
		if (!*tok)
			continue;
		(*nlisted)++;
		ne = scandir(full, &ents, NULL, alphasort);
		for (int k = 0; k < ne; k++) {
			const char *nm = ents[k]->d_name;

			if (nm[0] != '.' &&
			    (exact ? !strcmp(nm, tok) : !strncmp(nm, tok, strlen(tok))))
				found = 1;
			free(ents[k]);
		}
		free(ents);
		if (!found) {
			size_t off = strlen(missing);

			snprintf(missing + off, len - off, "%s%s", off ? ", " : "", tok);
			nmiss++;
		}
	}
	return nmiss;
}

/* A variable that lists names of dir's entries (NCCL_IB_HCA, NCCL_SOCKET_IFNAME). */
struct name_list {
	const char *var, *dir;
	bool ports;         /* names may end in :port */
	const char *what;   /* what a name names */
	const char *unset;  /* what NCCL does when it is not set */
	const char *no_one; /* said after "matches no <what>" */
};

/* Every name of the list must match an entry of dir; '^' lists are not checked. */
static void check_name_list(struct doctor *d, const struct name_list *k)
{
	const char *val = getenv(k->var);
	char id[64], fix[160], missing[512];
	int nmiss, nlisted;

	snprintf(id, sizeof(id), "env.%s", k->var);
	if (!val) {
		doc_add(d, DOC_PASS, id, NULL, "not set: %s", k->unset);
		return;
	}
	nmiss = list_missing(d, val, k->dir, k->ports, missing, sizeof(missing), &nlisted);
	if (val[0] == '^') {
		doc_add(d, DOC_PASS, id, NULL, "%s=%s excludes some (not checked)", k->var, val);
	} else if (nmiss == nlisted && nlisted > 0) {
		snprintf(fix, sizeof(fix), "set %s to names from %s, or unset it", k->var, k->dir);
		doc_add(d, DOC_FAIL, id, fix, "%s=%s matches no %s here (missing: %s)%s", k->var,
			val, k->what, missing, k->no_one);
	} else if (nmiss) {
		snprintf(fix, sizeof(fix), "drop the missing names from %s", k->var);
		doc_add(d, DOC_WARN, id, fix, "%s=%s: %s match no %s here", k->var, val, missing,
			k->what);
	} else {
		doc_add(d, DOC_PASS, id, NULL, "%s=%s: every name matches an entry of %s", k->var,
			val, k->dir);
	}
}

/* Every NCCL_IB_* variable of NCCL 2.30's IB transport that is set, and what braid does
 * with it: the table the plugin reports from at init (plugin/ncclib_env.c). */
static void check_ncclib_vars(struct doctor *d)
{
	size_t n;
	const struct braid_ncclib_var *v = braid_ncclib_vars(&n);

	for (size_t i = 0; i < n; i++) {
		const char *val = getenv(v[i].name);
		char id[64], fix[160];

		/* these two have their own checks above */
		if (!val || !strcmp(v[i].name, "NCCL_IB_HCA") ||
		    !strcmp(v[i].name, "NCCL_IB_DISABLE"))
			continue;
		snprintf(id, sizeof(id), "env.%s", v[i].name);
		switch (v[i].how) {
		case BRAID_NCCLIB_HONOURED:
			doc_add(d, DOC_PASS, id, NULL,
				"%s=%s: braid reads it with NCCL's meaning (%s)", v[i].name, val,
				v[i].braid);
			break;
		case BRAID_NCCLIB_WARN:
			snprintf(fix, sizeof(fix),
				 "see docs/ib.md for %s; unset it if it is not needed", v[i].name);
			doc_add(d, DOC_WARN, id, fix, "%s=%s: braid does not honour it: %s",
				v[i].name, val, v[i].braid);
			break;
		default:
			doc_add(d, DOC_INFO, id, NULL, "%s=%s: braid does not read it: %s",
				v[i].name, val, v[i].braid);
			break;
		}
	}
}

/*
 * NCCL 2.28.0 to 2.30.2 unload a net plugin with its last communicator (the reference
 * count starts at NCCL_NET_PLUGIN_REF_COUNT, 0 from 2.28) and clear the plugin's name as
 * they do (ncclNetPluginUnload, src/plugin/net.cc; 2.30.3 keeps it): the next
 * communicator looks for libnccl-net.so. Seen on a GPU host with 2.28.9
 * (tests/nccl/nccl_abort.c, docs/troubleshooting.md). Said only where it applies.
 */
static void check_plugin_unload(struct doctor *d)
{
	const char *name = getenv("NCCL_NET_PLUGIN"), *refs = getenv("NCCL_NET_PLUGIN_REF_COUNT");
	int v = nccl_version();

	if (v < 22800 || v >= 23003 || !name || !name[0] || !strcasecmp(name, "none"))
		return;
	if (refs && atoi(refs) > 0)
		doc_add(d, DOC_PASS, "env.NCCL_NET_PLUGIN_REF_COUNT", NULL,
			"NCCL_NET_PLUGIN_REF_COUNT=%s: NCCL %d.%d.%d keeps braid loaded when its last "
			"communicator goes",
			refs, v / 10000, (v / 100) % 100, v % 100);
	else
		doc_add(d, DOC_WARN, "env.NCCL_NET_PLUGIN_REF_COUNT",
			"export NCCL_NET_PLUGIN_REF_COUNT=1",
			"NCCL %d.%d.%d unloads the net plugin with its last communicator and forgets "
			"NCCL_NET_PLUGIN=%s as it does: a communicator made after every earlier one "
			"was destroyed or aborted (abort and re-init in one process) finds no plugin "
			"(\"Failed to initialize any NET plugin\"; NCCL 2.30.3 fixes it)",
			v / 10000, (v / 100) % 100, v % 100, name);
}

static void check_env(struct doctor *d)
{
	const char *net = getenv("NCCL_NET"), *dis = getenv("NCCL_IB_DISABLE");

	if (!net)
		doc_add(d, DOC_PASS, "env.NCCL_NET", NULL,
			"not set: NCCL uses the first network that initialises, the plugin's first");
	else if (!strcasecmp(net, "braid"))
		doc_add(d, DOC_PASS, "env.NCCL_NET", NULL,
			"NCCL_NET=%s: NCCL must use braid (an error if braid fails, no fallback)",
			net);
	else
		doc_add(d, DOC_FAIL, "env.NCCL_NET", "unset NCCL_NET, or set NCCL_NET=braid",
			"NCCL_NET=%s: NCCL uses its %s transport, not braid", net, net);

	if (dis && atoi(dis) == 1)
		doc_add(d, DOC_WARN, "env.NCCL_IB_DISABLE", "unset NCCL_IB_DISABLE",
			"NCCL_IB_DISABLE=1: NCCL's own IB transport is off, so when braid does not "
			"load NCCL falls back to TCP sockets without a word");
	else
		doc_add(d, DOC_PASS, "env.NCCL_IB_DISABLE", NULL, "%s",
			dis ? "NCCL_IB_DISABLE is not 1" : "not set");

	check_name_list(d, &(const struct name_list){ "NCCL_IB_HCA", "/sys/class/infiniband", true,
						      "RDMA device", "every RDMA device is used",
						      "" });
	check_name_list(d, &(const struct name_list){ "NCCL_SOCKET_IFNAME", "/sys/class/net", false,
						      "interface",
						      "NCCL picks an interface (not lo or docker*)",
						      ": NCCL cannot bootstrap" });
}

void doc_check_lib(struct doctor *d)
{
	if (doc_want(d, "lib")) {
		check_verbs(d);
		check_fabric(d);
		check_nccl(d);
	} else if (doc_want(d, "gpudirect")) {
		void *h = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);

		d->verbs_loaded = h != NULL;
		d->verbs_dmabuf = h && dlsym(h, "ibv_reg_dmabuf_mr");
		if (h)
			dlclose(h);
	}
	if (doc_want(d, "plugin"))
		check_plugin(d);
	if (doc_want(d, "env")) {
		check_env(d);
		check_plugin_unload(d);
		check_ncclib_vars(d);
	}
}
