/* cuda_layout.c: see cuda_layout.h. */
#include "cuda_layout.h"

#include <string.h>

#include "method.h"
#include "res_object.h"

/* Copies between the request, the pinned stage and the result are most of
 * the daemon's own time on big requests (one core moves ~10 GB/s, and a
 * fresh result buffer also takes its page faults there): split big ones
 * over a few threads. */
void cuda_copy_host(void *dst, const void *src, size_t n) { cuda_copy_pieces(dst, src, n, (size_t)8 << 20); }

static void add(cuda_layout *l, const gkcd_span *s) {
  l->in[l->nin] = s; /* absent optional inputs keep their place, with no bytes */
  if (s->ptr && s->where != SPAN_RES) {
    l->off[l->nin] = l->tmp_bytes;
    l->tmp_bytes += cuda_up(s->bytes ? s->bytes : 1);
    if (!s->pinned) l->stage_bytes += cuda_up(s->bytes);
    if (s->bytes) l->ncopies++;
  }
  l->nin++;
}

int cuda_layout_plan(gkcd_job *job, int copy_only, cuda_layout *l) {
  memset(l, 0, sizeof *l);
  gkcd_span *in[CUDA_MAX_INPUTS];
  const gkcd_method *row = job->row;
  int nin = row && row->inputs ? row->inputs(job, in, CUDA_MAX_INPUTS) : 0;
  if (!row || nin < 0 || nin > CUDA_MAX_INPUTS) return -1;
  for (int i = 0; i < nin; i++) add(l, in[i]);
  l->res_bytes = row->scalar ? sizeof(double) : job->out_bytes;
  if (copy_only) { /* straight from resident memory */
    l->tmp_bytes = 0;
    return 0;
  }
  if (row->scalar || job->out_kind == OUT_BIN || job->out_kind == OUT_HOST) {
    l->res_off = l->tmp_bytes;
    l->tmp_bytes += cuda_up(l->res_bytes);
  }
  return 0;
}

void cuda_layout_plan_into(cuda_layout *l, const gkcd_span *const in[], int nin) {
  memset(l, 0, sizeof *l);
  size_t at = 0;
  for (int i = 0; i < nin; i++) {
    size_t a = in[i]->dtype == DT_F64 ? 8 : 4; /* res_values_offset's padding */
    at = (at + a - 1) / a * a;
    l->in[i] = in[i];
    l->off[i] = at;
    at += in[i]->bytes;
    if (!in[i]->pinned) l->stage_bytes += cuda_up(in[i]->bytes);
  }
  l->nin = nin;
  l->ncopies = nin; /* into the new array, from the host or from a resident one */
}

cudaError_t cuda_layout_copy_in(cuda_slot *s, cuda_layout *l, char *base, int upload) {
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
    if (!sp->pinned && l->stage_bytes > CUDA_STAGE_SMALL) {
      cudaError_t e = cuda_ring_h2d(&s->ring, s->stream, dst, sp->ptr, sp->bytes);
      if (e != cudaSuccess) return e;
      continue;
    }
    if (!sp->pinned) {
      memcpy((char *)s->stage + st, sp->ptr, sp->bytes);
      src = (char *)s->stage + st;
      st += cuda_up(sp->bytes);
    }
    cudaError_t e = cudaMemcpyAsync(dst, src, sp->bytes, cudaMemcpyHostToDevice, s->stream);
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}
