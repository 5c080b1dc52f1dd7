/* fdstore.h: shared resident objects across a planned restart, through
 * systemd's file-descriptor store (FileDescriptorStoreMax= in the unit).
 *
 * On SIGTERM, once drained, every shared array and matrix (upload or
 * csr_upload with shared: true; a replicated one by its home copy, a
 * partitioned one as the CSR it was made from) is copied
 * to the host into a sealed memfd handed to systemd (FDSTORE=1,
 * FDNAME=gkc-obj-ID), then a manifest memfd (FDNAME=gkc-manifest) naming
 * them: ids, kinds, sizes, dtypes, shapes, the uid that made each, a
 * crc32 of each object's bytes, gkcd's shared_instance, and a crc32 of the
 * manifest itself.  The manifest goes last, so a save cut short leaves no
 * manifest.  At the next start systemd passes the descriptors back
 * (LISTEN_FDS, LISTEN_FDNAMES); before accepting, every size, count and id
 * is checked, then every checksum, and either every object comes back
 * (same ids, shared, the same shared_instance) or none does and the log
 * says why.  A replicated object comes back on each of its devices this
 * gkcd has, a partitioned matrix cut again over them (part_build), either
 * on device 0 when none of them is left.  Either way the entries are removed from the store
 * (FDSTOREREMOVE=1).  PROTOCOL.md, "Instances and restarts"; the format is
 * below in fdstore.c.
 *
 * Without NOTIFY_SOCKET (not under systemd) or with --restore-max-bytes 0
 * nothing is saved and the log says what is released.  Loop thread.
 */
#ifndef GKCD_FDSTORE_H
#define GKCD_FDSTORE_H

#include <stddef.h>

#include "resident.h"

/* Takes the descriptors systemd passed that are gkcd's (named gkc-...) or
 * not sockets, and restores the objects they hold into t, charging t's
 * budget, when they fit in max_bytes and the budget.  Call before the
 * listening socket is taken (it leaves sockets to listen.c).  Never fails
 * the start: anything wrong is logged and gkcd starts clean. */
void fdstore_restore(gkcd_residents *t, size_t max_bytes);
/* Saves t's shared objects to systemd's store (at most max_bytes); call
 * after the drain, before the devices close.  Logs what was saved, or why
 * nothing was and what is released. */
void fdstore_save(gkcd_residents *t, size_t max_bytes);

#endif
