/* part.c: see part.h.  The upload, spmv and the pieces part_solve.c shares. */
#include "part.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend.h"
#include "devices.h"
#include "gkc_errors.h"
#include "proto_methods.h"
#include "proto_rpc.h"
#include "res_object.h"

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/* --- block layout: row_ptr | col_idx | values | send | (8-aligned) dinv --- */

static size_t off_ci(const part_block *b) { return 4 * ((size_t)b->rows + 1); }
static size_t off_v(const part_block *b) { return off_ci(b) + 4 * (size_t)b->nnz; }
static size_t off_send(const part_block *b) { return off_v(b) + 4 * (size_t)b->nnz; }
static size_t off_dinv(const part_block *b) {
  return (off_send(b) + 4 * (size_t)b->nsend + 7) & ~(size_t)7;
}
static size_t block_bytes(const part_block *b, int square) {
  return off_dinv(b) + (square ? 8 * (size_t)b->rows : 0);
}

const int32_t *part_row_ptr(const gkcd_part *p, int j) { return p->mem[j]; }
const int32_t *part_col_idx(const gkcd_part *p, int j) {
  return (const int32_t *)((const char *)p->mem[j] + off_ci(&p->plan.b[j]));
}
const float *part_values(const gkcd_part *p, int j) {
  return (const float *)((const char *)p->mem[j] + off_v(&p->plan.b[j]));
}
const int32_t *part_send(const gkcd_part *p, int j) {
  return (const int32_t *)((const char *)p->mem[j] + off_send(&p->plan.b[j]));
}
const double *part_dinv(const gkcd_part *p, int j) {
  return (const double *)((const char *)p->mem[j] + off_dinv(&p->plan.b[j]));
}

void part_free(gkcd_part *p) {
  if (!p) return;
  for (int j = 0; j < p->plan.k; j++) {
    gkcd_backend *be = devices_backend(p->dev[j]);
    if (p->mem[j] && be) be->res_free(be, p->mem[j], p->cap[j]);
  }
  part_plan_free(&p->plan);
  free(p);
}

void part_pack(msgpack_packer *pk, const gkcd_part *p) {
  proto_pack_cstr(pk, "partition");
  msgpack_pack_array(pk, (size_t)p->plan.k);
  for (int j = 0; j < p->plan.k; j++) {
    const part_block *b = &p->plan.b[j];
    msgpack_pack_map(pk, 5);
    proto_pack_cstr(pk, "device"), msgpack_pack_int(pk, p->dev[j]);
    proto_pack_cstr(pk, "row0"), msgpack_pack_int32(pk, b->row0);
    proto_pack_cstr(pk, "rows"), msgpack_pack_int32(pk, b->rows);
    proto_pack_cstr(pk, "nnz"), msgpack_pack_int64(pk, b->nnz);
    proto_pack_cstr(pk, "halo"), msgpack_pack_int32(pk, b->nhalo);
  }
}

int part_failed(gkcd_job *job, int d, int rc, const char *what, const char *msg) {
  gkcd_backend *be = devices_backend(d);
  char lost[400];
  if (rc == GKC_EDEVICE_LOST || (be && atomic_load(&be->lost)))
    job_fail(job, GKC_EDEVICE_LOST, "%s", devices_lost_msg(be, lost, sizeof lost));
  else
    job_fail(job, rc, "%s on device %d: %.180s", what, d, msg);
  return job->err;
}

/* --- inputs and the result ------------------------------------------------ */

int part_read_span(gkcd_job *job, const gkcd_span *s, float *dst) {
  if (s->where == SPAN_HOST) {
    memcpy(dst, s->ptr, s->bytes);
    return 0;
  }
  /* A resident array: read through the backend of the device it is on. */
  for (int i = 0; i < job->nres; i++) {
    const gkcd_res *r = job->res[i];
    if (r->kind != RES_ARRAY || (const char *)s->ptr < (const char *)r->ptr ||
        (const char *)s->ptr + s->bytes > (const char *)r->ptr + r->bytes)
      continue;
    gkcd_backend *be = devices_backend(r->device);
    char msg[200] = "";
    int rc = be->part ? be->part->to_host(be, dst, s->ptr, s->bytes, msg, sizeof msg)
                      : GKC_EINTERNAL;
    if (rc) return part_failed(job, r->device, rc, "reading a handle", msg);
    return 0;
  }
  job_fail(job, GKC_EINTERNAL, "internal: an array of the request is on no known device");
  return job->err;
}

int part_write_out(gkcd_job *job, const float *src, int home) {
  char msg[200] = "";
  int rc = 0, d = home;
  gkcd_backend *be;
  switch (job->out_kind) {
    case OUT_BIN:
      if (!(job->out = malloc(job->out_bytes ? job->out_bytes : 1))) {
        job_fail(job, GKC_EOUT_OF_MEMORY, "cannot allocate %zu bytes for the result",
                 job->out_bytes);
        return job->err;
      }
      memcpy(job->out, src, job->out_bytes);
      return 0;
    case OUT_HOST: memcpy(job->out_ptr, src, job->out_bytes); return 0;
    case OUT_RES:
      d = job->out_res->device;
      be = devices_backend(d);
      rc = be->part->to_dev(be, job->out_ptr, src, job->out_bytes, msg, sizeof msg);
      break;
    default: /* OUT_RES_NEW, on the matrix's first device */
      be = devices_backend(d);
      rc = be->res_alloc(be, job->out_bytes, &job->out_ptr, &job->out_cap, msg, sizeof msg);
      if (!rc) rc = be->part->to_dev(be, job->out_ptr, src, job->out_bytes, msg, sizeof msg);
      if (rc && job->out_ptr) be->res_free(be, job->out_ptr, job->out_cap);
      if (rc) job->out_ptr = NULL;
      job->device = d; /* where the new handle lives (rpc.c adopt) */
  }
  return rc ? part_failed(job, d, rc, "writing the result", msg) : 0;
}

int part_halo_pack(const gkcd_part *p, int j, double *const *v, double *const *buf, char *msg,
                   size_t msglen) {
  const part_block *s = &p->plan.b[j];
  gkcd_backend *be = devices_backend(p->dev[j]);
  return s->nsend ? be->part->gather(be, buf[j], v[j], part_send(p, j), s->nsend, msg, msglen) : 0;
}

int part_halo_pull(const gkcd_part *p, int j, double *const *v, double *const *buf,
                   part_halo_moved *moved, int *blame, char *msg, size_t msglen) {
  const part_plan *pl = &p->plan;
  const part_block *r = &pl->b[j];
  gkcd_backend *to = devices_backend(p->dev[j]);
  double t0 = now_us();
  *blame = j;
  for (int e = 0; e < pl->k; e++) {
    int32_t n = r->recv_off[e + 1] - r->recv_off[e];
    if (!n || e == j) continue;
    gkcd_backend *from = devices_backend(p->dev[e]);
    int peer = 0;
    int rc = to->peer_copy(to, v[j] + r->ncols + r->recv_off[e], from,
                           buf[e] + pl->b[e].send_off[j], 8 * (size_t)n, &peer, msg, msglen);
    if (rc) {
      if (atomic_load(&from->lost)) *blame = e;
      return rc;
    }
    moved->bytes += 8.0 * n;
    moved->direct |= peer;
  }
  moved->us += now_us() - t0;
  return 0;
}

/* --- csr_upload with devices ---------------------------------------------- */

/* An aligned private copy of a span (the request's arrays sit anywhere). */
static void *copy_of(const gkcd_span *s) {
  void *p = malloc(s->bytes ? s->bytes : 1);
  if (p && s->bytes) memcpy(p, s->ptr, s->bytes);
  return p;
}

int part_build(uint64_t mask, int32_t rows, int32_t cols, const int32_t *rp, const int32_t *ci,
               const float *v, gkcd_part **out, part_build_fail *why) {
  char *stage = NULL;
  gkcd_part *p = calloc(1, sizeof *p);
  *out = NULL;
  why->device = -1, why->what = "partitioning the matrix", why->msg[0] = 0;
  if (!p) return GKC_EOUT_OF_MEMORY;
  p->bad_diag = -1;
  p->square = rows == cols;
  p->mask = mask;
  int k = 0, rc = 0;
  for (int d = 0; d < GKCD_MAX_DEVICES; d++)
    if (p->mask & (1ull << d)) p->dev[k++] = d;
  if (part_plan_make(&p->plan, k, rows, cols, rp, ci)) {
    rc = GKC_EOUT_OF_MEMORY;
    goto fail;
  }
  for (int j = 0; j < k; j++) {
    const part_block *b = &p->plan.b[j];
    size_t bytes = block_bytes(b, p->square);
    gkcd_backend *be = devices_backend(p->dev[j]);
    why->device = p->dev[j];
    if ((rc = be->res_alloc(be, bytes, &p->mem[j], &p->cap[j], why->msg, sizeof why->msg))) {
      p->mem[j] = NULL;
      why->what = "allocating its block";
      goto fail;
    }
    p->bytes += bytes;
    if (!(stage = calloc(1, bytes))) {
      rc = GKC_EOUT_OF_MEMORY;
      why->device = -1;
      goto fail;
    }
    memcpy(stage, b->row_ptr, off_ci(b));
    memcpy(stage + off_ci(b), b->col_idx, 4 * (size_t)b->nnz);
    memcpy(stage + off_v(b), v + rp[b->row0], 4 * (size_t)b->nnz);
    memcpy(stage + off_send(b), b->send, 4 * (size_t)b->nsend);
    if (p->square) {
      /* pcg's inverse diagonal, as cpu_solve finds it (repeated entries
       * add up); a square matrix's own columns are its rows. */
      double *dinv = (double *)(stage + off_dinv(b));
      for (int32_t i = 0; i < b->rows; i++) {
        double dg = 0;
        for (int32_t t = b->row_ptr[i]; t < b->row_ptr[i + 1]; t++)
          if (b->col_idx[t] == i) dg += v[rp[b->row0] + t];
        if ((dg == 0 || !isfinite(dg)) && p->bad_diag < 0) p->bad_diag = b->row0 + i;
        dinv[i] = dg == 0 || !isfinite(dg) ? 0 : 1.0 / dg;
      }
    }
    if ((rc = be->part->to_dev(be, p->mem[j], stage, bytes, why->msg, sizeof why->msg))) {
      why->what = "copying its block";
      goto fail;
    }
    free(stage);
    stage = NULL;
  }
  part_plan_drop_csr(&p->plan);
  *out = p;
  return 0;
fail:
  free(stage);
  part_free(p);
  return rc;
}

int part_to_csr(const gkcd_part *p, int32_t *rp, int32_t *ci, float *v, char *msg, size_t msglen) {
  int32_t row = 0;
  int64_t at = 0;
  rp[0] = 0;
  for (int j = 0; j < p->plan.k; j++) {
    const part_block *b = &p->plan.b[j];
    size_t bytes = off_send(b);
    gkcd_backend *be = devices_backend(p->dev[j]);
    char *host = malloc(bytes ? bytes : 1);
    if (!host) return snprintf(msg, msglen, "out of memory"), GKC_EOUT_OF_MEMORY;
    int rc = be->part->to_host(be, host, p->mem[j], bytes, msg, msglen);
    if (rc) {
      free(host);
      return rc;
    }
    const int32_t *brp = (const int32_t *)host, *bci = (const int32_t *)(host + off_ci(b));
    const float *bv = (const float *)(host + off_v(b));
    /* Local columns back to global ones: [0, ncols) are its own, from
     * col0; the rest index its halo, whose global indices the plan keeps. */
    for (int32_t i = 0; i < b->rows; i++, row++) {
      for (int32_t t = brp[i]; t < brp[i + 1]; t++, at++) {
        int32_t c = bci[t];
        ci[at] = c < b->ncols ? b->col0 + c : b->halo[c - b->ncols];
        v[at] = bv[t];
      }
      rp[row + 1] = (int32_t)at;
    }
    free(host);
  }
  return 0;
}

void part_run_upload(gkcd_job *job) {
  __typeof__(job->in.csr) *s = &job->in.csr;
  int32_t *rp = copy_of(&s->row_ptr), *ci = copy_of(&s->col_idx);
  float *v = copy_of(&s->values);
  if (!rp || !ci || !v) {
    job_fail(job, GKC_EOUT_OF_MEMORY, "out of memory partitioning the matrix");
  } else {
    double t0 = now_us();
    part_build_fail why;
    int rc = part_build(job->gang_mask, s->rows, s->cols, rp, ci, v, &job->part, &why);
    if (rc == 0) {
      job->kernel_us = now_us() - t0;
      job->algo_name = "partitioned";
    } else if (why.device < 0) {
      job_fail(job, rc, "out of memory partitioning the matrix");
    } else {
      part_failed(job, why.device, rc, why.what, why.msg);
    }
  }
  free(rp), free(ci), free(v);
}

/* --- spmv ----------------------------------------------------------------- */

void part_run_spmv(gkcd_job *job) {
  __typeof__(job->in.spmv) *s = &job->in.spmv;
  const gkcd_part *p = job->part;
  const part_plan *pl = &p->plan;
  int k = pl->k;
  float *x = malloc(4 * (size_t)s->cols), *y = malloc(4 * (size_t)s->rows + 4);
  double *xl = NULL, *yd = malloc(8 * (size_t)s->rows + 8);
  void *mem[GKCD_MAX_DEVICES] = {0};
  size_t cap[GKCD_MAX_DEVICES] = {0};
  if (!x || !y || !yd) goto oom;
  if (part_read_span(job, &s->x, x)) goto out;
  if (s->y.ptr && part_read_span(job, &s->y, y)) goto out;
  double t0 = now_us();
  for (int j = 0; j < k && !job->err; j++) {
    const part_block *b = &pl->b[j];
    gkcd_backend *be = devices_backend(p->dev[j]);
    size_t nx = (size_t)b->ncols + (size_t)b->nhalo;
    size_t bytes = 8 * (nx + (size_t)b->rows);
    char msg[200] = "";
    int rc = be->res_alloc(be, bytes, &mem[j], &cap[j], msg, sizeof msg);
    if (rc) {
      mem[j] = NULL;
      part_failed(job, p->dev[j], rc, "allocating x and y", msg);
      break;
    }
    /* Its x: own entries, then its halo, staged on the host. */
    if (!(xl = malloc(8 * nx + 8))) goto oom;
    for (int32_t i = 0; i < b->ncols; i++) xl[i] = x[b->col0 + i];
    for (int32_t i = 0; i < b->nhalo; i++) xl[b->ncols + i] = x[b->halo[i]];
    double *dx = mem[j], *dy = dx + nx;
    if ((rc = be->part->to_dev(be, dx, xl, 8 * nx, msg, sizeof msg)) ||
        (rc = be->part->spmv(be, b->rows, b->nnz, part_row_ptr(p, j), part_col_idx(p, j),
                             part_values(p, j), dx, dy, NULL, msg, sizeof msg)) ||
        (rc = be->part->to_host(be, yd + b->row0, dy, 8 * (size_t)b->rows, msg, sizeof msg)))
      part_failed(job, p->dev[j], rc, "spmv", msg);
    free(xl);
    xl = NULL;
  }
  job->kernel_us = now_us() - t0;
  if (job->err) goto out;
  for (int32_t i = 0; i < s->rows; i++) {
    double t = (double)s->alpha * yd[i];
    if (s->y.ptr) t += (double)s->beta * y[i];
    y[i] = (float)t;
  }
  if (part_write_out(job, y, p->dev[0]) == 0) job->algo_name = "partitioned";
  goto out;
oom:
  job_fail(job, GKC_EOUT_OF_MEMORY, "out of memory for a partitioned spmv");
out:
  for (int j = 0; j < k; j++) {
    gkcd_backend *be = devices_backend(p->dev[j]);
    if (mem[j]) be->res_free(be, mem[j], cap[j]);
  }
  free(x), free(y), free(xl), free(yd);
}

int part_gang_ready(gkcd_job *job) {
  /* Every device of the gang must still serve. */
  for (int d = 0; d < GKCD_MAX_DEVICES; d++) {
    gkcd_backend *be = (job->gang_mask & (1ull << d)) ? devices_backend(d) : NULL;
    if (be && atomic_load(&be->lost)) {
      part_failed(job, d, GKC_EDEVICE_LOST, "", "");
      return -1;
    }
  }
  job->split_mask = job->gang_mask; /* the reply's "devices" */
  return 0;
}
