/* res_object.h: one object that outlives a request (a resident array or
 * matrix, or a client's shared-memory region), as jobs and the modules that
 * place and run them read it.  The table that registers, finds and frees
 * objects is resident.h; nothing here needs it.
 */
#ifndef GKCD_RES_OBJECT_H
#define GKCD_RES_OBJECT_H

#include <stddef.h>
#include <stdint.h>

#include "job.h"
#include "proto_dtypes.h"

enum { RES_ARRAY = 1, RES_MATRIX = 2, RES_REGION = 3 };
/* An array's element type (proto_dtypes.h's table); a matrix's is its values'. */
enum { DT_F32 = PROTO_DT_F32, DT_I32 = PROTO_DT_I32, DT_F64 = PROTO_DT_F64 };

/* Where a resident matrix's values start in its memory: past row_ptr
 * (rows + 1 int32) and col_idx (nnz int32), rounded up to the values' own
 * alignment, so that float64 values are 8-byte aligned (float32 ones need
 * no padding: the layout before float64, unchanged). */
static inline size_t res_values_offset(int32_t rows, int64_t nnz, int dtype) {
  size_t off = ((size_t)rows + 1) * 4 + (size_t)nnz * 4, a = dtype == DT_F64 ? 8 : 4;
  return (off + a - 1) / a * a;
}

/* What one owner holds, for resident.h's limits: a connection embeds one. */
typedef struct {
  int n_objects; /* resident arrays and matrices */
  int n_regions;
  uint64_t pinned; /* bytes of its regions, registered or being registered */
} res_owner;

struct gkcd_res {
  uint32_t id;
  int kind;
  res_owner *owner; /* NULL: shared */
  int uid;          /* the user whose connection made it (kept with a saved object) */
  int refs;
  int released;
  size_t bytes;     /* array or region size; a matrix's three arrays together */
  void *ptr;        /* array, matrix: backend memory; region: the mapping */
  size_t cap;       /* backend allocation size */
  int dtype;        /* array: its elements; matrix: its values (DT_F32 or DT_F64) */
  struct region_pin *pin; /* region: its registration for DMA (pinner.h), or NULL */
  int32_t rows, cols; /* matrix: row_ptr at ptr, then col_idx, then values */
  int64_t nnz;
  int32_t max_row;
  float pos_offdiag; /* matrix: the positive share of its off-diagonal weight (0..1; -1:
                      * not known), what solve's precond auto goes by */
  int algo;         /* matrix: the spmv algo auto uses */
  size_t plan_off;  /* matrix: offset of the backend's spmv plan in ptr, past
                     * the arrays and within cap (0: none) */
  int device;       /* array, matrix: the device its memory is on */
  uint64_t rep_mask; /* replicated: the devices holding a copy (bit d); 0: not */
  gkcd_copy *copies; /* replicated: copies[d] for each d in rep_mask (ptr, cap are
                      * copies[device]); read-only, so never an `out` */
  struct gkcd_part *part; /* matrix partitioned by rows over several devices (part.h), or
                           * NULL; ptr is then NULL and device its first device */
  void *precond;    /* matrix: its AMG hierarchy, kept from the first solve that built
                     * one (the backend's; freed with the matrix), or NULL */
  size_t precond_bytes; /* its bytes, in the budget as resident */
  int precond_busy; /* lent to a solve now (one at a time: its scratch is its own) */
  gkcd_res *next;   /* hash chain */
};

#endif
