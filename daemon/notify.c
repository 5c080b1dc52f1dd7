/* notify.c: see notify.h. */
#include "notify.h"

#include <stdlib.h>
#include <systemd/sd-daemon.h>

#include "log.h"

#define STATUS_EVERY_MS 5000

static void send_status(gkcd_notify *n) {
  char text[256];
  n->status(n->arg, text, sizeof text);
  sd_notifyf(0, "STATUS=%s", text);
}

static void on_status(uv_timer_t *t) { send_status(t->data); }

static void on_watchdog(uv_timer_t *t) {
  (void)t;
  sd_notify(0, "WATCHDOG=1");
}

static void start_timer(gkcd_notify *n, uv_loop_t *loop, uv_timer_t *t, uv_timer_cb cb,
                        uint64_t every_ms) {
  int rc;
  if ((rc = uv_timer_init(loop, t)) || (rc = uv_timer_start(t, cb, every_ms, every_ms))) {
    log_warn("systemd notification timer: %s", uv_strerror(rc));
    return;
  }
  t->data = n;
  uv_unref((uv_handle_t *)t); /* never what keeps the loop running */
}

void notify_ready(gkcd_notify *n, uv_loop_t *loop, notify_status_fn status, void *arg) {
  const char *sock = getenv("NOTIFY_SOCKET");
  if (!sock || !*sock) return;
  n->status = status;
  n->arg = arg;
  n->notifying = 1;
  sd_notify(0, "READY=1");
  send_status(n);
  start_timer(n, loop, &n->status_timer, on_status, STATUS_EVERY_MS);
  uint64_t usec = 0;
  if (sd_watchdog_enabled(0, &usec) > 0 && usec > 0) {
    start_timer(n, loop, &n->watchdog_timer, on_watchdog, usec / 2000 ? usec / 2000 : 1);
    n->watchdog = 1;
    log_info("systemd watchdog: pinging every %llu ms", (unsigned long long)(usec / 2000));
  }
}

void notify_stopping(gkcd_notify *n) {
  if (!n->notifying) return;
  sd_notify(0, "STOPPING=1");
  send_status(n);
}

void notify_close(gkcd_notify *n) {
  if (!n->notifying) return;
  uv_close((uv_handle_t *)&n->status_timer, NULL);
  if (n->watchdog) uv_close((uv_handle_t *)&n->watchdog_timer, NULL);
}
