// SPDX-License-Identifier: Apache-2.0
/*
 * libibverbs is opened at init with dlopen, never linked: the plugin must load on hosts
 * without it. Only exported functions are resolved here. verbs.h's inline wrappers that
 * call exported functions (ibv_query_port, the ibv_reg_mr macro, ibv_query_gid_ex) are
 * not used; their targets are called through this table instead, so -Wl,-z,defs proves
 * nothing links to libibverbs. The library stays mapped until exit (its providers may
 * keep threads), as NCCL does.
 */
#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "net_ib/ib.h"

#define IBV_LIB "libibverbs.so.1"

struct ibv_dl ibv;

#define SYM(name, field, required)                             \
	{                                                      \
		name, offsetof(struct ibv_dl, field), required \
	}

int ibv_dl_open(char *why, size_t whylen)
{
	static const struct {
		const char *name;
		size_t offset;
		int required;
	} syms[] = {
		SYM("ibv_get_device_list", get_device_list, 1),
		SYM("ibv_free_device_list", free_device_list, 1),
		SYM("ibv_get_device_name", get_device_name, 1),
		SYM("ibv_open_device", open_device, 1),
		SYM("ibv_close_device", close_device, 1),
		SYM("ibv_query_device", query_device, 1),
		SYM("ibv_query_port", query_port, 1),
		SYM("ibv_query_gid", query_gid, 1),
		SYM("ibv_query_pkey", query_pkey, 0),
		SYM("ibv_alloc_pd", alloc_pd, 1),
		SYM("ibv_dealloc_pd", dealloc_pd, 1),
		SYM("ibv_reg_mr", reg_mr, 1),
		SYM("ibv_dereg_mr", dereg_mr, 1),
		SYM("ibv_create_cq", create_cq, 1),
		SYM("ibv_destroy_cq", destroy_cq, 1),
		SYM("ibv_create_qp", create_qp, 1),
		SYM("ibv_modify_qp", modify_qp, 1),
		SYM("ibv_destroy_qp", destroy_qp, 1),
		SYM("ibv_get_async_event", get_async_event, 1),
		SYM("ibv_ack_async_event", ack_async_event, 1),
		SYM("ibv_wc_status_str", wc_status_str, 1),
		SYM("ibv_event_type_str", event_type_str, 1),
		SYM("_ibv_query_gid_ex", query_gid_ex, 0),
		SYM("ibv_reg_mr_iova2", reg_mr_iova2, 0),
		SYM("ibv_reg_dmabuf_mr", reg_dmabuf_mr, 0),
		SYM("ibv_query_ece", query_ece, 0),
		SYM("ibv_set_ece", set_ece, 0),
	};
	void *lib;

	if (ibv.lib)
		return 0;
	lib = dlopen(IBV_LIB, RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		snprintf(why, whylen, "cannot open %s (%s)", IBV_LIB, dlerror());
		return -1;
	}
	for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
		void *sym = dlsym(lib, syms[i].name);

		if (!sym && syms[i].required) {
			snprintf(why, whylen, "%s has no %s (too old?)", IBV_LIB, syms[i].name);
			dlclose(lib);
			memset(&ibv, 0, sizeof(ibv));
			return -1;
		}
		memcpy((char *)&ibv + syms[i].offset, &sym, sizeof(sym));
	}
	ibv.lib = lib;
	return 0;
}
