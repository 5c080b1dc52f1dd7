/* comm.c: a rank, its gkcd, and agreeing on failures. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

double ctx_now(void) { return MPI_Wtime(); }

int ctx_fail(gkcm_ctx *ctx, int err, const char *fmt, ...) {
  if (ctx->err) return err;
  ctx->err = err;
  int n = snprintf(ctx->errmsg, sizeof ctx->errmsg, "rank %d: gkcd at %s on %s: ", ctx->rank,
                   ctx->socket[0] ? ctx->socket : "(none)", ctx->host);
  if (n < 0 || (size_t)n >= sizeof ctx->errmsg) n = 0;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(ctx->errmsg + n, sizeof ctx->errmsg - (size_t)n, fmt, ap);
  va_end(ap);
  return err;
}

int ctx_fail_gkc(gkcm_ctx *ctx, int rc, const char *step) {
  return ctx_fail(ctx, rc, "%s: %s: %s", step, gkc_errname(rc), gkc_errmsg(ctx->conn));
}

void ctx_sync_start(gkcm_ctx *ctx, const double *vals, int n, ctx_isync *s) {
  s->n = n;
  for (int i = 0; i < n; i++) s->buf[i] = vals[i];
  s->buf[n] = ctx->err ? 1 : 0;
  MPI_Iallreduce(MPI_IN_PLACE, s->buf, n + 1, MPI_DOUBLE, MPI_SUM, ctx->comm, &s->req);
}

int ctx_sync_finish(gkcm_ctx *ctx, double *vals, ctx_isync *s) {
  MPI_Wait(&s->req, MPI_STATUS_IGNORE);
  int n = s->n;
  for (int i = 0; i < n; i++) vals[i] = s->buf[i];
  if (s->buf[n] == 0) return 0;
  /* Rare path: who failed first (by rank), and what it said.  A rank that
   * failed only after start counts as not failed here (its flag went out
   * as 0) and reports at the next sync; the MPI_MIN below still finds a
   * rank that did fail in time. */
  int who = ctx->err ? ctx->rank : ctx->size;
  MPI_Allreduce(MPI_IN_PLACE, &who, 1, MPI_INT, MPI_MIN, ctx->comm);
  int err = ctx->err;
  MPI_Bcast(&err, 1, MPI_INT, who, ctx->comm);
  MPI_Bcast(ctx->errmsg, (int)sizeof ctx->errmsg, MPI_CHAR, who, ctx->comm);
  ctx->errmsg[sizeof ctx->errmsg - 1] = '\0';
  int others = (int)s->buf[n] - 1;
  if (others > 0) {
    size_t len = strlen(ctx->errmsg);
    snprintf(ctx->errmsg + len, sizeof ctx->errmsg - len, " (and %d other rank%s failed)",
             others, others > 1 ? "s" : "");
  }
  ctx->err = 0;
  return err;
}

int ctx_sync(gkcm_ctx *ctx, double *vals, int n) {
  ctx_isync s;
  ctx_sync_start(ctx, vals, n, &s);
  return ctx_sync_finish(ctx, vals, &s);
}

/* Expands GKC_MPI_SOCKET's %r, %l, %h and %%; -1 when it does not fit. */
static int expand(const char *tmpl, int rank, int local, const char *host, char *out,
                  size_t outlen) {
  size_t k = 0;
  for (const char *s = tmpl; *s; s++) {
    char piece[80];
    if (*s == '%' && s[1]) {
      s++;
      if (*s == 'r') snprintf(piece, sizeof piece, "%d", rank);
      else if (*s == 'l') snprintf(piece, sizeof piece, "%d", local);
      else if (*s == 'h') snprintf(piece, sizeof piece, "%s", host);
      else if (*s == '%') snprintf(piece, sizeof piece, "%%");
      else return -1;
    } else {
      piece[0] = *s, piece[1] = '\0';
    }
    size_t len = strlen(piece);
    if (k + len >= outlen) return -1;
    memcpy(out + k, piece, len + 1);
    k += len;
  }
  out[k] = '\0';
  return 0;
}

int gkcm_init(MPI_Comm comm, const char *socket, gkcm_ctx **out) {
  *out = NULL;
  gkcm_ctx *ctx = calloc(1, sizeof *ctx);
  /* Every rank must reach the agreement below, even one without memory:
   * a stack context stands in to take part, then reports. */
  gkcm_ctx stand_in = {0};
  gkcm_ctx *c = ctx ? ctx : &stand_in;
  MPI_Comm_dup(comm, &c->comm);
  MPI_Comm_rank(c->comm, &c->rank);
  MPI_Comm_size(c->comm, &c->size);
  if (gethostname(c->host, sizeof c->host - 1) != 0) snprintf(c->host, sizeof c->host, "?");
  MPI_Comm node;
  int local = 0;
  MPI_Comm_split_type(c->comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  MPI_Comm_rank(node, &local);
  MPI_Comm_free(&node);

  const char *tmpl = getenv("GKC_MPI_SOCKET");
  char want[128];
  const char *ask = NULL;
  if (!ctx) {
    ctx_fail(c, GKC_EOUT_OF_MEMORY, "out of memory for the context");
  } else if (socket) {
    ask = socket;
  } else if (tmpl && *tmpl) {
    if (expand(tmpl, c->rank, local, c->host, want, sizeof want) != 0)
      ctx_fail(c, GKC_EINVALID_ARGUMENT, "GKC_MPI_SOCKET='%s': only %%r, %%l, %%h and %%%% may "
               "follow a %%, and the path must fit in %zu bytes", tmpl, sizeof want - 1);
    else
      ask = want;
  }
  if (!c->err && gkc_socket_path(c->socket, sizeof c->socket, ask) != 0)
    ctx_fail(c, GKC_EINVALID_ARGUMENT, "the socket path is too long for a Unix socket");
  if (!c->err && gkc_connect(&c->conn, c->socket) != 0) {
    ctx_fail(c, GKC_ECONNECT, "%s", c->conn ? gkc_errmsg(c->conn) : "out of memory");
    gkc_close(c->conn);
    c->conn = NULL;
  }
  /* No reconnecting: a rank's resident vectors and halo region die with its
   * daemon, so every rank must fail at once, naming it, rather than retry
   * for seconds and then find its objects stale. */
  if (!c->err) gkc_set_reconnect(c->conn, 0, 0, 0);
  int rc = ctx_sync(c, NULL, 0);
  if (!ctx) {
    gkc_close(c->conn);
    MPI_Comm_free(&c->comm);
    return GKC_EOUT_OF_MEMORY;
  }
  *out = ctx;
  return rc;
}

void gkcm_free(gkcm_ctx *ctx) {
  if (!ctx) return;
  gkc_close(ctx->conn);
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Comm_free(&ctx->comm);
  free(ctx);
}

const char *gkcm_errmsg(const gkcm_ctx *ctx) { return ctx ? ctx->errmsg : "out of memory"; }
int gkcm_rank(const gkcm_ctx *ctx) { return ctx->rank; }
int gkcm_size(const gkcm_ctx *ctx) { return ctx->size; }
MPI_Comm gkcm_comm(const gkcm_ctx *ctx) { return ctx->comm; }
const char *gkcm_socket(const gkcm_ctx *ctx) { return ctx->socket; }
gkc_conn *gkcm_conn(const gkcm_ctx *ctx) { return ctx->conn; }
