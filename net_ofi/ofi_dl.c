// SPDX-License-Identifier: Apache-2.0
/*
 * libfabric is opened at init with dlopen, never linked: the plugin must load on hosts
 * without it (NCCL dlopens plugins with RTLD_NOW, so every linked symbol must resolve).
 * Only the exported functions are resolved here; the rest of libfabric's API is inline
 * calls through the ops tables of the objects these return. The library stays mapped
 * until exit: providers start threads that may outlive fi_close (NCCL's IB code keeps
 * libibverbs the same way).
 */
#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "net_ofi/ofi.h"

#define OFI_LIB "libfabric.so.1"

struct ofi_dl ofi_dl;

int ofi_dl_open(char *why, size_t whylen)
{
	static const struct {
		const char *name;
		size_t offset;
	} syms[] = {
		{ "fi_version", offsetof(struct ofi_dl, version) },
		{ "fi_getinfo", offsetof(struct ofi_dl, getinfo) },
		{ "fi_freeinfo", offsetof(struct ofi_dl, freeinfo) },
		{ "fi_dupinfo", offsetof(struct ofi_dl, dupinfo) },
		{ "fi_fabric", offsetof(struct ofi_dl, fabric) },
		{ "fi_strerror", offsetof(struct ofi_dl, strerror) },
	};
	void *lib;

	if (ofi_dl.lib)
		return 0;
	lib = dlopen(OFI_LIB, RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		snprintf(why, whylen, "cannot open %s (%s)", OFI_LIB, dlerror());
		return -1;
	}
	for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
		void *sym = dlsym(lib, syms[i].name);

		if (!sym) {
			snprintf(why, whylen, "%s has no %s (too old?)", OFI_LIB, syms[i].name);
			dlclose(lib);
			memset(&ofi_dl, 0, sizeof(ofi_dl));
			return -1;
		}
		memcpy((char *)&ofi_dl + syms[i].offset, &sym, sizeof(sym));
	}
	ofi_dl.lib = lib;
	return 0;
}
