/* fuzz_objects.h: the resident objects and regions fuzz_request sets up on
 * its fake connection before every input, so that requests can name them
 * (make_corpus uses the same ids for its seeds).
 *
 * The daemon numbers objects from 1 in creation order (resident.c res_add);
 * the harness creates them in the order of this table, on a fresh server,
 * so the ids below are theirs.
 */
#ifndef GKC_FUZZ_OBJECTS_H
#define GKC_FUZZ_OBJECTS_H

enum {
  FZ_REGION_A = 1,     /* region, 4096 bytes; a CSR laid out in it, see below */
  FZ_REGION_B = 2,     /* region, 64 bytes */
  FZ_ARR_F32_16 = 3,   /* resident f32[4] */
  FZ_ARR_F32_20 = 4,   /* resident f32[5] */
  FZ_ARR_I32_20 = 5,   /* resident i32[5] */
  FZ_MATRIX = 6,       /* resident 4x5 CSR matrix, nnz 6 */
  FZ_ARR_SHARED = 7,   /* resident f32[4], shared (no owner) */
  FZ_ARR_OTHER = 8,    /* resident f32[4] of another connection: never usable */
  FZ_REGION_OTHER = 9, /* region of another connection: never usable */
  FZ_ARR_F32_16B = 10, /* resident f32[4] */
  FZ_NOBJ = 10
};

/* Region A holds the 4x5 matrix by value at these offsets. */
#define FZ_RA_ROW_PTR 0    /* i32[5]: 0 2 2 5 6 */
#define FZ_RA_COL_IDX 64   /* i32[6]: 0 4 1 2 3 4 */
#define FZ_RA_VALUES 128   /* f32[6] */
#define FZ_RA_X 256        /* f32[5] */
#define FZ_RA_BAD_COL 512  /* i32[6]: one column out of range */
#define FZ_RA_BYTES 4096
#define FZ_RB_BYTES 64

#endif
