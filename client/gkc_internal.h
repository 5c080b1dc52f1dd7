/* gkc_internal.h: what the library's files share; not installed. */
#ifndef GKC_INTERNAL_H
#define GKC_INTERNAL_H

#include <msgpack.h>

#include "gkc.h"

/* Packs the params map of a request (exactly one map); 0 or an error. */
typedef int (*gkc__pack_fn)(msgpack_packer *pk, const void *arg);
/* Reads a successful result; 0 or an error set with gkc__fail. */
typedef int (*gkc__take_fn)(gkc_conn *c, const msgpack_object *result, void *arg);

/* One request, one reply. */
int gkc__call(gkc_conn *c, const char *method, gkc__pack_fn pack, const void *pack_arg,
              gkc__take_fn take, void *take_arg);
/* The same, passing the descriptor fd (when >= 0) as SCM_RIGHTS ancillary
 * data with the request's first bytes; the caller keeps its own copy. */
int gkc__call_fd(gkc_conn *c, int fd, const char *method, gkc__pack_fn pack, const void *pack_arg,
                 gkc__take_fn take, void *take_arg);
/* Records a message for gkc_errmsg and returns err. */
int gkc__fail(gkc_conn *c, int err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Nonzero when sgemm should ask for precision "tf32". */
int gkc__tf32(const gkc_conn *c);
/* Renders a msgpack object as JSON into a malloc'd string (NULL when out of memory). */
char *gkc__json(const msgpack_object *o);

#endif
