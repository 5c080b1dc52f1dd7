/* notify.c: see notify.h. */
#include "notify.h"

#include <systemd/sd-daemon.h>

#include "log.h"
#include "server.h"

#define STATUS_EVERY_MS 5000

static void send_status(gkcd_server *srv) {
  sd_notifyf(0, "STATUS=%s: %llu connections, %llu requests in flight, %llu served",
             srv->draining ? "stopping" : "serving", (unsigned long long)srv->nconns,
             (unsigned long long)srv->in_flight, (unsigned long long)srv->served);
}

static void on_status(uv_timer_t *t) { send_status(t->data); }

static void on_watchdog(uv_timer_t *t) {
  (void)t;
  sd_notify(0, "WATCHDOG=1");
}

static void start_timer(gkcd_server *srv, uv_timer_t *t, uv_timer_cb cb, uint64_t every_ms) {
  int rc;
  if ((rc = uv_timer_init(srv->loop, t)) || (rc = uv_timer_start(t, cb, every_ms, every_ms))) {
    log_warn("systemd notification timer: %s", uv_strerror(rc));
    return;
  }
  t->data = srv;
  uv_unref((uv_handle_t *)t); /* never what keeps the loop running */
}

void notify_ready(gkcd_server *srv) {
  const char *sock = getenv("NOTIFY_SOCKET");
  if (!sock || !*sock) return;
  srv->notifying = 1;
  sd_notify(0, "READY=1");
  send_status(srv);
  start_timer(srv, &srv->status_timer, on_status, STATUS_EVERY_MS);
  uint64_t usec = 0;
  if (sd_watchdog_enabled(0, &usec) > 0 && usec > 0) {
    start_timer(srv, &srv->watchdog_timer, on_watchdog, usec / 2000 ? usec / 2000 : 1);
    srv->watchdog = 1;
    log_info("systemd watchdog: pinging every %llu ms", (unsigned long long)(usec / 2000));
  }
}

void notify_stopping(gkcd_server *srv) {
  if (!srv->notifying) return;
  sd_notify(0, "STOPPING=1");
  send_status(srv);
}

void notify_close(gkcd_server *srv) {
  if (!srv->notifying) return;
  uv_close((uv_handle_t *)&srv->status_timer, NULL);
  if (srv->watchdog) uv_close((uv_handle_t *)&srv->watchdog_timer, NULL);
}
