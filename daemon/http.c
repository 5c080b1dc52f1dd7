/* http.c: see http.h. */
#include "http.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

#ifndef GKC_HAVE_MHD

int http_start(gkcd_http **out, uv_loop_t *loop, const char *listen, http_render_fn render,
               void *arg) {
  (void)loop, (void)render, (void)arg;
  *out = NULL;
  if (!listen[0]) return 0;
  log_err("--metrics-listen %s: this gkcd was built without libmicrohttpd (install "
          "libmicrohttpd-dev and rebuild); the 'metrics' method still answers", listen);
  return -1;
}

void http_stop(gkcd_http **h) { *h = NULL; }

#else

#include <errno.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <unistd.h>
#include <microhttpd.h>
#include <netdb.h>
#include <pthread.h>
#include <sys/socket.h>
#include <time.h>

#define HTTP_WAIT_S 5 /* a loop that does not answer in this long gets the scrape a 503 */

struct gkcd_http {
  http_render_fn render;
  void *arg;
  struct MHD_Daemon *mhd;
  uv_async_t wake;     /* HTTP thread -> loop: render */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  /* Under mu: scrapes asked for / renderings done (a scrape waits until
   * done reaches the value asked had when it asked), the latest text, and
   * shutdown. */
  uint64_t asked, done;
  char *text;
  size_t len;
  int stopping;
};

/* On the loop: one rendering answers every scrape waiting now. */
static void on_wake(uv_async_t *a) {
  struct gkcd_http *h = a->data;
  pthread_mutex_lock(&h->mu);
  uint64_t upto = h->asked;
  pthread_mutex_unlock(&h->mu);
  size_t len = 0;
  char *text = h->render(h->arg, &len); /* NULL: out of memory, the scrape gets 503 */
  pthread_mutex_lock(&h->mu);
  free(h->text);
  h->text = text;
  h->len = len;
  h->done = upto;
  pthread_cond_broadcast(&h->cv);
  pthread_mutex_unlock(&h->mu);
}

/* On the HTTP thread: a copy of a rendering made after this call began, or
 * NULL (shutdown, timeout, out of memory). */
static char *fetch(struct gkcd_http *h, size_t *len) {
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += HTTP_WAIT_S;
  char *copy = NULL;
  pthread_mutex_lock(&h->mu);
  uint64_t mine = ++h->asked;
  if (uv_async_send(&h->wake) == 0) {
    int rc = 0;
    while (!h->stopping && h->done < mine && rc != ETIMEDOUT)
      rc = pthread_cond_timedwait(&h->cv, &h->mu, &until);
    if (!h->stopping && h->done >= mine && h->text && (copy = malloc(h->len + 1))) {
      memcpy(copy, h->text, h->len + 1);
      *len = h->len;
    }
  }
  pthread_mutex_unlock(&h->mu);
  return copy;
}

static enum MHD_Result reply(struct MHD_Connection *conn, unsigned status, const char *type,
                             char *body, size_t len, enum MHD_ResponseMemoryMode mode) {
  struct MHD_Response *r = MHD_create_response_from_buffer(len, body, mode);
  if (!r) {
    if (mode == MHD_RESPMEM_MUST_FREE) free(body);
    return MHD_NO;
  }
  MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
  if (status == MHD_HTTP_METHOD_NOT_ALLOWED) MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
  enum MHD_Result rc = MHD_queue_response(conn, status, r);
  MHD_destroy_response(r);
  return rc;
}

#define PLAIN "text/plain; charset=utf-8"

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload,
                                  size_t *upload_size, void **state) {
  struct gkcd_http *h = cls;
  (void)version, (void)upload, (void)state;
  if (strcmp(method, "GET") && strcmp(method, "HEAD")) {
    if (*upload_size) { /* a body we do not want: take it, answer once it is all read */
      *upload_size = 0;
      return MHD_YES;
    }
    static char msg[] = "only GET /metrics is served here\n";
    return reply(conn, MHD_HTTP_METHOD_NOT_ALLOWED, PLAIN, msg, sizeof msg - 1, MHD_RESPMEM_PERSISTENT);
  }
  if (strcmp(url, "/metrics") != 0) {
    static char msg[] = "not found: gkcd serves /metrics\n";
    return reply(conn, MHD_HTTP_NOT_FOUND, PLAIN, msg, sizeof msg - 1, MHD_RESPMEM_PERSISTENT);
  }
  size_t len = 0;
  char *text = fetch(h, &len);
  if (!text) {
    static char msg[] = "gkcd did not render its metrics (shutting down, or busy)\n";
    return reply(conn, MHD_HTTP_SERVICE_UNAVAILABLE, PLAIN, msg, sizeof msg - 1,
                 MHD_RESPMEM_PERSISTENT);
  }
  return reply(conn, MHD_HTTP_OK, "text/plain; version=0.0.4; charset=utf-8", text, len,
               MHD_RESPMEM_MUST_FREE);
}

/* Splits "ADDR:PORT", "[ADDR]:PORT", ":PORT" or "PORT" and resolves it. */
static int resolve(const char *spec, struct sockaddr_storage *ss, socklen_t *sslen, char *why,
                   size_t n) {
  char host[128] = "127.0.0.1";
  const char *port = spec, *colon = strrchr(spec, ':');
  if (spec[0] == '[') {
    const char *close = strchr(spec, ']');
    if (!close || close[1] != ':' || (size_t)(close - spec - 1) >= sizeof host) {
      snprintf(why, n, "expected [IPV6]:PORT");
      return -1;
    }
    snprintf(host, sizeof host, "%.*s", (int)(close - spec - 1), spec + 1);
    port = close + 2;
  } else if (colon) {
    if ((size_t)(colon - spec) >= sizeof host) {
      snprintf(why, n, "address too long");
      return -1;
    }
    if (colon > spec) snprintf(host, sizeof host, "%.*s", (int)(colon - spec), spec);
    port = colon + 1;
  }
  char *end;
  errno = 0;
  long p = strtol(port, &end, 10);
  if (!*port || *end || errno || p < 0 || p > 65535) {
    snprintf(why, n, "port '%s' is not a number from 0 to 65535", port);
    return -1;
  }
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                           .ai_flags = AI_PASSIVE | AI_NUMERICSERV}, *ai;
  int rc = getaddrinfo(host, port, &hints, &ai);
  if (rc) {
    snprintf(why, n, "address '%s': %s", host, gai_strerror(rc));
    return -1;
  }
  memcpy(ss, ai->ai_addr, ai->ai_addrlen);
  *sslen = ai->ai_addrlen;
  freeaddrinfo(ai);
  return 0;
}

/* libmicrohttpd's own complaints (a broken connection, ...) go to our log. */
static void mhd_log(void *cls, const char *fmt, va_list ap) {
  char msg[256];
  (void)cls;
  vsnprintf(msg, sizeof msg, fmt, ap);
  msg[strcspn(msg, "\n")] = 0;
  log_warn("metrics http: %s", msg);
}

/* A listening TCP socket on ss, or -1 with errno's text in why.  Bound here
 * rather than by libmicrohttpd so the error names the real cause. */
static int listen_tcp(const struct sockaddr_storage *ss, socklen_t len, char *why, size_t n) {
  int fd = socket(ss->ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0), one = 1;
  if (fd < 0) {
    snprintf(why, n, "socket: %s", strerror(errno));
    return -1;
  }
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (ss->ss_family == AF_INET6) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
  if (bind(fd, (const struct sockaddr *)ss, len) || listen(fd, 64)) {
    snprintf(why, n, "%s", strerror(errno));
    close(fd);
    return -1;
  }
  return fd;
}

static void on_closed(uv_handle_t *hd) {
  struct gkcd_http *h = hd->data;
  pthread_mutex_destroy(&h->mu);
  pthread_cond_destroy(&h->cv);
  free(h->text);
  free(h);
}

int http_start(gkcd_http **out, uv_loop_t *loop, const char *spec, http_render_fn render,
               void *arg) {
  *out = NULL;
  if (!spec[0]) return 0;
  char why[200];
  struct sockaddr_storage ss;
  socklen_t sslen;
  if (resolve(spec, &ss, &sslen, why, sizeof why)) {
    log_err("--metrics-listen %s: %s", spec, why);
    return -1;
  }
  int fd = listen_tcp(&ss, sslen, why, sizeof why);
  if (fd < 0) {
    log_err("--metrics-listen %s: cannot listen there: %s", spec, why);
    return -1;
  }
  struct gkcd_http *h = calloc(1, sizeof *h);
  if (!h) {
    close(fd);
    log_err("--metrics-listen: out of memory");
    return -1;
  }
  h->render = render;
  h->arg = arg;
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_REALTIME);
  if (pthread_mutex_init(&h->mu, NULL) || pthread_cond_init(&h->cv, &ca)) {
    pthread_condattr_destroy(&ca);
    close(fd);
    free(h);
    log_err("--metrics-listen: cannot create a mutex");
    return -1;
  }
  pthread_condattr_destroy(&ca);
  int rc = uv_async_init(loop, &h->wake, on_wake);
  if (rc) {
    pthread_mutex_destroy(&h->mu);
    pthread_cond_destroy(&h->cv);
    close(fd);
    free(h);
    log_err("--metrics-listen: uv_async_init: %s", uv_strerror(rc));
    return -1;
  }
  h->wake.data = h;
  uv_unref((uv_handle_t *)&h->wake); /* scrapes alone do not keep gkcd running */
  *out = h;                          /* from here on, http_stop cleans up */
  unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO | MHD_USE_ERROR_LOG;
  if (ss.ss_family == AF_INET6) flags |= MHD_USE_IPv6;
  h->mhd = MHD_start_daemon(flags, 0, NULL, NULL, on_request, h, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
                            MHD_OPTION_LISTEN_SOCKET, fd,
                            MHD_OPTION_CONNECTION_LIMIT, (unsigned)16,
                            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)10, MHD_OPTION_END);
  if (!h->mhd) {
    close(fd);
    log_err("--metrics-listen %s: libmicrohttpd could not start its thread", spec);
    return -1;
  }
  const union MHD_DaemonInfo *di = MHD_get_daemon_info(h->mhd, MHD_DAEMON_INFO_BIND_PORT);
  log_info("metrics: serving GET /metrics on %s (port %u)", spec, di ? di->port : 0u);
  return 0;
}

void http_stop(gkcd_http **hp) {
  struct gkcd_http *h = *hp;
  if (!h) return;
  *hp = NULL;
  pthread_mutex_lock(&h->mu);
  h->stopping = 1;
  pthread_cond_broadcast(&h->cv);
  pthread_mutex_unlock(&h->mu);
  if (h->mhd) MHD_stop_daemon(h->mhd); /* joins the thread: nothing sends on wake after this */
  uv_close((uv_handle_t *)&h->wake, on_closed);
}

#endif
