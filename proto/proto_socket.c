/* proto_socket.c: see proto_socket.h. */
#include "proto_socket.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/un.h>

int proto_socket_path(char *buf, size_t buflen, const char *override) {
  const char *env;
  int n;
  if (override && *override)
    n = snprintf(buf, buflen, "%s", override);
  else if ((env = getenv("GKC_SOCKET")) && *env)
    n = snprintf(buf, buflen, "%s", env);
  else if ((env = getenv("XDG_RUNTIME_DIR")) && *env)
    n = snprintf(buf, buflen, "%s/gkcd.sock", env);
  else
    n = snprintf(buf, buflen, "%s", PROTO_SOCKET_DEFAULT);
  if (n < 0 || (size_t)n >= buflen || (size_t)n >= sizeof(((struct sockaddr_un *)0)->sun_path))
    return -1;
  return 0;
}
