/* config.h: everything gkcd can be told at start-up. */
#ifndef GKCD_CONFIG_H
#define GKCD_CONFIG_H

#include <stddef.h>

typedef struct {
  char socket_path[108];   /* resolved like gkc_socket_path() */
  unsigned socket_mode;    /* permission bits of the socket file */
  const char *backend;     /* "auto", "cpu" or "cuda" */
  int threads;             /* worker threads (concurrent jobs) */
  int kernel_threads;      /* CPU threads per kernel, 0 = all */
  size_t max_request_bytes;
  size_t max_queue;        /* jobs waiting for a worker before "busy" */
  int streams;             /* CUDA streams */
  size_t device_cache_bytes; /* idle device memory kept for reuse */
  int log_level;
} gkcd_config;

#endif
