/* proto_rpc.h: the msgpack-rpc envelope, shared by gkcd and libgkc.
 *
 * Request  [0, msgid, method, [ {named arguments} ]]
 * Response [1, msgid, error, result], error nil or {"code": str, "message": str}
 * (proto/PROTOCOL.md is the full contract.)  Parsing functions take an
 * unpacked msgpack_object and never allocate; strings they return point into
 * the object's buffer.
 */
#ifndef PROTO_RPC_H
#define PROTO_RPC_H

#include <msgpack.h>
#include <stddef.h>
#include <stdint.h>

#include "proto_frame.h"

/* Defaults the daemon applies to frames; the client uses the same shape
 * with a larger byte limit for replies. */
#define PROTO_MAX_OBJECTS 4096
#define PROTO_MAX_DEPTH 16

typedef struct {
  int msgid_known;
  uint32_t msgid;
  int method;              /* a proto_method, or -1 when unknown */
  const char *method_name; /* not NUL-terminated */
  size_t method_len;
  const msgpack_object *params; /* the one map of named arguments */
} proto_request;

/* Checks the request shape.  Returns 0, GKC_EINVALID_REQUEST or
 * GKC_EUNKNOWN_METHOD with an explanation in msg.  msgid fields are set
 * whenever the msgid itself is readable, even on error. */
int proto_request_parse(const msgpack_object *root, proto_request *req,
                        char *msg, size_t msglen);

typedef struct {
  uint32_t msgid;
  int error;                   /* 0, or the gkc_error named by the reply */
  const char *code;            /* wire code when error != 0 */
  size_t code_len;
  const char *message;         /* server message when error != 0 */
  size_t message_len;
  const msgpack_object *result; /* when error == 0 */
} proto_response;

/* Returns 0 when root is a well-formed response, else GKC_EPROTOCOL. */
int proto_response_parse(const msgpack_object *root, proto_response *resp);

/* The value stored under key in a map, or NULL. */
const msgpack_object *proto_map_get(const msgpack_object *map, const char *key);

/* Packs [0, msgid, method, [ ... the caller then packs exactly one map. */
void proto_pack_request_head(msgpack_packer *pk, uint32_t msgid, const char *method);
/* Packs [1, msgid, nil, ... the caller then packs the result. */
void proto_pack_result_head(msgpack_packer *pk, uint32_t msgid);
/* Packs a whole error response; msgid nil when !msgid_known. */
void proto_pack_error(msgpack_packer *pk, int msgid_known, uint32_t msgid,
                      int code, const char *message);

/* Packs the notification [2, "error", [{"code": ..., "message": ...}]] that
 * gkcd sends before it closes a connection on its own initiative (no slot
 * free, a timeout), so the client learns why. */
void proto_pack_error_notification(msgpack_packer *pk, int code, const char *message);

/* Copies a client-supplied name into dst for an error message: printable
 * ASCII only (anything else becomes '?', so a message is always valid
 * UTF-8 whatever bytes were sent), at most max characters, "..." marking a
 * cut.  Returns dst. */
char *proto_echo(char *dst, size_t cap, const char *s, size_t len, size_t max);

/* Packs a NUL-terminated string. */
void proto_pack_cstr(msgpack_packer *pk, const char *s);

#endif
