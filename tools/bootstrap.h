/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Out-of-band TCP for the tools: two processes find each other and swap small blobs
 * (options, connection handles) before the plugin is used. Every call is bounded.
 */
#ifndef BRAID_TOOLS_BOOTSTRAP_H
#define BRAID_TOOLS_BOOTSTRAP_H

#include <stddef.h>

/* Listen on host:port (host NULL: all addresses; port 0: any). Returns the fd and the
 * port it got in *bound_port, or -1 with a message in err. */
int boot_listen(const char *host, int port, int *bound_port, char *err, size_t errlen);
/* Accept one peer within timeout_s. */
int boot_accept(int lfd, double timeout_s, char *err, size_t errlen);
/* Connect to host:port, retrying until timeout_s (the server may start later). */
int boot_connect(const char *host, int port, double timeout_s, char *err, size_t errlen);
/* Send / receive exactly len bytes within timeout_s. 0 on success. */
int boot_send(int fd, const void *buf, size_t len, double timeout_s, char *err, size_t errlen);
int boot_recv(int fd, void *buf, size_t len, double timeout_s, char *err, size_t errlen);

#endif /* BRAID_TOOLS_BOOTSTRAP_H */
