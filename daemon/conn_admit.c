/* conn_admit.c: who may connect (peer credentials, the connection limits,
 * a refusal the client can read), and the deadlines that close a
 * connection (--idle-timeout, --send-timeout, --request-timeout); see
 * conn.h.  The rest of the transport is conn.c. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "conn.h"

#include <msgpack.h>

#include "gkc_errors.h"
#include "log.h"
#include "proto_rpc.h"

/* How long a refused socket stays open so its client can read why. */
#define LINGER_MS 2000

/* --- accepting ----------------------------------------------------------- */

/* Root, gkcd's own user, an allowed user, or a member of an allowed group
 * (the socket's group when none is configured). */
static int peer_allowed(gkcd_conns *set, int fd, struct ucred *cr) {
  socklen_t len = sizeof *cr;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, cr, &len) != 0) return 0;
  if (cr->uid == 0 || cr->uid == getuid()) return 1;
  const gkcd_config *cfg = set->cfg;
  for (int i = 0; i < cfg->n_allow_uids; i++)
    if (cfg->allow_uids[i] == cr->uid) return 1;
  const gid_t *gids = cfg->n_allow_gids ? cfg->allow_gids : &set->socket_gid;
  int ngids = cfg->n_allow_gids ? cfg->n_allow_gids : 1;
  gid_t groups[256];
  socklen_t glen = sizeof groups;
  int ngroups = getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &glen) == 0
                    ? (int)(glen / sizeof(gid_t)) : 0;
  for (int i = 0; i < ngids; i++) {
    if (gids[i] == cr->gid) return 1;
    for (int j = 0; j < ngroups; j++)
      if (gids[i] == groups[j]) return 1;
  }
  return 0;
}

/* Tells a refused client why, then keeps its socket open for a moment:
 * closed at once, a client that has just sent its first request could see
 * only a reset before it reads the reason. */
static void refuse(gkcd_conns *set, int fd, int code, const char *msg) {
  msgpack_sbuffer sb;
  msgpack_packer pk;
  msgpack_sbuffer_init(&sb);
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  proto_pack_error_notification(&pk, code, msg);
  ssize_t w = send(fd, sb.data, sb.size, MSG_NOSIGNAL | MSG_DONTWAIT);
  (void)w; /* a refused peer that cannot take 100 bytes learns from the close */
  msgpack_sbuffer_destroy(&sb);
  shutdown(fd, SHUT_WR);
  if (set->nlinger == CONN_LINGER_MAX) { /* the oldest goes first */
    close(set->linger_fds[0]);
    memmove(set->linger_fds, set->linger_fds + 1, (CONN_LINGER_MAX - 1) * sizeof set->linger_fds[0]);
    memmove(set->linger_ms, set->linger_ms + 1, (CONN_LINGER_MAX - 1) * sizeof set->linger_ms[0]);
    set->nlinger--;
  }
  set->linger_fds[set->nlinger] = fd;
  set->linger_ms[set->nlinger++] = uv_now(set->loop);
}

void conn_linger_close_all(gkcd_conns *set) {
  for (int i = 0; i < set->nlinger; i++) close(set->linger_fds[i]);
  set->nlinger = 0;
}

static uint64_t conns_of_user(gkcd_conns *set, int uid) {
  uint64_t n = 0;
  for (gkcd_conn *c = set->head; c; c = c->next)
    if (c->uid == uid && !c->closing) n++;
  return n;
}

void conn_accept(gkcd_conns *set, int fd) {
  struct ucred cr = {0, (uid_t)-1, (gid_t)-1};
  if (!peer_allowed(set, fd, &cr)) {
    set->refused++;
    log_warn("refused connection from pid %d uid %d gid %d: not an allowed user or group"
             " (allow-users, allow-groups)", (int)cr.pid, (int)cr.uid, (int)cr.gid);
    close(fd);
    return;
  }
  char msg[200];
  if (set->n >= set->cfg->max_connections) {
    snprintf(msg, sizeof msg, "gkcd has %llu connections open, its limit (--max-connections %zu);"
             " retry later", (unsigned long long)set->n, set->cfg->max_connections);
  } else if (conns_of_user(set, (int)cr.uid) >= set->cfg->max_conn_per_user) {
    snprintf(msg, sizeof msg, "user %d has %zu connections open, the limit per user"
             " (--max-conn-per-user %zu); close some or retry later", (int)cr.uid,
             set->cfg->max_conn_per_user, set->cfg->max_conn_per_user);
  } else {
    msg[0] = 0;
  }
  if (msg[0]) {
    set->refused++;
    set->refused_slots++;
    log_warn("refused connection from pid %d uid %d: %s", (int)cr.pid, (int)cr.uid, msg);
    refuse(set, fd, GKC_ETOO_MANY_CONNECTIONS, msg);
    return;
  }
  gkcd_conn *c = calloc(1, sizeof *c + set->owner_size);
  int rc = c ? uv_poll_init(set->loop, &c->poll, fd) : UV_ENOMEM;
  if (rc) {
    log_err("accepting a connection: %s", uv_strerror(rc));
    free(c);
    close(fd);
    return;
  }
  c->poll.data = c;
  c->fd = fd;
  c->set = set;
  c->srv = set->srv;
  c->refs = 1;
  c->pid = (int)cr.pid;
  c->uid = (int)cr.uid;
  c->id = ++set->next_id;
  set->hooks.accepted(c);
  c->last_active_ms = uv_now(set->loop);
  c->next = set->head;
  if (set->head) set->head->prev = c;
  set->head = c;
  set->n++;
  log_debug("connection %llu opened by pid %d uid %d", (unsigned long long)c->id, c->pid, c->uid);
  conn_update_reading(c);
}

/* --- deadlines ----------------------------------------------------------- */

/* Tells the client why (it may be reading even if it is not sending), then
 * closes once that is out, or at once when its replies are what is stuck. */
static void timeout_close(gkcd_conn *c, const char *msg) {
  log_info("connection %llu (pid %d): %s", (unsigned long long)c->id, c->pid, msg);
  c->by_gkcd = 1;
  if (c->rbusy) reader_cancel(&c->rt); /* the request will not be served */
  if (c->npend) {
    conn_close(c);
    return;
  }
  msgpack_sbuffer sb;
  msgpack_packer pk;
  msgpack_sbuffer_init(&sb);
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  proto_pack_error_notification(&pk, GKC_ETIMEOUT, msg);
  size_t len = sb.size;
  c->close_when_flushed = 1;
  c->by_gkcd = 1;
  c->reading = 0;
  conn_send(c, msgpack_sbuffer_release(&sb), len, NULL, 0);
}

void conn_sweep(gkcd_conns *set) {
  const gkcd_config *cfg = set->cfg;
  uint64_t now = uv_now(set->loop);
  uint64_t idle = (uint64_t)(cfg->idle_timeout_s * 1000), send = (uint64_t)(cfg->send_timeout_s * 1000),
           req = (uint64_t)(cfg->request_timeout_s * 1000);
  char msg[200];
  for (gkcd_conn *c = set->head, *next; c; c = next) {
    next = c->next;
    if (c->closing) continue;
    if (c->wbusy) { /* a writer's progress, as conn_write_pending's would be seen */
      size_t p = atomic_load_explicit(&c->wt.progress, memory_order_relaxed);
      if (p != c->wprog) {
        c->wprog = p;
        c->send_since_ms = c->last_active_ms = now;
      }
    }
    if (send && c->npend && c->send_since_ms && now - c->send_since_ms >= send) {
      set->closed_send_timeout++;
      snprintf(msg, sizeof msg, "%zu reply bytes not read for %g s (--send-timeout); closing",
               c->unwritten, cfg->send_timeout_s);
      timeout_close(c, msg);
    } else if (req && c->len && ((c->reading && c->taking) || c->wait_mem) && !c->close_when_flushed &&
               c->req_start_ms &&
               now - c->req_start_ms >= req) {
      set->closed_request_timeout++;
      size_t got = c->rbusy ? atomic_load_explicit(&c->rt.progress, memory_order_relaxed) : c->len;
      snprintf(msg, sizeof msg, "a request took longer than %g s to arrive (--request-timeout;"
               " %zu bytes of it received); closing", cfg->request_timeout_s, got);
      timeout_close(c, msg);
    } else if (idle && !c->jobs && !c->npend && !c->len && now - c->last_active_ms >= idle) {
      set->closed_idle++;
      snprintf(msg, sizeof msg, "idle for %g s (--idle-timeout); closing", cfg->idle_timeout_s);
      timeout_close(c, msg);
    }
  }
  int kept = 0;
  for (int i = 0; i < set->nlinger; i++) {
    if (now - set->linger_ms[i] >= LINGER_MS) {
      close(set->linger_fds[i]);
    } else {
      set->linger_fds[kept] = set->linger_fds[i];
      set->linger_ms[kept++] = set->linger_ms[i];
    }
  }
  set->nlinger = kept;
}
