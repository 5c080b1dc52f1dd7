/* test_reader: the reader threads (daemon/reader.c) on their own, over
 * socketpairs and a libuv loop of the test's: many tasks at once each
 * receiving byte for byte what its writer sent, a peer that stops in the
 * middle, a task cancelled while nothing arrives (its socket still usable
 * afterwards), descriptors sent with the bytes, a task submitted again from
 * its done hook, a body sent while another thread receives on the same
 * socket, a send cancelled and one failing, and the pool stopped and the
 * loop closed with nothing left.  Every task comes back exactly once.  The
 * threads run with SIGINT and SIGTERM blocked, though started from a
 * thread that has them unblocked (gkcd's loop thread).  No check reads a
 * time. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "reader.h"
#include "test.h"

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)

typedef struct {
  reader_task t;
  int back;        /* times done was called */
  int again;       /* submit once more from done, to this want */
  size_t again_want;
  reader_pool *pool;
} slot;

static int g_back; /* tasks back, over all slots */

static void on_done(reader_task *t) {
  slot *s = (slot *)t;
  s->back++;
  g_back++;
  if (s->again && t->status == READER_DONE) {
    s->again = 0;
    t->want = s->again_want;
    g_back--; /* it goes out again */
    ASSERT_EQ(reader_submit(s->pool, t, NULL), 0);
  }
}

static void run_until(uv_loop_t *loop, int back) {
  while (g_back < back) uv_run(loop, UV_RUN_ONCE);
}

typedef struct {
  int fd;
  const unsigned char *p;
  size_t n;
  int close_after;
} writer;

static void *writer_main(void *arg) {
  writer *w = arg;
  size_t off = 0;
  while (off < w->n) {
    size_t piece = w->n - off < 100 * KiB + 7 ? w->n - off : 100 * KiB + 7; /* not a multiple of anything */
    ssize_t k = send(w->fd, w->p + off, piece, MSG_NOSIGNAL);
    if (k < 0) TEST_FAIL("send");
    off += (size_t)k;
  }
  if (w->close_after) close(w->fd);
  return NULL;
}

static unsigned char *pattern(size_t n, unsigned seed) {
  unsigned char *p = malloc(n);
  ASSERT(p);
  uint32_t x = seed * 2654435761u + 1;
  for (size_t i = 0; i < n; i++) {
    x = x * 1664525u + 1013904223u;
    p[i] = (unsigned char)(x >> 24);
  }
  return p;
}

static void make_pair(int sv[2]) {
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  ASSERT_EQ(fcntl(sv[0], F_SETFL, O_NONBLOCK), 0); /* the daemon's side, as accepted */
}

/* Many tasks at once, each a few MiB from a writer thread of its own, some
 * starting with bytes already in the buffer; each submitted again from its
 * done hook for a second part. */
static void test_many(uv_loop_t *loop, reader_pool *pool) {
  enum { N = 12 };
  int sv[N][2];
  slot s[N];
  writer w[N];
  pthread_t th[N];
  unsigned char *src[N], *dst[N];
  size_t total[N];
  memset(s, 0, sizeof s);
  g_back = 0;
  for (int i = 0; i < N; i++) {
    make_pair(sv[i]);
    total[i] = 3 * MiB + (size_t)i * 77777;
    src[i] = pattern(total[i], (unsigned)i);
    dst[i] = malloc(total[i] + 64 * KiB);
    ASSERT(dst[i]);
    /* The loop has the first bytes already, as after its own reads. */
    size_t pre = (size_t)i * 1000;
    memcpy(dst[i], src[i], pre);
    s[i].t = (reader_task){.fd = sv[i][0], .buf = dst[i], .len = pre, .want = total[i] / 2,
                           .cap = total[i] + 64 * KiB, .done = on_done};
    s[i].again = 1;
    s[i].again_want = total[i];
    s[i].pool = pool;
    ASSERT_EQ(reader_submit(pool, &s[i].t, NULL), 0);
    w[i] = (writer){sv[i][1], src[i] + pre, total[i] - pre, 0};
    pthread_create(&th[i], NULL, writer_main, &w[i]);
  }
  ASSERT(pool->nthreads >= 1 && pool->nthreads <= pool->max_threads);
  run_until(loop, N);
  for (int i = 0; i < N; i++) {
    pthread_join(th[i], NULL);
    ASSERT_EQ(s[i].back, 2);
    ASSERT_EQ(s[i].t.status, READER_DONE);
    ASSERT_EQ(s[i].t.len, total[i]); /* nothing more was sent */
    ASSERT(memcmp(dst[i], src[i], total[i]) == 0);
    ASSERT_EQ(s[i].t.nfds, 0);
    close(sv[i][0]);
    close(sv[i][1]);
    free(src[i]);
    free(dst[i]);
  }
  ASSERT_EQ(pool->out, 0);
}

/* The peer stops in the middle: EOF with what it sent; and a reset. */
static void test_eof(uv_loop_t *loop, reader_pool *pool) {
  int sv[2];
  make_pair(sv);
  size_t n = 2 * MiB + 5;
  unsigned char *src = pattern(n, 99), *dst = malloc(2 * n);
  slot s = {0};
  s.t = (reader_task){.fd = sv[0], .buf = dst, .len = 0, .want = 2 * n, .cap = 2 * n, .done = on_done};
  g_back = 0;
  ASSERT_EQ(reader_submit(pool, &s.t, NULL), 0);
  writer w = {sv[1], src, n, 1};
  pthread_t th;
  pthread_create(&th, NULL, writer_main, &w);
  run_until(loop, 1);
  pthread_join(th, NULL);
  ASSERT_EQ(s.back, 1);
  ASSERT_EQ(s.t.status, READER_EOF);
  ASSERT_EQ(s.t.len, n);
  ASSERT(memcmp(dst, src, n) == 0);
  close(sv[0]);
  free(src);
  free(dst);
}

/* Nothing arrives: cancelled, it comes back CANCELLED, the socket is the
 * owner's again and still works (a reply written, a later byte read). */
static void test_cancel(uv_loop_t *loop, reader_pool *pool) {
  int sv[2];
  make_pair(sv);
  unsigned char buf[4 * KiB];
  slot s = {0};
  s.t = (reader_task){.fd = sv[0], .buf = buf, .len = 0, .want = sizeof buf, .cap = sizeof buf, .done = on_done};
  g_back = 0;
  ASSERT_EQ(reader_submit(pool, &s.t, NULL), 0);
  uv_run(loop, UV_RUN_NOWAIT);
  ASSERT_EQ(s.back, 0); /* nothing sent: still out */
  reader_cancel(&s.t);
  run_until(loop, 1);
  ASSERT_EQ(s.back, 1);
  ASSERT_EQ(s.t.status, READER_CANCELLED);
  ASSERT_EQ(s.t.len, 0);
  ASSERT_EQ(send(sv[0], "ok", 2, MSG_NOSIGNAL), 2);
  char two[2];
  ASSERT_EQ(recv(sv[1], two, 2, 0), 2);
  ASSERT_EQ(send(sv[1], "x", 1, MSG_NOSIGNAL), 1);
  ASSERT_EQ(recv(sv[0], two, 1, MSG_DONTWAIT), 1); /* the reader took nothing more */
  ASSERT_EQ(two[0], 'x');
  /* Cancelling a task that is back does nothing. */
  reader_cancel(&s.t);
  ASSERT_EQ(pool->out, 0);
  close(sv[0]);
  close(sv[1]);
}

/* Descriptors that come with the bytes are kept in the task, open. */
static void test_fds(uv_loop_t *loop, reader_pool *pool) {
  int sv[2];
  make_pair(sv);
  size_t n = 1 * MiB;
  unsigned char *src = pattern(n, 7), *dst = malloc(n);
  slot s = {0};
  s.t = (reader_task){.fd = sv[0], .buf = dst, .len = 0, .want = n, .cap = n, .done = on_done};
  g_back = 0;
  ASSERT_EQ(reader_submit(pool, &s.t, NULL), 0);
  /* Half, then a message with two descriptors and a few bytes, then the rest. */
  writer w = {sv[1], src, n / 2, 0};
  writer_main(&w);
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  union {
    char buf[CMSG_SPACE(2 * sizeof(int))];
    struct cmsghdr align;
  } ctl;
  memset(&ctl, 0, sizeof ctl);
  struct iovec iov = {src + n / 2, 16};
  struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf, .msg_controllen = sizeof ctl.buf};
  struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
  cm->cmsg_level = SOL_SOCKET;
  cm->cmsg_type = SCM_RIGHTS;
  cm->cmsg_len = CMSG_LEN(2 * sizeof(int));
  memcpy(CMSG_DATA(cm), p, sizeof p);
  ASSERT_EQ(sendmsg(sv[1], &mh, MSG_NOSIGNAL), 16);
  w = (writer){sv[1], src + n / 2 + 16, n - n / 2 - 16, 0};
  writer_main(&w);
  run_until(loop, 1);
  ASSERT_EQ(s.t.status, READER_DONE);
  ASSERT(memcmp(dst, src, n) == 0);
  ASSERT_EQ(s.t.nfds, 2);
  ASSERT_EQ(s.t.fds_closed, 0);
  /* Open, and the pipe's ends: a byte written to one is read from the other. */
  ASSERT_EQ(write(s.t.fds[1], "z", 1), 1);
  char z;
  ASSERT_EQ(read(s.t.fds[0], &z, 1), 1);
  ASSERT_EQ(z, 'z');
  ASSERT(fcntl(s.t.fds[0], F_GETFD) & FD_CLOEXEC);
  close(s.t.fds[0]);
  close(s.t.fds[1]);
  close(p[0]);
  close(p[1]);
  close(sv[0]);
  close(sv[1]);
  free(src);
  free(dst);
}

typedef struct {
  int fd;
  unsigned char *p;
  size_t n, got;
} drainer;

static void *drainer_main(void *arg) {
  drainer *d = arg;
  while (d->got < d->n) {
    ssize_t k = recv(d->fd, d->p + d->got, d->n - d->got < 70001 ? d->n - d->got : 70001, 0);
    if (k <= 0) break;
    d->got += (size_t)k;
  }
  return NULL;
}

/* Writing: a body sent from an offset while a receiving task has the same
 * socket on another thread, both byte for byte; then a send to a peer that
 * never reads, cancelled, and one to a peer that closed (an error). */
static void test_write(uv_loop_t *loop, reader_pool *pool) {
  int sv[2];
  make_pair(sv);
  size_t n = 6 * MiB + 3, off = 1000, in = 2 * MiB;
  unsigned char *body = pattern(n, 21), *got = malloc(n), *src = pattern(in, 22), *dst = malloc(in);
  slot r = {0}, w = {0};
  r.t = (reader_task){.fd = sv[0], .buf = dst, .len = 0, .want = in, .cap = in, .done = on_done};
  w.t = (reader_task){.fd = sv[0], .buf = body, .len = off, .want = n, .write = 1, .done = on_done};
  g_back = 0;
  ASSERT_EQ(reader_submit(pool, &r.t, NULL), 0);
  ASSERT_EQ(reader_submit(pool, &w.t, &r.t), 0);
  ASSERT(w.t.th != r.t.th); /* one epoll set cannot hold the descriptor twice */
  drainer d = {sv[1], got, n - off, 0};
  pthread_t th;
  pthread_create(&th, NULL, drainer_main, &d);
  writer wr = {sv[1], src, in, 0};
  writer_main(&wr);
  run_until(loop, 2);
  pthread_join(th, NULL);
  ASSERT_EQ(w.t.status, READER_DONE);
  ASSERT_EQ(w.t.len, n);
  ASSERT_EQ(d.got, n - off);
  ASSERT(memcmp(got, body + off, n - off) == 0);
  ASSERT_EQ(r.t.status, READER_DONE);
  ASSERT(memcmp(dst, src, in) == 0);
  /* Nobody reads: the send blocks until cancelled; what went is counted. */
  w.t.len = 0;
  g_back = 0;
  ASSERT_EQ(reader_submit(pool, &w.t, NULL), 0);
  uv_run(loop, UV_RUN_NOWAIT);
  ASSERT_EQ(g_back, 0);
  reader_cancel(&w.t);
  run_until(loop, 1);
  ASSERT_EQ(w.t.status, READER_CANCELLED);
  ASSERT(w.t.len > 0 && w.t.len < n);
  /* The peer goes: the send fails. */
  close(sv[1]);
  w.t.len = 0;
  g_back = 0;
  ASSERT_EQ(reader_submit(pool, &w.t, NULL), 0);
  run_until(loop, 1);
  ASSERT_EQ(w.t.status, READER_ERROR);
  ASSERT(w.t.err == EPIPE || w.t.err == ECONNRESET);
  close(sv[0]);
  free(body), free(got), free(src), free(dst);
}

/* Every gkcd-reader thread of this process blocks SIGINT and SIGTERM
 * (/proc/self/task/T/status, SigBlk); how many there are. */
static int readers_block_stop_signals(void) {
  DIR *d = opendir("/proc/self/task");
  ASSERT(d);
  int n = 0;
  for (struct dirent *e; (e = readdir(d));) {
    if (e->d_name[0] == '.') continue;
    char path[64], comm[32] = "", line[256];
    snprintf(path, sizeof path, "/proc/self/task/%.20s/comm", e->d_name);
    FILE *f = fopen(path, "r");
    if (!f) continue; /* a thread that has just gone */
    if (!fgets(comm, sizeof comm, f)) comm[0] = 0;
    fclose(f);
    if (strncmp(comm, "gkcd-reader", 11) != 0) continue;
    snprintf(path, sizeof path, "/proc/self/task/%.20s/status", e->d_name);
    ASSERT((f = fopen(path, "r")));
    unsigned long long blk = 0;
    int found = 0;
    while (fgets(line, sizeof line, f))
      if (sscanf(line, "SigBlk: %llx", &blk) == 1) found = 1;
    fclose(f);
    ASSERT(found);
    if (!(blk & (1ull << (SIGINT - 1))) || !(blk & (1ull << (SIGTERM - 1))))
      TEST_FAIL("reader thread %s has SIGINT or SIGTERM unblocked (SigBlk %llx)", e->d_name, blk);
    n++;
  }
  closedir(d);
  return n;
}

int main(void) {
  /* As gkcd's loop thread: SIGINT and SIGTERM unblocked where the threads start. */
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  ASSERT_EQ(pthread_sigmask(SIG_UNBLOCK, &stop, NULL), 0);
  uv_loop_t loop;
  ASSERT_EQ(uv_loop_init(&loop), 0);
  reader_pool pool;
  ASSERT_EQ(reader_init(&pool, &loop), 0);
  ASSERT_EQ(uv_run(&loop, UV_RUN_NOWAIT), 0); /* no thread, nothing keeping the loop */
  test_many(&loop, &pool);
  ASSERT(readers_block_stop_signals() >= 1);
  test_eof(&loop, &pool);
  test_cancel(&loop, &pool);
  test_fds(&loop, &pool);
  test_write(&loop, &pool);
  /* Nothing out: the pool does not keep the loop alive. */
  ASSERT_EQ(uv_run(&loop, UV_RUN_NOWAIT), 0);
  reader_stop(&pool);
  uv_run(&loop, UV_RUN_DEFAULT);
  ASSERT_EQ(uv_loop_close(&loop), 0);
  printf("test_reader: ok\n");
  return 0;
}
