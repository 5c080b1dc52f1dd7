/* args.h: typed access to a request's named arguments.
 *
 * Each getter looks a key up in the params map, checks its msgpack type and
 * range, and on failure writes a message naming the argument and returns
 * GKC_EINVALID_ARGUMENT.  A missing optional argument leaves *out at the
 * default the caller stored there beforehand.
 */
#ifndef GKCD_ARGS_H
#define GKCD_ARGS_H

#include <msgpack.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
  const msgpack_object *params;
  char *msg;
  size_t msglen;
} args_ctx;

/* Rejects keys not in the NULL-terminated list (catches typos like "alhpa"). */
int args_known(args_ctx *a, const char *const *allowed);

int args_int(args_ctx *a, const char *key, int required, int64_t lo, int64_t hi, int64_t *out);
/* o's value when it is a msgpack number (float32, float64 or an integer,
 * read as a double): 0, or -1 for any other type. */
int args_number(const msgpack_object *o, double *out);
/* msgpack float32, float64 or int; must be finite. */
int args_float(args_ctx *a, const char *key, int required, float *out);
/* msgpack float32, float64 or int; must be finite (float64 precision kept). */
int args_double(args_ctx *a, const char *key, int required, double *out);
int args_bool(args_ctx *a, const char *key, int required, int *out);
/* String; *out points into the request, not NUL-terminated. */
int args_str(args_ctx *a, const char *key, int required, const char **out, size_t *len);
int args_present(args_ctx *a, const char *key);

#endif
