/* request.c: bench_rpc's requests, encoded once by hand so that the timed
 * client does no encoding, and a check that gkcd reads them as meant. */
#include <errno.h>
#include <math.h>
#include <msgpack.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bench_common.h"
#include "proto_frame.h"
#include "proto_rpc.h"
#include "rpc.h"

float g_reduce_x[REDUCE_N];

void request_put_be32(unsigned char *p, uint32_t v) {
  p[0] = (unsigned char)(v >> 24), p[1] = (unsigned char)(v >> 16);
  p[2] = (unsigned char)(v >> 8), p[3] = (unsigned char)v;
}

void request_init(request_tpl *t, const char *method) {
  size_t ml = strlen(method);
  memset(t, 0, sizeof *t);
  unsigned char *p = t->bytes;
  t->method = method;
  *p++ = 0x94;
  *p++ = 0x00;
  *p++ = 0xce;
  t->msgid_off = (size_t)(p - t->bytes);
  p += 4;
  *p++ = (unsigned char)(0xa0 | ml);
  memcpy(p, method, ml);
  p += ml;
  *p++ = 0x91;
  if (!strcmp(method, "reduce")) {
    *p++ = 0x81; /* {"x": bin of 64 bytes} */
    *p++ = 0xa1, *p++ = 'x';
    *p++ = 0xc4, *p++ = REDUCE_N * 4;
    for (int i = 0; i < REDUCE_N; i++) { /* little-endian float32 */
      uint32_t u;
      memcpy(&u, &g_reduce_x[i], 4);
      for (int b = 0; b < 4; b++) *p++ = (unsigned char)(u >> (8 * b));
    }
  } else {
    *p++ = 0x80; /* {} */
  }
  t->len = (size_t)(p - t->bytes);
}

/* Non-zero values: zeros could hide a reply that never read them. */
void request_init_reduce_x(void) {
  uint64_t s = 0x5eed;
  for (int i = 0; i < REDUCE_N; i++) { /* splitmix64 */
    uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    g_reduce_x[i] = 0.25f + (float)((z >> 40) & 0xffff) / 65536.0f; /* [0.25, 1.25) */
  }
}

void request_check(const char *sock, request_tpl *tpls, int ntpl, gkc_ping_info *pi) {
  gkc_conn *c;
  if (gkc_connect(&c, sock) != 0 || gkc_ping(c, pi) != 0)
    bench_die("gkcd at %s: %s", sock, gkc_errmsg(c));
  if (pi->protocol != GKC_PROTOCOL)
    bench_die("gkcd speaks protocol %d, not %d", pi->protocol, GKC_PROTOCOL);
  double want = 0, mag = 0, got;
  for (int i = 0; i < REDUCE_N; i++) want += g_reduce_x[i], mag += fabs(g_reduce_x[i]);
  if (gkc_reduce(c, g_reduce_x, REDUCE_N, GKC_SUM, &got, NULL, NULL) != 0)
    bench_die("libgkc reduce: %s", gkc_errmsg(c));
  if (fabs(got - want) > 1e-5 * mag) bench_die("libgkc reduce: %.9g, expected %.9g", got, want);
  gkc_close(c);

  int fd = client_connect(sock);
  for (int k = 0; k < ntpl; k++) {
    request_tpl *t = &tpls[k];
    unsigned char req[128], buf[4096];
    memcpy(req, t->bytes, t->len);
    request_put_be32(req + t->msgid_off, 0xabcdef01u);
    if (send(fd, req, t->len, MSG_NOSIGNAL) != (ssize_t)t->len)
      bench_die("send: %s", strerror(errno));
    size_t have = 0;
    const proto_limits lim = {sizeof buf, PROTO_MAX_OBJECTS, PROTO_MAX_DEPTH};
    proto_frame_info info;
    ssize_t r;
    while ((r = proto_frame_scan(buf, have, &lim, &info)) == PROTO_PARTIAL) {
      ssize_t n = recv(fd, buf + have, sizeof buf - have, 0);
      if (n <= 0) bench_die("check %s: recv: %s", t->method, n ? strerror(errno) : "closed");
      have += (size_t)n;
    }
    if (r < 0) bench_die("check %s: reply is not msgpack", t->method);
    msgpack_zone zone;
    msgpack_object root;
    proto_response resp;
    size_t off = 0;
    if (!msgpack_zone_init(&zone, 2048)) bench_die("out of memory");
    if (msgpack_unpack((const char *)buf, (size_t)r, &off, &zone, &root) !=
            MSGPACK_UNPACK_SUCCESS ||
        proto_response_parse(&root, &resp) != 0 || resp.msgid != 0xabcdef01u)
      bench_die("check %s: malformed reply", t->method);
    if (resp.error)
      bench_die("check %s: %.*s: %.*s", t->method, (int)resp.code_len, resp.code,
                (int)resp.message_len, resp.message);
    if (!strcmp(t->method, "reduce")) {
      const msgpack_object *v = proto_map_get(resp.result, "value");
      const msgpack_object *nn = proto_map_get(resp.result, "n");
      if (!v || v->type != MSGPACK_OBJECT_FLOAT64 || fabs(v->via.f64 - want) > 1e-5 * mag ||
          !nn || nn->type != MSGPACK_OBJECT_POSITIVE_INTEGER || nn->via.u64 != REDUCE_N)
        bench_die("check reduce: wrong result from the raw request");
    }
    /* Counted with a uint32-coded msgid like the request's; gkcd codes small
     * msgids shorter, so most timed replies are 2 to 4 bytes smaller. */
    t->reply_len = (size_t)r;
    msgpack_zone_destroy(&zone);
  }
  close(fd);
}
