/* rpc.c: from a complete frame to a reply.
 *
 * The header [0, msgid, method, [params]] is checked before any argument is
 * read (proto_request_parse), then the method's arguments (methods.c), and
 * only then is a job queued.  Every path ends in exactly one reply.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "args.h"
#include "gkc.h"
#include "log.h"
#include "method.h"
#include "methods.h"
#include "move.h"
#include "part.h"
#include "split.h"
#include "proto_errors.h"
#include "proto_methods.h"
#include "proto_rpc.h"
#include "res_object.h"
#include "server.h"

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Sends whatever sb holds, taking its memory. */
static void send_sbuffer(gkcd_conn *c, msgpack_sbuffer *sb, void *body, size_t body_len) {
  size_t len = sb->size;
  conn_send(c, msgpack_sbuffer_release(sb), len, body, body_len);
}

static void pack_error(msgpack_sbuffer *sb, int msgid_known, uint32_t msgid, int code, const char *msg) {
  msgpack_packer pk;
  msgpack_sbuffer_init(sb);
  msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
  proto_pack_error(&pk, msgid_known, msgid, code, msg);
}

void rpc_send_error(gkcd_conn *c, int msgid_known, uint32_t msgid, int code, const char *msg) {
  msgpack_sbuffer sb;
  pack_error(&sb, msgid_known, msgid, code, msg);
  send_sbuffer(c, &sb, NULL, 0);
}

void rpc_reject_frame(gkcd_conn *c, int scan_rc, const proto_frame_info *info) {
  char msg[200];
  int code;
  gkcd_server *srv = c->srv;
  srv->bad_frames++;
  switch (scan_rc) {
    case PROTO_FRAME_ETOOBIG:
      code = GKC_ETOO_LARGE;
      snprintf(msg, sizeof msg, "request is larger than the limit of %zu bytes"
               " (--max-request-bytes); closing the connection", srv->limits.max_bytes);
      break;
    case PROTO_FRAME_ECOMPLEX:
      code = GKC_EINVALID_REQUEST;
      snprintf(msg, sizeof msg, "request has more than %u msgpack objects or nests deeper than %u;"
               " closing the connection", srv->limits.max_objects, srv->limits.max_depth);
      break;
    default:
      code = GKC_EPARSE_ERROR;
      snprintf(msg, sizeof msg, "bytes are not msgpack; closing the connection");
  }
  log_info("connection %llu: %s: %s", (unsigned long long)c->id, proto_err_wire(code), msg);
  rpc_send_error(c, info->msgid_known, info->msgid, code, msg);
}

/* Starts a success reply to msgid in sb. */
static void result_begin(msgpack_sbuffer *sb, msgpack_packer *pk, uint32_t msgid) {
  msgpack_sbuffer_init(sb);
  msgpack_packer_init(pk, sb, msgpack_sbuffer_write);
  proto_pack_result_head(pk, msgid);
}

/* A frame or a completion reached the loop; server_run polls on after it. */
static void count_event(gkcd_server *srv) {
  srv->events++;
  if (srv->polling) srv->loop_spin_hits++;
}

/* Frees the job and what it holds: its request bytes, its result, its
 * references to resident objects. */
/* A solve's AMG hierarchy, before the job lets go of its matrix: the
 * matrix's own given back (another solve may have it now), or one this
 * solve built kept with the matrix, when it has none and the budget has
 * room (the bytes count as resident until the matrix goes), else freed. */
static void amg_settle(gkcd_server *srv, gkcd_job *job) {
  gkcd_res *m = job->amg_matrix;
  if (!m) return;
  if (job->in.solve.amg) m->precond_busy = 0;
  void *h = job->amg_built;
  job->amg_built = NULL;
  if (!h) return;
  gkcd_backend *be = srv->devs.dev[m->device].be;
  if (!m->released && !m->precond && budget_fits(&srv->budget, job->amg_built_bytes)) {
    m->precond = h;
    m->precond_bytes = job->amg_built_bytes;
    budget_take(&srv->budget, BUDGET_RESIDENT, m->precond_bytes);
    srv->res.precond_bytes += m->precond_bytes;
  } else if (be->precond_free) {
    be->precond_free(be, h);
  }
}

static void job_free(gkcd_server *srv, gkcd_job *job) {
  amg_settle(srv, job);
  move_free(job);   /* operands copied from other devices (before the objects go) */
  split_free(job);  /* parts, and copies a replicate made that nobody adopted */
  if (job->row && job->row->makes == RES_MATRIX && !job->part_adopted) part_free(job->part);
  for (int i = 0; i < job->nres; i++) res_unref(&srv->res, job->res[i]);
  if (job->reg_fd >= 0) close(job->reg_fd);
  if (job->pin_charge) res_unpin(&srv->res, &client_of(job->conn)->owns, job->pin_charge);
  free(job->priv[0]);
  free(job->priv[1]);
  free(job->out);
  /* A big request's bytes go back to the pool instead of to free(), for
   * the next big request (bufpool.h). */
  if (job->frame && job->frame_bytes >= BUFPOOL_MIN)
    bufpool_put(&srv->bufpool, job->frame);
  else
    free(job->frame);
  free(job);
}

/* A job created something that outlives it: register it, or free it when
 * its connection has gone.  Returns the new id, 0 when nothing was made. */
static uint32_t adopt(gkcd_server *srv, gkcd_job *job) {
  int kind = job->row->makes;
  if (kind < 0 && job->out_kind == OUT_RES_NEW) kind = RES_ARRAY;
  if (kind < 0) return 0;
  gkcd_conn *c = job->conn;
  gkcd_res *r = c->closing ? NULL : res_add(&srv->res, kind, job->shared ? NULL : &client_of(c)->owns);
  if (!r) { /* nobody can use it any more (or no memory to track it) */
    if (kind == RES_REGION) {
      gkcd_backend *be = srv->devs.dev[0].be; /* the pinner's, portable */
      if (job->reg_pinned && be->region_unpin) be->region_unpin(be, job->out_ptr);
      munmap(job->out_ptr, job->out_bytes);
    } else if (!job->copies && !job->part) { /* a replicate's copies, a partitioned matrix's
                                               * blocks go with the job (job_free) */
      gkcd_backend *be = srv->devs.dev[job->device].be;
      be->res_free(be, job->out_ptr, job->out_cap);
    }
    if (!c->closing) job_fail(job, GKC_EOUT_OF_MEMORY, "out of memory");
    return 0;
  }
  r->uid = c->uid;
  r->ptr = job->out_ptr;
  r->cap = job->out_cap;
  r->bytes = job->out_bytes;
  r->device = job->device;
  if (job->part && kind == RES_MATRIX) { /* partitioned: the object takes the blocks */
    r->part = job->part;
    r->bytes = job->part->bytes;
    r->device = job->part->dev[0];
    job->part_adopted = 1;
  }
  if (job->copies) { /* replicated: the object takes every device's copy */
    r->copies = job->copies;
    r->rep_mask = job->split_mask;
    job->copies = NULL;
  }
  if (kind == RES_REGION) {
    res_region_pin(&srv->res, r, job->reg_pinned, job->reg_dev, job->reg_ino);
    job->pin_charge = 0; /* the region's now: res_release gives them back */
    return r->id;
  }
  /* upload, the row that makes arrays, says their type; a matrix's is its
   * values'; an out handle's is the result's */
  r->dtype = job->row->makes == RES_ARRAY    ? job->in.upload.dtype
             : job->row->makes == RES_MATRIX ? job->in.csr.values.dtype
                                             : job->out_dtype;
  if (kind == RES_MATRIX) {
    r->rows = job->in.csr.rows, r->cols = job->in.csr.cols, r->nnz = job->in.csr.nnz;
    r->max_row = job->in.csr.max_row;
    r->pos_offdiag = job->in.csr.pos_offdiag;
    r->algo = job->algo_used;
    r->plan_off = job->plan_off;
  }
  /* Resident bytes stay in the budget until released (resident.c). */
  budget_take(&srv->budget, BUDGET_RESIDENT, res_charge(r));
  return r->id;
}

/* Returns 0 when the job was accepted (it now owns frame), else an error
 * code with msg filled; frame is then still the caller's. */
static int submit(gkcd_conn *c, const gkcd_method *row, const proto_request *req, void *frame,
                  size_t frame_len, char *msg, size_t msglen) {
  gkcd_server *srv = c->srv;
  if (srv->draining) {
    snprintf(msg, msglen, "gkcd is shutting down");
    return GKC_EBUSY;
  }
  gkcd_job *job = calloc(1, sizeof *job);
  if (!job) {
    snprintf(msg, msglen, "out of memory");
    return GKC_EOUT_OF_MEMORY;
  }
  job->reg_fd = -1;
  job->method = req->method;
  job->row = row;
  job->pin_device = -1;
  args_ctx a = {req->params, msg, msglen};
  /* A region's memfd came as ancillary data with its bytes: the oldest
   * descriptor not yet taken is this request's. */
  int fd = row->makes == RES_REGION ? conn_take_fd(c) : -1;
  refs_ctx r = {.a = &a, .res = &srv->res, .asker = &client_of(c)->owns, .devs = &srv->devs, .fd = fd,
                .job = job};
  int rc = methods_deadline(&a, job);
  if (rc == 0 && row->where == METHOD_BACKEND && !srv->be->run[row->id]) {
    snprintf(msg, msglen, "method '%s' is not served by gkcd's %s backend",
             proto_method_name(row->id), srv->be->name);
    rc = GKC_EUNKNOWN_METHOD;
  }
  if (rc == 0) rc = row->parse(&r, srv->cfg.max_request_bytes);
  /* The one place a backend without float64 kernels turns f64 away, before
   * anything is queued: every row notes its first f64 argument. */
  if (rc == 0 && job->f64_arg[0] && !srv->be->f64 &&
      !(srv->be->f64_methods & (1ull << job->method))) {
    char some[120] = "";
    size_t at = 0;
    for (int m = 0; m < PROTO_M_COUNT && at < sizeof some; m++)
      if (srv->be->f64_methods & (1ull << m))
        at += (size_t)snprintf(some + at, sizeof some - at, "%s%s", at ? ", " : "", proto_method_name(m));
    snprintf(msg, msglen, "argument '%s' is float64 (f64): gkcd's %s backend serves f64 %s%s%s"
             " (the CPU backend serves it everywhere); send float32 (f32)", job->f64_arg,
             srv->be->name, some[0] ? "only to " : "not yet", some, some[0] ? " so far" : "");
    rc = GKC_EINVALID_ARGUMENT;
  }
  if (rc == 0 && job->method == PROTO_M_SOLVE && !srv->be->amg &&
      (job->in.solve.precond == SOLVE_PRECOND_AMG ||
       (job->in.solve.precond == SOLVE_PRECOND_JACOBI && job->in.solve.method == SOLVE_BICGSTAB))) {
    snprintf(msg, msglen, "argument 'precond': %s runs on the CPU backend only for now",
             job->in.solve.precond == SOLVE_PRECOND_AMG ? "amg" : "jacobi with bicgstab");
    rc = GKC_EINVALID_ARGUMENT;
  }
  if (rc == 0 && job->method == PROTO_M_SOLVE && !srv->be->f64_solve_matrix &&
      job->in.solve.values_dtype == DT_F64) {
    snprintf(msg, msglen, "argument 'matrix': its values are float64 (f64), and solve on gkcd's %s"
             " backend takes float32 (f32) matrix values only so far (b, x0 and x may be float64):"
             " upload the matrix with dtype \"f32\" (the CPU backend takes both)", srv->be->name);
    rc = GKC_EINVALID_ARGUMENT;
  }
  if (r.fd >= 0) close(r.fd); /* refused before the job took it */
  /* Every request that creates an object (upload, csr_upload, out "handle")
   * counts against the limits on objects. */
  if (rc == 0 && job->out_kind == OUT_RES_NEW)
    rc = res_room(&srv->res, job->shared ? NULL : &client_of(c)->owns, RES_ARRAY, msg, msglen);
  job->conn = c;
  job->client = &client_of(c)->sc;
  job->msgid = req->msgid;
  job->frame_bytes = frame_len;
  job->t_start_ns = now_ns();
  if (job->deadline_ns) job->deadline_ns += job->t_start_ns;
  if (rc == 0) rc = sched_submit(srv->sched, job, msg, msglen);
  if (rc) {
    job_free(srv, job);
    return rc;
  }
  job->frame = frame;
  c->refs++;
  c->jobs++;
  srv->in_flight++;
  server_expect(srv, job->cost_us);
  return 0;
}

static void status_cb(void *srv, msgpack_packer *pk) { status_pack(srv, pk); }
static char *metrics_cb(void *srv, size_t *len) { return status_metrics(srv, len); }

/* A method the loop answers at once (ping, status, metrics, release,
 * shm_release): its row packs the result. */
static void answer(gkcd_conn *c, const gkcd_method *row, const proto_request *req) {
  gkcd_server *srv = c->srv;
  char msg[320];
  if (row->no_args && req->params->via.map.size != 0) {
    snprintf(msg, sizeof msg, "method '%s' takes no arguments", proto_method_name(req->method));
    metrics_count(&srv->metrics, req->method, GKC_EINVALID_ARGUMENT);
    srv->errors[req->method]++;
    rpc_send_error(c, 1, req->msgid, GKC_EINVALID_ARGUMENT, msg);
    return;
  }
  if (row->no_args) metrics_count(&srv->metrics, req->method, 0);
  method_env env = {srv, srv->be->name, status_cb, metrics_cb, &srv->res, &client_of(c)->owns, c,
                    srv->cfg.rings > 0 || (srv->cfg.rings < 0 && srv->cfg.spin_us > 0)};
  msgpack_sbuffer sb;
  msgpack_packer pk;
  result_begin(&sb, &pk, req->msgid);
  void *body = NULL;
  size_t body_len = 0;
  int rc = row->answer(&env, req->params, &pk, &body, &body_len, msg, sizeof msg);
  if (!row->no_args) metrics_count(&srv->metrics, req->method, rc);
  if (rc) {
    msgpack_sbuffer_destroy(&sb);
    free(body);
    srv->errors[req->method]++;
    rpc_send_error(c, 1, req->msgid, rc, msg);
    return;
  }
  send_sbuffer(c, &sb, body, body_len);
}

void rpc_handle_frame(gkcd_conn *c, void *frame, size_t len) {
  gkcd_server *srv = c->srv;
  count_event(srv);
  msgpack_zone zone;
  msgpack_object root;
  size_t off = 0;
  char msg[320];
  proto_request req;

  if (!msgpack_zone_init(&zone, 2048)) {
    free(frame);
    rpc_send_error(c, 0, 0, GKC_EOUT_OF_MEMORY, "out of memory decoding the request");
    return;
  }
  if (msgpack_unpack(frame, len, &off, &zone, &root) != MSGPACK_UNPACK_SUCCESS || off != len) {
    /* The scanner accepted the structure, so this is msgpack-c refusing
     * something (e.g. its own allocation failing). */
    srv->bad_frames++;
    rpc_send_error(c, 0, 0, GKC_EPARSE_ERROR, "request could not be decoded");
    goto done;
  }
  int rc = proto_request_parse(&root, &req, msg, sizeof msg);
  if (rc) {
    srv->bad_frames++;
    log_debug("connection %llu: %s: %s", (unsigned long long)c->id, proto_err_wire(rc), msg);
    rpc_send_error(c, req.msgid_known, req.msgid, rc, msg);
    goto done;
  }
  srv->requests[req.method]++;
  const gkcd_method *row = method_row(req.method);
  if (row->where == METHOD_LOOP) {
    answer(c, row, &req);
    goto done;
  }
  rc = submit(c, row, &req, frame, len, msg, sizeof msg);
  if (rc == 0) {
    frame = NULL; /* the job owns it */
  } else {
    srv->errors[req.method]++;
    metrics_count(&srv->metrics, req.method, rc);
    log_debug("connection %llu: %s %u: %s: %s", (unsigned long long)c->id,
              proto_method_name(req.method), req.msgid, proto_err_wire(rc), msg);
    rpc_send_error(c, 1, req.msgid, rc, msg);
  }
done:
  msgpack_zone_destroy(&zone);
  free(frame);
}

/* Answers a finished job and frees it.  more: the next reply is to the
 * same connection (conn_job_done). */
static void job_done(gkcd_server *srv, gkcd_job *job, int more) {
  gkcd_conn *c = job->conn;
  srv->in_flight--;
  if (srv->in_flight == 0) srv->expect_ns = 0; /* nothing left to wait for */
  srv->served++;
  count_event(srv);
  sched_finished(srv->sched, job); /* gives back its memory; replies take their own */
  uint32_t new_id = job->err ? 0 : adopt(srv, job);
  metrics_job_done(&srv->metrics, job, now_ns());
  msgpack_sbuffer sb;
  void *body = NULL;
  size_t body_len = 0;
  if (job->err) {
    srv->errors[job->method]++;
    log_debug("connection %llu: %s %u failed: %s: %s", (unsigned long long)c->id,
              proto_method_name(job->method), job->msgid, proto_err_wire(job->err), job->errmsg);
    pack_error(&sb, 1, job->msgid, job->err, job->errmsg);
  } else {
    srv->kernel_us[job->method] += job->kernel_us;
    msgpack_packer pk;
    result_begin(&sb, &pk, job->msgid);
    job->row->pack(&pk, job, (double)(now_ns() - job->t_start_ns) / 1e3, new_id);
    if (job->out_kind == OUT_BIN && job->out) {
      body = job->out;
      body_len = job->out_bytes;
      job->out = NULL; /* the write owns it now */
    }
  }
  job_free(srv, job);
  size_t len = sb.size;
  conn_job_done(c, msgpack_sbuffer_release(&sb), len, body, body_len, more);
  server_maybe_finish(srv);
}

void rpc_job_done(gkcd_job *job, void *arg) { job_done(arg, job, 0); }

void rpc_jobs_done(uv_async_t *h) {
  gkcd_server *srv = h->data;
  gkcd_job *list = job_done_take(&srv->done_q);
  bufpool_sync(&srv->bufpool); /* the charges of result buffers the workers took */
  /* Replies to one connection among these go out in one write: each
   * knows whether another follows (c->batch counts them). */
  for (gkcd_job *j = list; j; j = j->next) j->conn->batch++;
  while (list) {
    gkcd_job *job = list;
    list = job->next;
    job->next = NULL;
    job_done(srv, job, --job->conn->batch > 0);
  }
}
