/* gkc_reply.h: reading gkcd's replies, and the "algo" argument, for the
 * method files (gkc_methods.c, gkc_resident.c, gkc_region.c, gkc_solve.c);
 * not installed.
 *
 * These sit below every method file and call only the core (gkc_wire.c),
 * so that a method file may call another's calls (gkc_sgemm packs through
 * gkc_sgemm_ref) without the two needing each other.
 */
#ifndef GKC_REPLY_H
#define GKC_REPLY_H

#include "gkc_internal.h"

/* Packs "algo": algo, or "auto" when algo is NULL or "". */
void gkc__pack_algo(msgpack_packer *pk, const char *algo);
/* Copies a string field of map m into a fixed buffer; "" when absent. */
void gkc__get_str(const msgpack_object *m, const char *key, char *dst, size_t n);
/* A numeric field of map m as a double; dflt when absent or not a number. */
double gkc__get_num(const msgpack_object *m, const char *key, double dflt);
/* Fills info (when not NULL) from a result's algo and timings (NAN when absent). */
void gkc__take_info(const msgpack_object *r, gkc_info *info);
/* A result that must be a map (and holds nothing we need). */
int gkc__take_map(gkc_conn *c, const msgpack_object *result, gkc__req *r, gkc_result *res);
/* An unsigned integer under key of map m, in [0, max]; 0 or GKC_EPROTOCOL. */
int gkc__get_uint(gkc_conn *c, const msgpack_object *m, const char *key, uint64_t max,
                  uint64_t *v);

#endif
