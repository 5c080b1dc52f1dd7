/* dmat.c: the distributed matrix: halo plan exchange, upload, the halo's three steps, spmv. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define HALO_TAG 0x6b64

/* Uploads a CSR block; records a failure. */
static void upload(gkcm_matrix *A, int32_t rows, int32_t cols, int64_t nnz, const int32_t *rp,
                   const int32_t *ci, const float *v, uint32_t *id, int *have, const char *what,
                   char *algo) {
  gkcm_ctx *ctx = A->ctx;
  if (ctx->err) return;
  gkc_csr m = {rows, cols, nnz, rp, ci, v};
  int rc = gkc_csr_upload(ctx->conn, &m, 0, id, algo);
  if (rc) ctx_fail_gkc(ctx, rc, what);
  else *have = 1;
}

/* The halo's buffers: one shared-memory region when gkcd registers it, so
 * that neither direction is copied through the socket; plain memory
 * (inline bins) otherwise, e.g. through a proxy that drops descriptors. */
static void halo_buffers(gkcm_matrix *A) {
  gkcm_ctx *ctx = A->ctx;
  halo_plan *p = &A->plan;
  size_t hn = (size_t)p->nsend + (size_t)p->nghost, gn = (size_t)p->nghost;
  /* 64-byte offsets keep the two parts off each other's cache lines. */
  A->hoff = 0, A->goff = (hn * 4 + 63) / 64 * 64;
  size_t bytes = A->goff + gn * 4;
  if (ctx->err || bytes == 0) return;
  if (gkc_region_create(ctx->conn, bytes, &A->region) == 0) {
    A->hbuf = (float *)((char *)gkc_region_data(A->region) + A->hoff);
    A->gbuf = (float *)((char *)gkc_region_data(A->region) + A->goff);
    return;
  }
  A->region = NULL;
  A->hbuf = calloc(hn + 1, sizeof(float));
  A->gbuf = calloc(gn + 1, sizeof(float));
  if (!A->hbuf || !A->gbuf) ctx_fail(ctx, GKC_EOUT_OF_MEMORY, "out of memory for the halo buffers");
}

/* [G; offd^T]: nsend rows with a single 1 (the send list, grouped by
 * destination), then offd transposed (nghost rows over the own rows). */
static void upload_down(gkcm_matrix *A) {
  gkcm_ctx *ctx = A->ctx;
  halo_plan *p = &A->plan;
  int64_t m = (int64_t)p->nsend + p->nghost, nnz = (int64_t)p->nsend + p->o_nnz;
  if (ctx->err) return;
  if (m > INT32_MAX - 1 || nnz > INT32_MAX) {
    ctx_fail(ctx, GKC_EINVALID_ARGUMENT, "the halo download has %" PRId64 " rows and %" PRId64
             " nonzeros, more than int32 indexes", m, nnz);
    return;
  }
  int32_t *rp = calloc((size_t)m + 2, sizeof *rp), *ci = malloc(((size_t)nnz + 1) * sizeof *ci);
  float *v = malloc(((size_t)nnz + 1) * sizeof *v);
  if (!rp || !ci || !v) {
    ctx_fail(ctx, GKC_EOUT_OF_MEMORY, "out of memory for the halo download matrix");
    goto done;
  }
  for (int32_t k = 0; k < p->nsend; k++) rp[k + 1] = k + 1, ci[k] = p->send_idx[k], v[k] = 1.0f;
  /* The transpose by counting: row nsend + c of the result lists the own
   * rows whose offd entries sit in ghost column c. */
  int32_t *cnt = rp + p->nsend + 1; /* cnt[c] counts column c, then is its end */
  for (int64_t k = 0; k < p->o_nnz; k++) cnt[p->o_col[k]]++;
  for (int32_t c = 0; c < p->nghost; c++) cnt[c] += c ? cnt[c - 1] : p->nsend;
  for (int32_t c = p->nghost; c-- > 0;) cnt[c] = c ? cnt[c - 1] : p->nsend; /* starts */
  for (int32_t i = 0; i < p->rows; i++)
    for (int32_t k = p->o_row_ptr[i]; k < p->o_row_ptr[i + 1]; k++) {
      int32_t at = cnt[p->o_col[k]]++;
      ci[at] = i, v[at] = p->o_val[k];
    }
  /* cnt[c] now ends column c: rp[nsend + 1 + c], as CSR wants. */
  upload(A, (int32_t)m, p->rows, nnz, rp, ci, v, &A->down, &A->have_down,
         "csr_upload (halo download)", NULL);
done:
  free(rp), free(ci), free(v);
}

int gkcm_matrix_create(gkcm_ctx *ctx, const gkcm_rows *mine, gkcm_matrix **out) {
  *out = NULL;
  int P = ctx->size, rc;
  char msg[256];
  gkcm_matrix *A = calloc(1, sizeof *A);
  int64_t *all = malloc((size_t)P * 3 * sizeof *all);
  int *counts = calloc((size_t)P, sizeof *counts);
  int *displ = calloc((size_t)P, sizeof *displ);
  int64_t *ids = NULL;
  if (A) A->offsets = malloc(((size_t)P + 1) * sizeof *A->offsets);
  int nomem = !A || !A->offsets || !all || !counts || !displ;
  /* Agree on memory first: the gathers below need the buffers on all ranks. */
  if (nomem) ctx_fail(ctx, GKC_EOUT_OF_MEMORY, "out of memory for the matrix");
  if ((rc = ctx_sync(ctx, NULL, 0))) goto fail;
  A->ctx = ctx;

  int64_t me[3] = {mine->n, mine->row0, mine->rows};
  MPI_Allgather(me, 3, MPI_INT64_T, all, 3, MPI_INT64_T, ctx->comm);
  for (int q = 0; q < P; q++) {
    if (all[3 * q] != mine->n) {
      ctx_fail(ctx, GKC_EINVALID_ARGUMENT, "rank %d says the matrix has %" PRId64 " rows, rank "
               "%d %" PRId64, q, all[3 * q], ctx->rank, mine->n);
      break;
    }
    A->offsets[q] = all[3 * q + 1];
    if (q + 1 < P && all[3 * q + 1] + all[3 * q + 2] != all[3 * q + 4]) {
      ctx_fail(ctx, GKC_EINVALID_ARGUMENT, "rank %d's rows end at %" PRId64 " but rank %d's "
               "start at %" PRId64 ": the ranks' rows must tile [0, n) in rank order", q,
               all[3 * q + 1] + all[3 * q + 2], q + 1, all[3 * q + 4]);
      break;
    }
  }
  A->offsets[P] = all[3 * (P - 1) + 1] + all[3 * (P - 1) + 2];
  if (!ctx->err && halo_plan_build(&A->plan, A->offsets, P, ctx->rank, mine->n, mine->rows,
                                   mine->row_ptr, mine->col_idx, mine->values, msg,
                                   sizeof msg) != 0)
    ctx_fail(ctx, GKC_EINVALID_ARGUMENT, "%s", msg);
  if ((rc = ctx_sync(ctx, NULL, 0))) goto fail;

  /* Tell each owner which of its rows we need: counts, then the ids. */
  halo_plan *p = &A->plan;
  MPI_Alltoall(p->recv_count, 1, MPI_INT, counts, 1, MPI_INT, ctx->comm);
  int64_t total = 0;
  for (int q = 0; q < P; q++) displ[q] = (int)total, total += counts[q];
  ids = malloc((size_t)(total ? total : 1) * sizeof *ids);
  if (!ids || total > INT32_MAX) ctx_fail(ctx, GKC_EOUT_OF_MEMORY, "out of memory for %" PRId64
                                          " halo indices", total);
  if ((rc = ctx_sync(ctx, NULL, 0))) goto fail;
  MPI_Alltoallv(p->ghost, p->recv_count, p->recv_displ, MPI_INT64_T, ids, counts, displ,
                MPI_INT64_T, ctx->comm);
  if (halo_plan_set_sends(p, counts, ids, msg, sizeof msg) != 0)
    ctx_fail(ctx, GKC_EINVALID_ARGUMENT, "%s", msg);
  if ((rc = ctx_sync(ctx, NULL, 0))) goto fail;

  A->reqs = malloc((size_t)P * 2 * sizeof *A->reqs);
  for (int q = 0; q < P; q++) A->nneigh += p->recv_count[q] > 0 || p->send_count[q] > 0;
  if (!A->reqs) ctx_fail(ctx, GKC_EOUT_OF_MEMORY, "out of memory for the halo requests");
  halo_buffers(A);

  /* Upload: the own columns, the ghost columns, and the halo download
   * matrix [G; offd^T] (see internal.h). */
  upload(A, p->rows, p->rows, p->d_nnz, p->d_row_ptr, p->d_col, p->d_val, &A->diag,
         &A->have_diag, "csr_upload (own columns)", A->spmv_algo);
  if (p->nghost > 0) {
    upload(A, p->rows, p->nghost, p->o_nnz, p->o_row_ptr, p->o_col, p->o_val, &A->offd,
           &A->have_offd, "csr_upload (ghost columns)", NULL);
    float *zeros = calloc((size_t)p->rows, sizeof *zeros);
    if (!zeros) ctx_fail(ctx, GKC_EOUT_OF_MEMORY, "out of memory");
    else if (!ctx->err) {
      rc = gkc_upload(ctx->conn, gkc_ref_mem(zeros, (size_t)p->rows * 4), GKC_F32, 0,
                      &A->scratch);
      if (rc) ctx_fail_gkc(ctx, rc, "upload (scratch vector)");
      else A->have_scratch = 1;
    }
    free(zeros);
  }
  if (p->nsend + p->nghost > 0) upload_down(A);
  if ((rc = ctx_sync(ctx, NULL, 0))) goto fail;
  free(all), free(counts), free(displ), free(ids);
  *out = A;
  return 0;
fail:
  free(all), free(counts), free(displ), free(ids);
  gkcm_matrix_free(A);
  return rc;
}

void gkcm_matrix_free(gkcm_matrix *A) {
  if (!A) return;
  gkc_conn *c = A->ctx ? A->ctx->conn : NULL;
  /* After a failure the connection may be gone: the releases then fail
   * quietly, and gkcd freed everything when the connection closed. */
  if (c) {
    if (A->have_diag) gkc_release_matrix(c, A->diag);
    if (A->have_offd) gkc_release_matrix(c, A->offd);
    if (A->have_down) gkc_release_matrix(c, A->down);
    if (A->have_scratch) gkc_release(c, A->scratch);
  }
  if (A->region) gkc_region_release(c, A->region);
  else free(A->hbuf), free(A->gbuf);
  halo_plan_free(&A->plan);
  free(A->offsets), free(A->reqs);
  free(A);
}

void gkcm_matrix_info_get(const gkcm_matrix *A, gkcm_matrix_info *info) {
  memset(info, 0, sizeof *info);
  info->n = A->plan.n, info->row0 = A->plan.row0, info->rows = A->plan.rows;
  info->nnz = A->plan.d_nnz + A->plan.o_nnz;
  info->ghosts = A->plan.nghost, info->sends = A->plan.nsend, info->neighbours = A->nneigh;
  info->halo_in_region = A->region != NULL;
  memcpy(info->spmv_algo, A->spmv_algo, sizeof info->spmv_algo);
}

void clock_request(gkcm_clock *clk, double t0, const gkc_info *info) {
  clk->local_s += ctx_now() - t0;
  clk->requests++;
  if (info) clk->server_s += info->server_us * 1e-6, clk->kernel_s += info->kernel_us * 1e-6;
}

/* Posts the exchange of hbuf's sends into gbuf; returns the request count. */
static int halo_post(gkcm_matrix *A) {
  halo_plan *p = &A->plan;
  int nreq = 0;
  for (int q = 0; q < p->nranks; q++)
    if (p->recv_count[q] > 0)
      MPI_Irecv(A->gbuf + p->recv_displ[q], p->recv_count[q], MPI_FLOAT, q, HALO_TAG,
                A->ctx->comm, &A->reqs[nreq++]);
  for (int q = 0; q < p->nranks; q++)
    if (p->send_count[q] > 0)
      MPI_Isend(A->hbuf + p->send_displ[q], p->send_count[q], MPI_FLOAT, q, HALO_TAG,
                A->ctx->comm, &A->reqs[nreq++]);
  return nreq;
}

void dmat_halo_down(gkcm_matrix *A, uint32_t x, gkcm_clock *clk) {
  gkcm_ctx *ctx = A->ctx;
  halo_plan *p = &A->plan;
  size_t m = (size_t)p->nsend + (size_t)p->nghost;
  if (m == 0 || ctx->err) return;
  double t = ctx_now();
  gkc_spmv_args g = GKC_SPMV_ARGS_INIT;
  g.use_matrix = 1, g.matrix = A->down, g.x = gkc_ref_handle(x, (size_t)p->rows * 4);
  gkc_out o = A->region ? gkc_out_region(A->region, A->hoff) : gkc_out_mem(A->hbuf, m * 4);
  gkc_info info;
  int rc = gkc_spmv_ref(ctx->conn, &g, &o, &info);
  if (rc) ctx_fail_gkc(ctx, rc, "spmv (halo download)");
  clock_request(clk, t, rc ? NULL : &info);
  clk->down_bytes += (int64_t)m * 4;
}

int dmat_fused(const gkcm_matrix *A) { return A->region != NULL && A->ctx->size > 1; }

int dmat_step_down(gkcm_matrix *A, uint32_t x, gkc_step *st, gkc_step_region *g,
                   gkcm_clock *clk) {
  halo_plan *p = &A->plan;
  size_t m = (size_t)p->nsend + (size_t)p->nghost;
  if (m == 0) return 0;
  *st = gkc_step_spmv(A->down, gkc_scalar_num(1), x, gkc_scalar_num(0), 0, 0);
  memset(g, 0, sizeof *g);
  g->out = gkc_out_region(A->region, A->hoff);
  clk->down_bytes += (int64_t)m * 4;
  return 1;
}

int dmat_step_up(gkcm_matrix *A, uint32_t y, uint32_t out, gkc_step *st, gkc_step_region *g) {
  halo_plan *p = &A->plan;
  if (p->nghost == 0) return 0;
  *st = gkc_step_spmv(A->offd, gkc_scalar_num(1), 0, gkc_scalar_num(1), y, out);
  memset(g, 0, sizeof *g);
  g->x = gkc_ref_region(A->region, A->goff, (size_t)p->nghost * 4);
  return 1;
}

void dmat_halo_exchange(gkcm_matrix *A, gkcm_clock *clk) {
  double t = ctx_now();
  int nreq = halo_post(A);
  MPI_Waitall(nreq, A->reqs, MPI_STATUSES_IGNORE);
  clk->comm_s += ctx_now() - t;
  clk->halo_bytes += (int64_t)A->plan.nsend * 4;
}

double dmat_ghost_dot(const gkcm_matrix *A) {
  const halo_plan *p = &A->plan;
  const float *v = A->hbuf + p->nsend;
  double acc = 0;
  for (int32_t k = 0; k < p->nghost; k++) acc += (double)A->gbuf[k] * v[k];
  return acc;
}

void dmat_halo_up(gkcm_matrix *A, float alpha, float beta, uint32_t y, uint32_t out,
                  gkcm_clock *clk) {
  gkcm_ctx *ctx = A->ctx;
  halo_plan *p = &A->plan;
  if (p->nghost == 0 || ctx->err) return;
  size_t nb = (size_t)p->rows * 4, gb = (size_t)p->nghost * 4;
  double t = ctx_now();
  gkc_spmv_args a = GKC_SPMV_ARGS_INIT;
  a.use_matrix = 1, a.matrix = A->offd;
  a.x = A->region ? gkc_ref_region(A->region, A->goff, gb) : gkc_ref_mem(A->gbuf, gb);
  a.y = gkc_ref_handle(y, nb);
  a.alpha = alpha, a.beta = beta;
  gkc_out o = gkc_out_handle(out);
  gkc_info info;
  int rc = gkc_spmv_ref(ctx->conn, &a, &o, &info);
  if (rc) ctx_fail_gkc(ctx, rc, "spmv (ghost columns)");
  clock_request(clk, t, rc ? NULL : &info);
  clk->up_bytes += (int64_t)gb;
}

void dmat_spmv(gkcm_matrix *A, float alpha, uint32_t x, float beta, int has_y, uint32_t y,
               uint32_t out, gkcm_clock *clk) {
  gkcm_ctx *ctx = A->ctx;
  halo_plan *p = &A->plan;
  size_t nb = (size_t)p->rows * 4;
  dmat_halo_down(A, x, clk);
  double t1 = ctx_now();
  int nreq = halo_post(A);
  clk->halo_bytes += (int64_t)p->nsend * 4;
  clk->comm_s += ctx_now() - t1;
  if (!ctx->err) { /* the own columns while the messages travel */
    double t = ctx_now();
    gkc_spmv_args d = GKC_SPMV_ARGS_INIT;
    d.use_matrix = 1, d.matrix = A->diag, d.x = gkc_ref_handle(x, nb);
    d.alpha = alpha, d.beta = has_y ? beta : 0.0f;
    if (has_y) d.y = gkc_ref_handle(y, nb);
    gkc_out o = gkc_out_handle(p->nghost > 0 ? A->scratch : out);
    gkc_info info;
    int rc = gkc_spmv_ref(ctx->conn, &d, &o, &info);
    if (rc) ctx_fail_gkc(ctx, rc, "spmv (own columns)");
    clock_request(clk, t, rc ? NULL : &info);
  }
  double t3 = ctx_now();
  MPI_Waitall(nreq, A->reqs, MPI_STATUSES_IGNORE);
  clk->comm_s += ctx_now() - t3;
  dmat_halo_up(A, alpha, 1.0f, A->scratch, out, clk);
}

int gkcm_host_spmv(gkcm_matrix *A, const float *x, double *y) {
  halo_plan *p = &A->plan;
  for (int32_t k = 0; k < p->nsend; k++) A->hbuf[k] = x[p->send_idx[k]];
  int nreq = halo_post(A);
  MPI_Waitall(nreq, A->reqs, MPI_STATUSES_IGNORE);
  for (int32_t i = 0; i < p->rows; i++) {
    double acc = 0;
    for (int32_t k = p->d_row_ptr[i]; k < p->d_row_ptr[i + 1]; k++)
      acc += (double)p->d_val[k] * x[p->d_col[k]];
    for (int32_t k = p->o_row_ptr[i]; k < p->o_row_ptr[i + 1]; k++)
      acc += (double)p->o_val[k] * A->gbuf[p->o_col[k]];
    y[i] = acc;
  }
  return 0;
}

int gkcm_gather(gkcm_matrix *A, int root, const float *x, float *y) {
  gkcm_ctx *ctx = A->ctx;
  int P = ctx->size;
  int *counts = malloc((size_t)P * sizeof *counts), *displ = malloc((size_t)P * sizeof *displ);
  if (!counts || !displ) ctx_fail(ctx, GKC_EOUT_OF_MEMORY, "out of memory");
  int rc = ctx_sync(ctx, NULL, 0);
  if (rc == 0) {
    for (int q = 0; q < P; q++)
      counts[q] = (int)(A->offsets[q + 1] - A->offsets[q]), displ[q] = (int)A->offsets[q];
    MPI_Gatherv(x, A->plan.rows, MPI_FLOAT, y, counts, displ, MPI_FLOAT, root, ctx->comm);
  }
  free(counts), free(displ);
  return rc;
}
