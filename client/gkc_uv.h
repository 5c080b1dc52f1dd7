/* gkc_uv.h: drive a gkc_async context from a libuv loop.
 *
 * A separate library (libgkc_uv, pkg-config gkc-uv), so that libgkc itself
 * never depends on libuv.  After gkc_async_attach_uv the loop watches the
 * context's descriptor and runs its callbacks; nothing else is needed.
 *
 *   uv_loop_t *loop = uv_default_loop();
 *   gkc_async *ac;
 *   gkc_async_connect(&ac, NULL);
 *   gkc_async_attach_uv(ac, loop);
 *   gkc_async_reduce(ac, &args, on_sum, NULL);
 *   uv_run(loop, UV_RUN_DEFAULT);   // returns once nothing is pending and ac is closed
 *
 * The watcher keeps the loop alive while the connection is open: close the
 * context (gkc_async_close, from a callback or a libuv callback) to let
 * uv_run return.  Its uv_poll_t is closed, and freed, through the loop.
 */
#ifndef GKC_UV_H
#define GKC_UV_H

#include <uv.h>

#include "gkc_async.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Watches ac's descriptor on loop; 0, or GKC_EOUT_OF_MEMORY, or GKC_EIO
 * when libuv refuses the descriptor (or ac is not connected).  At most once
 * per context. */
GKC_API int gkc_async_attach_uv(gkc_async *ac, uv_loop_t *loop);

#ifdef __cplusplus
}
#endif

#endif /* GKC_UV_H */
