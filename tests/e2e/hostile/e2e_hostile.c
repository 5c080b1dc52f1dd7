/* e2e_hostile.c: every attack of issue 10 at once, beside honest clients.
 *
 * One gkcd on the CPU backend (--memory-budget 512M, --max-conn-reply-bytes
 * 64M, --send-timeout 3, --request-timeout 3, --max-connections 40 and as
 * many per user, since every client here has the test's uid).  Eight
 * well-behaved clients connect first and keep their slots; each sends small
 * sgemm and reduce requests one at a time, every result checked against a
 * float64 reference.  They run alone for a while (the idle phase), then for
 * GKC_HOSTILE_SECONDS (default 60; 25 in a sanitizer build, whose daemon is
 * several times slower) beside:
 *
 *  - 4 clients that never read: each uploads a resident array, registers a
 *    shared-memory region, asks for four 64 MiB sgemm results and reads
 *    nothing; gkcd must close each --send-timeout after its replies stall,
 *    and the client comes back;
 *  - 20 slowloris clients sending a ping one byte a second; each must be
 *    told `timeout` and closed --request-timeout after its first byte, and
 *    comes back;
 *  - a client opening connections until it is refused, which must be with
 *    the too_many_connections notification naming --max-connections; it
 *    holds what it got for 3 s, closes it all and starts again.
 *
 * Checked: every well-behaved request answered right; the refusals and the
 * closings as above, each within its deadline plus a slack (4 s: the sweep
 * runs every 0.75 s, and the machine is loaded); gkcd's RSS, sampled from
 * /proc every 20 ms, never above its idle RSS + --memory-budget + 64 MiB;
 * after the attackers go, status shows nothing left behind: no resident
 * array, matrix or region, nothing in flight, queued or waiting, and zero
 * bytes in memory.used, memory.input and memory.replies; the daemon's fds
 * are back to what they were, and it exits 0.
 *
 * It also prints the well-behaved clients' round trips, p50 and p99, idle
 * and under attack (bench/hostile_latency.sh runs it for that; timings are
 * never asserted).
 */
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fixture.h"
#include "probe.h"
#include "rawrpc.h"
#include "test.h"

#define NGOOD 8
#define NSLOW 4
#define NLORIS 20
#define MAX_CONNS 40
#define DEADLINE_S 3.0
#define SLACK_S 4.0
#define MiB (1024L * 1024)
#define BUDGET (512 * MiB)

static int g_phase;   /* 0 idle, 1 hostile, 2 stop: the good clients' clock */
static int g_attack;  /* attackers run while set */

static int phase(void) { return __atomic_load_n(&g_phase, __ATOMIC_ACQUIRE); }
static int attacking(void) { return __atomic_load_n(&g_attack, __ATOMIC_ACQUIRE); }

/* Prints the first few problems of each kind, counts all of them. */
static pthread_mutex_t g_print = PTHREAD_MUTEX_INITIALIZER;
static void note(long *count, const char *who, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void note(long *count, const char *who, const char *fmt, ...) {
  pthread_mutex_lock(&g_print);
  if (++*count <= 5) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", who);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
  }
  pthread_mutex_unlock(&g_print);
}

/* ------------------------------------------------------------------------ */
/* the well-behaved clients                                                  */

typedef struct {
  double *v;
  size_t n, cap;
} lat_list;

static void lat_add(lat_list *l, double v) {
  if (l->n == l->cap) {
    l->cap = l->cap ? l->cap * 2 : 1024;
    l->v = realloc(l->v, l->cap * sizeof *l->v);
    if (!l->v) TEST_FAIL("out of memory");
  }
  l->v[l->n++] = v;
}

typedef struct {
  const fixture *f;
  int id;
  uint64_t seed;
  rr_conn c;
  lat_list lat[2]; /* round trips in ms, idle and hostile */
  long sent, wrong;
} good_client;

static void *good_main(void *vp) {
  good_client *g = vp;
  rr_rng = g->seed;
  char why[300], who[32];
  snprintf(who, sizeof who, "good client %d", g->id);
  uint32_t id = 1;
  for (int ph; (ph = phase()) < 2; id++) {
    int ok;
    double t0 = rr_now_s();
    if (test_rand_u64(&rr_rng) % 2) {
      int m = 1 + (int)(test_rand_u64(&rr_rng) % 64), n = 1 + (int)(test_rand_u64(&rr_rng) % 64),
          k = 1 + (int)(test_rand_u64(&rr_rng) % 64);
      ok = pb_sgemm_ok(&g->c, id, m, n, k, 30000, why, sizeof why);
    } else {
      ok = pb_reduce_ok(&g->c, id, 1 + test_rand_u64(&rr_rng) % 4096, 30000, why, sizeof why);
    }
    double ms = (rr_now_s() - t0) * 1e3;
    g->sent++;
    if (!ok) note(&g->wrong, who, "%s (after %.0f ms)", why, ms);
    if (phase() == ph) lat_add(&g->lat[ph], ms);
  }
  return NULL;
}

/* ------------------------------------------------------------------------ */
/* clients that never read                                                   */

typedef struct {
  const fixture *f;
  int id;
  uint64_t seed;
  long rounds, closed_in_time, closed_late, refused, problems;
  double worst; /* seconds from the requests to the close */
} slow_client;

/* Connects and sets up what the client will hold: 0, 1 when refused, -1 on
 * anything else (counted). */
static int slow_setup(slow_client *s, rr_conn *c) {
  rr_open(c, s->f);
  float data[256];
  for (int i = 0; i < 256; i++) data[i] = (float)i;
  rr_reply r;
  rr_call(c, 1, "upload", ARGS(AB("data", data, sizeof data), AS("dtype", "f32")), &r, 10000);
  int refused = r.notification && !strcmp(r.code, "too_many_connections");
  int ok = rr_reply_ok(&r, 1);
  if (!ok && !refused) note(&s->problems, "never-reader", "upload: %s", rr_reply_desc(&r));
  rr_reply_free(&r);
  if (!ok) return refused ? 1 : -1;
  int mfd = pb_memfd(64 << 10);
  rr_frame fr;
  rr_frame_init(&fr);
  rr_pack_request(&fr, 2, "shm_register", ARGS(AI("bytes", 64 << 10)));
  int e = mfd >= 0 ? pb_send_with_fd(c->fd, fr.sb.data, fr.sb.size, mfd) : errno;
  rr_frame_free(&fr);
  if (mfd >= 0) close(mfd);
  rr_get_reply(c, &r, 10000);
  ok = !e && rr_reply_ok(&r, 2);
  if (!ok) note(&s->problems, "never-reader", "shm_register: %s", rr_reply_desc(&r));
  rr_reply_free(&r);
  return ok ? 0 : -1;
}

static void *slow_main(void *vp) {
  slow_client *s = vp;
  rr_rng = s->seed;
  enum { DIM = 4096, NREQ = 4 }; /* 64 MiB replies */
  float *a = rr_rand_floats(DIM), *b = rr_rand_floats(DIM);
  rr_frame fr;
  pb_pack_outer_sgemms(&fr, 10, NREQ, DIM, DIM, a, 0, b, 0);
  while (attacking()) {
    rr_conn c;
    int st = slow_setup(s, &c);
    if (st != 0) {
      s->refused += st == 1;
      rr_close(&c);
      rr_sleep_ms(500);
      continue;
    }
    s->rounds++;
    double t0 = rr_now_s();
    /* 128 KiB of requests: more than the socket holds once gkcd stops
     * reading, so send without blocking and give up on the rest. */
    size_t off = 0;
    while (off < fr.sb.size) {
      ssize_t w = send(c.fd, fr.sb.data + off, fr.sb.size - off, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (w <= 0) break;
      off += (size_t)w;
    }
    /* Never read; wait for gkcd to hang up (POLLRDHUP with replies unread). */
    double closed = -1;
    while (rr_now_s() - t0 < DEADLINE_S + SLACK_S + 20) {
      struct pollfd p = {c.fd, POLLRDHUP, 0};
      if (poll(&p, 1, 100) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR))) {
        closed = rr_now_s() - t0;
        break;
      }
      if (!attacking() && rr_now_s() - t0 < DEADLINE_S) break; /* the end: not a round */
    }
    if (closed >= 0) {
      if (closed > s->worst) s->worst = closed;
      if (closed >= DEADLINE_S - 0.1 && closed <= DEADLINE_S + SLACK_S)
        s->closed_in_time++;
      else
        note(&s->closed_late, "never-reader", "closed %.2f s after its requests", closed);
    } else if (attacking() || rr_now_s() - t0 >= DEADLINE_S) {
      note(&s->closed_late, "never-reader", "not closed %.0f s after its requests", rr_now_s() - t0);
    } else {
      s->rounds--;
    }
    rr_close(&c);
  }
  rr_frame_free(&fr);
  free(a), free(b);
  return NULL;
}

/* ------------------------------------------------------------------------ */
/* slowloris                                                                 */

static const unsigned char PING[] = {0x94, 0x00, 0x05, 0xa4, 'p', 'i', 'n', 'g', 0x91, 0x80};

typedef struct {
  const fixture *f;
  long rounds, in_time, late, refused, problems;
  double worst;
} loris_stats;

typedef struct {
  rr_conn c;
  int open;
  size_t sent;
  double t_first, t_next;
  int told;
} loris;

static void *loris_main(void *vp) {
  loris_stats *ls = vp;
  static loris L[NLORIS];
  memset(L, 0, sizeof L);
  while (attacking()) {
    double now = rr_now_s();
    for (int i = 0; i < NLORIS; i++) {
      loris *l = &L[i];
      if (!l->open) {
        if (now < l->t_next) continue;
        rr_open(&l->c, ls->f);
        l->open = 1, l->sent = 0, l->told = 0;
        l->t_next = now;
      }
      if (l->sent < sizeof PING - 1 && now >= l->t_next) {
        if (l->sent == 0) l->t_first = now;
        rr_send_some(l->c.fd, PING + l->sent++, 1);
        l->t_next = now + 1.0;
      }
      rr_reply r;
      rr_get_reply(&l->c, &r, 0);
      if (r.got && r.notification && !strcmp(r.code, "timeout") && strstr(r.msg, "--request-timeout")) {
        l->told = 1;
      } else if (r.got && r.notification && !strcmp(r.code, "too_many_connections")) {
        ls->refused++;
        l->told = -1;
      } else if (r.got) {
        note(&ls->problems, "slowloris", "unexpected %s", rr_reply_desc(&r));
      } else if (r.rf == RF_CLOSED || r.rf == RF_MIDFRAME) {
        double took = now - l->t_first;
        if (l->told == 1) {
          ls->rounds++;
          if (took > ls->worst) ls->worst = took;
          if (took >= DEADLINE_S - 0.1 && took <= DEADLINE_S + SLACK_S)
            ls->in_time++;
          else
            note(&ls->late, "slowloris", "closed %.2f s after its first byte", took);
        } else if (l->told == 0) {
          note(&ls->problems, "slowloris", "closed without a word after %.2f s", took);
        }
        rr_close(&l->c);
        l->open = 0;
        l->t_next = now + (l->told == -1 ? 1.0 : 0.05);
      } else if (l->told != -1 && l->sent > 0 && now - l->t_first > DEADLINE_S + SLACK_S + 5) {
        note(&ls->late, "slowloris", "still open %.1f s after its first byte", now - l->t_first);
        rr_close(&l->c);
        l->open = 0;
      }
      rr_reply_free(&r);
    }
    rr_sleep_ms(20);
  }
  for (int i = 0; i < NLORIS; i++)
    if (L[i].open) rr_close(&L[i].c);
  return NULL;
}

/* ------------------------------------------------------------------------ */
/* a client opening connections until refused                                */

typedef struct {
  const fixture *f;
  long cycles, refused_right, problems, most_held;
} opener_stats;

static void *opener_main(void *vp) {
  opener_stats *o = vp;
  static rr_conn held[MAX_CONNS + 8];
  while (attacking()) {
    int n = 0, refused = 0;
    while (n < MAX_CONNS + 8 && attacking()) {
      rr_conn c;
      rr_open(&c, o->f);
      rr_reply r;
      rr_get_reply(&c, &r, 100); /* a refusal is sent at once; a slot, nothing */
      if (r.got && r.notification && !strcmp(r.code, "too_many_connections")) {
        refused = 1;
        if (strstr(r.msg, "--max-connections 40"))
          o->refused_right++;
        else
          note(&o->problems, "opener", "refused with %s", r.msg);
      }
      int slot = !r.got && r.rf == RF_TIMEOUT;
      if (!refused && !slot) note(&o->problems, "opener", "a new connection got %s", rr_reply_desc(&r));
      rr_reply_free(&r);
      if (refused || !slot) {
        rr_close(&c);
        if (refused) break;
        continue;
      }
      held[n++] = c;
    }
    if (!refused && attacking()) note(&o->problems, "opener", "opened %d connections, never refused", n);
    o->cycles += refused;
    if (n > o->most_held) o->most_held = n;
    for (double t0 = rr_now_s(); rr_now_s() - t0 < 3 && attacking();) rr_sleep_ms(50);
    for (int i = 0; i < n; i++) rr_close(&held[i]);
    rr_sleep_ms(200);
  }
  return NULL;
}

/* ------------------------------------------------------------------------ */

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double pct(double *v, size_t n, double p) {
  if (!n) return NAN;
  size_t i = (size_t)(p * (double)(n - 1) + 0.5);
  return v[i];
}

static void report(good_client *g, int ph, const char *name) {
  lat_list all = {0};
  for (int i = 0; i < NGOOD; i++)
    for (size_t j = 0; j < g[i].lat[ph].n; j++) lat_add(&all, g[i].lat[ph].v[j]);
  qsort(all.v, all.n, sizeof *all.v, cmp_d);
  fprintf(stderr, "hostile latency, %-7s: %zu requests, round trip p50 %.3f ms, p99 %.3f ms, max %.3f ms\n", name,
          all.n, pct(all.v, all.n, 0.5), pct(all.v, all.n, 0.99), pct(all.v, all.n, 1.0));
  free(all.v);
}

int main(void) {
  double t_start = rr_now_s();
  uint64_t seed = test_seed();
  rr_rng = seed;
  signal(SIGPIPE, SIG_IGN);
  int sanitized = rr_env_flag("GKC_SANITIZE");
  double seconds = pb_env_num("GKC_HOSTILE_SECONDS", sanitized ? 25 : 60);
  double idle_s = pb_env_num("GKC_HOSTILE_IDLE_SECONDS", seconds / 6 < 10 ? seconds / 6 : 10);
  fprintf(stderr, "hostile: %.0f s of attack after %.0f s idle%s\n", seconds, idle_s,
          sanitized && !getenv("GKC_HOSTILE_SECONDS") ? " (25 s by default in a sanitizer build)" : "");

  const char *env[] = {pb_asan_env(), NULL};
  const char *const args[] = {"--memory-budget", "512M", "--max-conn-reply-bytes", "64M", "--send-timeout", "3",
                              "--request-timeout", "3", "--max-connections", "40", "--max-conn-per-user", "40",
                              NULL};
  fixture f;
  fixture_start(&f, args, env);
  pb_wait_status(&f, "connections", 1, 5000);

  static good_client g[NGOOD];
  pthread_t gth[NGOOD];
  for (int i = 0; i < NGOOD; i++) {
    g[i].f = &f;
    g[i].id = i;
    g[i].seed = seed + 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1);
    rr_open(&g[i].c, &f);
    CHECK(rr_ping(&g[i].c, 5000, NULL, 0), "well-behaved client %d not served", i);
  }
  for (int i = 0; i < NGOOD; i++) pthread_create(&gth[i], NULL, good_main, &g[i]);
  for (double t0 = rr_now_s(); rr_now_s() - t0 < idle_s;) rr_sleep_ms(50);
  long rss0 = fixture_rss_kib(&f);
  int fds0 = fixture_nfds(&f);

  /* The attack. */
  rr_ctx = "the hostile mix";
  pb_rss_watch rw;
  pb_rss_start(&rw, &f, 20);
  __atomic_store_n(&g_phase, 1, __ATOMIC_RELEASE);
  __atomic_store_n(&g_attack, 1, __ATOMIC_RELEASE);
  static slow_client slow[NSLOW];
  pthread_t sth[NSLOW], lth, oth;
  for (int i = 0; i < NSLOW; i++) {
    slow[i].f = &f;
    slow[i].id = i;
    slow[i].seed = seed ^ (0x51ull << i);
    pthread_create(&sth[i], NULL, slow_main, &slow[i]);
  }
  loris_stats ls = {&f, 0, 0, 0, 0, 0, 0};
  pthread_create(&lth, NULL, loris_main, &ls);
  opener_stats os = {&f, 0, 0, 0, 0};
  pthread_create(&oth, NULL, opener_main, &os);
  double t_attack = rr_now_s();
  while (rr_now_s() - t_attack < seconds) rr_sleep_ms(100);
  __atomic_store_n(&g_attack, 0, __ATOMIC_RELEASE);
  for (int i = 0; i < NSLOW; i++) pthread_join(sth[i], NULL);
  pthread_join(lth, NULL);
  pthread_join(oth, NULL);
  __atomic_store_n(&g_phase, 2, __ATOMIC_RELEASE);
  for (int i = 0; i < NGOOD; i++) pthread_join(gth[i], NULL);
  long rss_max = pb_rss_stop(&rw);

  /* What each side saw. */
  long sent = 0, wrong = 0;
  for (int i = 0; i < NGOOD; i++) sent += g[i].sent, wrong += g[i].wrong;
  fprintf(stderr, "hostile: well-behaved clients: %ld requests, %ld wrong\n", sent, wrong);
  CHECK(wrong == 0 && sent > 0, "well-behaved clients: %ld of %ld requests not answered right", wrong, sent);
  long rounds = 0, in_time = 0, late = 0, refused = 0, problems = 0;
  double worst = 0;
  for (int i = 0; i < NSLOW; i++) {
    rounds += slow[i].rounds, in_time += slow[i].closed_in_time, late += slow[i].closed_late;
    refused += slow[i].refused, problems += slow[i].problems;
    if (slow[i].worst > worst) worst = slow[i].worst;
  }
  fprintf(stderr, "hostile: never-readers: %ld rounds, %ld closed in time (slowest %.2f s), %ld late, %ld"
          " refused a slot, %ld other problems\n", rounds, in_time, worst, late, refused, problems);
  CHECK(rounds >= NSLOW && in_time == rounds && late == 0 && problems == 0,
        "never-readers: %ld rounds, %ld closed within --send-timeout %.0f s + %.0f s, %ld late, %ld problems", rounds,
        in_time, DEADLINE_S, SLACK_S, late, problems);
  fprintf(stderr, "hostile: slowloris: %ld closed (slowest %.2f s after its first byte), %ld in time, %ld late,"
          " %ld refused a slot, %ld other problems\n", ls.rounds, ls.worst, ls.in_time, ls.late, ls.refused,
          ls.problems);
  CHECK(ls.rounds >= NLORIS && ls.in_time == ls.rounds && ls.late == 0 && ls.problems == 0,
        "slowloris: %ld closed, %ld within --request-timeout %.0f s + %.0f s, %ld late, %ld problems", ls.rounds,
        ls.in_time, DEADLINE_S, SLACK_S, ls.late, ls.problems);
  fprintf(stderr, "hostile: opener: %ld cycles refused with the right message, at most %ld connections held,"
          " %ld problems\n", os.refused_right, os.most_held, os.problems);
  CHECK(os.refused_right >= 1 && os.refused_right == os.cycles && os.problems == 0,
        "opener: %ld refusals naming --max-connections 40 in %ld cycles, %ld problems", os.refused_right, os.cycles,
        os.problems);
  long bound = (BUDGET + 64 * MiB) / 1024;
  fprintf(stderr, "hostile: gkcd RSS %ld KiB idle, max %ld KiB under attack (%ld samples; growth %ld KiB, bound"
          " --memory-budget + 64 MiB = %ld KiB)\n", rss0, rss_max, rw.samples, rss_max - rss0, bound);
  CHECK(rss_max - rss0 < bound, "gkcd RSS grew by %ld KiB under attack", rss_max - rss0);
  report(g, 0, "idle");
  report(g, 1, "hostile");

  /* Nothing left behind: the well-behaved connections are still open and
   * idle, everything else is gone. */
  rr_ctx = "after the attack";
  const char *paths[] = {"connections", "in_flight", "queued", "budget_waiting", "memory.used", "memory.input",
                         "memory.replies", "memory.jobs", "resident.arrays", "resident.matrices",
                         "resident.regions", "resident.bytes"};
  enum { NP = sizeof paths / sizeof paths[0] };
  double st[NP];
  int clean = 0;
  for (double t0 = rr_now_s(); rr_now_s() - t0 < 10 && !clean; rr_sleep_ms(50)) {
    if (pb_status_on(&g[0].c, paths, NP, st) != 0) continue;
    clean = st[0] == NGOOD;
    for (int i = 1; i < NP; i++) clean &= st[i] == 0;
  }
  for (int i = 0; i < NP; i++)
    CHECK(st[i] == (i == 0 ? NGOOD : 0), "status %s = %g after the attackers left", paths[i], st[i]);
  int fds = fds0;
  for (double t0 = rr_now_s(); rr_now_s() - t0 < 5; rr_sleep_ms(50))
    if ((fds = fixture_nfds(&f)) <= fds0) break;
  CHECK(fds <= fds0, "gkcd has %d fds open, %d before the attack", fds, fds0);
  int served = 0;
  for (int i = 0; i < NGOOD; i++) served += rr_ping(&g[i].c, 5000, NULL, 0);
  CHECK(served == NGOOD, "%d of %d well-behaved connections still served", served, NGOOD);
  for (int i = 0; i < NGOOD; i++) {
    rr_close(&g[i].c);
    free(g[i].lat[0].v), free(g[i].lat[1].v);
  }
  if (rr_failed) rr_dump_log(&f, 80);
  int stt = fixture_stop(&f, SIGTERM);
  CHECK(WIFEXITED(stt) && WEXITSTATUS(stt) == 0, "gkcd exit status %#x", stt);
  rr_print_totals("e2e_hostile", t_start);
  return rr_failed ? 1 : 0;
}
