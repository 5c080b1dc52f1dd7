/* cuda_launch.h: each method's launcher on the array path, by method.
 *
 * cuda_launchers[m] launches method m's kernel on a layout (cuda_layout.h,
 * cuda_launch_fn); NULL for a method whose array path runs no kernel
 * (download: its input is its result) and for those that do not take the
 * array path at all (uploads, solve, batch: cuda_run.h).  A new method of
 * this kind is a launcher in its family's file and a line here.
 */
#ifndef CUDA_LAUNCH_H
#define CUDA_LAUNCH_H

#include "cuda_layout.h"
#include "proto_methods.h"

extern const cuda_launch_fn cuda_launchers[PROTO_M_COUNT];

#endif
