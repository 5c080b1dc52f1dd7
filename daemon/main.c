/* main.c: gkcd's command line, backend choice and event loop. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fault.h"
#include "gkc.h"
#include "log.h"
#include "proto_socket.h"
#include "server.h"

static void usage(FILE *f) {
  fprintf(f,
          "Usage: gkcd [OPTIONS]\n"
          "GPU compute daemon: serves sgemm, reduce and spmv over a Unix socket\n"
          "(msgpack-rpc, see PROTOCOL.md), on a CUDA GPU or on the CPU.\n\n"
          "Options:\n"
          "  --socket PATH            socket to listen on (default: $GKC_SOCKET, else\n"
          "                           $XDG_RUNTIME_DIR/gkcd.sock, else %s)\n"
          "  --socket-mode MODE       octal permissions of the socket (default 0660)\n"
          "  --backend auto|cpu|cuda  compute backend (default auto: cuda when a GPU is\n"
          "                           usable, else cpu)\n"
          "  --threads N              requests computed at once (default: CPU count)\n"
          "  --max-request-bytes N    largest request or result accepted, with optional\n"
          "                           K, M or G suffix (default 1G)\n"
          "  --max-queue N            requests waiting for a thread before clients get\n"
          "                           'busy' (default 1024)\n"
          "  --streams N              CUDA streams, requests on the GPU at once (default 4)\n"
          "  --device-cache-bytes N   idle GPU memory kept for reuse, K/M/G suffix\n"
          "                           (default 2G)\n"
          "  --log-level LEVEL        error, warn, info or debug (default info)\n"
          "  -h, --help               show this help and exit\n"
          "  -V, --version            show the version and exit\n",
          PROTO_SOCKET_DEFAULT);
}

/* Parses a size such as 1048576, 512K, 64M or 1G. */
static int parse_size(const char *s, size_t *out) {
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || end == s || *s == '-') return -1;
  unsigned long long mul = 1;
  switch (*end) {
    case 'K': case 'k': mul = 1ull << 10; end++; break;
    case 'M': case 'm': mul = 1ull << 20; end++; break;
    case 'G': case 'g': mul = 1ull << 30; end++; break;
  }
  if (*end || v == 0 || v > SIZE_MAX / mul) return -1;
  *out = (size_t)(v * mul);
  return 0;
}

static int parse_int(const char *s, long lo, long hi, long *out) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 0);
  if (errno || end == s || *end || v < lo || v > hi) return -1;
  *out = v;
  return 0;
}

static int bad_arg(const char *opt, const char *val, const char *want) {
  fprintf(stderr, "gkcd: invalid %s '%s': %s\n", opt, val, want);
  return 2;
}

/* Fills cfg from argv.  Returns -1 to go on, else an exit code. */
static int parse_args(int argc, char **argv, gkcd_config *cfg) {
  enum { O_SOCKET = 256, O_MODE, O_BACKEND, O_THREADS, O_MAXREQ, O_MAXQ, O_LOG, O_STREAMS,
         O_DEVCACHE };
  static const struct option opts[] = {
      {"socket", required_argument, 0, O_SOCKET},
      {"socket-mode", required_argument, 0, O_MODE},
      {"backend", required_argument, 0, O_BACKEND},
      {"threads", required_argument, 0, O_THREADS},
      {"max-request-bytes", required_argument, 0, O_MAXREQ},
      {"max-queue", required_argument, 0, O_MAXQ},
      {"log-level", required_argument, 0, O_LOG},
      {"streams", required_argument, 0, O_STREAMS},
      {"device-cache-bytes", required_argument, 0, O_DEVCACHE},
      {"help", no_argument, 0, 'h'},
      {"version", no_argument, 0, 'V'},
      {0, 0, 0, 0}};
  const char *socket_opt = NULL;
  long v;
  int o;
  while ((o = getopt_long(argc, argv, "hV", opts, NULL)) != -1) {
    switch (o) {
      case O_SOCKET: socket_opt = optarg; break;
      case O_MODE:
        if (parse_int(optarg, 0, 0777, &v) || optarg[0] != '0')
          return bad_arg("--socket-mode", optarg, "expected octal permissions such as 0660");
        cfg->socket_mode = (unsigned)v;
        break;
      case O_BACKEND:
        if (strcmp(optarg, "auto") && strcmp(optarg, "cpu") && strcmp(optarg, "cuda"))
          return bad_arg("--backend", optarg, "expected auto, cpu or cuda");
        cfg->backend = optarg;
        break;
      case O_THREADS:
        if (parse_int(optarg, 1, 1024, &v))
          return bad_arg("--threads", optarg, "expected an integer from 1 to 1024");
        cfg->threads = (int)v;
        break;
      case O_MAXREQ:
        if (parse_size(optarg, &cfg->max_request_bytes) || cfg->max_request_bytes < 1024 ||
            cfg->max_request_bytes > ((size_t)4 << 30) - 1)
          return bad_arg("--max-request-bytes", optarg, "expected a size from 1K to 4G-1");
        break;
      case O_MAXQ:
        if (parse_int(optarg, 1, 1 << 20, &v))
          return bad_arg("--max-queue", optarg, "expected an integer from 1 to 1048576");
        cfg->max_queue = (size_t)v;
        break;
      case O_STREAMS:
        if (parse_int(optarg, 1, 64, &v))
          return bad_arg("--streams", optarg, "expected an integer from 1 to 64");
        cfg->streams = (int)v;
        break;
      case O_DEVCACHE:
        if (!strcmp(optarg, "0"))
          cfg->device_cache_bytes = 0;
        else if (parse_size(optarg, &cfg->device_cache_bytes))
          return bad_arg("--device-cache-bytes", optarg, "expected a size such as 512M or 4G");
        break;
      case O_LOG:
        if ((cfg->log_level = log_parse_level(optarg)) < 0)
          return bad_arg("--log-level", optarg, "expected error, warn, info or debug");
        break;
      case 'h': usage(stdout); return 0;
      case 'V': printf("gkcd %s (protocol %d)\n", GKC_VERSION, GKC_PROTOCOL); return 0;
      default: fprintf(stderr, "Try 'gkcd --help'.\n"); return 2;
    }
  }
  if (optind < argc) {
    fprintf(stderr, "gkcd: unexpected argument '%s'\nTry 'gkcd --help'.\n", argv[optind]);
    return 2;
  }
  if (proto_socket_path(cfg->socket_path, sizeof cfg->socket_path, socket_opt) != 0) {
    fprintf(stderr, "gkcd: socket path is longer than a Unix socket allows (107 bytes)\n");
    return 2;
  }
  return -1;
}

static int open_backend(const gkcd_config *cfg, gkcd_backend **be) {
  char msg[256] = "";
  int want_cuda = strcmp(cfg->backend, "cpu") != 0;
#ifdef GKC_HAVE_CUDA
  if (want_cuda) {
    if (cuda_backend_create(be, cfg, msg, sizeof msg) == 0) return 0;
    if (strcmp(cfg->backend, "cuda") == 0) {
      log_err("CUDA backend unavailable: %s", msg);
      return -1;
    }
    log_warn("no usable GPU (%s); serving from the CPU backend", msg);
  }
#else
  if (strcmp(cfg->backend, "cuda") == 0) {
    log_err("this gkcd was built without CUDA; use --backend cpu or auto");
    return -1;
  }
  if (want_cuda) log_info("built without CUDA; serving from the CPU backend");
#endif
  if (cpu_backend_create(be, cfg->kernel_threads, msg, sizeof msg) != 0) {
    log_err("CPU backend: %s", msg);
    return -1;
  }
  return 0;
}

int main(int argc, char **argv) {
  static gkcd_server srv; /* lives as long as the process */
  gkcd_config *cfg = &srv.cfg;
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  cfg->socket_mode = 0660;
  cfg->backend = "auto";
  cfg->threads = ncpu > 0 ? (int)ncpu : 1;
  cfg->max_request_bytes = (size_t)1 << 30;
  cfg->max_queue = 1024;
  cfg->streams = 4;
  cfg->device_cache_bytes = (size_t)2 << 30;
  cfg->log_level = LOG_LVL_INFO;

  int rc = parse_args(argc, argv, cfg);
  if (rc >= 0) return rc;
  log_set_level(cfg->log_level);
  if (fault_init() != 0) {
    log_err("GKCD_FAULT must be METHOD:CODE, e.g. sgemm:device_error");
    return 2;
  }

  gkcd_backend *be;
  if (open_backend(cfg, &be) != 0) return 1;
  uv_loop_t *loop = uv_default_loop();
  if (server_start(&srv, loop, be) != 0) {
    if (srv.listening) unlink(cfg->socket_path);
    be->destroy(be);
    return 1;
  }
  log_info("gkcd %s listening on %s (backend %s, %d threads, max request %zu bytes)",
           GKC_VERSION, cfg->socket_path, be->name, cfg->threads, cfg->max_request_bytes);
  uv_run(loop, UV_RUN_DEFAULT);
  server_close(&srv);
  rc = uv_loop_close(loop);
  if (rc) log_warn("uv_loop_close: %s", uv_strerror(rc));
  be->destroy(be);
  return backend_failed() ? 1 : 0;
}
