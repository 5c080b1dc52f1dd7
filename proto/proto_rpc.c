/* proto_rpc.c: msgpack-rpc envelope parsing and packing, see proto_rpc.h. */
#include "proto_rpc.h"

#include <stdio.h>
#include <string.h>

#include "proto_errors.h"
#include "proto_methods.h"

static int is_uint(const msgpack_object *o) {
  return o->type == MSGPACK_OBJECT_POSITIVE_INTEGER;
}

char *proto_echo(char *dst, size_t cap, const char *s, size_t len, size_t max) {
  size_t n = 0;
  if (cap < 5) max = 0; else if (max > cap - 4) max = cap - 4;
  for (; n < len && n < max; n++) {
    unsigned char ch = (unsigned char)s[n];
    dst[n] = ch >= 0x20 && ch < 0x7f ? (char)ch : '?';
  }
  if (n < len && cap >= 4) memcpy(dst + n, "...", 3), n += 3;
  if (cap) dst[n < cap ? n : cap - 1] = 0;
  return dst;
}

int proto_request_parse(const msgpack_object *root, proto_request *req,
                        char *msg, size_t msglen) {
  memset(req, 0, sizeof *req);
  req->method = -1;
  if (root->type != MSGPACK_OBJECT_ARRAY) {
    snprintf(msg, msglen, "a request must be an array [0, msgid, method, params]");
    return GKC_EINVALID_REQUEST;
  }
  const msgpack_object_array *a = &root->via.array;
  if (a->size >= 2 && is_uint(&a->ptr[1]) && a->ptr[1].via.u64 <= UINT32_MAX) {
    req->msgid_known = 1;
    req->msgid = (uint32_t)a->ptr[1].via.u64;
  }
  if (a->size != 4) {
    snprintf(msg, msglen, "a request must have 4 elements [0, msgid, method, params], got %u",
             (unsigned)a->size);
    return GKC_EINVALID_REQUEST;
  }
  if (!is_uint(&a->ptr[0]) || a->ptr[0].via.u64 != 0) {
    snprintf(msg, msglen, "element 0 of a request must be 0 (request type)");
    return GKC_EINVALID_REQUEST;
  }
  if (!req->msgid_known) {
    snprintf(msg, msglen, "element 1 of a request (msgid) must be an integer in [0, 2^32)");
    return GKC_EINVALID_REQUEST;
  }
  if (a->ptr[2].type != MSGPACK_OBJECT_STR) {
    snprintf(msg, msglen, "element 2 of a request (method) must be a string");
    return GKC_EINVALID_REQUEST;
  }
  const msgpack_object *p = &a->ptr[3];
  if (p->type != MSGPACK_OBJECT_ARRAY || p->via.array.size != 1 ||
      p->via.array.ptr[0].type != MSGPACK_OBJECT_MAP) {
    snprintf(msg, msglen, "element 3 of a request (params) must be an array holding one map");
    return GKC_EINVALID_REQUEST;
  }
  req->params = &p->via.array.ptr[0];
  req->method_name = a->ptr[2].via.str.ptr;
  req->method_len = a->ptr[2].via.str.size;
  req->method = proto_method_lookup(req->method_name, req->method_len);
  if (req->method < 0) {
    char name[72];
    snprintf(msg, msglen, "unknown method '%s'",
             proto_echo(name, sizeof name, req->method_name, req->method_len, 64));
    return GKC_EUNKNOWN_METHOD;
  }
  return 0;
}

int proto_response_parse(const msgpack_object *root, proto_response *resp) {
  memset(resp, 0, sizeof *resp);
  if (root->type != MSGPACK_OBJECT_ARRAY || root->via.array.size != 4)
    return GKC_EPROTOCOL;
  const msgpack_object *a = root->via.array.ptr;
  if (!is_uint(&a[0]) || a[0].via.u64 != 1) return GKC_EPROTOCOL;
  if (a[1].type == MSGPACK_OBJECT_NIL) {
    resp->msgid = UINT32_MAX; /* the server could not read our msgid */
  } else if (is_uint(&a[1]) && a[1].via.u64 <= UINT32_MAX) {
    resp->msgid = (uint32_t)a[1].via.u64;
  } else {
    return GKC_EPROTOCOL;
  }
  if (a[2].type == MSGPACK_OBJECT_NIL) {
    resp->result = &a[3];
    return 0;
  }
  if (a[2].type != MSGPACK_OBJECT_MAP) return GKC_EPROTOCOL;
  const msgpack_object *code = proto_map_get(&a[2], "code");
  const msgpack_object *message = proto_map_get(&a[2], "message");
  if (!code || code->type != MSGPACK_OBJECT_STR) return GKC_EPROTOCOL;
  resp->code = code->via.str.ptr;
  resp->code_len = code->via.str.size;
  resp->error = proto_err_from_wire(resp->code, resp->code_len);
  if (message && message->type == MSGPACK_OBJECT_STR) {
    resp->message = message->via.str.ptr;
    resp->message_len = message->via.str.size;
  }
  return 0;
}

const msgpack_object *proto_map_get(const msgpack_object *map, const char *key) {
  if (map->type != MSGPACK_OBJECT_MAP) return NULL;
  size_t klen = strlen(key);
  for (uint32_t i = 0; i < map->via.map.size; i++) {
    const msgpack_object *k = &map->via.map.ptr[i].key;
    if (k->type == MSGPACK_OBJECT_STR && k->via.str.size == klen &&
        memcmp(k->via.str.ptr, key, klen) == 0)
      return &map->via.map.ptr[i].val;
  }
  return NULL;
}

void proto_pack_cstr(msgpack_packer *pk, const char *s) {
  size_t n = strlen(s);
  msgpack_pack_str(pk, n);
  msgpack_pack_str_body(pk, s, n);
}

void proto_pack_request_head(msgpack_packer *pk, uint32_t msgid, const char *method) {
  msgpack_pack_array(pk, 4);
  msgpack_pack_uint8(pk, 0);
  msgpack_pack_uint32(pk, msgid);
  proto_pack_cstr(pk, method);
  msgpack_pack_array(pk, 1);
}

void proto_pack_result_head(msgpack_packer *pk, uint32_t msgid) {
  msgpack_pack_array(pk, 4);
  msgpack_pack_uint8(pk, 1);
  msgpack_pack_uint32(pk, msgid);
  msgpack_pack_nil(pk);
}

void proto_pack_error_notification(msgpack_packer *pk, int code, const char *message) {
  msgpack_pack_array(pk, 3);
  msgpack_pack_uint8(pk, 2);
  proto_pack_cstr(pk, "error");
  msgpack_pack_array(pk, 1);
  msgpack_pack_map(pk, 2);
  proto_pack_cstr(pk, "code");
  proto_pack_cstr(pk, proto_err_wire(code));
  proto_pack_cstr(pk, "message");
  proto_pack_cstr(pk, message ? message : proto_err_text(code));
}

void proto_pack_error(msgpack_packer *pk, int msgid_known, uint32_t msgid,
                      int code, const char *message) {
  msgpack_pack_array(pk, 4);
  msgpack_pack_uint8(pk, 1);
  if (msgid_known)
    msgpack_pack_uint32(pk, msgid);
  else
    msgpack_pack_nil(pk);
  msgpack_pack_map(pk, 2);
  proto_pack_cstr(pk, "code");
  proto_pack_cstr(pk, proto_err_wire(code));
  proto_pack_cstr(pk, "message");
  proto_pack_cstr(pk, message ? message : proto_err_text(code));
  msgpack_pack_nil(pk);
}
