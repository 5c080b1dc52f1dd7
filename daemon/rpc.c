/* rpc.c: from a complete frame to a reply.
 *
 * The header [0, msgid, method, [params]] is checked before any argument is
 * read (proto_request_parse), then the method's arguments (methods.c), and
 * only then is a job queued.  Every path ends in exactly one reply.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "args.h"
#include "gkc.h"
#include "log.h"
#include "methods.h"
#include "proto_errors.h"
#include "proto_rpc.h"
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

static void send_error(gkcd_conn *c, int msgid_known, uint32_t msgid, int code,
                       const char *msg) {
  msgpack_sbuffer sb;
  msgpack_packer pk;
  msgpack_sbuffer_init(&sb);
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  proto_pack_error(&pk, msgid_known, msgid, code, msg);
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
  send_error(c, info->msgid_known, info->msgid, code, msg);
}

static void send_ping(gkcd_conn *c, uint32_t msgid) {
  msgpack_sbuffer sb;
  msgpack_packer pk;
  msgpack_sbuffer_init(&sb);
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  proto_pack_result_head(&pk, msgid);
  msgpack_pack_map(&pk, 3);
  proto_pack_cstr(&pk, "version");
  proto_pack_cstr(&pk, GKC_VERSION);
  proto_pack_cstr(&pk, "protocol");
  msgpack_pack_int(&pk, GKC_PROTOCOL);
  proto_pack_cstr(&pk, "backend");
  proto_pack_cstr(&pk, c->srv->be->name);
  send_sbuffer(c, &sb, NULL, 0);
}

static void send_status(gkcd_conn *c, uint32_t msgid) {
  msgpack_sbuffer sb;
  msgpack_packer pk;
  msgpack_sbuffer_init(&sb);
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  proto_pack_result_head(&pk, msgid);
  status_pack(c->srv, &pk);
  send_sbuffer(c, &sb, NULL, 0);
}

/* Queues job for a worker; on failure answers it and frees it. */
static void dispatch(gkcd_server *srv, gkcd_job *job) {
  int rc = pool_submit(srv->pool, job);
  if (rc == 0) return;
  job_fail(job, rc, "the queue holds %zu requests (--max-queue); retry later", srv->cfg.max_queue);
  rpc_job_done(job, srv);
}

/* Starts the jobs waiting for memory budget, in order, while they fit. */
static void admit_waiting(gkcd_server *srv) {
  while (srv->budget_head &&
         srv->budget_used + srv->budget_head->cost <= srv->cfg.memory_budget) {
    gkcd_job *job = srv->budget_head;
    srv->budget_head = job->next;
    if (!srv->budget_head) srv->budget_tail = NULL;
    srv->budget_waiting--;
    job->next = NULL;
    srv->budget_used += job->cost;
    dispatch(srv, job);
  }
}

/* Returns 0 when the job was accepted (it now owns frame), else an error
 * code with msg filled; frame is then still the caller's. */
static int submit(gkcd_conn *c, const proto_request *req, void *frame, size_t frame_len,
                  char *msg, size_t msglen) {
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
  args_ctx a = {req->params, msg, msglen};
  int rc = methods_parse(req->method, srv->be, &a, job, srv->cfg.max_request_bytes);
  /* What the request holds while in flight: its bytes and its result. */
  job->cost = frame_len + job->out_bytes;
  if (rc == 0 && job->cost > srv->cfg.memory_budget) {
    snprintf(msg, msglen, "the request and its result need %zu bytes, more than the whole"
             " memory budget of %zu (--memory-budget)", job->cost, srv->cfg.memory_budget);
    rc = GKC_ETOO_LARGE;
  }
  int must_wait = rc == 0 && (srv->budget_head ||
                              srv->budget_used + job->cost > srv->cfg.memory_budget);
  if (must_wait && srv->budget_waiting >= srv->cfg.budget_queue) {
    snprintf(msg, msglen, "%zu requests already wait for memory (--memory-budget %zu,"
             " --budget-queue %zu); retry later", srv->budget_waiting, srv->cfg.memory_budget,
             srv->cfg.budget_queue);
    rc = GKC_EBUSY;
  }
  if (rc) {
    free(job);
    return rc;
  }
  job->conn = c;
  job->msgid = req->msgid;
  job->frame = frame;
  job->t_start_ns = now_ns();
  if (job->deadline_ns) job->deadline_ns += job->t_start_ns;
  c->refs++;
  c->jobs++;
  srv->in_flight++;
  if (must_wait) { /* FIFO, so a big request is not starved by small ones */
    if (srv->budget_tail)
      srv->budget_tail->next = job;
    else
      srv->budget_head = job;
    srv->budget_tail = job;
    srv->budget_waiting++;
  } else {
    srv->budget_used += job->cost;
    dispatch(srv, job);
  }
  return 0;
}

void rpc_handle_frame(gkcd_conn *c, void *frame, size_t len) {
  gkcd_server *srv = c->srv;
  msgpack_zone zone;
  msgpack_object root;
  size_t off = 0;
  char msg[320];
  proto_request req;

  if (!msgpack_zone_init(&zone, 2048)) {
    free(frame);
    send_error(c, 0, 0, GKC_EOUT_OF_MEMORY, "out of memory decoding the request");
    return;
  }
  if (msgpack_unpack(frame, len, &off, &zone, &root) != MSGPACK_UNPACK_SUCCESS || off != len) {
    /* The scanner accepted the structure, so this is msgpack-c refusing
     * something (e.g. its own allocation failing). */
    srv->bad_frames++;
    send_error(c, 0, 0, GKC_EPARSE_ERROR, "request could not be decoded");
    goto done;
  }
  int rc = proto_request_parse(&root, &req, msg, sizeof msg);
  if (rc) {
    srv->bad_frames++;
    log_debug("connection %llu: %s: %s", (unsigned long long)c->id, proto_err_wire(rc), msg);
    send_error(c, req.msgid_known, req.msgid, rc, msg);
    goto done;
  }
  srv->requests[req.method]++;
  if (!methods_is_compute(req.method)) {
    if (req.params->via.map.size != 0) {
      srv->errors[req.method]++;
      snprintf(msg, sizeof msg, "method '%s' takes no arguments", proto_method_name(req.method));
      send_error(c, 1, req.msgid, GKC_EINVALID_ARGUMENT, msg);
    } else if (req.method == PROTO_M_PING) {
      send_ping(c, req.msgid);
    } else {
      send_status(c, req.msgid);
    }
    goto done;
  }
  rc = submit(c, &req, frame, len, msg, sizeof msg);
  if (rc == 0) {
    frame = NULL; /* the job owns it */
  } else {
    srv->errors[req.method]++;
    log_debug("connection %llu: %s %u: %s: %s", (unsigned long long)c->id,
              proto_method_name(req.method), req.msgid, proto_err_wire(rc), msg);
    send_error(c, 1, req.msgid, rc, msg);
  }
done:
  msgpack_zone_destroy(&zone);
  free(frame);
}

void rpc_job_done(gkcd_job *job, void *arg) {
  gkcd_server *srv = arg;
  gkcd_conn *c = job->conn;
  srv->in_flight--;
  srv->served++;
  c->jobs--;
  if (job->err) {
    srv->errors[job->method]++;
    log_debug("connection %llu: %s %u failed: %s: %s", (unsigned long long)c->id,
              proto_method_name(job->method), job->msgid, proto_err_wire(job->err), job->errmsg);
    send_error(c, 1, job->msgid, job->err, job->errmsg);
  } else {
    srv->kernel_us[job->method] += job->kernel_us;
    msgpack_sbuffer sb;
    msgpack_packer pk;
    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    proto_pack_result_head(&pk, job->msgid);
    methods_pack_result(&pk, job, (double)(now_ns() - job->t_start_ns) / 1e3);
    size_t out_bytes = job->out ? job->out_bytes : 0;
    send_sbuffer(c, &sb, job->out, out_bytes);
    job->out = NULL; /* the write owns it now */
  }
  srv->budget_used -= job->cost;
  job_free(job);
  admit_waiting(srv);
  if (!c->closing) conn_update_reading(c);
  conn_unref(c);
  server_maybe_finish(srv);
}

void job_free(gkcd_job *job) {
  free(job->out);
  free(job->frame);
  free(job);
}
