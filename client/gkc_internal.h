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

/* Helpers of the method files (defined in gkc_methods.c). */
/* Packs "algo": algo, or "auto" when algo is NULL or "". */
void gkc__pack_algo(msgpack_packer *pk, const char *algo);
/* Packs a reduce request's map header (3 entries), "op" and "algo"; the
 * caller packs "x". */
void gkc__pack_reduce_head(msgpack_packer *pk, gkc_reduce_op op, const char *algo);
/* Copies a string field of map m into a fixed buffer; "" when absent. */
void gkc__get_str(const msgpack_object *m, const char *key, char *dst, size_t n);
/* A numeric field of map m as a double; dflt when absent or not a number. */
double gkc__get_num(const msgpack_object *m, const char *key, double dflt);
/* Fills info (when not NULL) from a result's algo and timings (NAN when absent). */
void gkc__take_info(const msgpack_object *r, gkc_info *info);

#endif
