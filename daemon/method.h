/* method.h: the method table, one row per protocol method.
 *
 * Everything the daemon knows about a method sits in its row, in the
 * method's own file (method_sgemm.c, method_blas1.c, ...): how its
 * arguments become a job, what the job costs, which of its pointers name
 * resident memory (to place and move), whether it splits over devices, and
 * how its result is packed.  The backends keep the other half of the row,
 * what runs it (backend.h, `run`).  Nothing else switches on a method:
 * adding one is a row here, its kernels, its client call, its CLI command,
 * its Python call and PROTOCOL.md.
 *
 * A request's path, one way: conn (bytes, frames) -> rpc (header, the row)
 * -> the row's parse -> sched (lane, cost, queue, device; dispatched at
 * once when its lane has room) -> pool (a worker) -> work (validate, move)
 * -> the backend's run -> job_finish (the loop's completion queue) -> rpc
 * (sched_finished, the row's pack) -> conn (written at once).
 *
 * Implemented in: method_table.c
 */
#ifndef GKCD_METHOD_H
#define GKCD_METHOD_H

#include <msgpack.h>
#include <stddef.h>
#include <stdint.h>

#include "job.h"
#include "proto_methods.h"
#include "res_object.h"

/* What the rows take, declared where they live (refs.h, resident.h): named
 * here only, so that the modules below the table that call a row through
 * the job (cost, move, split, the backends) need not include them. */
typedef struct refs_ctx refs_ctx;
typedef struct gkcd_residents gkcd_residents;

/* Where a method is answered. */
enum {
  METHOD_LOOP = 0, /* on the loop, at once: answer() */
  METHOD_DAEMON,   /* as a job the daemon runs itself on a worker (shm_register: run_daemon) */
  METHOD_BACKEND,  /* as a job the device's backend runs (backend.h run[]) */
};

/* What a job of a method costs, by the napkin (cost.c turns it into time
 * with the device's rates): flops, bytes touched on the device, bytes
 * crossing between host and device. */
typedef struct {
  double flops, bytes, xfer;
} method_work;

/* What a loop method may use: the state it reports on, through the
 * server's callbacks (the server sits above the table). */
typedef struct {
  void *srv;
  const char *backend_name;
  /* status: packs the status map.  metrics: the text (malloc'd, *len set),
   * NULL when out of memory. */
  void (*status)(void *srv, msgpack_packer *pk);
  char *(*metrics)(void *srv, size_t *len);
  gkcd_residents *res;
  res_owner *asker;
  struct gkcd_conn *conn; /* the asking connection (ring_register hands it its ring) */
  int rings;              /* gkcd offers rings (--rings, resolved) */
} method_env;

typedef struct gkcd_method {
  int id;           /* proto_method */
  int where;        /* METHOD_* */
  int makes;        /* the resident object a successful job creates: RES_* kind, or -1;
                     * RES_ARRAY also whenever the job's out_kind is OUT_RES_NEW */
  int no_args;      /* METHOD_LOOP: takes no arguments (checked before answer); it
                     * reports on gkcd, so it is counted before it answers and its own
                     * reply includes it */

  /* METHOD_LOOP: 0 with the result packed (map or value) into pk and, when
   * *body is set, *body_len bytes (malloc'd, taken by the reply) to follow
   * it; else an error code with msg. */
  int (*answer)(const method_env *env, const msgpack_object *params, msgpack_packer *pk,
                void **body, size_t *body_len, char *msg, size_t msglen);

  /* Jobs: fills r->job from the params (methods.h's rules: everything
   * checked in constant time, before anything is allocated).  0, or
   * GKC_EINVALID_ARGUMENT / GKC_ETOO_LARGE with a message. */
  int (*parse)(refs_ctx *r, size_t max_bytes);
  /* The napkin of its cost.  NULL: only the fixed cost. */
  void (*work)(const gkcd_job *job, method_work *w);
  /* Its array inputs, in the order its backends read them (an absent
   * optional one keeps its place, ptr NULL); returns how many.  NULL:
   * none. */
  int (*inputs)(gkcd_job *job, gkcd_span *out[], int max);
  /* Every pointer of the job that may name resident memory, for moving
   * operands between devices (move.c); returns how many.  NULL: the
   * inputs' ptr fields. */
  int (*operands)(gkcd_job *job, const void **out[], int max);
  /* Checks that read whole arrays (validate.h), on the worker before the
   * backend: 0, or nonzero with the job failed.  NULL: none needed. */
  int (*check)(gkcd_job *job);
  /* How it splits over devices (split.h SPLIT_*).  NULL: never. */
  int (*split)(const gkcd_job *job);
  /* A job on a partitioned matrix (part.h): runs it across the matrix's
   * devices, then returns (the caller finishes the job).  NULL: refused. */
  void (*part_run)(gkcd_job *job);
  /* METHOD_DAEMON: runs the job on a worker (the caller finishes it). */
  void (*run_daemon)(struct gkcd_backend *be, gkcd_job *job);
  /* Packs the result map of a successful job (the bin body of an OUT_BIN
   * result follows it; its header is the map's last value). */
  void (*pack)(msgpack_packer *pk, const gkcd_job *job, double server_us, uint32_t new_id);
  int scalar;       /* the result is job->value (reduce, dot, nrm2), not an array */
  int bulk_only;    /* iterates an unknown number of times (solve, batch): the bulk lane,
                     * whatever its cost prediction says (scheduler.c) */
  int in_place;     /* writes resident operands in place (batch): they cannot be moved to
                     * another device for it (the copy would take the writes), so
                     * they must share one (place.c) */
} gkcd_method;

/* The row of method m (a proto_method), or NULL when out of range. */
const gkcd_method *method_row(int m);

/* Each method's row, defined in its own file; method_table.c lists them
 * from proto_methods.h, so a method named there without a row does not
 * link. */
#define METHOD__ROW_DECL(name, str) extern const gkcd_method method_row_##name;
PROTO_METHOD_MAP(METHOD__ROW_DECL)
#undef METHOD__ROW_DECL

#endif
