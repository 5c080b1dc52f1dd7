/* config.h: everything gkcd can be told at start-up.
 *
 * Every field is set by one row of the option table in options.c, from a
 * command-line flag (--max-request-bytes) or the same key in the config file
 * (max_request_bytes = 1G); flags win.
 */
#ifndef GKCD_CONFIG_H
#define GKCD_CONFIG_H

#include <stddef.h>
#include <sys/types.h>

#define GKCD_MAX_ALLOWED 32
#define GKCD_MAX_DEVICES 64

typedef struct {
  char config_path[256];   /* the file read, "" when none */
  char socket_opt[108];    /* --socket / socket =, "" when not given */
  char socket_path[108];   /* resolved like gkc_socket_path() */
  unsigned socket_mode;    /* permission bits of the socket file */
  char backend[8];         /* "auto", "cpu" or "cuda" */
  int threads;             /* worker threads (concurrent jobs) */
  int kernel_threads;      /* CPU threads per kernel, 0 = all */
  size_t max_request_bytes;
  size_t max_conn_pinned;    /* shared-memory region bytes one connection may register */
  size_t restore_max_bytes;  /* shared objects saved to systemd's fd store at most (0: none) */
  size_t max_queue;        /* jobs waiting for a worker before "busy" */
  int streams;             /* CUDA streams */
  size_t device_cache_bytes; /* idle device memory kept for reuse */
  int log_level;

  /* Access control: peers whose uid is in allow_uids or whose primary or
   * supplementary group is in allow_gids may connect; root always may. */
  char allow_users[512], allow_groups[512]; /* as given: comma-separated names or ids */
  uid_t allow_uids[GKCD_MAX_ALLOWED];
  gid_t allow_gids[GKCD_MAX_ALLOWED];
  int n_allow_uids, n_allow_gids;

  /* Limits. */
  size_t max_connections;
  size_t max_conn_requests;    /* requests in flight per connection before reading pauses */
  size_t max_conn_reply_bytes; /* reply bytes queued per connection before reading pauses */
  size_t memory_budget;        /* bytes of requests and results held at once, all clients */
  size_t budget_queue;         /* requests waiting for budget before "busy" */
  double idle_timeout_s;       /* close connections idle this long; 0 = never */
  double send_timeout_s;       /* close connections whose replies make no progress this long */
  double request_timeout_s;    /* close connections that take longer to send one request */
  size_t max_conn_per_user;    /* connections one uid may hold; 0 = max_connections / 4 */
  double queue_wait_s;         /* a queued request waiting longer is answered busy; 0 = never */
  int spin_us;                 /* workers and the loop poll this long before sleeping */
  int rings;                   /* ring_register: 1 on, 0 off, -1 auto (on when spin_us > 0) */
  char metrics_listen[128];    /* --metrics-listen ADDR:PORT for GET /metrics; "" = off */

  /* Scheduling (scheduler.c). */
  int latency_sms;             /* SMs of the GPU's latency lane; 0: no lanes */
  double latency_us;           /* requests predicted under this go to the latency lane */
  double slice_us;             /* without green contexts: longest bulk launch */
  char weights_opt[512];       /* --weights user:N,... as given */
  uid_t weight_uids[GKCD_MAX_ALLOWED];
  double weights[GKCD_MAX_ALLOWED];
  int n_weights;

  /* Devices (daemon/devices.c). */
  int devices[GKCD_MAX_DEVICES]; /* --devices 0,2: GPU ordinals to open, in order */
  int ndevices;                /* 0: every visible GPU */
  int cpu_devices;             /* --cpu-devices N: virtual devices of the CPU backend */
  size_t cpu_device_memory;    /* --cpu-device-memory: each one's pool; 0 = host memory / N */
  int split_device;            /* --split-device N: each GPU cut into N devices by SM partition */
} gkcd_config;

#endif
