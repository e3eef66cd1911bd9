/* SPDX-License-Identifier: Apache-2.0 */
/* Logging: through NCCL's logger when NCCL gave one, else to stderr filtered by BRAID_DEBUG. */
#ifndef BRAID_LOG_H
#define BRAID_LOG_H

#include "nccl_net_abi.h"

enum braid_log_level {
	BRAID_LOG_NONE = 0,
	BRAID_LOG_WARN = 1,
	BRAID_LOG_INFO = 2,
	BRAID_LOG_TRACE = 3,
};

/* Install NCCL's logger (NULL: stderr). Safe to call again on each init. */
void braid_log_set_logger(ncclDebugLogger_t logger);
/* Level from BRAID_DEBUG for stderr output; NCCL filters its own. */
void braid_log_set_level(enum braid_log_level level);
enum braid_log_level braid_log_level(void);

void braid_log(enum braid_log_level level, unsigned long subsys, const char *file, int line,
	       const char *fmt, ...) __attribute__((format(printf, 5, 6)));

#define BRAID_WARN(fmt, ...) \
	braid_log(BRAID_LOG_WARN, NCCL_NET, __FILE__, __LINE__, fmt, ##__VA_ARGS__)
#define BRAID_INFO(subsys, fmt, ...) \
	braid_log(BRAID_LOG_INFO, subsys, __FILE__, __LINE__, fmt, ##__VA_ARGS__)
#define BRAID_TRACE(fmt, ...)                                                         \
	do {                                                                          \
		if (braid_log_level() >= BRAID_LOG_TRACE)                             \
			braid_log(BRAID_LOG_TRACE, NCCL_NET, __FILE__, __LINE__, fmt, \
				  ##__VA_ARGS__);                                     \
	} while (0)

#endif
