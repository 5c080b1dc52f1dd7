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

#include <stddef.h>
#include <uv.h>

typedef struct gkcd_http gkcd_http;

/* Renders the exposition on the loop thread: malloc'd text and its length,
 * or NULL (out of memory: the scrape gets 503). */
typedef char *(*http_render_fn)(void *arg, size_t *len);

/* Starts serving GET /metrics on listen ("ADDR:PORT", "[V6ADDR]:PORT", or
 * ":PORT"/"PORT" for 127.0.0.1); nothing when listen is empty.  Each
 * scrape wakes loop, which calls render(arg).  0, or -1 after logging why
 * (the message names --metrics-listen).  *out is set as soon as there is
 * something for http_stop to clean up, even when -1 is returned. */
int http_start(gkcd_http **out, uv_loop_t *loop, const char *listen, http_render_fn render,
               void *arg);
/* Stops the HTTP thread (waiting scrapes get 503), closes the loop's handle
 * and sets *h to NULL.  Safe when http_start did nothing. */
void http_stop(gkcd_http **h);

#endif
