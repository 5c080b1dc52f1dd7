/* gkc_client.c: libgkc, the blocking client for gkcd (see gkc.h).
 *
 * A call packs its request with msgpack's vrefbuffer, which references large
 * arrays in the caller's memory instead of copying them, sends the pieces
 * with one sendmsg loop, then reads until proto_frame_scan reports a whole
 * reply frame and decodes it with msgpack_unpack.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include "gkc.h"
#include "gkc_internal.h"
#include "proto_errors.h"
#include "proto_rpc.h"
#include "proto_socket.h"

/* Arrays at least this big are sent from the caller's memory, not copied. */
#define REF_MIN 4096
#define READ_CHUNK (256 * 1024)
/* send_all's "the daemon hung up on us": look for its reply before failing. */
#define GKC__SEND_CUT 1

struct gkc_conn {
  int fd;
  uint32_t next_msgid;
  int tf32; /* gkc_set_precision */
  char errmsg[512];
  int send_fd; /* gkc__call_fd: a descriptor to pass with the next request, or -1 */
  unsigned char *buf; /* received bytes */
  size_t len, cap;
};

int gkc__fail(gkc_conn *c, int err, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->errmsg, sizeof c->errmsg, fmt, ap);
  va_end(ap);
  return err;
}

int gkc_socket_path(char *buf, size_t buflen, const char *override) {
  return proto_socket_path(buf, buflen, override) == 0 ? 0 : GKC_EINVALID_ARGUMENT;
}

const char *gkc_errmsg(const gkc_conn *c) { return c ? c->errmsg : "out of memory"; }
const char *gkc_errname(int err) { return err == 0 ? "ok" : proto_err_wire(err); }
const char *gkc_strerror(int err) { return proto_err_text(err); }

int gkc_connect(gkc_conn **out, const char *socket_path) {
  gkc_conn *c = calloc(1, sizeof *c);
  *out = c;
  if (!c) return GKC_EOUT_OF_MEMORY;
  c->fd = -1;
  c->send_fd = -1;
  c->next_msgid = 1;
  char path[108];
  if (proto_socket_path(path, sizeof path, socket_path) != 0)
    return gkc__fail(c, GKC_EINVALID_ARGUMENT, "socket path is too long for a Unix socket");
  c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (c->fd < 0) return gkc__fail(c, GKC_ECONNECT, "socket: %s", strerror(errno));
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  memcpy(sa.sun_path, path, strlen(path) + 1);
  if (connect(c->fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
    int e = errno;
    close(c->fd);
    c->fd = -1;
    return gkc__fail(c, GKC_ECONNECT, "cannot connect to gkcd at %s: %s", path, strerror(e));
  }
  return 0;
}

int gkc_set_precision(gkc_conn *c, const char *precision) {
  if (precision && !strcmp(precision, "tf32"))
    c->tf32 = 1;
  else if (precision && !strcmp(precision, "fp32"))
    c->tf32 = 0;
  else
    return gkc__fail(c, GKC_EINVALID_ARGUMENT, "precision must be \"fp32\" or \"tf32\"");
  return 0;
}

int gkc__tf32(const gkc_conn *c) { return c->tf32; }

void gkc_close(gkc_conn *c) {
  if (!c) return;
  if (c->fd >= 0) close(c->fd);
  free(c->buf);
  free(c);
}

/* The connection is unusable after an I/O or framing error: a half-read
 * reply would desynchronise every later call. */
static int broken(gkc_conn *c, int err, const char *what, int e) {
  if (c->fd >= 0) close(c->fd);
  c->fd = -1;
  return gkc__fail(c, err, "%s%s%s", what, e ? ": " : "", e ? strerror(e) : "");
}

static int send_all(gkc_conn *c, const msgpack_vrefbuffer *vb) {
  size_t n = msgpack_vrefbuffer_veclen(vb);
  struct iovec *iov = malloc(n * sizeof *iov);
  if (!iov) return gkc__fail(c, GKC_EOUT_OF_MEMORY, "out of memory");
  memcpy(iov, msgpack_vrefbuffer_vec(vb), n * sizeof *iov);
  struct iovec *p = iov;
  int rc = 0;
  /* A descriptor for gkc__call_fd travels as SCM_RIGHTS with the first
   * sendmsg that moves bytes: the kernel attaches it to those bytes. */
  union {
    struct cmsghdr align;
    char buf[CMSG_SPACE(sizeof(int))];
  } cm;
  while (n > 0) {
    struct msghdr mh = {.msg_iov = p, .msg_iovlen = n > IOV_MAX ? IOV_MAX : n};
    if (c->send_fd >= 0) {
      memset(&cm, 0, sizeof cm);
      mh.msg_control = cm.buf;
      mh.msg_controllen = sizeof cm.buf;
      struct cmsghdr *h = CMSG_FIRSTHDR(&mh);
      h->cmsg_level = SOL_SOCKET;
      h->cmsg_type = SCM_RIGHTS;
      h->cmsg_len = CMSG_LEN(sizeof(int));
      memcpy(CMSG_DATA(h), &c->send_fd, sizeof(int));
    }
    ssize_t w = sendmsg(c->fd, &mh, MSG_NOSIGNAL);
    if (w > 0) c->send_fd = -1; /* sent along with these bytes */
    if (w < 0) {
      if (errno == EINTR) continue;
      /* The daemon closes a connection after refusing a request it cannot
       * skip (too large, not msgpack), usually while we are still sending:
       * its error reply is then waiting to be read, and says more than EPIPE. */
      if (errno == EPIPE || errno == ECONNRESET) {
        rc = GKC__SEND_CUT;
        break;
      }
      rc = broken(c, GKC_EIO, "sending to gkcd", errno);
      break;
    }
    while (n > 0 && (size_t)w >= p->iov_len) {
      w -= (ssize_t)p->iov_len;
      p++, n--;
    }
    if (n > 0) {
      p->iov_base = (char *)p->iov_base + w;
      p->iov_len -= (size_t)w;
    }
  }
  free(iov);
  return rc;
}

/* Reads until buf holds one whole frame; returns its length or an error. */
static ssize_t recv_frame(gkc_conn *c) {
  /* Depth 32: as deep as msgpack-c's unpacker goes. */
  static const proto_limits lim = {((size_t)1 << 40), 1u << 20, 32};
  for (;;) {
    proto_frame_info info;
    if (c->len > 0) {
      ssize_t r = proto_frame_scan(c->buf, c->len, &lim, &info);
      if (r > 0) return r;
      if (r < 0) return broken(c, GKC_EPROTOCOL, "gkcd sent bytes that are not msgpack", 0);
    } else {
      info.need = 1;
    }
    if (c->cap - c->len < READ_CHUNK || info.need > c->cap) {
      /* We trust our daemon's declared reply size enough to size the buffer
       * from it: one allocation instead of repeated doubling for big results. */
      size_t ncap = c->cap * 2 > c->len + READ_CHUNK ? c->cap * 2 : c->len + READ_CHUNK;
      if (info.need > ncap) ncap = info.need;
      unsigned char *nb = realloc(c->buf, ncap);
      if (!nb) return broken(c, GKC_EOUT_OF_MEMORY, "out of memory reading the reply", 0);
      c->buf = nb;
      c->cap = ncap;
    }
    ssize_t n = recv(c->fd, c->buf + c->len, c->cap - c->len, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return broken(c, GKC_EIO, "reading from gkcd", errno);
    if (n == 0) return broken(c, GKC_EIO, "gkcd closed the connection", 0);
    c->len += (size_t)n;
  }
}

int gkc__call(gkc_conn *c, const char *method, gkc__pack_fn pack, const void *pack_arg,
              gkc__take_fn take, void *take_arg) {
  if (c->fd < 0) return gkc__fail(c, GKC_EIO, "connection is closed after an earlier error");
  c->errmsg[0] = 0;
  uint32_t msgid = c->next_msgid++;
  msgpack_vrefbuffer vb;
  if (!msgpack_vrefbuffer_init(&vb, REF_MIN, 8192))
    return gkc__fail(c, GKC_EOUT_OF_MEMORY, "out of memory");
  msgpack_packer pk;
  msgpack_packer_init(&pk, &vb, msgpack_vrefbuffer_write);
  proto_pack_request_head(&pk, msgid, method);
  int rc = pack(&pk, pack_arg);
  if (rc == 0) rc = send_all(c, &vb);
  msgpack_vrefbuffer_destroy(&vb);
  if (rc < 0) return rc;
  int cut = rc == GKC__SEND_CUT;

  ssize_t flen = recv_frame(c);
  if (flen < 0) {
    if (cut) return broken(c, GKC_EIO, "gkcd closed the connection while we were sending", 0);
    return (int)flen;
  }
  msgpack_zone zone;
  if (!msgpack_zone_init(&zone, 4096)) return gkc__fail(c, GKC_EOUT_OF_MEMORY, "out of memory");
  msgpack_object root;
  size_t off = 0;
  proto_response resp;
  if (msgpack_unpack((const char *)c->buf, (size_t)flen, &off, &zone, &root) !=
          MSGPACK_UNPACK_SUCCESS ||
      proto_response_parse(&root, &resp) != 0) {
    rc = broken(c, GKC_EPROTOCOL, "malformed reply from gkcd", 0);
  } else if (resp.msgid != msgid && !(resp.error && resp.msgid == UINT32_MAX)) {
    rc = broken(c, GKC_EPROTOCOL, "reply does not match the request (msgid)", 0);
  } else if (resp.error) {
    rc = gkc__fail(c, resp.error, "%.*s", (int)resp.message_len, resp.message ? resp.message : "");
  } else {
    rc = take(c, resp.result, take_arg);
  }
  msgpack_zone_destroy(&zone);
  if (cut && rc == 0) rc = broken(c, GKC_EIO, "gkcd closed the connection while we were sending", 0);
  if (cut && c->fd >= 0) { /* keep the daemon's message, drop the dead socket */
    close(c->fd);
    c->fd = -1;
  }
  if (c->buf) {
    memmove(c->buf, c->buf + flen, c->len - (size_t)flen);
    c->len -= (size_t)flen;
  }
  return rc;
}

int gkc__call_fd(gkc_conn *c, int fd, const char *method, gkc__pack_fn pack, const void *pack_arg,
                 gkc__take_fn take, void *take_arg) {
  c->send_fd = fd;
  int rc = gkc__call(c, method, pack, pack_arg, take, take_arg);
  c->send_fd = -1; /* not sent (packing or sending failed): never leak into the next request */
  return rc;
}
