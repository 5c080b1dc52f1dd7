/* cuda_layout.c: see cuda_layout.h. */
#include "cuda_layout.h"

#include <string.h>

#include "proto_methods.h"
#include "resident.h"

/* Copies between the request, the pinned stage and the result are most of
 * the daemon's own time on big requests (one core moves ~10 GB/s, and a
 * fresh result buffer also takes its page faults there): split big ones
 * over a few threads. */
void cuda_copy_host(void *dst, const void *src, size_t n) {
  enum { PIECE = 8 << 20 };
  if (n < 2 * (size_t)PIECE) {
    memcpy(dst, src, n);
    return;
  }
  long pieces = (long)((n + PIECE - 1) / PIECE);
#pragma omp parallel for num_threads(8) schedule(static)
  for (long i = 0; i < pieces; i++) {
    size_t off = (size_t)i * PIECE, len = n - off < PIECE ? n - off : PIECE;
    memcpy((char *)dst + off, (const char *)src + off, len);
  }
}

static void add(layout *l, const gkcd_span *s) {
  l->in[l->nin] = s; /* absent optional inputs keep their place, with no bytes */
  if (s->ptr && s->where != SPAN_RES) {
    l->off[l->nin] = l->tmp_bytes;
    l->tmp_bytes += cuda_up(s->bytes ? s->bytes : 1);
    if (!s->pinned) l->stage_bytes += cuda_up(s->bytes);
    if (s->bytes) l->ncopies++;
  }
  l->nin++;
}

void layout_plan(gkcd_job *job, layout *l) {
  memset(l, 0, sizeof *l);
  switch (job->method) {
    case PROTO_M_SGEMM:
      add(l, &job->in.sgemm.a);
      add(l, &job->in.sgemm.b);
      add(l, &job->in.sgemm.c);
      break;
    case PROTO_M_REDUCE: add(l, &job->in.reduce.x); break;
    case PROTO_M_SPMV:
      add(l, &job->in.spmv.row_ptr);
      add(l, &job->in.spmv.col_idx);
      add(l, &job->in.spmv.values);
      add(l, &job->in.spmv.x);
      add(l, &job->in.spmv.y);
      break;
    case PROTO_M_DOT:
    case PROTO_M_AXPBY:
      add(l, &job->in.vec.x);
      add(l, &job->in.vec.y);
      break;
    case PROTO_M_DOWNLOAD: add(l, &job->in.upload.data); break;
  }
  int scalar = job->method == PROTO_M_REDUCE || job->method == PROTO_M_DOT;
  l->res_bytes = scalar ? sizeof(double) : job->out_bytes;
  if (scalar || job->out_kind == OUT_BIN || job->out_kind == OUT_HOST) {
    l->res_off = l->tmp_bytes;
    l->tmp_bytes += cuda_up(l->res_bytes);
  }
  if (job->method == PROTO_M_DOWNLOAD) l->tmp_bytes = 0; /* straight from resident memory */
}

void layout_plan_upload(gkcd_job *job, layout *l) {
  memset(l, 0, sizeof *l);
  const gkcd_span *parts[3];
  int n = 0;
  if (job->method == PROTO_M_UPLOAD) {
    parts[n++] = &job->in.upload.data;
  } else {
    parts[n++] = &job->in.csr.row_ptr;
    parts[n++] = &job->in.csr.col_idx;
    parts[n++] = &job->in.csr.values;
  }
  size_t at = 0;
  for (int i = 0; i < n; i++) {
    l->in[i] = parts[i];
    l->off[i] = at;
    at += parts[i]->bytes;
    if (!parts[i]->pinned) l->stage_bytes += cuda_up(parts[i]->bytes);
  }
  l->nin = n;
  l->ncopies = n; /* into the new array, from the host or from a resident one */
}

cudaError_t layout_copy_in(slot *s, layout *l, char *base, int upload) {
  size_t st = 0;
  for (int i = 0; i < l->nin; i++) {
    const gkcd_span *sp = l->in[i];
    if (upload && sp->where == SPAN_RES) { /* a new array made from a resident one */
      l->dev[i] = base + l->off[i];
      cudaError_t e = cudaMemcpyAsync(base + l->off[i], sp->ptr, sp->bytes,
                                      cudaMemcpyDeviceToDevice, s->stream);
      if (e != cudaSuccess) return e;
      continue;
    }
    if (sp->where == SPAN_RES || !sp->ptr) {
      l->dev[i] = sp->ptr;
      continue;
    }
    char *dst = base + l->off[i];
    l->dev[i] = dst;
    if (sp->bytes == 0) continue;
    const void *src = sp->ptr;
    if (!sp->pinned) {
      cuda_copy_host((char *)s->stage + st, sp->ptr, sp->bytes);
      src = (char *)s->stage + st;
      st += cuda_up(sp->bytes);
    }
    cudaError_t e = cudaMemcpyAsync(dst, src, sp->bytes, cudaMemcpyHostToDevice, s->stream);
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}


