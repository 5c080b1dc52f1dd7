/* devices.c: see devices.h. */
#include "devices.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "log.h"

/* The list as worker threads see it: written once before any worker starts. */
static gkcd_backend *g_be[GKCD_MAX_DEVICES];
static int g_n;
static atomic_ullong g_pending; /* lost on some thread, not yet seen by the loop */

gkcd_backend *devices_backend(int i) { return i >= 0 && i < g_n ? g_be[i] : NULL; }
int devices_count(void) { return g_n; }

uint64_t devices_live(const gkcd_devices *d) {
  uint64_t m = 0;
  for (int i = 0; i < d->n; i++)
    if (!atomic_load(&d->dev[i].be->lost)) m |= 1ull << i;
  return m;
}

void devices_name(gkcd_backend *be, char *buf, size_t len) {
  gkcd_device_info info;
  memset(&info, 0, sizeof info);
  if (be->devices(be, &info, 1) < 1) snprintf(info.name, sizeof info.name, "%s", be->name);
  snprintf(buf, len, "%s", info.name);
}

const char *devices_lost_msg(gkcd_backend *be, char *buf, size_t len) {
  char name[128];
  devices_name(be, name, sizeof name);
  snprintf(buf, len, "device %d (%s) was lost: %s", be->device, name, backend_lost_reason(be));
  return buf;
}

/* Any thread: note the device and wake the loop. */
static void lost_hook(gkcd_backend *be, void *arg) {
  gkcd_devices *d = arg;
  atomic_fetch_or(&g_pending, 1ull << be->device);
  if (atomic_load(&d->async_on)) uv_async_send(&d->lost_async);
}

/* The loop: each newly lost device leaves service; with none left the
 * daemon can do nothing more and is restarted by its service manager. */
static void on_lost(uv_async_t *h) {
  gkcd_devices *d = h->data;
  uint64_t pending = atomic_exchange(&g_pending, 0);
  for (int i = 0; i < d->n; i++) {
    if (!(pending & (1ull << i)) || d->dev[i].down) continue;
    d->dev[i].down = 1;
    char msg[400];
    log_warn("%s; %d device(s) go on serving", devices_lost_msg(d->dev[i].be, msg, sizeof msg),
             __builtin_popcountll(devices_live(d)));
    if (d->on_lost) d->on_lost(i, d->arg);
  }
  if (!devices_live(d)) backend_fatal("every device was lost");
}

int devices_init(gkcd_devices *d, uv_loop_t *loop, gkcd_backend **be, int n,
                 void (*on_lost_cb)(int device, void *arg), void *arg) {
  memset(d, 0, sizeof *d);
  d->on_lost = on_lost_cb;
  d->arg = arg;
  for (int i = 0; i < n; i++) {
    d->dev[i].be = be[i];
    be[i]->device = i;
    g_be[i] = be[i];
    int rc = cost_create(&d->dev[i].cost, &be[i]->rates);
    if (rc) {
      log_err("cannot make the cost model of device %d (%d)", i, rc);
      for (int j = 0; j < i; j++) cost_destroy(d->dev[j].cost);
      return -1;
    }
  }
  d->n = g_n = n;
  int rc = uv_async_init(loop, &d->lost_async, on_lost);
  if (rc) {
    log_err("uv_async_init: %s", uv_strerror(rc));
    return -1;
  }
  d->lost_async.data = d;
  uv_unref((uv_handle_t *)&d->lost_async);
  atomic_store(&d->async_on, 1);
  backend_set_lost_hook(lost_hook, d);
  return 0;
}

void devices_close(gkcd_devices *d) {
  /* From here on a lost device is only marked (its flag); nothing wakes
   * the loop, which is ending. */
  if (!atomic_exchange(&d->async_on, 0)) return;
  uv_close((uv_handle_t *)&d->lost_async, NULL);
}

void devices_destroy(gkcd_devices *d) {
  backend_set_lost_hook(NULL, NULL);
  for (int i = 0; i < d->n; i++) {
    cost_destroy(d->dev[i].cost);
    d->dev[i].be->destroy(d->dev[i].be);
  }
  d->n = 0;
}
