/* backend.h: what the daemon needs from a compute backend.
 *
 * A backend is a table of functions.  run[method]() is called on a scheduler worker
 * thread with a validated job; it either computes synchronously and calls
 * job_finish() before returning (the CPU backend), or enqueues asynchronous
 * work and calls job_finish() later from any thread, e.g. a stream callback
 * (the CUDA backend).  Either way it must finish every job it is given
 * exactly once, setting job->err on failure; it never exits the process on
 * a request's behalf.
 *
 * Implemented in: backend.c, cpu/cpu_backend.c, cuda/cuda_backend.c, daemon/cuda_module.c
 */
#ifndef GKCD_BACKEND_H
#define GKCD_BACKEND_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "cost.h"
#include "batch_step.h"
#include "job.h"
#include "proto_methods.h"

typedef struct {
  char name[128];
  uint64_t memory_total, memory_free; /* bytes */
  int threads;                        /* CPU threads, or 0 */
  uint64_t cached_bytes;              /* device memory kept for reuse */
  int streams, streams_busy;          /* GPU streams, and how many are working */
  int sms;                            /* GPU multiprocessors it may use (0: CPU) */
  int gpu;                            /* CUDA ordinal (-1: CPU) */
  const char *kind;                   /* "cpu", "cuda"; NULL: the backend's name */
} gkcd_device_info;

/* A lane as the backend made it (status). */
typedef struct {
  int sms;     /* GPU multiprocessors it may use; 0: not partitioned */
  int streams; /* its streams; 0 on the CPU */
} gkcd_lane_info;

typedef struct gkcd_backend gkcd_backend;
struct gkcd_backend {
  const char *name; /* "cpu", "cuda": the value of ping's "backend" */
  /* Per method, a NULL-terminated list of algo names; index 0 is what
   * "auto" resolves to when the backend has no better rule. */
  const char *const *algos[PROTO_M_COUNT];
  /* What the cost model starts from (it refines them as requests run). */
  cost_rates rates;
  /* Whether its kernels take float64 arrays (dtype "f64"; PROTOCOL.md):
   * 0 (the default) has rpc.c refuse any request naming one, before it is
   * queued, with invalid_argument naming the argument, except for the
   * methods of f64_methods (bit 1 << PROTO_M_*: those that do). */
  int f64;
  uint64_t f64_methods;
  /* Whether its solve takes a float64 matrix (a csr_upload with dtype
   * f64): 0 (the default) has rpc.c refuse such a solve, before it is
   * queued, with invalid_argument naming 'matrix'. */
  int f64_solve_matrix;
  /* Whether its solve takes the preconditioners beyond pcg's Jacobi
   * (precond "amg", and "jacobi" with bicgstab): 0 (the default) has
   * rpc.c refuse them before anything is queued, with invalid_argument. */
  int amg;
  /* Frees an AMG hierarchy its solve built and a resident matrix kept
   * (gkcd_res.precond); any thread.  Set when amg is. */
  void (*precond_free)(gkcd_backend *be, void *h);
  /* Workers of the latency lane (0: one); the bulk lane has --threads. */
  int latency_workers;
  /* The backend's half of the method table (method.h): per method
   * (proto_method), what runs a job of it, on a scheduler worker thread,
   * with a validated job; it finishes the job exactly once (now, or later
   * from any thread).  NULL for a method this backend does not run (those
   * the loop answers, shm_register): the scheduler never hands it one. */
  void (*run[PROTO_M_COUNT])(gkcd_backend *be, gkcd_job *job);
  /* Resident memory (device memory on a GPU): 0, or GKC_EOUT_OF_MEMORY with
   * a message.  Any thread. */
  int (*res_alloc)(gkcd_backend *be, size_t bytes, void **ptr, size_t *cap, char *msg,
                   size_t msglen);
  void (*res_free)(gkcd_backend *be, void *ptr, size_t cap);
  /* Registers a client's region for DMA (may be NULL: nothing to do);
   * nonzero when it could not, which is not an error. */
  int (*region_pin)(gkcd_backend *be, void *ptr, size_t bytes);
  void (*region_unpin)(gkcd_backend *be, void *ptr);
  /* The spmv algo (index into algos[PROTO_M_SPMV]) auto picks for a matrix. */
  int (*spmv_pick)(gkcd_backend *be, int32_t rows, int32_t cols, int64_t nnz, int32_t max_row);
  int (*devices)(gkcd_backend *be, gkcd_device_info *out, int max);
  /* May be NULL. */
  void (*lane_info)(gkcd_backend *be, int lane, gkcd_lane_info *out);
  void (*destroy)(gkcd_backend *be);

  /* --- several devices (daemon/devices.c) ---------------------------------
   * Each device the daemon serves from is one backend: a GPU, a slice of a
   * GPU (--split-device), or one of the CPU backend's virtual devices
   * (--cpu-devices).  The daemon numbers them in `device`. */
  int device;
  /* Copies bytes of resident memory at src on device `from` (a backend of
   * the same kind) to dst in this backend's resident memory, directly
   * (peer to peer) where the hardware allows, else staged.  Synchronous;
   * any worker thread.  0, or a negative gkc_error with msg.  *peer is set
   * to 1 when the copy went peer to peer. */
  int (*peer_copy)(gkcd_backend *be, void *dst, gkcd_backend *from, const void *src, size_t bytes,
                   int *peer, char *msg, size_t msglen);
  /* The primitives a partitioned matrix runs on (daemon/part.h), or NULL
   * when the backend has none (partitioned matrices are then refused). */
  const struct gkcd_part_ops *part;
  /* Set once the device has failed for good (backend_device_lost). */
  atomic_int lost;
  void *impl;
};

/* --- partitioned matrices (daemon/part.h) ---------------------------------
 * What one device does for its row block of a partitioned matrix, on
 * vectors of float64 in its resident memory (res_alloc): the iteration is
 * carried in float64, like cpu_solve's, so a partitioned solve follows the
 * single-device one.  Every call is synchronous and may come from any
 * worker thread; each returns 0, or a negative gkc_error with msg (e.g.
 * GKC_EDEVICE_LOST after backend_device_lost).  n may be 0.
 *
 * A CG iteration (part_solve.c) is three steps on every device: the halo's
 * peer_copy then spmv with its dot; cg_update; axpby then gather (packing
 * p's send entries).  Each step is a round trip to every device, so what
 * can share one is fused.  A partial dot (a sum over the device's rows) is
 * float64 and gives the same bits every run for the same inputs on the
 * same device; the coordinator adds the devices' partials. */
typedef struct gkcd_part_ops {
  /* bytes from host memory src to resident dst, and back. */
  int (*to_dev)(gkcd_backend *be, void *dst, const void *src, size_t bytes, char *msg,
                size_t msglen);
  int (*to_host)(gkcd_backend *be, void *dst, const void *src, size_t bytes, char *msg,
                 size_t msglen);
  /* y[i] = sum over row i of values[t] * x[col_idx[t]], for rows rows
   * holding nnz entries (the plan's count: a GPU sizes its launch by it);
   * and, when xy is not NULL, *xy = sum over i < rows of x[i] * y[i] (x's
   * first rows entries are the block's own rows: CG's p . A p). */
  int (*spmv)(gkcd_backend *be, int32_t rows, int64_t nnz, const int32_t *row_ptr,
              const int32_t *col_idx, const float *values, const double *x, double *y,
              double *xy, char *msg, size_t msglen);
  /* dst[i] = src[idx[i]] (packing the entries another device reads). */
  int (*gather)(gkcd_backend *be, double *dst, const double *src, const int32_t *idx, int64_t n,
                char *msg, size_t msglen);
  /* *out = x . y */
  int (*dot)(gkcd_backend *be, const double *x, const double *y, int64_t n, double *out,
             char *msg, size_t msglen);
  /* y = a x + b y (b = 0: y is only written) */
  int (*axpby)(gkcd_backend *be, double a, const double *x, double b, double *y, int64_t n,
               char *msg, size_t msglen);
  /* CG's update, in one pass: x += a p and r -= a q (a = 0: x and r are
   * left alone, p and q not read), then out[0] = r . r; with dinv (pcg's
   * Jacobi preconditioner, not NULL) also z = dinv .* r and out[1] = r . z,
   * else out[1] = 0. */
  int (*cg_update)(gkcd_backend *be, double a, const double *p, const double *q, double *x,
                   double *r, const double *dinv, double *z, int64_t n, double out[2], char *msg,
                   size_t msglen);
} gkcd_part_ops;

/* A device has failed for good: a sticky CUDA error, an ECC fault, a GPU
 * that fell off the bus, or fault injection.  Any thread.  The backend
 * still finishes each of its own jobs in flight, with GKC_EDEVICE_LOST and
 * a message naming the device; the daemon takes the device out of
 * placement, answers queued work that needs its memory DEVICE_LOST, marks
 * its resident objects lost (using one later says so) and goes on serving
 * from the others.  When no device is left it calls backend_fatal. */
void backend_device_lost(gkcd_backend *be, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Why be was lost (what backend_device_lost was told), "" while it serves. */
const char *backend_lost_reason(const gkcd_backend *be);
/* The daemon's side of backend_device_lost (devices.c): called once per
 * lost device, from the thread that lost it. */
void backend_set_lost_hook(void (*hook)(gkcd_backend *be, void *arg), void *arg);

#define GKCD_ALGO_AUTO (-1)

/* Index of name in be's algo list for method, GKCD_ALGO_AUTO for "auto",
 * or -2 when the backend has no such algo. */
int backend_algo_lookup(const gkcd_backend *be, int method, const char *name, size_t len);


/* Backend constructors: 0 on success, else a negative gkc_error with the
 * reason in msg.  nthreads is the CPU parallelism per kernel (0 = all). */
int cpu_backend_create(gkcd_backend **out, int nthreads, char *msg, size_t msglen);
/* The CPU backend as count virtual devices (--cpu-devices): each with
 * nthreads kernel threads and a memory pool of memory_each bytes (0: the
 * host's memory over count) with its own accounting; peer_copy is memcpy.
 * out[0..count) are filled, or nothing is left open. */
int cpu_backends_create(gkcd_backend **out, int count, int nthreads, size_t memory_each, char *msg,
                        size_t msglen);
#ifdef GKC_HAVE_CUDA
/* One backend per GPU in cfg->devices (every visible one when ndevices is
 * 0), each cut into cfg->split_device backends over disjoint SM partitions
 * when that is above 1; at most max in all.  0 with *count set, or a
 * negative gkc_error with msg (nothing left open). */
int cuda_backends_create(gkcd_backend **out, int max, int *count, const gkcd_config *cfg, char *msg,
                         size_t msglen);
#endif

/* For a backend that can no longer work (a poisoned GPU context): logs why,
 * then has the daemon answer what it can, exit non-zero and so be restarted
 * by its service manager.  Safe from any thread. */
void backend_fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Nonzero once backend_fatal has been called. */
int backend_failed(void);

#endif
