/* notify.h: telling systemd how gkcd is doing (Type=notify).
 *
 * READY=1 once the socket serves, STATUS= lines every few seconds,
 * STOPPING=1 when draining, and WATCHDOG=1 from the event loop itself at
 * half the WatchdogSec interval, so a loop that hangs stops the pings and
 * gets gkcd restarted.  Every call does nothing when systemd did not start
 * gkcd (no NOTIFY_SOCKET).
 */
#ifndef GKCD_NOTIFY_H
#define GKCD_NOTIFY_H

#include <stddef.h>
#include <uv.h>

/* Fills buf with the STATUS= text ("serving: 3 connections, ..."). */
typedef void (*notify_status_fn)(void *arg, char *buf, size_t len);

typedef struct {
  uv_timer_t status_timer, watchdog_timer;
  int notifying;         /* NOTIFY_SOCKET was set: the timers run */
  int watchdog;          /* WatchdogSec is set: watchdog_timer runs */
  notify_status_fn status;
  void *arg;
} gkcd_notify;

/* READY=1 and the first STATUS=, then STATUS= every few seconds and the
 * watchdog pings, on loop's timers. */
void notify_ready(gkcd_notify *n, uv_loop_t *loop, notify_status_fn status, void *arg);
/* STOPPING=1 and a last STATUS=. */
void notify_stopping(gkcd_notify *n);
/* Closes the timers; after uv_run has returned. */
void notify_close(gkcd_notify *n);

#endif
