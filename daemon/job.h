/* job.h: one request on its way from the wire to a worker and back.
 *
 * The event loop fills the arguments after validating them, the pool hands
 * the job to a worker thread, the backend computes and fills the results,
 * and job_finish() hands it back to the loop (its completion queue, drained
 * by rpc.c), which sends the reply and frees it; a part of a split job goes
 * to split.c's finish hook instead.  An array argument is a span: bytes inside the request itself (which
 * the job owns, `frame`) or inside a client's shared-memory region, both in
 * host memory and possibly unaligned; or a resident array, in the backend's
 * own memory (device memory on the CUDA backend).
 *
 * Implemented in: job.c, job_finish.c
 */
#ifndef GKCD_JOB_H
#define GKCD_JOB_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

typedef struct gkcd_conn gkcd_conn;
typedef struct gkcd_res gkcd_res;
typedef struct sched_client sched_client;

enum { SPAN_HOST = 0, SPAN_RES = 1 };

typedef struct {
  const void *ptr; /* NULL when absent */
  size_t bytes;
  int where;       /* SPAN_HOST: request or region bytes; SPAN_RES: backend memory */
  int pinned;      /* SPAN_HOST inside a region the backend registered for DMA */
  int shared;      /* SPAN_HOST inside a client's region: it may change under us */
  int dtype;       /* its elements (res_object.h DT_*): DT_F32 unless refs.c said */
} gkcd_span;

/* Where an array result goes. */
enum {
  OUT_BIN = 0,  /* job->out, malloc'd here, sent in the reply */
  OUT_HOST,     /* out_ptr: inside a client's region */
  OUT_RES,      /* out_ptr: an existing resident array */
  OUT_RES_NEW,  /* a new resident array: the backend allocates out_ptr/out_cap */
};

#define JOB_MAX_RES 32 /* a batch may name many handles */

/* solve: the Krylov method, and why the iteration stopped.  The names are
 * the wire strings of the `method` argument and the `reason` result. */
#define SOLVE_METHOD_MAP(XX) XX(CG, "cg") XX(PCG, "pcg") XX(BICGSTAB, "bicgstab")
/* ... and the `precond` argument's values (pcg is cg with jacobi). */
#define SOLVE_PRECOND_MAP(XX) XX(NONE, "none") XX(JACOBI, "jacobi") XX(AMG, "amg") XX(AUTO, "auto")
#define SOLVE_REASON_MAP(XX)                                                      \
  XX(CONVERGED, "converged") XX(MAX_ITER, "max_iter") XX(BREAKDOWN, "breakdown") \
  XX(NON_FINITE, "non_finite") XX(DEADLINE, "deadline") XX(CANCELLED, "cancelled")
enum {
#define SOLVE__M(name, str) SOLVE_##name,
  SOLVE_METHOD_MAP(SOLVE__M)
#undef SOLVE__M
  SOLVE_NMETHODS
};
enum {
#define SOLVE__P(name, str) SOLVE_PRECOND_##name,
  SOLVE_PRECOND_MAP(SOLVE__P)
#undef SOLVE__P
  SOLVE_NPRECONDS
};
enum {
#define SOLVE__R(name, str) SOLVE_R_##name,
  SOLVE_REASON_MAP(SOLVE__R)
#undef SOLVE__R
  SOLVE_NREASONS
};
#define SOLVE_MAX_ITER 100000000 /* max_iter's upper bound */
#define SOLVE_POLL_MS 2         /* deadline and cancel are looked at least this often (GPU: about) */

/* batch: one step, parsed and checked on the loop (method_batch.c). */
#define BATCH_OP_MAP(XX) XX(DOT, "dot") XX(AXPBY, "axpby") XX(SPMV, "spmv") \
  XX(REDUCE, "reduce") XX(SGEMM, "sgemm")
enum {
#define BATCH__OP(name, str) BATCH_##name,
  BATCH_OP_MAP(BATCH__OP)
#undef BATCH__OP
  BATCH_NOPS
};
#define BATCH_MAX_STEPS 64

/* A float argument of a batch step: scale * v[num] / v[den], where v[i] is
 * the scalar result of an earlier step i (dot, reduce); num or den -1 when
 * absent.  A literal number is {scale, -1, -1}. */
typedef struct {
  double scale;
  int num, den;
} gkcd_scalar;

typedef struct {
  int op;           /* BATCH_* */
  int sub;          /* reduce: CPU_SUM/MIN/MAX */
  int64_t n;        /* dot, axpby, reduce: vector length */
  int32_t m, k;     /* sgemm: m, k (n is in n); spmv: rows, cols */
  int trans_a, trans_b;
  gkcd_scalar alpha, beta;
  const void *x, *y, *a, *b, *c; /* resident (backend) memory; y, c NULL when not read */
  void *out;        /* resident array written, or NULL (dot, reduce) */
  uint32_t out_id;  /* its handle, for the reply */
  size_t out_bytes;
  /* spmv: x read from (x_host) or out written into (out_host) a slice of a
   * client's shared-memory region instead: host memory, which the client
   * may rewrite while we run.  The CPU backend uses it in place (values
   * only, never indices); the CUDA backend copies x's slice to the device
   * just before the step and out's back just after it (cuda_batch.c). */
  int x_host, out_host;
  size_t x_bytes;       /* x_host: the slice's bytes */
  uint32_t out_region;  /* out_host: the region and byte offset, for the reply */
  uint64_t out_offset;
  /* spmv: the resident matrix */
  const void *row_ptr, *col_idx, *values, *plan;
  int64_t nnz;
  int32_t max_row;
  int dtype;        /* x, y, out: DT_F32 or DT_F64 (reduce, sgemm: DT_F32) */
  int values_dtype; /* spmv: the matrix's values */
  double value;     /* result: dot, reduce */
} gkcd_step;

typedef struct gkcd_job gkcd_job;
struct gkcd_job {
  int method; /* proto_method */
  const struct gkcd_method *row; /* its row of the method table (method.h) */
  int algo;   /* index into the backend's algo list for this method, or auto */
  union {
    struct {
      int32_t m, n, k;
      int trans_a, trans_b;
      int tf32;          /* precision "tf32": the caller accepts TF32 rounding */
      float alpha, beta;
      gkcd_span a, b, c; /* c only when beta != 0 */
    } sgemm;
    struct {
      gkcd_span x;
      int64_t n;
      int op; /* CPU_SUM/MIN/MAX == GKC_SUM/MIN/MAX */
    } reduce;
    struct {
      int32_t rows, cols;
      int64_t nnz;
      float alpha, beta;
      gkcd_span row_ptr, col_idx, values, x, y; /* y only when beta != 0 */
      int32_t max_row;   /* longest row, found while validating: guides "auto" */
      int validated;     /* a resident matrix, checked when it was uploaded */
      const void *plan;  /* a resident matrix's spmv plan in backend memory, or NULL */
      double alpha64, beta64; /* x, y of f64: the scalars as sent (f32: alpha, beta) */
    } spmv;              /* values.dtype: A's; x.dtype: x's, y's and the result's */
    struct {
      gkcd_span x, y;    /* of one dtype (x.dtype) */
      int64_t n;
      float alpha, beta; /* axpby */
      double alpha64, beta64; /* axpby on f64: the scalars as sent (f32: alpha, beta) */
    } vec;               /* dot, axpby, nrm2 */
    struct {
      gkcd_span data;
      int dtype;         /* upload: DT_F32, DT_I32 or DT_F64 */
    } upload;            /* upload, download (data = the resident array) */
    struct {
      int32_t rows, cols;
      int64_t nnz;
      gkcd_span row_ptr, col_idx, values;
      int32_t max_row;
      float pos_offdiag; /* validate_csr_upload: the positive share of the off-diagonal weight */
    } csr;               /* csr_upload */
    struct {
      int32_t n;         /* the square matrix's order */
      int64_t nnz;
      int32_t max_row;
      const void *row_ptr, *col_idx, *values, *plan; /* the resident matrix */
      int values_dtype;  /* its values: DT_F32 or DT_F64 */
      gkcd_span b, x0;   /* x0.ptr NULL: start from zero; b.dtype: b's, x0's and x's */
      double rtol, atol;
      int64_t max_iter;
      int method;        /* SOLVE_*: what runs (cg with precond jacobi runs as SOLVE_PCG) */
      int method_asked;  /* SOLVE_*: what the request named, for the reply */
      int precond;       /* SOLVE_PRECOND_* (SOLVE_PCG: jacobi) */
      void *amg;         /* amg: the matrix's hierarchy, lent to this solve, or NULL */
      int history;       /* return the residual of every iteration */
      int fp32;          /* precision "fp32": float32 vectors, float64 dots and scalars */
    } solve;
    struct {
      gkcd_step *steps;  /* nsteps, malloc'd (also in priv[0], which frees it) */
      int nsteps;
      int done;          /* result: steps completed */
    } batch;
  } in;

  /* Results, written by the backend. */
  int err;            /* 0 or a negative gkc_error */
  char errmsg[256];
  int out_kind;       /* OUT_* */
  int out_dtype;      /* the array result's elements (DT_*): a new handle's dtype */
  void *out;          /* OUT_BIN: malloc'd result array, freed after the reply */
  void *out_ptr;      /* OUT_HOST, OUT_RES, OUT_RES_NEW: where the result is */
  size_t out_cap;     /* OUT_RES_NEW: the allocation's true size */
  size_t out_bytes;
  uint64_t out_offset; /* OUT_HOST: offset in the region, for the reply */
  double value;       /* reduce, dot */
  double kernel_us;
  double h2d_us, d2h_us; /* host<->device copies, when the backend has them (else 0) */
  const char *algo_name; /* static string: the algo that ran */
  int64_t iterations; /* solve: iterations run */
  int reason;         /* solve: SOLVE_R_* */
  int amg_levels;     /* solve with precond amg: the hierarchy's levels */
  double amg_setup_us; /* ... and the time its setup took (0: the matrix's was lent) */
  /* precond amg: the resident matrix whose hierarchy was lent
   * (in.solve.amg) or is to keep the one built (the loop settles both when
   * the job goes, rpc.c) */
  struct gkcd_res *amg_matrix;
  void *amg_built;    /* a hierarchy built by the solve, for the matrix to keep */
  size_t amg_built_bytes;
  double *history;    /* solve: iterations relative residuals when asked for
                       * (malloc'd by the backend, also in priv[1], which frees it) */
  int algo_used;      /* csr_upload: the spmv algo index auto will use */
  size_t plan_off;    /* csr_upload: offset of the spmv plan in out_ptr (0: none) */

  /* Daemon-private. */
  gkcd_conn *conn;
  /* Where job_finish sends it instead of the loop's completion queue: set
   * by split.c for a part (NULL for every other job).  Called once, on
   * whatever thread finished the job. */
  void (*on_finish)(gkcd_job *job, void *arg);
  void *finish_arg;
  uint32_t msgid;
  void *frame;        /* owned request bytes */
  size_t frame_bytes;
  uint64_t t_start_ns;  /* decoded */
  uint64_t t_run_ns, t_done_ns; /* a worker took it; the worker finished it */
  uint64_t deadline_ns; /* from deadline_ms: drop the job if it starts later; 0 = none.
                         * solve and batch also stop when it passes while they run. */
  /* Cancellation of a running job (a solve or a batch; the others are short).
   * Any thread may set it (atomic_store(&job->cancel, 1)), e.g. the loop when
   * the job's client has gone; the backend polls it between batch steps and
   * every few iterations of a solve (at most ~SOLVE_POLL_MS apart on the GPU)
   * and then finishes the job at once with GKC_ECANCELLED ("cancelled"), its
   * outputs partly written.  Setting it on a job that already finished, or
   * never looks, does nothing: the job still finishes exactly once. */
  atomic_int cancel;
  /* The scheduler's (scheduler.c). */
  sched_client *client;
  int lane;             /* LANE_BULK or LANE_LATENCY */
  double cost_us;       /* predicted worker time */
  int dispatched;       /* handed to the pool, not yet back */
  /* Its client had nothing running when it was dispatched: the pool puts
   * it ahead of the jobs waiting for a worker (primed by clients that
   * have some running), so a newcomer waits for the next free worker, not
   * behind another client's primed jobs too (issue #26, fairness). */
  int first;
  gkcd_job *run_prev, *run_next; /* on its client's running_list while dispatched */
  size_t frame_charge, out_charge; /* bytes charged to the memory budget */
  int frame_is_work;    /* frame_charge moved from input to work (admitted) */
  size_t reply_charge;  /* result bytes counted against its connection */
  gkcd_res *res[JOB_MAX_RES]; /* resident objects it uses, referenced until it is freed */
  int nres;
  gkcd_res *out_res;    /* OUT_RES / OUT_HOST: the object written to */
  int shared;           /* upload, csr_upload: create a shared object */
  /* The first argument holding float64 ("x", "steps[2].y"), "" when none:
   * a backend that does not serve f64 refuses the job by it (rpc.c). */
  char f64_arg[32];
  uint64_t instance, shared_instance; /* upload, csr_upload: what the reply names (PROTOCOL.md,
                                       * "Instances and restarts") */
  int reg_fd;           /* shm_register: the descriptor, until mapped (-1 after) */
  int reg_pin;          /* shm_register "pinned": registered for DMA before the answer */
  int reg_pinned;       /* ... and it was (the region's pages are registered now) */
  void *reg_keep;       /* shm_register: the pinner whose kept registrations it may take */
  int reg_reuse;        /* shm_register "reuse": may be kept after its connection */
  uint64_t reg_dev, reg_ino; /* ... and its file (ino 0 unless reuse: never kept) */
  void *priv[2];        /* private copies of CSR indices that came in a region */
  size_t pin_charge;    /* shm_register: bytes counted against its connection's
                         * --max-conn-pinned until the region takes them over */
  gkcd_job *next;

  /* --- several devices (devices.h, place.h, split.h) ---------------------- */
  struct gkcd_backend *be; /* the device that runs it, set at dispatch */
  int device;           /* its index; -1 while not placed */
  int pin_device;       /* the `device` argument, or -1 */
  int replicate;        /* upload, csr_upload: a copy on every live device */
  uint64_t dev_mask;    /* devices it may run on (bit d: device d), from its operands */
  int new_on;           /* a new object bound to its connection's home (scheduler.c): the
                         * device whose room its bytes are counted against until it is
                         * done; -1: none */
  double dev_cost_us;   /* predicted worker time on its device (that device's model) */
  /* Operands moved here from another device before it ran (work.c): the
   * copies, freed with the job on its device. */
  void *moved[JOB_MAX_RES];
  size_t moved_cap[JOB_MAX_RES];
  int nmoved;
  double peer_bytes, peer_us; /* what the moves cost (reply fields), 0 when none */
  int peer_direct;      /* the moves went peer to peer, not staged */
  /* Split work: the parent runs as parts on several devices (split.c). */
  uint64_t split_mask;  /* parent: the devices its parts ran on; 0 when not split */
  int nparts;
  gkcd_job **parts;     /* parent: its parts, freed with it */
  gkcd_job *parent;     /* part: the job it is a piece of */
  atomic_int parts_left;
  /* replicate: each device's copy {ptr, cap}, indexed by device (malloc'd). */
  struct gkcd_copy *copies;
  /* A gang job (part.h): the devices it holds a slot on, all at once, while
   * it runs on one worker (csr_upload with `devices`, spmv and solve on a
   * partitioned matrix); 0 for any other job. */
  uint64_t gang_mask;
  /* Its partitioned matrix: the one it reads (spmv, solve: the matrix's,
   * referenced through res[]), or the one it made (csr_upload: the job's
   * until rpc.c adopts it). */
  struct gkcd_part *part;
  int part_adopted;     /* csr_upload: the new matrix took part (still packed in the reply) */
};

/* One device's copy of a replicated object. */
typedef struct gkcd_copy {
  void *ptr;
  size_t cap;
} gkcd_copy;

/* Sets job->err and a formatted message. */
void job_fail(gkcd_job *job, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Hands a finished job (results or err filled) back, stamping t_done_ns
 * first: to its finish hook (on_finish) when it has one, else onto the
 * loop's completion queue, waking the loop through the async handle given
 * to job_done_setup.  The job is no longer the caller's.  Safe from any
 * thread, including a CUDA host callback.  Defined in job_finish.c, apart
 * from job.c, so that a test linking job.c can stand in its own. */
void job_finish(gkcd_job *job);

/* The loop's completion queue: jobs finished on any thread (job_finish),
 * in the order they finished, and the async handle (a uv_async_t) that
 * wakes the loop for them; uv_async_send coalesces wake-ups, hence the
 * queue.  The loop's side takes the whole list at once (job_done_take). */
struct uv_async_s;
typedef struct job_done_queue {
  pthread_mutex_t mu;
  gkcd_job *head, *tail;    /* under mu */
  atomic_int waiting;       /* head != NULL, for a polling loop to look without mu */
  struct uv_async_s *wake;
} job_done_queue;

/* Loop thread, before any worker starts: where job_finish puts the jobs
 * without a finish hook of their own (q's mutex initialised here). */
void job_done_setup(job_done_queue *q, struct uv_async_s *wake);

/* Loop thread: every job finished since the last call, oldest first,
 * linked through next; NULL when none. */
static inline gkcd_job *job_done_take(job_done_queue *q) {
  pthread_mutex_lock(&q->mu);
  gkcd_job *list = q->head;
  q->head = q->tail = NULL;
  atomic_store_explicit(&q->waiting, 0, memory_order_relaxed);
  pthread_mutex_unlock(&q->mu);
  return list;
}

/* Any thread: 1 when finished jobs wait (a polling loop takes them at once,
 * without waiting for the async handle's wake-up). */
static inline int job_done_waiting(job_done_queue *q) {
  return atomic_load_explicit(&q->waiting, memory_order_acquire);
}

/* An OUT_BIN result buffer of bytes bytes (at least 1): from the allocator
 * the daemon registered (job_set_out_alloc: its buffer pool, bufpool.h),
 * else malloc.  Either way plain malloc'd memory, freed with free() or
 * given back to the pool.  Any thread. */
void *job_out_alloc(size_t bytes);
/* Gives back a scratch buffer from job_out_alloc that no reply carries (an
 * aligned copy of an argument): to the pool, else free().  Any thread. */
void job_out_free(void *p);
/* Registers that allocator and its give-back (NULL: malloc and free
 * again); before any worker runs. */
void job_set_out_alloc(void *(*alloc)(void *arg, size_t bytes), void (*give)(void *arg, void *p),
                       void *arg);

/* Whether a running job should stop (the backends ask between batch steps
 * and solve iterations): SOLVE_R_CANCELLED once its cancel flag is set,
 * else SOLVE_R_DEADLINE once its deadline has passed, else 0.  Any
 * thread. */
int job_poll(const gkcd_job *job);

#endif
