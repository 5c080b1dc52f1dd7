/* e2e_notify.c: gkcd's error notifications, as libgkc and the CLI see them.
 *
 * Before closing a connection on its own, gkcd sends one msgpack-rpc
 * notification [2, "error", [{"code", "message"}]] ("too_many_connections"
 * to a connection it refuses, "timeout" to one that made no progress).  A
 * fake server, a thread here with a Unix socket, plays gkcd's part
 * connection by connection, so the client side is tested on its own:
 *  1. refused at once: the blocking call fails with
 *     GKC_ETOO_MANY_CONNECTIONS and the server's message; later calls say
 *     the connection is closed, and why;
 *  2. an unknown notification before a reply is skipped; a timeout
 *     notification fails the next call with GKC_ETIMEOUT;
 *  3. async: three requests, an unknown notification, a reply to one, then
 *     the timeout notification: one success, two GKC_ETIMEOUT callbacks
 *     carrying the message, each exactly once;
 *  4. the gkc CLI prints the server's code and message (when built).
 */
#include <errno.h>
#include <msgpack.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "fixture.h"
#include "gkc_async.h"
#include "proto_rpc.h"
#include "test.h"

#define REFUSED_MSG "gkcd has 4 connections, its --max-connections: try again later"
#define TIMEOUT_MSG "no request arrived in 2 s (--request-timeout)"

static char sock_path[108];
static int listen_fd = -1;

/* --- the fake server --------------------------------------------------------------------- */

typedef struct {
  int fd;
  unsigned char *buf;
  size_t cap, have;
} peer;

/* The next request's msgid (the frame is consumed); -1 when the client closed. */
static int64_t next_request(peer *p) {
  size_t len = test_recv_frame(p->fd, &p->buf, &p->cap, &p->have);
  if (len == 0) return -1;
  msgpack_zone z;
  msgpack_zone_init(&z, 1024);
  msgpack_object root;
  size_t off = 0;
  ASSERT(msgpack_unpack((const char *)p->buf, len, &off, &z, &root) == MSGPACK_UNPACK_SUCCESS);
  ASSERT(root.type == MSGPACK_OBJECT_ARRAY && root.via.array.size == 4);
  int64_t id = (int64_t)root.via.array.ptr[1].via.u64;
  msgpack_zone_destroy(&z);
  memmove(p->buf, p->buf + len, p->have - len);
  p->have -= len;
  return id;
}

static void send_sbuf(peer *p, msgpack_sbuffer *sb) {
  test_send_all(p->fd, sb->data, sb->size);
  msgpack_sbuffer_clear(sb);
}

static void notify(peer *p, const char *method, const char *code, const char *message) {
  msgpack_sbuffer sb;
  msgpack_sbuffer_init(&sb);
  msgpack_packer pk;
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  msgpack_pack_array(&pk, 3);
  msgpack_pack_uint8(&pk, 2);
  proto_pack_cstr(&pk, method);
  msgpack_pack_array(&pk, 1);
  msgpack_pack_map(&pk, code ? 2 : 1);
  if (code) proto_pack_cstr(&pk, "code"), proto_pack_cstr(&pk, code);
  proto_pack_cstr(&pk, "message"), proto_pack_cstr(&pk, message);
  send_sbuf(p, &sb);
  msgpack_sbuffer_destroy(&sb);
}

static void reply_ping(peer *p, uint32_t msgid) {
  msgpack_sbuffer sb;
  msgpack_sbuffer_init(&sb);
  msgpack_packer pk;
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  proto_pack_result_head(&pk, msgid);
  msgpack_pack_map(&pk, 3);
  proto_pack_cstr(&pk, "version"), proto_pack_cstr(&pk, "fake");
  proto_pack_cstr(&pk, "protocol"), msgpack_pack_int(&pk, GKC_PROTOCOL);
  proto_pack_cstr(&pk, "backend"), proto_pack_cstr(&pk, "cpu");
  send_sbuf(p, &sb);
  msgpack_sbuffer_destroy(&sb);
}

static void refuse(peer *p) { notify(p, "error", "too_many_connections", REFUSED_MSG); }

static void skip_then_timeout(peer *p) {
  int64_t id = next_request(p);
  ASSERT(id >= 0);
  notify(p, "progress", NULL, "a notification libgkc does not know");
  reply_ping(p, (uint32_t)id);
  ASSERT(next_request(p) >= 0);
  notify(p, "error", "timeout", TIMEOUT_MSG);
}

static void async_three(peer *p) {
  int64_t ids[3];
  for (int i = 0; i < 3; i++) ASSERT((ids[i] = next_request(p)) >= 0);
  notify(p, "progress", NULL, "skipped");
  reply_ping(p, (uint32_t)ids[1]);
  notify(p, "error", "timeout", TIMEOUT_MSG);
}

static void (*const scenarios[])(peer *) = {refuse, skip_then_timeout, async_three, refuse};
enum { N_SCENARIOS = sizeof scenarios / sizeof scenarios[0] };
static int n_scenarios = N_SCENARIOS;

static void *server(void *arg) {
  (void)arg;
  for (int i = 0; i < n_scenarios; i++) {
    peer p = {accept(listen_fd, NULL, NULL), NULL, 0, 0};
    if (p.fd < 0) TEST_FAIL("accept: %s", strerror(errno));
    scenarios[i](&p);
    close(p.fd); /* as gkcd does, right after its notification */
    free(p.buf);
  }
  return NULL;
}

/* --- the client side ---------------------------------------------------------------------- */

static void test_refused(void) {
  gkc_conn *c;
  ASSERT_EQ(gkc_connect(&c, sock_path), 0); /* the kernel accepts; gkcd then refuses */
  gkc_ping_info pi;
  ASSERT_EQ(gkc_ping(c, &pi), GKC_ETOO_MANY_CONNECTIONS);
  ASSERT_CONTAINS(gkc_errmsg(c), REFUSED_MSG);
  ASSERT_EQ(gkc_ping(c, &pi), GKC_EIO);
  ASSERT_CONTAINS(gkc_errmsg(c), "closed");
  ASSERT_CONTAINS(gkc_errmsg(c), REFUSED_MSG);
  gkc_close(c);
}

static void test_skip_then_timeout(void) {
  gkc_conn *c;
  ASSERT_EQ(gkc_connect(&c, sock_path), 0);
  gkc_ping_info pi;
  ASSERT_EQ(gkc_ping(c, &pi), 0);
  ASSERT_STR_EQ(pi.version, "fake");
  ASSERT_EQ(gkc_ping(c, &pi), GKC_ETIMEOUT);
  ASSERT_CONTAINS(gkc_errmsg(c), TIMEOUT_MSG);
  gkc_close(c);
}

typedef struct {
  int calls, ok, timeout, other;
} tally;

static void on_ping(gkc_async *ac, const gkc_result *res, void *ud) {
  (void)ac;
  tally *t = ud;
  t->calls++;
  if (res->status == 0) {
    ASSERT_STR_EQ(res->ping.version, "fake");
    t->ok++;
  } else if (res->status == GKC_ETIMEOUT) {
    ASSERT_CONTAINS(res->errmsg, TIMEOUT_MSG);
    t->timeout++;
  } else {
    fprintf(stderr, "  unexpected: %s: %s\n", gkc_errname(res->status), res->errmsg);
    t->other++;
  }
}

static void test_async(void) {
  gkc_async *ac;
  ASSERT_EQ(gkc_async_connect(&ac, sock_path), 0);
  tally t[3] = {{0}};
  for (int i = 0; i < 3; i++) ASSERT_EQ(gkc_async_ping(ac, on_ping, &t[i]), 0);
  int rc;
  while ((rc = gkc_async_poll(ac, 10000)) > 0) {
  }
  ASSERT_EQ(rc, GKC_ETIMEOUT);
  int ok = 0, timeout = 0;
  for (int i = 0; i < 3; i++) {
    ASSERT_EQ(t[i].calls, 1);
    ASSERT_EQ(t[i].other, 0);
    ok += t[i].ok, timeout += t[i].timeout;
  }
  ASSERT_EQ(t[1].ok, 1); /* the one the server answered */
  ASSERT_EQ(ok, 1);
  ASSERT_EQ(timeout, 2);
  gkc_async_close(ac);
}

static void test_cli(void) {
  const char *gkc = getenv("GKC_BIN");
  char cmd[512];
  snprintf(cmd, sizeof cmd, "'%s' --socket '%s' ping 2>&1", gkc, sock_path);
  FILE *p = popen(cmd, "r");
  ASSERT(p != NULL);
  char out[2048] = "";
  size_t n = fread(out, 1, sizeof out - 1, p);
  out[n] = 0;
  int st = pclose(p);
  fprintf(stderr, "  gkc ping said: %s", out);
  ASSERT(st != 0);
  ASSERT_CONTAINS(out, "too_many_connections");
  ASSERT_CONTAINS(out, REFUSED_MSG);
}

int main(void) {
  signal(SIGPIPE, SIG_IGN);
  /* The fake server plays one scenario per connection: a client that
   * connected again on its own would start the next one (reconnecting is
   * e2e_reconnect's). */
  setenv("GKC_RECONNECT", "off", 1);
  /* Its scripts answer each request in turn: a ring_register first (libgkc
   * sets a ring up at a connection's first call) would take the first
   * answer.  Rings are e2e_ring's. */
  setenv("GKC_NO_RING", "1", 1);
  const char *tmp = getenv("TMPDIR");
  snprintf(sock_path, sizeof sock_path, "%s/gkc-notify-%d.sock", tmp && *tmp ? tmp : "/tmp",
           (int)getpid());
  listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  snprintf(sa.sun_path, sizeof sa.sun_path, "%s", sock_path);
  unlink(sock_path);
  if (bind(listen_fd, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(listen_fd, 8) != 0)
    TEST_FAIL("cannot listen on %s: %s", sock_path, strerror(errno));
  if (!getenv("GKC_BIN")) n_scenarios = N_SCENARIOS - 1;
  pthread_t th;
  ASSERT_EQ(pthread_create(&th, NULL, server, NULL), 0);
  test_refused();
  test_skip_then_timeout();
  test_async();
  if (getenv("GKC_BIN")) test_cli();
  pthread_join(th, NULL);
  close(listen_fd);
  unlink(sock_path);
  fprintf(stderr, "e2e_notify: all passed\n");
  return 0;
}
