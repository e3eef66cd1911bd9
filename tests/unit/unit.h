/* SPDX-License-Identifier: Apache-2.0 */
/* Shared by the unit tests: cmocka, and a logger that keeps what braid said. */
#ifndef BRAID_TEST_UNIT_H
#define BRAID_TEST_UNIT_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "nccl_net_abi.h"

extern char unit_log[8192];
extern int unit_warns;
void unit_logger(ncclDebugLogLevel level, unsigned long flags, const char *file, int line,
		 const char *fmt, ...);
void unit_log_reset(void);

#endif
