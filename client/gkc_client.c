/* gkc_client.c: libgkc's blocking connection (see gkc.h).
 *
 * A gkc_conn is the core of gkc_wire.c on a blocking socket: each call
 * queues its one request, writes it, and reads until its reply has been
 * matched (gkc__run).  The method files hold the calls themselves.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gkc.h"
#include "gkc_internal.h"
#include "gkc_shm.h"
#include "proto_errors.h"
#include "proto_socket.h"

int gkc_socket_path(char *buf, size_t buflen, const char *override) {
  return proto_socket_path(buf, buflen, override) == 0 ? 0 : GKC_EINVALID_ARGUMENT;
}

const char *gkc_errmsg(const gkc_conn *c) { return c ? c->errmsg : "out of memory"; }
const char *gkc_errname(int err) { return err == 0 ? "ok" : proto_err_wire(err); }
const char *gkc_strerror(int err) { return proto_err_text(err); }

int gkc_connect(gkc_conn **out, const char *socket_path) {
  gkc_conn *c = malloc(sizeof *c);
  *out = c;
  if (!c) return GKC_EOUT_OF_MEMORY;
  gkc__conn_init(c);
  gkc__shm_init(c);
  gkc__reconnect_init(c);
  gkc__ring_init(c);
  return gkc__conn_connect(c, socket_path);
}

int gkc_set_precision(gkc_conn *c, const char *precision) {
  if (precision && !strcmp(precision, "tf32"))
    c->tf32 = 1;
  else if (precision && !strcmp(precision, "fp32"))
    c->tf32 = 0;
  else
    return gkc__fail(c, GKC_EINVALID_ARGUMENT, "precision must be \"fp32\" or \"tf32\"");
  return 0;
}

int gkc__tf32(const gkc_conn *c) { return c->tf32; }

int gkc_set_device(gkc_conn *c, int device) {
  if (device < GKC_DEVICE_AUTO)
    return gkc__fail(c, GKC_EINVALID_ARGUMENT, "device %d is neither a device number nor"
                     " GKC_DEVICE_AUTO", device);
  c->pinned = device >= 0;
  c->pin_device = device >= 0 ? device : 0;
  return 0;
}

int gkc__device(const gkc_conn *c) { return c->pinned ? c->pin_device : -1; }

void gkc_close(gkc_conn *c) {
  if (!c) return;
  gkc__conn_destroy(c);
  gkc__shm_destroy(c); /* after every request, and so every slice, has ended */
  gkc__objs_free(c);
  free(c);
}
