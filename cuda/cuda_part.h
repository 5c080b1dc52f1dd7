/* cuda_part.h: a partitioned matrix's primitives on one CUDA device
 * (backend.h, gkcd_part_ops): cuda_backend.c points be->part at them. */
#ifndef CUDA_PART_H
#define CUDA_PART_H

#include "backend.h"

extern const gkcd_part_ops cuda_part_ops;

#endif
