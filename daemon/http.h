/* http.h: GET /metrics over HTTP (--metrics-listen), with libmicrohttpd.
 *
 * libmicrohttpd parses HTTP on a thread of its own; the daemon's state
 * belongs to the event loop thread.  A scrape therefore asks the loop for
 * the text: the HTTP thread wakes the loop with a uv_async and waits on a
 * condition variable until the loop has rendered a fresh exposition (or a
 * few seconds, or shutdown, then answers 503).  Fresh numbers on every
 * scrape and no work while nobody scrapes, at the price of one loop wake-up
 * per scrape; scrapes that arrive together share one rendering.
 *
 * Without libmicrohttpd at build time, http_start refuses a non-empty
 * address and says why.
 */
#ifndef GKCD_HTTP_H
#define GKCD_HTTP_H

struct gkcd_server;

/* Starts serving when srv->cfg.metrics_listen is set ("ADDR:PORT",
 * "[V6ADDR]:PORT", or ":PORT"/"PORT" for 127.0.0.1).  0, or -1 after
 * logging why (the message names --metrics-listen). */
int http_start(struct gkcd_server *srv);
/* Stops the HTTP thread (waiting scrapes get 503) and closes the loop's
 * handle.  Safe when http_start did nothing. */
void http_stop(struct gkcd_server *srv);

#endif
