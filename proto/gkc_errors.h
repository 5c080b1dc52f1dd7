/* gkc_errors.h: the one table of gkc error codes.
 *
 * Every error the daemon can send and every error the client library can
 * return is a row here.  The table generates the C enum (negative values,
 * 0 is success), the wire strings carried in an error reply's "code" field,
 * and the default human-readable text (see gkc_strerror / gkc_errname).
 *
 * Rows marked "wire" are sent by gkcd; the others only arise inside a client.
 */
#ifndef GKC_ERRORS_H
#define GKC_ERRORS_H

/*  XX(NAME,             value, wire string,        default text) */
#define GKC_ERROR_MAP(XX)                                                              \
  /* wire */                                                                           \
  XX(PARSE_ERROR,        -1,  "parse_error",       "bytes are not valid msgpack")      \
  XX(INVALID_REQUEST,    -2,  "invalid_request",   "not a msgpack-rpc request")        \
  XX(UNKNOWN_METHOD,     -3,  "unknown_method",    "unknown method")                   \
  XX(INVALID_ARGUMENT,   -4,  "invalid_argument",  "invalid argument")                 \
  XX(TOO_LARGE,          -5,  "too_large",         "request over a configured limit")  \
  XX(OUT_OF_MEMORY,      -6,  "out_of_memory",     "out of memory")                    \
  XX(BUSY,               -7,  "busy",              "server busy, retry later")         \
  XX(DEVICE_ERROR,       -8,  "device_error",      "device error")                     \
  XX(INTERNAL,           -9,  "internal",          "internal server error")            \
  XX(DEADLINE_EXCEEDED,  -10, "deadline_exceeded", "request waited past its deadline") \
  XX(TOO_MANY_CONNECTIONS, -11, "too_many_connections", "gkcd has no connection slot free") \
  XX(DEVICE_LOST,        -12, "device_lost",       "the device running the request failed") \
  XX(TIMEOUT,            -13, "timeout",           "the connection made no progress in time") \
  /* client side only */                                                               \
  XX(CONNECT,            -20, "connect",           "cannot connect to gkcd")           \
  XX(IO,                 -21, "io",                "connection to gkcd failed")        \
  XX(PROTOCOL,           -22, "protocol",          "malformed reply from gkcd")        \
  XX(UNKNOWN_CODE,       -23, "unknown_code",      "gkcd sent an unknown error code")  \
  XX(CANCELLED,          -24, "cancelled",         "request cancelled before its reply") \
  XX(STALE_HANDLE,       -25, "stale_handle",      "the object belongs to an earlier connection or gkcd instance")

typedef enum {
  GKC_OK = 0,
#define GKC__ERR_ENUM(name, val, wire, text) GKC_E##name = (val),
  GKC_ERROR_MAP(GKC__ERR_ENUM)
#undef GKC__ERR_ENUM
} gkc_error;

#endif /* GKC_ERRORS_H */
