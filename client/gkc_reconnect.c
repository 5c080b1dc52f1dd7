/* gkc_reconnect.c: connecting again after gkcd went away, and refusing to
 * name the objects that did not survive it (gkc.h, "reconnecting";
 * PROTOCOL.md, "Instances and restarts").
 *
 * Every object the connection makes is remembered here: its id, kind,
 * whether it is shared, and the instance that made it.  A private object
 * (and every region) lives as long as its connection; a shared one as long
 * as its instance's shared objects do, which a restart through systemd's
 * fd store keeps (shared_instance then carries over).  When the connection
 * is made again, the new gkcd is asked its instances (one ping, on the
 * fresh socket, before anything else is sent) and every object that did
 * not survive is marked stale with both instances, so that a request
 * naming it is refused while it is packed: it never reaches whatever now
 * has that number.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "gkc_internal.h"
#include "proto_frame.h"
#include "proto_rpc.h"

#define DEFAULT_TRIES 6
#define DEFAULT_BACKOFF_MS 100
#define MAX_BACKOFF_MS 5000
/* How long a fresh gkcd may take to answer the hello: it may still be
 * starting (socket activation queues the connection meanwhile). */
#define HELLO_MS 5000
#define HELLO_MAX (64 * 1024)
#define OBJ_BUCKETS 256

typedef struct obj {
  struct obj *next;
  uint32_t id;
  int kind, shared, stale;
  uint64_t made_in; /* private: the instance that made it; shared: its shared_instance */
  uint64_t now_in;  /* stale: the instance reached instead */
} obj;

struct gkc__objs {
  obj *b[OBJ_BUCKETS];
};

/* --- the policy ----------------------------------------------------------------------- */

static int replay_hook(gkc_conn *c, gkc__req *r, int status);
static int hold_hook(gkc_conn *c, gkc__req *r, int status);
static void send_held(gkc_conn *c);
static void lose_unsent(gkc_conn *c, const char *why, const char *failed);

/* $GKC_RECONNECT: "off" | "0" | "TRIES[,BACKOFF_MS[,idempotent]]"; a value
 * that does not parse leaves the defaults (a library cannot complain at
 * connect time, and reconnecting is the safer reading). */
static void from_env(gkc_conn *c) {
  const char *v = getenv("GKC_RECONNECT");
  if (!v || !*v) return;
  if (!strcmp(v, "off") || !strcmp(v, "no") || !strcmp(v, "false")) {
    c->rc_tries = 0;
    return;
  }
  char *end;
  long tries = strtol(v, &end, 10);
  if (end == v || tries < 0 || tries > 1000) return;
  long backoff = DEFAULT_BACKOFF_MS;
  int flags = 0;
  if (*end == ',') {
    const char *b = end + 1;
    backoff = strtol(b, &end, 10);
    if (end == b || backoff < 0 || backoff > 60000) return;
    if (*end == ',') {
      if (strcmp(end + 1, "idempotent") != 0) return;
      flags = GKC_RECONNECT_IDEMPOTENT;
      end += strlen(end);
    }
  }
  if (*end) return;
  c->rc_tries = (int)tries, c->rc_backoff_ms = (int)backoff, c->rc_flags = flags;
}

void gkc__reconnect_init(gkc_conn *c) {
  c->rc_tries = DEFAULT_TRIES;
  c->rc_backoff_ms = DEFAULT_BACKOFF_MS;
  c->rc_flags = 0;
  from_env(c);
  c->replay = replay_hook;
}

void gkc__reconnect_async(gkc_conn *c) {
  c->replay = NULL; /* no caller waits inside the call: gkc__run never runs */
  c->hold = hold_hook;
}

int gkc_set_reconnect(gkc_conn *c, int tries, int backoff_ms, int flags) {
  if (tries < 0 || backoff_ms < 0 || (flags & ~GKC_RECONNECT_IDEMPOTENT))
    return gkc__fail(c, GKC_EINVALID_ARGUMENT, "gkc_set_reconnect: tries and backoff_ms must be"
                     " >= 0 and flags 0 or GKC_RECONNECT_IDEMPOTENT");
  c->rc_tries = tries, c->rc_backoff_ms = backoff_ms, c->rc_flags = flags;
  return 0;
}

unsigned gkc_reconnects(const gkc_conn *c) { return c ? c->epoch : 0; }

static void hex(uint64_t v, char *buf) {
  if (v)
    snprintf(buf, 17, "%016llx", (unsigned long long)v);
  else
    buf[0] = 0;
}

void gkc_instance(const gkc_conn *c, char *instance, char *shared_instance) {
  if (instance) hex(c ? c->instance : 0, instance);
  if (shared_instance) hex(c ? c->shared_instance : 0, shared_instance);
}

/* --- instances -------------------------------------------------------------------------- */

/* The 16 hex digits of key in map m, or 0 (absent: an older gkcd). */
static uint64_t instance_of(const msgpack_object *m, const char *key) {
  const msgpack_object *o = m && m->type == MSGPACK_OBJECT_MAP ? proto_map_get(m, key) : NULL;
  if (!o || o->type != MSGPACK_OBJECT_STR || o->via.str.size != 16) return 0;
  uint64_t v = 0;
  for (uint32_t i = 0; i < 16; i++) {
    char ch = o->via.str.ptr[i];
    int d = ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;
    if (d < 0) return 0;
    v = v << 4 | (uint64_t)d;
  }
  return v;
}

void gkc__note_instance(gkc_conn *c, const msgpack_object *reply) {
  uint64_t i = instance_of(reply, "instance"), s = instance_of(reply, "shared_instance");
  if (i) c->instance = i;
  if (s) c->shared_instance = s;
}

/* "1a2b...", or words when unknown; buf of 40 bytes. */
static const char *name_of(uint64_t v, char *buf) {
  if (!v) return "an unknown instance (an older gkcd)";
  snprintf(buf, 40, "instance %016llx", (unsigned long long)v);
  return buf;
}

/* --- the objects -------------------------------------------------------------------- */

static obj **bucket(struct gkc__objs *t, uint32_t id) { return &t->b[(id * 2654435761u) % OBJ_BUCKETS]; }

static obj *find(gkc_conn *c, uint32_t id) {
  if (!c->objs) return NULL;
  for (obj *o = *bucket(c->objs, id); o; o = o->next)
    if (o->id == id) return o;
  return NULL;
}

void gkc__obj_made(gkc_conn *c, int kind, uint32_t id, int shared, const msgpack_object *reply) {
  gkc__note_instance(c, reply);
  if (!c->objs && !(c->objs = calloc(1, sizeof *c->objs))) return; /* unchecked, as before */
  obj *o = find(c, id);
  if (!o) { /* a new number; an old entry with it is a stale object's, now replaced */
    if (!(o = malloc(sizeof *o))) return;
    obj **b = bucket(c->objs, id);
    o->next = *b;
    *b = o;
  }
  o->id = id, o->kind = kind, o->shared = shared, o->stale = 0, o->now_in = 0;
  o->made_in = shared ? c->shared_instance : c->instance;
}

void gkc__obj_gone(gkc_conn *c, uint32_t id) {
  if (!c->objs) return;
  for (obj **p = bucket(c->objs, id); *p; p = &(*p)->next)
    if ((*p)->id == id) {
      obj *o = *p;
      *p = o->next;
      free(o);
      return;
    }
}

void gkc__objs_free(gkc_conn *c) {
  if (!c->objs) return;
  for (int i = 0; i < OBJ_BUCKETS; i++)
    for (obj *o = c->objs->b[i], *next; o; o = next) {
      next = o->next;
      free(o);
    }
  free(c->objs);
  c->objs = NULL;
}

/* After a new connection (old_instance: the one before): private objects
 * and regions died with the old connection; shared ones survived only
 * when the new gkcd holds their instance's shared objects. */
static void mark_stale(gkc_conn *c, uint64_t old_instance) {
  if (!c->objs) return;
  for (int i = 0; i < OBJ_BUCKETS; i++)
    for (obj *o = c->objs->b[i]; o; o = o->next) {
      if (o->stale) continue;
      if (!o->shared) {
        if (!o->made_in) o->made_in = old_instance;
        o->stale = 1, o->now_in = c->instance;
      } else if (!o->made_in || o->made_in != c->shared_instance) {
        o->stale = 1, o->now_in = c->shared_instance;
      }
    }
}

static const char *kind_name(int kind) {
  return kind == GKC__OBJ_MATRIX ? "matrix" : kind == GKC__OBJ_REGION ? "region" : "array handle";
}

void gkc__pack_id(msgpack_packer *pk, uint32_t id) {
  msgpack_pack_uint32(pk, id);
  gkc_conn *c = pk->data;
  obj *o = find(c, id);
  if (!o || !o->stale || c->pack_stale) return;
  char a[40], b[40];
  c->pack_stale = 1;
  if (!o->shared)
    snprintf(c->stale_msg, sizeof c->stale_msg,
             "%s %u is stale: it was made on an earlier connection to gkcd %s and died with "
             "it; this connection was made again (to %s), which holds nothing of the old one "
             "(only shared objects can outlive their connection)",
             kind_name(o->kind), id, name_of(o->made_in, a), name_of(o->now_in, b));
  else
    snprintf(c->stale_msg, sizeof c->stale_msg,
             "shared %s %u is stale: it belonged to the shared objects of gkcd %s, and the gkcd "
             "reached after reconnecting holds those of %s (it restarted without restoring them)",
             kind_name(o->kind), id, name_of(o->made_in, a), name_of(o->now_in, b));
}

/* --- the hello: one ping on the fresh socket ------------------------------------------ */

static uint64_t now_ms(void) { return gkc__now_ns() / 1000000u; }

/* Sends ping and waits (at most HELLO_MS) for its reply; learns the
 * instances.  0, or an error with the message set. */
static int hello(gkc_conn *c) {
  msgpack_sbuffer sb;
  msgpack_sbuffer_init(&sb);
  msgpack_packer pk;
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  uint32_t msgid = c->next_msgid++;
  proto_pack_request_head(&pk, msgid, "ping");
  msgpack_pack_map(&pk, 0);
  int rc = 0;
  unsigned char *buf = NULL;
  for (size_t off = 0; off < sb.size;) {
    ssize_t w = send(c->fd, sb.data + off, sb.size - off, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) {
      rc = gkc__fail(c, GKC_EIO, "sending the hello ping: %s", strerror(errno));
      goto out;
    }
    off += (size_t)w;
  }
  if (!(buf = malloc(HELLO_MAX))) {
    rc = gkc__fail(c, GKC_EOUT_OF_MEMORY, "out of memory");
    goto out;
  }
  static const proto_limits lim = {HELLO_MAX, 4096, 32};
  size_t have = 0;
  uint64_t deadline = now_ms() + HELLO_MS;
  for (;;) {
    proto_frame_info info = {0};
    ssize_t n = have ? proto_frame_scan(buf, have, &lim, &info) : 0;
    if (n < 0) {
      rc = gkc__fail(c, GKC_EPROTOCOL, "gkcd's answer to the hello is not msgpack");
      goto out;
    }
    if (n > 0) {
      msgpack_zone zone;
      if (!msgpack_zone_init(&zone, 2048)) {
        rc = gkc__fail(c, GKC_EOUT_OF_MEMORY, "out of memory");
        goto out;
      }
      msgpack_object root;
      size_t o = 0;
      proto_response resp;
      if (msgpack_unpack((const char *)buf, (size_t)n, &o, &zone, &root) != MSGPACK_UNPACK_SUCCESS ||
          proto_response_parse(&root, &resp) != 0 || resp.msgid != msgid) {
        /* A notification (no slot for us, say) or something else: not a hello. */
        rc = gkc__fail(c, GKC_EPROTOCOL, "gkcd did not answer the hello ping (it may have no"
                       " connection slot free)");
      } else if (resp.error) {
        rc = gkc__fail(c, resp.error, "hello ping: %.*s", (int)resp.message_len,
                       resp.message ? resp.message : "");
      } else {
        c->instance = instance_of(resp.result, "instance");
        c->shared_instance = instance_of(resp.result, "shared_instance");
      }
      msgpack_zone_destroy(&zone);
      goto out;
    }
    if (have == HELLO_MAX) {
      rc = gkc__fail(c, GKC_EPROTOCOL, "gkcd's answer to the hello is too long");
      goto out;
    }
    uint64_t now = now_ms();
    if (now >= deadline) {
      rc = gkc__fail(c, GKC_ETIMEOUT, "gkcd did not answer the hello ping within %d ms", HELLO_MS);
      goto out;
    }
    struct pollfd p = {.fd = c->fd, .events = POLLIN};
    int pr = poll(&p, 1, (int)(deadline - now));
    if (pr < 0 && errno != EINTR) {
      rc = gkc__fail(c, GKC_EIO, "poll: %s", strerror(errno));
      goto out;
    }
    if (pr <= 0) continue;
    ssize_t r = recv(c->fd, buf + have, HELLO_MAX - have, MSG_DONTWAIT);
    if (r < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
    if (r <= 0) {
      rc = gkc__fail(c, GKC_EIO, "gkcd closed the new connection before answering the hello");
      goto out;
    }
    have += (size_t)r;
  }
out:
  free(buf);
  msgpack_sbuffer_destroy(&sb);
  return rc;
}

/* --- connecting again ----------------------------------------------------------------- */

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

int gkc__revive(gkc_conn *c) {
  /* Nothing to revive, or not ours to: the owner closed it, the policy
   * says no, or requests are still being failed (their callbacks run). */
  if (c->fd >= 0 || c->cancelling || c->rc_tries <= 0 || !c->socket_path[0] || c->npending ||
      c->staging)
    return 0;
  char why[sizeof c->dead_msg];
  snprintf(why, sizeof why, "%s", c->dead_msg);
  uint64_t old_instance = c->instance;
  /* The old stream's leftovers mean nothing on the new one. */
  c->ipos = c->ilen = 0;
  c->olen = c->nseg = c->seg_head = 0;
  c->write_cut = 0;
  c->pack_oom = 0;
  int rc = 0, backoff = c->rc_backoff_ms;
  uint64_t t0 = gkc__now_ns();
  for (int i = 0; i < c->rc_tries; i++) {
    if (i > 0) {
      sleep_ms(backoff);
      backoff = backoff > MAX_BACKOFF_MS / 2 ? MAX_BACKOFF_MS : backoff * 2;
    }
    if ((rc = gkc__conn_connect(c, c->socket_path)) != 0) continue;
    if ((rc = hello(c)) == 0) break;
    close(c->fd);
    c->fd = -1;
  }
  if (rc) {
    char last[sizeof c->errmsg];
    snprintf(last, sizeof last, "%s", c->errmsg);
    snprintf(c->dead_msg, sizeof c->dead_msg, "%.200s", why);
    rc = gkc__fail(c, GKC_ECONNECT, "the connection to gkcd was lost (%.150s) and %d attempt%s"
                   " to connect again over %.1f s failed; the last: %.200s", why, c->rc_tries,
                   c->rc_tries == 1 ? "" : "s", (double)(gkc__now_ns() - t0) / 1e9, last);
    /* Marked now, not tried again at the frame's end: one round of
     * attempts is what the policy allows. */
    char failed[sizeof c->errmsg];
    snprintf(failed, sizeof failed, "%s", c->errmsg);
    lose_unsent(c, why, failed);
    snprintf(c->errmsg, sizeof c->errmsg, "%s", failed);
    return rc;
  }
  c->epoch++;
  c->dead_msg[0] = 0;
  mark_stale(c, old_instance);
  if (c->on_reconnect) c->on_reconnect(c);
  /* Before any new request: what was in flight goes first, in its order. */
  send_held(c);
  c->errmsg[0] = 0;
  return 0;
}

int gkc__live(gkc_conn *c) {
  if (c->staging) return 0;
  if (c->fd >= 0 && c->npending == 0 && !c->nonblock && c->rc_tries > 0) {
    /* Idle, yet something arrived: gkcd's end of the stream (a restart) or
     * its notification before closing.  Read it now, so that the call is
     * sent on a live connection rather than into a dead one. */
    struct pollfd p = {.fd = c->fd, .events = POLLIN | POLLRDHUP};
    if (poll(&p, 1, 0) > 0 && p.revents) {
      c->nonblock = 1;
      gkc__read(c);
      c->nonblock = 0;
    }
  }
  return gkc__revive(c);
}

/* --- sending again what was in flight -------------------------------------------------- */

/* Gives the same result when run twice, and can be packed again as it
 * is: no descriptor, nothing staged in the (old) arena, no array result
 * written into gkcd-side memory. */
static int idempotent(const gkc__req *r) {
  static const char *const always[] = {"ping", "status", "metrics", "reduce", "dot", "nrm2",
                                       "download", NULL};
  static const char *const by_value[] = {"sgemm", "spmv", "axpby", "solve", NULL};
  if (r->fd >= 0 || r->nslices || r->out_staged || r->internal) return 0;
  for (const char *const *m = always; *m; m++)
    if (!strcmp(r->method, *m)) return !r->out || r->out->kind == GKC_OUT_MEM;
  for (const char *const *m = by_value; *m; m++)
    if (!strcmp(r->method, *m)) return r->out && r->out->kind == GKC_OUT_MEM;
  return 0;
}

/* The message of a request lost in flight and not sent again; lost: how
 * the connection was lost. */
static void not_sent_again(gkc_conn *c, const gkc__req *r, const char *lost) {
  char why[sizeof c->errmsg];
  snprintf(why, sizeof why, "%s", lost);
  gkc__fail(c, GKC_EIO, "%.300s: this %s was in flight and may or may not have run; it was not"
            " sent again%s", why, r->method,
            r->resent ? " (it had been sent again once already, after an earlier loss)"
                      : " (the next call connects again)");
}

/* gkc__run's hook: r failed with status; 1 when it is to be sent once more
 * on a connection made again (made here), 0 when its failure stands (its
 * message then says it was not sent again). */
static int replay_hook(gkc_conn *c, gkc__req *r, int status) {
  if (status != GKC_EIO || c->fd >= 0 || c->cancelling || c->rc_tries <= 0) return 0;
  if ((c->rc_flags & GKC_RECONNECT_IDEMPOTENT) && idempotent(r)) {
    char lost[sizeof c->errmsg];
    snprintf(lost, sizeof lost, "%s", c->errmsg);
    /* A big result half received straight into out (gkc_wire.c) comes
     * whole again: its reply must not be read as already delivered. */
    r->delivered = 0;
    if (gkc__revive(c) == 0 && c->fd >= 0) return 1;
    char failed[sizeof c->errmsg];
    snprintf(failed, sizeof failed, "%s", c->errmsg);
    gkc__fail(c, GKC_EIO, "%.200s; this %s was in flight and could not be sent again: %.250s",
              lost, r->method, failed);
    return 0;
  }
  not_sent_again(c, r, c->errmsg);
  return 0;
}

/* --- the same for an async context's requests ------------------------------------------
 *
 * Many requests may be in flight there, each with a callback that must run
 * exactly once.  A request lost with its connection is offered to
 * hold_hook before its callback would run (the context's done hook asks):
 * with GKC_RECONNECT_IDEMPOTENT, an idempotent one that was not sent again
 * before is kept on c->held, in msgid order, and its callback waits.  The
 * connection is made again by the first of: a new request call (from a
 * callback of a request that failed), or gkc__resend, which the context
 * runs before it returns to the loop.  gkc__revive then sends every held
 * request again, in order, before anything new.  One that cannot be sent
 * (it names an object that did not survive, or no connection could be
 * made) stays held, marked lost with its own error, and gkc__resend runs
 * its callback: never from inside a request call. */

static void held_push(gkc_conn *c, gkc__req *r) {
  gkc__req **p = &c->held;
  while (*p) p = &(*p)->next;
  r->next = NULL;
  *p = r;
  c->nheld++;
}

/* r will end with status and msg (copied; without memory, its end says less). */
static void lose(gkc__req *r, int status, const char *msg) {
  r->lost_status = status;
  free(r->lost_msg);
  r->lost_msg = strdup(msg);
}

static int hold_hook(gkc_conn *c, gkc__req *r, int status) {
  /* Lost in flight: GKC_EIO, and the connection it went out on is gone
   * (closed, or already made again by a callback of another lost request).
   * Anything else is an answer, or the context being closed. */
  if (status != GKC_EIO || c->cancelling || r->internal || r->lost_status) return 0;
  if (c->fd >= 0 && r->epoch == c->epoch) return 0;
  if (c->rc_tries <= 0) return 0; /* reconnecting off: the loss is reported as it always was */
  if ((c->rc_flags & GKC_RECONNECT_IDEMPOTENT) && !r->resent && idempotent(r)) {
    held_push(c, r);
    return 1;
  }
  not_sent_again(c, r, c->errmsg);
  return 0;
}

/* On a connection just made: every held request not yet lost is sent again
 * (its latency still counts from its first call). */
static void send_held(gkc_conn *c) {
  gkc__req *list = c->held;
  c->held = NULL;
  c->nheld = 0;
  char keep[sizeof c->errmsg];
  snprintf(keep, sizeof keep, "%s", c->errmsg);
  while (list) {
    gkc__req *r = list;
    list = r->next;
    r->next = NULL;
    if (!r->lost_status) {
      uint64_t t0 = r->t0_ns;
      r->resent = 1;
      r->delivered = 0; /* a big result half received into out: all of it comes again */
      /* Unbounded: it was within the context's bounds when it was first sent. */
      int rc = gkc__submit(c, r, 0, 0);
      if (rc == 0) {
        r->t0_ns = t0;
        r->epoch = c->epoch;
        continue;
      }
      lose(r, rc, c->errmsg); /* a stale object (gkc__pack_id), or out of memory */
    }
    held_push(c, r);
  }
  snprintf(c->errmsg, sizeof c->errmsg, "%s", keep);
}

/* No connection for the held requests: each not yet lost is, naming how
 * the connection was lost (why) and why none was made again (failed). */
static void lose_unsent(gkc_conn *c, const char *why, const char *failed) {
  char msg[sizeof c->errmsg];
  for (gkc__req *r = c->held; r; r = r->next) {
    if (r->lost_status) continue;
    snprintf(msg, sizeof msg, "%.200s; this %s was in flight and could not be sent again: %.250s",
             why, r->method, failed);
    lose(r, GKC_EIO, msg);
  }
}

static int has_unsent(const gkc_conn *c) {
  for (const gkc__req *r = c->held; r; r = r->next)
    if (!r->lost_status) return 1;
  return 0;
}

/* Runs r's callback (through its done hook) with status and msg. */
static void end_held(gkc_conn *c, gkc__req *r, int status, const char *msg) {
  snprintf(c->errmsg, sizeof c->errmsg, "%s", msg);
  if (r->end) r->end(c, r, status);
  r->end = NULL;
  gkc_result res;
  gkc__result_init(&res);
  res.status = status;
  res.errmsg = c->errmsg;
  res.method = r->method;
  res.msgid = r->msgid;
  res.latency_us = (double)(gkc__now_ns() - r->t0_ns) / 1e3;
  r->done(c, r, &res);
}

int gkc__resend(gkc_conn *c) {
  int rc = 0;
  if (c->held && !c->cancelling && has_unsent(c)) {
    if (c->fd >= 0) {
      send_held(c); /* made again by a callback after these were held */
    } else {
      char why[sizeof c->dead_msg];
      snprintf(why, sizeof why, "%s", c->dead_msg);
      rc = gkc__revive(c);
      if (rc == 0 && c->fd < 0) /* the policy changed meanwhile, or the context is closing */
        lose_unsent(c, why, "no connection was made again (reconnecting is off)");
    }
  }
  /* What the context says happened (gkc_async_errmsg), whatever the
   * callbacks' messages below leave in errmsg. */
  char said[sizeof c->errmsg];
  snprintf(said, sizeof said, "%s", c->errmsg);
  /* Re-read every time: a callback may close the context (which ends the
   * rest as cancelled, through here) or hold more. */
  char msg[sizeof c->errmsg];
  while (c->held && (c->cancelling || c->held->lost_status)) {
    gkc__req *r = c->held;
    c->held = r->next;
    c->nheld--;
    r->next = NULL;
    int status = c->cancelling ? GKC_ECANCELLED : r->lost_status;
    if (c->cancelling)
      snprintf(msg, sizeof msg, "cancelled: the connection was closed before the reply arrived");
    else if (r->lost_msg)
      snprintf(msg, sizeof msg, "%s", r->lost_msg);
    else
      snprintf(msg, sizeof msg, "this %s was in flight and could not be sent again (out of "
               "memory for the reason)", r->method);
    end_held(c, r, status, msg);
  }
  snprintf(c->errmsg, sizeof c->errmsg, "%s", said);
  return rc;
}
