/* SPDX-License-Identifier: Apache-2.0 */
/* The NICs' link watcher (ofi_watch.c): braid stat's view of a NIC's link while no comm
 * waits on it. */
#ifndef BRAID_NET_OFI_OFI_WATCH_H
#define BRAID_NET_OFI_OFI_WATCH_H

/* After the devices are found (ofi_devs_init); no thread where no NIC is an interface. */
void ofi_watch_start(void);
/* Before the devices are freed (the backend's fini); again is harmless. */
void ofi_watch_stop(void);

#endif
