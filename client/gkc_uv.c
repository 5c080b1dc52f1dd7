/* gkc_uv.c: the libuv adapter (see gkc_uv.h).
 *
 * A uv_poll_t on the context's descriptor, its events set by the
 * context's hooks: readable while the connection is open, writable while
 * output is queued.  The context may be freed from inside handle_read (a
 * callback closed it); its cleanup hook then clears ac and closes the
 * poll handle, whose memory libuv hands back in the close callback.
 */
#include <stdlib.h>

#include "gkc_uv.h"

typedef struct {
  uv_poll_t *poll; /* a new one whenever the context connects again */
  uv_loop_t *loop;
  gkc_async *ac;   /* NULL once the context is gone */
  unsigned epoch;  /* gkc_async_reconnects when poll was made */
} adapter;

static void on_poll(uv_poll_t *h, int status, int events) {
  adapter *a = h->data;
  /* An error on the descriptor: reading reports it and fails what is pending. */
  if (status < 0) events = UV_READABLE;
  if (a->ac && (events & UV_WRITABLE)) gkc_async_handle_write(a->ac);
  if (a->ac && (events & UV_READABLE)) gkc_async_handle_read(a->ac);
}

static void on_closed(uv_handle_t *h) { free(h); }

/* A poll handle on the context's descriptor now, or NULL. */
static uv_poll_t *watch(adapter *a) {
  uv_poll_t *p = malloc(sizeof *p);
  if (!p) return NULL;
  if (uv_poll_init(a->loop, p, gkc_async_fd(a->ac)) != 0) {
    free(p);
    return NULL;
  }
  p->data = a;
  a->epoch = gkc_async_reconnects(a->ac);
  return p;
}

static void update(void *data, int want_read, int want_write) {
  adapter *a = data;
  int ev = (want_read ? UV_READABLE : 0) | (want_write ? UV_WRITABLE : 0);
  if (a->ac && a->epoch != gkc_async_reconnects(a->ac) && gkc_async_fd(a->ac) >= 0) {
    /* The context connected again: the old descriptor is closed, so its
     * handle goes (freed in its close callback) and a new one watches. */
    if (a->poll) uv_close((uv_handle_t *)a->poll, on_closed);
    a->poll = watch(a);
  }
  if (!a->poll) return; /* out of memory: the context is not watched (gkc_async_poll still works) */
  if (ev == 0)
    uv_poll_stop(a->poll);
  else
    uv_poll_start(a->poll, ev, on_poll); /* on an fd libuv took already: cannot fail */
}

static void on_adapter_closed(uv_handle_t *h) {
  free(h->data);
  free(h);
}

static void cleanup(void *data) {
  adapter *a = data;
  a->ac = NULL;
  if (a->poll)
    uv_close((uv_handle_t *)a->poll, on_adapter_closed);
  else
    free(a);
}

int gkc_async_attach_uv(gkc_async *ac, uv_loop_t *loop) {
  int fd = gkc_async_fd(ac);
  if (fd < 0) return GKC_EIO;
  adapter *a = calloc(1, sizeof *a);
  if (!a) return GKC_EOUT_OF_MEMORY;
  a->loop = loop;
  a->ac = ac;
  if (!(a->poll = watch(a))) {
    free(a);
    return GKC_EIO;
  }
  static const gkc_async_hooks hooks = {update, cleanup};
  gkc_async_set_hooks(ac, &hooks, a);
  return 0;
}
