/* proto_socket.h: where gkcd listens, resolved the same way by every party. */
#ifndef PROTO_SOCKET_H
#define PROTO_SOCKET_H

#include <stddef.h>

#define PROTO_SOCKET_DEFAULT "/run/gkcd/gkcd.sock"

/* override if not NULL, else $GKC_SOCKET, else $XDG_RUNTIME_DIR/gkcd.sock,
 * else PROTO_SOCKET_DEFAULT.  Returns 0, or -1 when the result does not fit
 * buflen or a Unix socket address (107 bytes). */
int proto_socket_path(char *buf, size_t buflen, const char *override);

#endif
