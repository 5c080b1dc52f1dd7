/* client.c: bench_rpc's raw client, thin on purpose so that it costs the
 * same against gkcd and the echo server: one thread per connection sending
 * the template's bytes with a patched msgid, replies framed with
 * proto_frame_scan and only their header [1, msgid, nil, ...] checked. */
#include <errno.h>
#include <msgpack.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "bench_common.h"
#include "proto_frame.h"
#include "proto_rpc.h"
#include "rpc.h"

#define READ_CHUNK (64 * 1024)

int client_connect(const char *path) {
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) bench_die("socket: %s", strerror(errno));
  if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0)
    bench_die("connect %s: %s", path, strerror(errno));
  return fd;
}

typedef struct {
  int fd;
  const request_tpl *tpl;
  int echo;             /* the reply is the request itself, not [1, msgid, nil, ...] */
  int window;           /* 1: sequential */
  uint64_t count;       /* requests to complete */
  double cap_s;         /* stop sending new ones after this long */
  uint32_t *lat;        /* count entries: round trips in ns */
  pthread_barrier_t *barrier;
  /* out */
  uint64_t done, t0, t1;
  char err[256];
} worker;

/* Checks one reply frame; returns its msgid, or -1 with w->err set. */
static int64_t check_reply(worker *w, const unsigned char *f, size_t len,
                           const proto_frame_info *info) {
  if (!info->msgid_known || len < 4 || f[0] != 0x94 || f[1] != (w->echo ? 0x00 : 0x01)) {
    snprintf(w->err, sizeof w->err, "reply is not [%d, msgid, ...]", w->echo ? 0 : 1);
    return -1;
  }
  if (w->echo) return info->msgid;
  size_t idl = f[2] < 0x80 ? 1 : f[2] == 0xcc ? 2 : f[2] == 0xcd ? 3 : f[2] == 0xce ? 5 : len;
  if (2 + idl < len && f[2 + idl] == 0xc0) return info->msgid; /* error: nil */
  /* A failure: decode it properly to say why. */
  msgpack_zone zone;
  msgpack_object root;
  proto_response resp;
  size_t off = 0;
  snprintf(w->err, sizeof w->err, "malformed reply");
  if (msgpack_zone_init(&zone, 1024)) {
    if (msgpack_unpack((const char *)f, len, &off, &zone, &root) == MSGPACK_UNPACK_SUCCESS &&
        proto_response_parse(&root, &resp) == 0 && resp.error)
      snprintf(w->err, sizeof w->err, "gkcd answered %.*s: %.*s", (int)resp.code_len, resp.code,
               (int)resp.message_len, resp.message);
    msgpack_zone_destroy(&zone);
  }
  return -1;
}

static int send_all(worker *w, const unsigned char *p, size_t n) {
  while (n > 0) {
    ssize_t s = send(w->fd, p, n, MSG_NOSIGNAL);
    if (s < 0 && errno == EINTR) continue;
    if (s < 0) {
      snprintf(w->err, sizeof w->err, "send: %s", strerror(errno));
      return -1;
    }
    p += s;
    n -= (size_t)s;
  }
  return 0;
}

/* Keeps min(window, what is left) requests in flight on one connection until
 * count have come back or cap_s has passed.  Slot s carries msgids s, s+W,
 * s+2W..., so a reply finds its slot whatever order replies come in.  The
 * requests queued while handling one read's replies go out in one send. */
static void *worker_main(void *arg) {
  worker *w = arg;
  const proto_limits lim = {1u << 20, PROTO_MAX_OBJECTS, PROTO_MAX_DEPTH};
  const size_t rl = w->tpl->len;
  const int W = w->window;
  uint64_t *sent_at = calloc((size_t)W, sizeof *sent_at);
  uint32_t *next_id = calloc((size_t)W, sizeof *next_id);
  int *pending = calloc((size_t)W, sizeof *pending);
  char *busy = calloc((size_t)W, 1);
  unsigned char *out = malloc((size_t)W * rl);
  size_t in_cap = READ_CHUNK + 4096, in_len = 0;
  unsigned char *in = malloc(in_cap);
  if (!sent_at || !next_id || !pending || !busy || !out || !in) {
    snprintf(w->err, sizeof w->err, "out of memory");
    pthread_barrier_wait(w->barrier);
    goto out;
  }
  for (int s = 0; s < W; s++) next_id[s] = (uint32_t)s;

  uint64_t sent = 0, done = 0;
  int inflight = 0, npend = 0;
  pthread_barrier_wait(w->barrier);
  w->t0 = bench_clock_ns();
  const uint64_t deadline = w->t0 + (uint64_t)(w->cap_s * 1e9);
  for (int s = 0; s < W && sent < w->count; s++, sent++) pending[npend++] = s;
  for (;;) {
    if (npend > 0) {
      for (int i = 0; i < npend; i++) {
        memcpy(out + (size_t)i * rl, w->tpl->bytes, rl);
        request_put_be32(out + (size_t)i * rl + w->tpl->msgid_off, next_id[pending[i]]);
        busy[pending[i]] = 1;
      }
      uint64_t t = bench_clock_ns();
      for (int i = 0; i < npend; i++) sent_at[pending[i]] = t;
      if (send_all(w, out, (size_t)npend * rl)) goto out;
      inflight += npend;
      npend = 0;
    }
    if (inflight == 0) break;
    ssize_t n = recv(w->fd, in + in_len, in_cap - in_len, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      snprintf(w->err, sizeof w->err, "recv: %s", n ? strerror(errno) : "server closed");
      goto out;
    }
    uint64_t t = bench_clock_ns();
    int more = t < deadline;
    in_len += (size_t)n;
    size_t pos = 0;
    for (;;) {
      proto_frame_info info;
      ssize_t r = proto_frame_scan(in + pos, in_len - pos, &lim, &info);
      if (r == PROTO_PARTIAL) break;
      if (r < 0) {
        snprintf(w->err, sizeof w->err, "reply is not msgpack (%zd)", r);
        goto out;
      }
      int64_t id = check_reply(w, in + pos, (size_t)r, &info);
      if (id < 0) goto out;
      int s = (int)((uint32_t)id % (uint32_t)W);
      if (!busy[s] || (uint32_t)id != next_id[s]) {
        snprintf(w->err, sizeof w->err, "reply with unexpected msgid %lld", (long long)id);
        goto out;
      }
      uint64_t d = t - sent_at[s];
      w->lat[done++] = d > UINT32_MAX ? UINT32_MAX : (uint32_t)d;
      inflight--;
      busy[s] = 0;
      next_id[s] += (uint32_t)W;
      if (more && sent < w->count) pending[npend++] = s, sent++;
      pos += (size_t)r;
    }
    memmove(in, in + pos, in_len - pos);
    in_len -= pos;
    if (in_cap - in_len < 4096) {
      snprintf(w->err, sizeof w->err, "a reply larger than %zu bytes", in_cap - 4096);
      goto out;
    }
  }
  w->done = done;
out:
  w->t1 = bench_clock_ns();
  free(sent_at);
  free(next_id);
  free(pending);
  free(busy);
  free(out);
  free(in);
  return NULL;
}

void client_run(const int *fds, int nconn, const request_tpl *tpl, int echo, int window,
                uint64_t count, double cap_s, pid_t srv_pid, run_stats *st) {
  uint64_t per = (count + (uint64_t)nconn - 1) / (uint64_t)nconn;
  worker *ws = calloc((size_t)nconn, sizeof *ws);
  pthread_t *th = calloc((size_t)nconn, sizeof *th);
  uint32_t *lat = malloc((size_t)(per * (uint64_t)nconn) * sizeof *lat);
  pthread_barrier_t bar;
  if (!ws || !th || !lat) bench_die("out of memory for %llu samples", (unsigned long long)count);
  pthread_barrier_init(&bar, NULL, (unsigned)nconn);
  for (int i = 0; i < nconn; i++)
    ws[i] = (worker){.fd = fds[i], .tpl = tpl, .echo = echo, .window = window, .count = per,
                     .cap_s = cap_s, .lat = lat + (size_t)i * per, .barrier = &bar};
  int64_t srv0 = srv_pid > 0 ? cputime_proc_ns(srv_pid) : -1, busy0, steal0, busy1, steal1;
  cputime_machine_ns(&busy0, &steal0);
  uint64_t cli0 = cputime_self_ns();
  for (int i = 0; i < nconn; i++)
    if ((errno = pthread_create(&th[i], NULL, worker_main, &ws[i])))
      bench_die("pthread_create: %s", strerror(errno));
  for (int i = 0; i < nconn; i++) pthread_join(th[i], NULL);
  uint64_t cli1 = cputime_self_ns();
  int64_t srv1 = srv0 >= 0 ? cputime_proc_ns(srv_pid) : -1;
  cputime_machine_ns(&busy1, &steal1);
  pthread_barrier_destroy(&bar);

  memset(st, 0, sizeof *st);
  uint64_t t0 = UINT64_MAX, t1 = 0, n = 0;
  for (int i = 0; i < nconn; i++) {
    if (ws[i].err[0])
      bench_die("%s %s, connection %d of %d: %s", echo ? "echo" : "gkcd", tpl->method, i + 1,
                nconn, ws[i].err);
    if (ws[i].t0 < t0) t0 = ws[i].t0;
    if (ws[i].t1 > t1) t1 = ws[i].t1;
    /* Packs the samples together: a capped run fills only a prefix. */
    memmove(lat + n, ws[i].lat, ws[i].done * sizeof *lat);
    n += ws[i].done;
  }
  st->requests = n;
  st->seconds = (double)(t1 - t0) / 1e9;
  st->rps = n / st->seconds;
  stats_latency(lat, n, st);
  st->cli_cpu_us = (double)(cli1 - cli0) / 1e3 / (double)n;
  st->srv_cpu_us = srv0 >= 0 && srv1 >= srv0 ? (double)(srv1 - srv0) / 1e3 / (double)n : -1;
  if (busy1 > 0 && st->srv_cpu_us >= 0) {
    st->other_ns = (double)(busy1 - busy0) - (double)(cli1 - cli0) - (double)(srv1 - srv0);
    st->steal_ns = (double)(steal1 - steal0);
  }
  free(ws);
  free(th);
  free(lat);
}
