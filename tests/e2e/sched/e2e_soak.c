/* e2e_soak.c: load and soak test of one gkcd, bounded in count and time.
 *
 * 64 client threads, one connection each, send a mixed stream of requests
 * (sgemm of small shapes with random transposes/alpha/beta, reduce sum/min/max
 * of lengths from 1 to 64 Ki, spmv on small random CSR, ping, status, and
 * about 2% deliberately invalid requests whose error code is known), keeping
 * a window of 4 to 16 requests in flight per connection (pipelined).  16 of
 * the threads close their connection every 50 to 400 requests, once every
 * reply of the connection has arrived, and reconnect (connection churn).
 *
 * Every reply is checked: a result against a float64 reference computed
 * here, an error by its code and by the argument its message names; every
 * msgid is answered exactly once (a reply to a msgid not in flight fails the
 * test, as does any byte left over when a connection is closed, and a window
 * that gets no reply for 60 s).
 *
 * Before the run (after a warm-up of the same load) and after it, with all
 * client connections closed, it compares the daemon's open fds (exactly
 * equal), its RSS (bounded: see the comment at the check) and its status
 * counters (per method requests and errors, and bad_requests: exactly what
 * was sent; in_flight and queued 0; one connection, the one asking), then
 * stops it with SIGTERM and expects exit 0 and no warning in its log (under
 * ASan, LeakSanitizer turns a leak at exit into a non-zero status).
 *
 * Count: 102,400 requests (1,600 per connection) in both the normal and the
 * ASan build: on 2 cores that takes about 1-1.5 s, and 2-3 s under ASan, so
 * there is no need to scale it down.  GKC_SOAK_REQUESTS=N runs another count
 * (3,000,000 takes about 35 s).  GKC_TEST_SEED replays each thread's random
 * stream (the interleaving differs, of course).
 */
#include <errno.h>
#include <math.h>
#include <msgpack.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fixture.h"
#include "proto_methods.h"
#include "proto_rpc.h"
#include "rawrpc.h"
#include "soak.h"
#include "test.h"

/* Relative tolerance of a reduce sum, scaled by the sum of magnitudes: the
 * CPU backend accumulates in float64 (error ~ n * 2^-53), other backends may
 * accumulate in float32. */
static double g_sum_tol = 1e-5;

static void lat_add(lat_list *l, double v) {
  if (l->n == l->cap) {
    l->cap = l->cap ? l->cap * 2 : 1024;
    l->v = realloc(l->v, l->cap * sizeof *l->v);
    if (!l->v) TEST_FAIL("out of memory");
  }
  l->v[l->n++] = v;
}

/* ------------------------------------------------------------------------ */
/* replies                                                                   */

static uint64_t get_u64(worker *w, const msgpack_object *map, const char *key) {
  const msgpack_object *o = proto_map_get(map, key);
  if (!o || o->type != MSGPACK_OBJECT_POSITIVE_INTEGER) WFAIL(w, "status: '%s' missing or not an unsigned integer", key);
  return o->via.u64;
}

static int str_eq(const msgpack_object *o, const char *s) {
  return o && o->type == MSGPACK_OBJECT_STR && o->via.str.size == strlen(s) &&
         memcmp(o->via.str.ptr, s, o->via.str.size) == 0;
}

static void check_status_result(worker *w, const msgpack_object *res) {
  if (!res || res->type != MSGPACK_OBJECT_MAP) WFAIL(w, "status result is not a map");
  uint64_t in_flight = get_u64(w, res, "in_flight"), queued = get_u64(w, res, "queued");
  uint64_t conns = get_u64(w, res, "connections");
  (void)get_u64(w, res, "bad_requests");
  if (in_flight > (uint64_t)w->max_in_flight)
    WFAIL(w, "status in_flight %llu > %ld, the most the clients can have sent",
          (unsigned long long)in_flight, w->max_in_flight);
  if (queued > in_flight) WFAIL(w, "status queued %llu > in_flight %llu", (unsigned long long)queued,
                                (unsigned long long)in_flight);
  if (conns < 1) WFAIL(w, "status connections = 0 on a live connection");
  const msgpack_object *ms = proto_map_get(res, "methods");
  if (!ms || ms->type != MSGPACK_OBJECT_MAP) WFAIL(w, "status has no methods map");
  uint64_t total = 0;
  for (int m = 0; m < PROTO_M_COUNT; m++) {
    const msgpack_object *mo = proto_map_get(ms, proto_method_name(m));
    if (!mo) WFAIL(w, "status methods lacks %s", proto_method_name(m));
    uint64_t req = get_u64(w, mo, "requests"), err = get_u64(w, mo, "errors");
    if (err > req) WFAIL(w, "status %s: errors %llu > requests %llu", proto_method_name(m),
                         (unsigned long long)err, (unsigned long long)req);
    total += req;
  }
  /* Counters never go backwards, as seen from one client. */
  if (total < w->last_status_total)
    WFAIL(w, "status requests went from %llu down to %llu", (unsigned long long)w->last_status_total,
          (unsigned long long)total);
  w->last_status_total = total;
}

static void check_floats(worker *w, const slot *s, const msgpack_object *res, const char *key,
                         double rel) {
  const msgpack_object *o = proto_map_get(res, key);
  if (!o || o->type != MSGPACK_OBJECT_BIN || o->via.bin.size != s->nwant * 4)
    WFAIL(w, "msgid %u (%s): '%s' missing or of %u bytes, expected %zu", s->msgid,
          proto_method_name(s->cls), key, o && o->type == MSGPACK_OBJECT_BIN ? o->via.bin.size : 0,
          s->nwant * 4);
  for (size_t i = 0; i < s->nwant; i++) {
    float got;
    memcpy(&got, o->via.bin.ptr + 4 * i, 4);
    double tol = rel * s->mag[i] + 1e-30;
    if (!(fabs((double)got - s->want[i]) <= tol))
      WFAIL(w, "msgid %u (%s): %s[%zu] = %.9g, reference %.9g (tol %.3g)", s->msgid,
            proto_method_name(s->cls), key, i, got, s->want[i], tol);
  }
  const msgpack_object *algo = proto_map_get(res, "algo");
  if (!algo || algo->type != MSGPACK_OBJECT_STR || algo->via.str.size == 0)
    WFAIL(w, "msgid %u (%s): no algo in the result", s->msgid, proto_method_name(s->cls));
}

static void check_result(worker *w, const slot *s, const msgpack_object *res) {
  switch (s->cls) {
    case PROTO_M_PING: {
      const msgpack_object *p = proto_map_get(res, "protocol");
      const msgpack_object *v = proto_map_get(res, "version");
      const msgpack_object *b = proto_map_get(res, "backend");
      if (!p || p->type != MSGPACK_OBJECT_POSITIVE_INTEGER || p->via.u64 != 1 || !v ||
          v->type != MSGPACK_OBJECT_STR || !b || b->type != MSGPACK_OBJECT_STR)
        WFAIL(w, "msgid %u: malformed ping result", s->msgid);
      break;
    }
    case PROTO_M_STATUS: check_status_result(w, res); break;
    case PROTO_M_SGEMM: check_floats(w, s, res, "c", 1e-5); break;
    case PROTO_M_SPMV: check_floats(w, s, res, "y", 1e-6); break;
    case PROTO_M_REDUCE: {
      const msgpack_object *v = proto_map_get(res, "value");
      const msgpack_object *n = proto_map_get(res, "n");
      if (!v || v->type != MSGPACK_OBJECT_FLOAT64)
        WFAIL(w, "msgid %u (reduce): value missing or not float64", s->msgid);
      if (!n || n->type != MSGPACK_OBJECT_POSITIVE_INTEGER || n->via.u64 != s->n)
        WFAIL(w, "msgid %u (reduce): n wrong (expected %zu)", s->msgid, s->n);
      double tol = s->op == 0 ? g_sum_tol * s->mag[0] : 0.0;
      if (!(fabs(v->via.f64 - s->want[0]) <= tol))
        WFAIL(w, "msgid %u (reduce %s of %zu): %.17g, reference %.17g (tol %.3g)", s->msgid,
              s->op == 0 ? "sum" : s->op == 1 ? "min" : "max", s->n, v->via.f64, s->want[0], tol);
      break;
    }
    default: WFAIL(w, "msgid %u: success for a request of no method", s->msgid);
  }
}

/* Checks the frame at w->buf[0..len) and frees its slot. */
static void handle_reply(worker *w, size_t len) {
  double t1 = rr_now_s();
  msgpack_object root;
  size_t off = 0;
  msgpack_zone_clear(&w->zone);
  if (msgpack_unpack((const char *)w->buf, len, &off, &w->zone, &root) != MSGPACK_UNPACK_SUCCESS ||
      off != len)
    WFAIL(w, "reply does not decode");
  if (root.type != MSGPACK_OBJECT_ARRAY || root.via.array.size != 4)
    WFAIL(w, "reply is not an array of 4");
  const msgpack_object *a = root.via.array.ptr;
  if (a[0].type != MSGPACK_OBJECT_POSITIVE_INTEGER || a[0].via.u64 != 1)
    WFAIL(w, "reply type is not 1");
  if (a[1].type != MSGPACK_OBJECT_POSITIVE_INTEGER || a[1].via.u64 > UINT32_MAX)
    WFAIL(w, "reply msgid is %s", a[1].type == MSGPACK_OBJECT_NIL ? "nil" : "not a uint32");
  uint32_t msgid = (uint32_t)a[1].via.u64;
  slot *s = NULL;
  for (int i = 0; i < MAX_WINDOW && !s; i++)
    if (w->slots[i].used && w->slots[i].msgid == msgid) s = &w->slots[i];
  if (!s) {
    uint32_t seq = msgid - w->id_base;
    if (msgid >= w->id_base && seq < (uint32_t)w->quota && w->answered[seq])
      WFAIL(w, "msgid %u answered twice", msgid);
    WFAIL(w, "reply for msgid %u, which is not in flight on this connection", msgid);
  }
  const char *what = s->inv >= 0 ? "invalid" : proto_method_name(s->cls);
  if (s->inv >= 0) {
    if (a[2].type != MSGPACK_OBJECT_MAP || a[3].type != MSGPACK_OBJECT_NIL)
      WFAIL(w, "msgid %u (invalid request kind %d): expected %s, got a %s", msgid, s->inv,
            INV[s->inv].code, a[2].type == MSGPACK_OBJECT_NIL ? "success" : "malformed error");
    const msgpack_object *code = proto_map_get(&a[2], "code");
    const msgpack_object *msg = proto_map_get(&a[2], "message");
    if (!str_eq(code, INV[s->inv].code))
      WFAIL(w, "msgid %u (invalid request kind %d): code %.*s, expected %s", msgid, s->inv,
            code && code->type == MSGPACK_OBJECT_STR ? (int)code->via.str.size : 1,
            code && code->type == MSGPACK_OBJECT_STR ? code->via.str.ptr : "?", INV[s->inv].code);
    char text[400] = "";
    if (msg && msg->type == MSGPACK_OBJECT_STR)
      snprintf(text, sizeof text, "%.*s", (int)msg->via.str.size, msg->via.str.ptr);
    if (!strstr(text, INV[s->inv].needle))
      WFAIL(w, "msgid %u: message \"%s\" does not name %s", msgid, text, INV[s->inv].needle);
  } else {
    if (a[2].type != MSGPACK_OBJECT_NIL) {
      const msgpack_object *code = a[2].type == MSGPACK_OBJECT_MAP ? proto_map_get(&a[2], "code") : NULL;
      const msgpack_object *msg = a[2].type == MSGPACK_OBJECT_MAP ? proto_map_get(&a[2], "message") : NULL;
      WFAIL(w, "msgid %u (%s) failed: %.*s: %.*s", msgid, what,
            code && code->type == MSGPACK_OBJECT_STR ? (int)code->via.str.size : 1,
            code && code->type == MSGPACK_OBJECT_STR ? code->via.str.ptr : "?",
            msg && msg->type == MSGPACK_OBJECT_STR ? (int)msg->via.str.size : 0,
            msg && msg->type == MSGPACK_OBJECT_STR ? msg->via.str.ptr : "");
    }
    check_result(w, s, &a[3]);
  }
  lat_add(&w->lat[s->inv >= 0 ? CLS_BAD : s->cls], (t1 - s->t0) * 1e6);
  w->answered[msgid - w->id_base] = 1;
  s->used = 0;
  w->inflight--;
  w->replies++;
  w->bytes_in += len;
  memmove(w->buf, w->buf + len, w->have - len);
  w->have -= len;
}

/* The length of a complete frame at the start of w->buf, or 0. */
static size_t frame_ready(worker *w) {
  static const proto_limits lim = {(size_t)1 << 40, 1u << 20, 32};
  if (w->have == 0) return 0;
  proto_frame_info info;
  ssize_t r = proto_frame_scan(w->buf, w->have, &lim, &info);
  if (r < 0) WFAIL(w, "the daemon sent a malformed frame (%zd)", r);
  return (size_t)(r > 0 ? r : 0);
}

/* Waits for at least one complete frame (bounded), handles every complete
 * frame received. */
static void receive(worker *w) {
  size_t len;
  while ((len = frame_ready(w)) == 0) {
    if (w->cap - w->have < 65536) {
      w->cap = w->cap * 2 + 65536;
      w->buf = realloc(w->buf, w->cap);
      if (!w->buf) TEST_FAIL("out of memory");
    }
    struct pollfd p = {w->fd, POLLIN, 0};
    int pr = poll(&p, 1, REPLY_TIMEOUT_MS);
    if (pr < 0 && errno == EINTR) continue;
    if (pr == 0) {
      char ids[MAX_WINDOW * 12 + 1] = "";
      for (int i = 0; i < MAX_WINDOW; i++)
        if (w->slots[i].used)
          snprintf(ids + strlen(ids), sizeof ids - strlen(ids), " %u", w->slots[i].msgid);
      WFAIL(w, "no reply for %d s; %d in flight, never answered:%s", REPLY_TIMEOUT_MS / 1000,
            w->inflight, ids);
    }
    ssize_t n = recv(w->fd, w->buf + w->have, w->cap - w->have, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) WFAIL(w, "recv: %s", strerror(errno));
    if (n == 0) WFAIL(w, "the daemon closed the connection with %d requests in flight", w->inflight);
    w->have += (size_t)n;
  }
  do handle_reply(w, len);
  while ((len = frame_ready(w)) > 0);
}

/* Every reply of the session is in: nothing more may come. */
static void end_session(worker *w) {
  if (w->have) WFAIL(w, "%zu bytes beyond the last expected reply", w->have);
  unsigned char extra[64];
  ssize_t n = recv(w->fd, extra, sizeof extra, MSG_DONTWAIT);
  if (n > 0) WFAIL(w, "%zd bytes arrived after the last expected reply (a duplicate?)", n);
  close(w->fd);
  w->fd = -1;
}

static int g_finished; /* workers done, for the main thread's sampling loop */

static void *run_worker(void *arg) {
  worker *w = arg;
  long seq = 0;
  w->fd = fixture_connect(w->f);
  w->sessions = 1;
  long session_left = w->churn ? 50 + (long)rnd(w, 351) : w->quota;
  while (w->replies < w->quota) {
    w->sb.size = 0;
    while (w->inflight < w->window && seq < w->quota && session_left > 0) {
      add_request(w, seq++);
      session_left--;
    }
    if (w->sb.size) test_send_all(w->fd, w->sb.data, w->sb.size);
    w->bytes_out += w->sb.size;
    if (w->inflight) receive(w);
    if (w->inflight == 0 && session_left == 0 && seq < w->quota) {
      end_session(w); /* churn: close once every reply is in, and reconnect */
      w->fd = fixture_connect(w->f);
      w->sessions++;
      session_left = 50 + (long)rnd(w, 351);
    }
  }
  end_session(w);
  for (long i = 0; i < w->quota; i++)
    if (!w->answered[i]) WFAIL(w, "msgid %u never answered", w->id_base + (uint32_t)i);
  __atomic_add_fetch(&g_finished, 1, __ATOMIC_RELEASE);
  return NULL;
}

/* ------------------------------------------------------------------------ */
/* one phase: NCONN threads, total requests                                  */

typedef struct {
  long total, replies, sessions, inv;
  uint64_t bytes_out, bytes_in;
  long sent_req[PROTO_M_COUNT], sent_err[PROTO_M_COUNT], sent_bad;
  lat_list lat[NCLS];
  double seconds;
  long rss_peak;
} phase_result;

static int window_of(int id) { return 4 + (id % 5) * 3; } /* 4, 7, 10, 13, 16 */

static void run_phase(const fixture *f, long total, uint64_t seed, phase_result *pr) {
  static pthread_t th[NCONN];
  static worker w[NCONN];
  long max_in_flight = 0;
  for (int i = 0; i < NCONN; i++) max_in_flight += window_of(i);
  memset(pr, 0, sizeof *pr);
  pr->total = total;
  for (int i = 0; i < NCONN; i++) {
    memset(&w[i], 0, sizeof w[i]);
    w[i].f = f;
    w[i].id = i;
    w[i].window = window_of(i);
    w[i].churn = i % 4 == 1;
    w[i].rng = seed + (uint64_t)i * 0x9e3779b97f4a7c15ull;
    w[i].quota = total / NCONN + (i < total % NCONN);
    /* msgids of thread i lie in [i * 2^26, (i+1) * 2^26): every encoding
     * from fixint up to uint32 near 2^32 is used. */
    w[i].id_base = (uint32_t)i << 26;
    w[i].max_in_flight = max_in_flight;
    if (w[i].quota >= (1L << 26) - 1) TEST_FAIL("too many requests per connection");
    w[i].answered = calloc((size_t)w[i].quota + 1, 1);
    w[i].scratch = malloc(RD_MAX * sizeof(float));
    if (!w[i].answered || !w[i].scratch) TEST_FAIL("out of memory");
    msgpack_sbuffer_init(&w[i].sb);
    msgpack_packer_init(&w[i].pk, &w[i].sb, msgpack_sbuffer_write);
    msgpack_zone_init(&w[i].zone, 8192);
  }
  g_finished = 0;
  double t0 = rr_now_s();
  for (int i = 0; i < NCONN; i++) ASSERT_EQ(pthread_create(&th[i], NULL, run_worker, &w[i]), 0);
  /* The main thread samples the daemon's RSS while the clients run. */
  while (__atomic_load_n(&g_finished, __ATOMIC_ACQUIRE) < NCONN) {
    long rss = fixture_rss_kib(f);
    if (rss > pr->rss_peak) pr->rss_peak = rss;
    rr_sleep_ms(50);
  }
  for (int i = 0; i < NCONN; i++) pthread_join(th[i], NULL);
  pr->seconds = rr_now_s() - t0;
  for (int i = 0; i < NCONN; i++) {
    pr->replies += w[i].replies;
    pr->bytes_out += w[i].bytes_out;
    pr->bytes_in += w[i].bytes_in;
    pr->sessions += w[i].sessions;
    pr->inv += w[i].sent_inv;
    pr->sent_bad += w[i].sent_bad;
    for (int m = 0; m < PROTO_M_COUNT; m++) {
      pr->sent_req[m] += w[i].sent_req[m];
      pr->sent_err[m] += w[i].sent_err[m];
    }
    for (int c = 0; c < NCLS; c++) {
      for (size_t j = 0; j < w[i].lat[c].n; j++) lat_add(&pr->lat[c], w[i].lat[c].v[j]);
      free(w[i].lat[c].v);
    }
    for (int s = 0; s < MAX_WINDOW; s++) free(w[i].slots[s].want), free(w[i].slots[s].mag);
    free(w[i].answered);
    free(w[i].scratch);
    free(w[i].buf);
    msgpack_sbuffer_destroy(&w[i].sb);
    msgpack_zone_destroy(&w[i].zone);
  }
  ASSERT_EQ(pr->replies, total);
}

static void phase_free(phase_result *pr) {
  for (int c = 0; c < NCLS; c++) free(pr->lat[c].v);
}

/* ------------------------------------------------------------------------ */
/* the daemon's side                                                         */

typedef struct {
  uint64_t req[PROTO_M_COUNT], err[PROTO_M_COUNT], bad, in_flight, queued, conns, max_queue;
} counters;

/* One status call on a fresh connection. */
static void read_status(const fixture *f, counters *c) {
  rr_fetched st;
  rr_fetch(f, 4242, "status", &st);
  const proto_response r = st.r;
  if (r.error) TEST_FAIL("status failed: %.*s", (int)r.message_len, r.message);
  ASSERT_EQ(r.msgid, 4242);
  worker dummy = {.id = -1, .max_in_flight = INT64_MAX};
  c->in_flight = get_u64(&dummy, r.result, "in_flight");
  c->queued = get_u64(&dummy, r.result, "queued");
  c->conns = get_u64(&dummy, r.result, "connections");
  c->bad = get_u64(&dummy, r.result, "bad_requests");
  const msgpack_object *ms = proto_map_get(r.result, "methods");
  ASSERT(ms && ms->type == MSGPACK_OBJECT_MAP);
  for (int m = 0; m < PROTO_M_COUNT; m++) {
    const msgpack_object *mo = proto_map_get(ms, proto_method_name(m));
    ASSERT(mo != NULL);
    c->req[m] = get_u64(&dummy, mo, "requests");
    c->err[m] = get_u64(&dummy, mo, "errors");
  }
  const msgpack_object *lim = proto_map_get(r.result, "limits");
  ASSERT(lim && lim->type == MSGPACK_OBJECT_MAP);
  c->max_queue = get_u64(&dummy, lim, "max_queue");
  rr_fetched_free(&st);
}

/* Waits until the daemon's fd count stops changing (10 equal readings 20 ms
 * apart) and returns it. */
static int settled_nfds(const fixture *f) {
  int last = fixture_nfds(f), same = 0;
  for (int i = 0; i < 500 && same < 10; i++) {
    rr_sleep_ms(20);
    int n = fixture_nfds(f);
    same = n == last ? same + 1 : 0;
    last = n;
  }
  return last;
}

/* Waits (up to 5 s) for the fd count to come back to want. */
static int wait_nfds(const fixture *f, int want) {
  int n = fixture_nfds(f);
  for (int i = 0; i < 500 && n != want; i++) {
    rr_sleep_ms(10);
    n = fixture_nfds(f);
  }
  return n;
}

static double pct(const lat_list *l, double p) {
  if (!l->n) return NAN;
  size_t i = (size_t)(p * (double)(l->n - 1) + 0.5);
  return l->v[i];
}

/* Lines of the daemon's log at level warning or worse ("<0>".."<4>"), and
 * anything a sanitizer wrote there. */
static int log_warnings(const fixture *f) {
  FILE *fp = fopen(f->log, "r");
  if (!fp) return -1;
  char line[1024];
  int n = 0;
  while (fgets(line, sizeof line, fp))
    if ((line[0] == '<' && line[1] >= '0' && line[1] <= '4' && line[2] == '>') ||
        strstr(line, "Sanitizer") || strstr(line, "runtime error")) {
      if (n++ < 20) fprintf(stderr, "gkcd log: %s", line);
    }
  fclose(fp);
  return n;
}

int main(void) {
  signal(SIGPIPE, SIG_IGN);
  uint64_t seed = test_seed();
  int sanitize = rr_env_flag("GKC_SANITIZE");
  long total = DEFAULT_TOTAL;
  const char *requests = getenv("GKC_SOAK_REQUESTS");
  if (requests) total = strtol(requests, NULL, 10);
  if (total < NCONN) TEST_FAIL("GKC_SOAK_REQUESTS must be at least %d", NCONN);
  if (total < 100000) fprintf(stderr, "note: GKC_SOAK_REQUESTS=%ld, fewer than the usual 100k\n", total);

  fixture f;
  /* A queue wait as long as a window may go without a reply: this test
   * holds every reply to its result and the daemon to its fds and memory,
   * not to admission.  With the default 5 s a daemon starved by another
   * test's load (ctest -j 2 under ASan on 2 cores) rightly answered busy,
   * and the run failed on it; e2e_timeouts tests the queue wait. */
  const char *const args[] = {"--queue-wait", "60", NULL};
  fixture_start(&f, args, NULL);
  {
    /* Which backend: the CPU one sums in float64, others may not. */
    rr_fetched ping;
    rr_fetch(&f, 1, "ping", &ping);
    const proto_response r = ping.r;
    ASSERT(!r.error);
    const msgpack_object *be = proto_map_get(r.result, "backend");
    if (str_eq(be, "cpu")) g_sum_tol = 1e-9;
    fprintf(stderr, "backend %.*s, reduce sum tolerance %.0e x sum|x|\n",
            be && be->type == MSGPACK_OBJECT_STR ? (int)be->via.str.size : 1,
            be && be->type == MSGPACK_OBJECT_STR ? be->via.str.ptr : "?", g_sum_tol);
    rr_fetched_free(&ping);
  }
  int fds_start = settled_nfds(&f);

  /* Warm-up: the same load, smaller, so that worker threads, OpenBLAS and
   * OpenMP buffers and malloc arenas exist before the baseline. */
  phase_result warm;
  run_phase(&f, (long)NCONN * WARMUP_PER_CONN, seed ^ 0x5eedull, &warm);
  phase_free(&warm);
  int fds0 = settled_nfds(&f);
  if (fds0 != fds_start)
    TEST_FAIL("daemon fds %d after the warm-up's connections closed, %d before it", fds0, fds_start);
  long rss0 = fixture_rss_kib(&f);
  counters c0;
  read_status(&f, &c0);
  long max_in_flight = 0;
  for (int i = 0; i < NCONN; i++) max_in_flight += window_of(i);
  /* No request may be refused "busy": the windows must fit the queue. */
  if ((uint64_t)max_in_flight > c0.max_queue)
    TEST_FAIL("windows add up to %ld, more than --max-queue %llu", max_in_flight,
              (unsigned long long)c0.max_queue);
  fprintf(stderr, "baseline after warm-up (%.2f s): RSS %ld KiB, %d fds\n", warm.seconds, rss0, fds0);

  phase_result pr;
  run_phase(&f, total, seed, &pr);

  /* All client connections are closed: the daemon's fds come back exactly. */
  int fds1 = wait_nfds(&f, fds0);
  long rss1 = fixture_rss_kib(&f);
  int st;
  if (waitpid(f.pid, &st, WNOHANG) == f.pid) {
    rr_dump_log(&f, 200);
    TEST_FAIL("gkcd died during the run: status %#x", st);
  }
  counters c1;
  read_status(&f, &c1);

  int failed = 0;
#define SOAK_CHECK(cond, ...)                                       \
  do {                                                              \
    if (!(cond)) {                                                  \
      failed++;                                                     \
      fprintf(stderr, "%s:%d: CHECK FAILED: %s: ", __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                                 \
      fputc('\n', stderr);                                          \
    }                                                               \
  } while (0)

  SOAK_CHECK(fds1 == fds0, "daemon fds %d after the run, %d before", fds1, fds0);
  /* Counters: exactly what was sent.  The status call that reads c1 counts
   * itself (c0's call is already in c0). */
  for (int m = 0; m < PROTO_M_COUNT; m++) {
    uint64_t want_req = (uint64_t)pr.sent_req[m] + (m == PROTO_M_STATUS);
    SOAK_CHECK(c1.req[m] - c0.req[m] == want_req, "%s requests +%llu, sent %llu", proto_method_name(m),
               (unsigned long long)(c1.req[m] - c0.req[m]), (unsigned long long)want_req);
    SOAK_CHECK(c1.err[m] - c0.err[m] == (uint64_t)pr.sent_err[m], "%s errors +%llu, sent %ld invalid",
               proto_method_name(m), (unsigned long long)(c1.err[m] - c0.err[m]), pr.sent_err[m]);
  }
  SOAK_CHECK(c1.bad - c0.bad == (uint64_t)pr.sent_bad, "bad_requests +%llu, sent %ld",
             (unsigned long long)(c1.bad - c0.bad), pr.sent_bad);
  SOAK_CHECK(c1.in_flight == 0, "in_flight %llu", (unsigned long long)c1.in_flight);
  SOAK_CHECK(c1.queued == 0, "queued %llu", (unsigned long long)c1.queued);
  SOAK_CHECK(c1.conns == 1, "connections %llu with only the status client connected",
             (unsigned long long)c1.conns);
  /* RSS bound: before + 64 MiB in a normal build, before + 512 MiB under
   * ASan.  Measured from the post-warm-up baseline (2 cores, see
   * tests/ROBUSTNESS.md), normal build: after 102,400 requests -1.8 to
   * +18.8 MiB over 26 runs, peak during the run +19 to +28 MiB; after 1M and
   * 3M requests -1.5 to +29 MiB, peak +31 to +37 MiB.  That is the high-water
   * mark of what is in flight (at most 634 requests and their replies, the
   * connections' 64 KiB read buffers) left as free space in the malloc arenas
   * of the daemon's threads; it does not grow with the count.  Requests
   * average 5.2 KB and every reply is packed into an 8 KiB buffer (msgpack
   * sbuffer's first allocation; replies average 360 B), so leaking either
   * once per request would add hundreds of MiB over 100k requests; 64 MiB
   * is 1.7 times the worst peak seen and well below that.  (A leaked connection is caught
   * by the fd and "connections" checks, not by this one.)  Under ASan freed
   * memory waits in the quarantine (256 MiB by default) before reuse, so RSS
   * climbs until that is full: +281 to +328 MiB after 102,400 requests over
   * 13 runs, +329 to +351 MiB after 1M; 512 MiB leaves margin.  There, leaks
   * are caught by LeakSanitizer at the daemon's exit instead (a non-zero exit
   * status below).  A larger ASAN_OPTIONS=quarantine_size_mb needs a larger
   * bound. */
  long bound_kib = (sanitize ? 512L : 64L) * 1024;
  SOAK_CHECK(rss1 - rss0 < bound_kib, "RSS grew by %ld KiB (bound %ld KiB)", rss1 - rss0, bound_kib);

  /* SIGTERM: exit 0 (under ASan: and no leak, no error report).  Waited for
   * here rather than in fixture_stop so that the log can be read first. */
  ASSERT_EQ(kill(f.pid, SIGTERM), 0);
  pid_t wp = 0;
  for (int i = 0; i < 3000 && wp == 0; i++) {
    wp = waitpid(f.pid, &st, WNOHANG);
    if (wp == 0) rr_sleep_ms(10);
  }
  if (wp != f.pid) {
    kill(f.pid, SIGKILL);
    waitpid(f.pid, &st, 0);
    SOAK_CHECK(0, "gkcd did not exit within 30 s of SIGTERM");
  }
  f.pid = 0;
  SOAK_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "gkcd exit status %#x (%s %d)", st,
             WIFSIGNALED(st) ? "signal" : "exit", WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
  /* Nothing worse than info in the log: the invalid requests of the mix are
   * logged at debug level, and a clean run has no warning. */
  int warnings = log_warnings(&f);
  SOAK_CHECK(warnings == 0, "%d warning or error lines in the daemon's log", warnings);
  if (failed) rr_dump_log(&f, 200);
  fixture_stop(&f, SIGTERM); /* removes its directory */

  /* Figures. */
  printf("e2e_soak: %ld requests (%ld invalid on purpose) over %d connections, %ld connection "
         "sessions (churn), windows 4..16, %s build\n",
         pr.replies, pr.inv, NCONN, pr.sessions, sanitize ? "ASan/UBSan" : "normal");
  printf("e2e_soak: %.2f s, %.0f requests/s; every reply checked, none lost, none duplicated\n",
         pr.seconds, (double)pr.replies / pr.seconds);
  printf("e2e_soak: %.1f MiB of requests sent (%.0f B each on average), %.1f MiB of replies received "
         "(%.0f B each)\n", (double)pr.bytes_out / 1048576.0, (double)pr.bytes_out / (double)pr.replies,
         (double)pr.bytes_in / 1048576.0, (double)pr.bytes_in / (double)pr.replies);
  printf("e2e_soak: latency from send to reply (pipelined, includes queueing), microseconds:\n");
  printf("  %-8s %8s %10s %10s %10s\n", "method", "count", "p50", "p99", "max");
  for (int c = 0; c < NCLS; c++) {
    lat_list *l = &pr.lat[c];
    if (!l->n) continue; /* methods this test does not send */
    rr_sort_doubles(l->v, l->n);
    printf("  %-8s %8zu %10.0f %10.0f %10.0f\n", c == CLS_BAD ? "invalid" : proto_method_name(c), l->n,
           pct(l, 0.5), pct(l, 0.99), l->n ? l->v[l->n - 1] : NAN);
  }
  printf("e2e_soak: status counters: ");
  for (int m = 0; m < PROTO_M_COUNT; m++)
    if (c1.req[m] != c0.req[m])
      printf("%s %llu/%llu err, ", proto_method_name(m), (unsigned long long)(c1.req[m] - c0.req[m]),
           (unsigned long long)(c1.err[m] - c0.err[m]));
  printf("bad_requests %llu (deltas over the run)\n", (unsigned long long)(c1.bad - c0.bad));
  printf("e2e_soak: RSS %ld KiB before, %ld KiB after (%+ld KiB, bound %ld), peak %ld KiB; "
         "fds %d before, %d after; exit status %d\n",
         rss0, rss1, rss1 - rss0, bound_kib, pr.rss_peak, fds0, fds1,
         WIFEXITED(st) ? WEXITSTATUS(st) : -1);
  phase_free(&pr);
  if (failed) {
    fprintf(stderr, "e2e_soak: %d checks failed\n", failed);
    return 1;
  }
  return 0;
}
