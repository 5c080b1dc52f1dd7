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

typedef struct gkcd_server gkcd_server;

void notify_ready(gkcd_server *srv);
void notify_stopping(gkcd_server *srv);
/* Closes the timers; after uv_run has returned. */
void notify_close(gkcd_server *srv);

#endif
