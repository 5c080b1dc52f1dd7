/* bench_multi: one device vs every device, through gkcd (issues 14, 15).
 *
 *   bench_multi --one SOCK --all SOCK [sizes] [--json FILE]
 *   bench_multi --fault SOCK [sizes] [--json FILE]
 *
 * --one and --all are two gkcd instances already running on the same host:
 * one serving from a single device (--devices 0, --cpu-devices 1), the other
 * from every device (all GPUs, --split-device 2, --cpu-devices 2).  Each
 * workload runs on both, one after the other, and the table gives the ratio
 * all / one from the same run (bench/gpu/multigpu.sh starts the daemons):
 *
 *  (a) big:    one sgemm FP32 N^3 (--big-n, default 16384) by value; the
 *              daemon may split it over its devices.  TFLOP/s, median of
 *              --reps.
 *  (b) many:   --many-count (256) independent sgemm --many-n^3 (4096) by value
 *              from --conns (8) connections.  Requests/s.
 *  (c) stencil: a 27-point stencil on a --grid^3 grid (156: 101M nonzeros),
 *              SPD (diagonal 27, off-diagonal -1), uploaded with
 *              csr_upload devices: "all" (rows partitioned over the devices),
 *              then spmv (ms per call) and CG solve (--cg-iters iterations,
 *              iterations/s over the solve, and per iteration beyond a
 *              solve of a fifth as many).  Skipped, saying so, when gkcd answers
 *              invalid_argument (a gkcd without partitioned matrices).
 *              On one device "all" is a partition of one block, so the
 *              same CG is also run on --one uploaded without devices (the
 *              single-device solver) and compared with --all's.
 *  (e) fault:  --fault SOCK is a gkcd started with
 *              GKCD_FAULT=device_lost:dev=1:after=K; --conns connections send
 *              --fault-count sgemm requests each, checked against a float64
 *              reference; a connection may see device_lost at most once (the
 *              request in flight on the lost device) and every later
 *              request must be served, right.
 *
 * Every result is checked (sgemm entries and spmv rows sampled against
 * float64) so that a fast wrong answer never counts; inputs are random.
 * (d), GPU-to-GPU copy bandwidth, is bench/gpu/p2p_bw (no daemon).
 */
#include <math.h>
#include <msgpack.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "bench_common.h"
#include "gkc.h"

static int big_n = 16384, many_n = 4096, many_count = 256, conns = 8, grid = 156, reps = 3,
           spmv_reps = 20, cg_iters = 200, fault_count = 40, fault_n = 512;
static double hbm_gbs = 4800;
static const char *sock_one, *sock_all, *sock_fault, *json_path;
static FILE *json;
static int json_items;

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
  return v[n / 2];
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static float frand(void) { /* [-1, 1) */
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return (float)((rng_state >> 40) / (double)(1 << 24) * 2.0 - 1.0);
}

/* n floats, uninitialised (the results' buffers); exits when out of memory. */
static float *floats(size_t n) {
  float *p = malloc(n * sizeof *p);
  if (!p) {
    fprintf(stderr, "bench_multi: out of memory (%zu floats)\n", n);
    exit(1);
  }
  return p;
}

static float *randv(size_t n) {
  float *p = floats(n);
  for (size_t i = 0; i < n; i++) p[i] = frand();
  return p;
}

static gkc_conn *connect_or_die(const char *sock) {
  gkc_conn *c;
  if (gkc_connect(&c, sock) != 0) {
    fprintf(stderr, "bench_multi: cannot connect to %s: %s\n", sock, gkc_errmsg(c));
    exit(1);
  }
  return c;
}

/* Samples 64 entries of C = A B (n x n) against float64; 0 when right. */
static int sgemm_ok(int n, const float *a, const float *b, const float *c) {
  for (int s = 0; s < 64; s++) {
    int i = (int)((unsigned)(s * 7919 + 13) % (unsigned)n), j = (int)((unsigned)(s * 104729 + 7) % (unsigned)n);
    double want = 0, mag = 0;
    for (int p = 0; p < n; p++) {
      double t = (double)a[(size_t)i * n + p] * b[(size_t)p * n + j];
      want += t;
      mag += fabs(t);
    }
    if (!(fabs(c[(size_t)i * n + j] - want) <= 2.0 * n * 1.2e-7 * mag + 1e-30)) {
      fprintf(stderr, "bench_multi: sgemm %d^3: C[%d,%d] = %.9g, want %.9g\n", n, i, j,
              c[(size_t)i * n + j], want);
      return -1;
    }
  }
  return 0;
}

static void row(const char *what, const char *unit, double one, double all) {
  printf("%-42s %-12s %12.3f %12.3f %8.3f\n", what, unit, one, all, all / one);
  if (json)
    fprintf(json, "%s  \"%s\": {\"unit\": \"%s\", \"one\": %.6g, \"all\": %.6g, \"ratio\": %.4f}",
            json_items++ ? ",\n" : "", what, unit, one, all, all / one);
}

static void skip(const char *what, const char *why) {
  printf("%-42s skipped: %s\n", what, why);
  if (!json) return;
  fprintf(json, "%s  \"%s\": {\"skipped\": ", json_items++ ? ",\n" : "", what);
  bench_json_str(json, why);
  fprintf(json, "}");
}

/* --- (a) one big sgemm ------------------------------------------------------------- */

static double big(const char *sock) {
  size_t nn = (size_t)big_n * big_n;
  float *a = randv(nn), *b = randv(nn), *c = floats(nn);
  gkc_conn *cn = connect_or_die(sock);
  double t[16];
  gkc_info info;
  for (int r = 0; r <= reps; r++) { /* r == 0: warm-up */
    double t0 = bench_clock_s();
    int rc = gkc_sgemm(cn, big_n, big_n, big_n, 1.0f, a, 0, b, 0, 0.0f, c, NULL, &info);
    if (rc) {
      fprintf(stderr, "bench_multi: sgemm %d^3 on %s: %s\n", big_n, sock, gkc_errmsg(cn));
      exit(1);
    }
    if (r > 0) t[r - 1] = bench_clock_s() - t0;
  }
  /* Where the last call's time went: the rest of the round trip is the
   * client's (its copies into and out of the arena) and the transport. */
  printf("  %s: (a) last call %.1f ms: gkcd %.1f (queue %.1f, worker %.1f: h2d %.1f, kernel %.1f, "
         "d2h %.1f ms), %d device(s), algo %s\n", sock, t[reps - 1] * 1e3, info.server_us / 1e3,
         info.queue_us / 1e3, info.worker_us / 1e3, info.h2d_us / 1e3, info.kernel_us / 1e3,
         info.d2h_us / 1e3, info.device < 0 ? info.ndevices : 1, info.algo);
  if (sgemm_ok(big_n, a, b, c)) exit(1);
  gkc_close(cn);
  free(a);
  free(b);
  free(c);
  return 2.0 * big_n * (double)big_n * big_n / median(t, reps) / 1e12;
}

/* --- (b) many independent sgemm ------------------------------------------------------ */

typedef struct {
  const char *sock;
  int count, n;
  const float *a, *b;
  int failed, lost, served;
  int expect_loss; /* (e): device_lost allowed once */
  double rtt_s, server_us, worker_us, h2d_us, kernel_us, d2h_us; /* sums over served */
} client;

static void *many_client(void *arg) {
  client *cl = arg;
  size_t nn = (size_t)cl->n * cl->n;
  float *c = floats(nn);
  gkc_conn *cn = connect_or_die(cl->sock);
  for (int i = 0; i < cl->count && !cl->failed; i++) {
    gkc_info info;
    double t0 = bench_clock_s();
    int rc = gkc_sgemm(cn, cl->n, cl->n, cl->n, 1.0f, cl->a, 0, cl->b, 0, 0.0f, c, NULL, &info);
    if (rc == 0) {
      cl->rtt_s += bench_clock_s() - t0;
      cl->server_us += info.server_us, cl->worker_us += info.worker_us, cl->kernel_us += info.kernel_us;
      cl->h2d_us += info.h2d_us == info.h2d_us ? info.h2d_us : 0;
      cl->d2h_us += info.d2h_us == info.d2h_us ? info.d2h_us : 0;
    }
    if (rc == GKC_EDEVICE_LOST && cl->expect_loss && cl->lost == 0) {
      printf("  connection saw: %s\n", gkc_errmsg(cn));
      cl->lost++;
      continue;
    }
    if (rc) {
      fprintf(stderr, "bench_multi: sgemm %d^3 on %s (request %d%s): %s\n", cl->n, cl->sock, i,
              cl->lost ? ", after a device was lost" : "", gkc_errmsg(cn));
      cl->failed = 1;
      break;
    }
    if ((i == 0 || i == cl->count - 1 || cl->expect_loss) && sgemm_ok(cl->n, cl->a, cl->b, c)) cl->failed = 1;
    cl->served++;
  }
  gkc_close(cn);
  free(c);
  return NULL;
}

static double run_clients(const char *sock, int n, int total, int expect_loss, client *out) {
  size_t nn = (size_t)n * n;
  float *a = randv(nn), *b = randv(nn);
  client *cl = calloc((size_t)conns, sizeof *cl);
  pthread_t *th = calloc((size_t)conns, sizeof *th);
  if (!cl || !th) {
    fprintf(stderr, "bench_multi: out of memory (%d connections)\n", conns);
    exit(1);
  }
  double t0 = bench_clock_s();
  for (int i = 0; i < conns; i++) {
    cl[i] = (client){.sock = sock, .count = total / conns + (i < total % conns), .n = n, .a = a, .b = b,
                     .expect_loss = expect_loss};
    int e = pthread_create(&th[i], NULL, many_client, &cl[i]);
    if (e) {
      fprintf(stderr, "bench_multi: pthread_create: %s\n", strerror(e));
      exit(1);
    }
  }
  for (int i = 0; i < conns; i++) pthread_join(th[i], NULL);
  double dt = bench_clock_s() - t0;
  memset(out, 0, sizeof *out);
  for (int i = 0; i < conns; i++) {
    out->failed += cl[i].failed;
    out->lost += cl[i].lost;
    out->served += cl[i].served;
    out->rtt_s += cl[i].rtt_s, out->server_us += cl[i].server_us, out->worker_us += cl[i].worker_us;
    out->h2d_us += cl[i].h2d_us, out->kernel_us += cl[i].kernel_us, out->d2h_us += cl[i].d2h_us;
  }
  free(cl);
  free(th);
  free(a);
  free(b);
  return dt;
}

static double many(const char *sock) {
  client sum;
  run_clients(sock, many_n, conns, 0, &sum); /* warm-up: one each */
  double dt = run_clients(sock, many_n, many_count, 0, &sum);
  if (sum.failed) exit(1);
  if (sum.served > 0) { /* where a request's time went, means over the run */
    double k = sum.served;
    printf("  %s: (b) mean request %.2f ms: gkcd %.2f (worker %.2f: h2d %.2f, kernel %.2f, d2h %.2f ms)\n",
           sock, sum.rtt_s / k * 1e3, sum.server_us / k / 1e3, sum.worker_us / k / 1e3, sum.h2d_us / k / 1e3,
           sum.kernel_us / k / 1e3, sum.d2h_us / k / 1e3);
  }
  return many_count / dt;
}

/* --- (c) the partitioned stencil ----------------------------------------------------- */

typedef struct {
  int32_t rows;
  int64_t nnz;
  int32_t *row_ptr, *col_idx;
  float *values;
} csr;

static void csr_free(csr *m) {
  free(m->row_ptr);
  free(m->col_idx);
  free(m->values);
  memset(m, 0, sizeof *m);
}

/* The g^3 stencil into *m: 0, or -1 (nothing left allocated) when it does
 * not fit int32 or memory. */
static int stencil(csr *m, int g) {
  memset(m, 0, sizeof *m);
  int64_t rows = (int64_t)g * g * g, per = 3LL * g - 2, nnz = per * per * per;
  if (rows > INT32_MAX || nnz > INT32_MAX) return -1;
  m->rows = (int32_t)rows;
  m->nnz = nnz;
  m->row_ptr = malloc((size_t)(rows + 1) * 4);
  m->col_idx = malloc((size_t)nnz * 4);
  m->values = malloc((size_t)nnz * 4);
  if (!m->row_ptr || !m->col_idx || !m->values) {
    csr_free(m);
    return -1;
  }
  int64_t at = 0;
  for (int z = 0; z < g; z++)
    for (int y = 0; y < g; y++)
      for (int x = 0; x < g; x++) {
        int64_t r = ((int64_t)z * g + y) * g + x;
        m->row_ptr[r] = (int32_t)at;
        for (int dz = -1; dz <= 1; dz++)
          for (int dy = -1; dy <= 1; dy++)
            for (int dx = -1; dx <= 1; dx++) {
              int zz = z + dz, yy = y + dy, xx = x + dx;
              if (zz < 0 || yy < 0 || xx < 0 || zz >= g || yy >= g || xx >= g) continue;
              m->col_idx[at] = (int32_t)(((int64_t)zz * g + yy) * g + xx);
              m->values[at++] = dz || dy || dx ? -1.0f : 27.0f;
            }
      }
  m->row_ptr[rows] = (int32_t)at;
  if (at != nnz) {
    csr_free(m);
    return -1;
  }
  return 0;
}

static void pack_str(msgpack_packer *pk, const char *s) {
  msgpack_pack_str(pk, strlen(s));
  msgpack_pack_str_body(pk, s, strlen(s));
}

static void pack_bin(msgpack_packer *pk, const void *p, size_t n) {
  msgpack_pack_bin(pk, n);
  msgpack_pack_bin_body(pk, p, n);
}

/* csr_upload with devices: "all" and shared: true, written by hand (libgkc
 * has no call for the devices argument yet).  0 with *matrix, 1 when gkcd
 * answered invalid_argument (why in why), -1 on other failures. */
static int upload_partitioned(const char *sock, const csr *m, uint32_t *matrix, char *why, size_t whylen) {
  msgpack_sbuffer sb;
  msgpack_sbuffer_init(&sb);
  msgpack_packer pk;
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  msgpack_pack_array(&pk, 4);
  msgpack_pack_int(&pk, 0);
  msgpack_pack_uint32(&pk, 1);
  pack_str(&pk, "csr_upload");
  msgpack_pack_array(&pk, 1);
  msgpack_pack_map(&pk, 7);
  pack_str(&pk, "rows"), msgpack_pack_int32(&pk, m->rows);
  pack_str(&pk, "cols"), msgpack_pack_int32(&pk, m->rows);
  pack_str(&pk, "row_ptr"), pack_bin(&pk, m->row_ptr, (size_t)(m->rows + 1) * 4);
  pack_str(&pk, "col_idx"), pack_bin(&pk, m->col_idx, (size_t)m->nnz * 4);
  pack_str(&pk, "values"), pack_bin(&pk, m->values, (size_t)m->nnz * 4);
  pack_str(&pk, "shared"), msgpack_pack_true(&pk);
  pack_str(&pk, "devices"), pack_str(&pk, "all");
  int fd = socket(AF_UNIX, SOCK_STREAM, 0), rc = -1;
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  snprintf(sa.sun_path, sizeof sa.sun_path, "%s", sock);
  if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
    snprintf(why, whylen, "cannot connect to %s", sock);
    goto out;
  }
  for (size_t off = 0; off < sb.size;) {
    ssize_t w = write(fd, sb.data + off, sb.size - off);
    if (w <= 0) {
      snprintf(why, whylen, "writing the request failed");
      goto out;
    }
    off += (size_t)w;
  }
  msgpack_unpacker up;
  msgpack_unpacker_init(&up, 1 << 16);
  msgpack_unpacked res;
  msgpack_unpacked_init(&res);
  for (;;) {
    msgpack_unpacker_reserve_buffer(&up, 1 << 16);
    ssize_t r = read(fd, msgpack_unpacker_buffer(&up), msgpack_unpacker_buffer_capacity(&up));
    if (r <= 0) {
      snprintf(why, whylen, "gkcd closed the connection");
      break;
    }
    msgpack_unpacker_buffer_consumed(&up, (size_t)r);
    if (msgpack_unpacker_next(&up, &res) != MSGPACK_UNPACK_SUCCESS) continue;
    msgpack_object o = res.data;
    if (o.type != MSGPACK_OBJECT_ARRAY || o.via.array.size != 4) {
      snprintf(why, whylen, "a reply that is no msgpack-rpc response");
      break;
    }
    msgpack_object err = o.via.array.ptr[2], val = o.via.array.ptr[3];
    if (err.type == MSGPACK_OBJECT_MAP) {
      char code[64] = "", msg[256] = "";
      for (uint32_t i = 0; i < err.via.map.size; i++) {
        msgpack_object k = err.via.map.ptr[i].key, v = err.via.map.ptr[i].val;
        if (k.type != MSGPACK_OBJECT_STR || v.type != MSGPACK_OBJECT_STR) continue;
        char *dst = k.via.str.size == 4 && !memcmp(k.via.str.ptr, "code", 4) ? code : msg;
        size_t cap = dst == code ? sizeof code : sizeof msg;
        snprintf(dst, cap, "%.*s", (int)v.via.str.size, v.via.str.ptr);
      }
      snprintf(why, whylen, "%s: %s", code, msg);
      rc = strcmp(code, "invalid_argument") == 0 ? 1 : -1;
      break;
    }
    for (uint32_t i = 0; val.type == MSGPACK_OBJECT_MAP && i < val.via.map.size; i++) {
      msgpack_object k = val.via.map.ptr[i].key, v = val.via.map.ptr[i].val;
      if (k.type == MSGPACK_OBJECT_STR && k.via.str.size == 6 && !memcmp(k.via.str.ptr, "matrix", 6) &&
          v.type == MSGPACK_OBJECT_POSITIVE_INTEGER) {
        *matrix = (uint32_t)v.via.u64;
        rc = 0;
      }
    }
    if (rc) snprintf(why, whylen, "the reply has no matrix");
    break;
  }
  msgpack_unpacked_destroy(&res);
  msgpack_unpacker_destroy(&up);
out:
  if (fd >= 0) close(fd);
  msgpack_sbuffer_destroy(&sb);
  return rc;
}

typedef struct {
  double spmv_ms, cg_its, cg_marginal;
} stencil_fig;

/* CG's rate two ways: over one solve of cg_iters iterations, wall clock
 * (what a client waits: it includes the solve's fixed costs, the vectors'
 * allocation and staging, the two true residuals, the copies), and per
 * iteration beyond a solve of a fifth as many (the difference of the two:
 * the iteration alone).  Two solves of exactly that many iterations (rtol
 * 0) on matrix mat, b and x of m->rows floats. */
static void cg_rates(gkc_conn *cn, const char *sock, uint32_t mat, const csr *m, float *b, float *x,
                     const char *what, double *wall, double *marginal) {
  int short_iters = cg_iters / 5 > 0 ? cg_iters / 5 : 1;
  double secs[2];
  long long its[2];
  for (int k = 0; k < 2; k++) {
    gkc_solve_args s = GKC_SOLVE_ARGS_INIT;
    s.matrix = mat;
    s.b = gkc_ref_mem(b, (size_t)m->rows * 4);
    s.rtol = 0; /* run exactly max_iter iterations */
    s.max_iter = k ? cg_iters : short_iters;
    gkc_solve_result res;
    gkc_info info;
    gkc_out out = gkc_out_mem(x, (size_t)m->rows * 4);
    double t0 = bench_clock_s();
    if (gkc_solve(cn, &s, &out, &res, &info) != 0) {
      fprintf(stderr, "bench_multi: solve (%s) on %s: %s\n", what, sock, gkc_errmsg(cn));
      exit(1);
    }
    secs[k] = bench_clock_s() - t0;
    its[k] = res.iterations;
    if (k)
      printf("  %s: %s (%s) %lld iterations, relative residual %.3g (%s); %lld iterations %.1f ms\n", sock,
             what, info.algo, its[1], res.residual, res.reason, its[0], secs[0] * 1e3);
  }
  *wall = (double)its[1] / secs[1];
  *marginal = secs[1] > secs[0] ? (double)(its[1] - its[0]) / (secs[1] - secs[0]) : 0;
}

/* 1 when skipped (why set). */
static int stencil_run(const char *sock, const csr *m, stencil_fig *f, char *why, size_t whylen) {
  uint32_t mat = 0;
  int rc = upload_partitioned(sock, m, &mat, why, whylen);
  if (rc == 1) return 1;
  if (rc) {
    fprintf(stderr, "bench_multi: csr_upload on %s: %s\n", sock, why);
    exit(1);
  }
  gkc_conn *cn = connect_or_die(sock);
  float *x = randv((size_t)m->rows), *y = floats((size_t)m->rows);
  gkc_spmv_args sa = GKC_SPMV_ARGS_INIT;
  sa.use_matrix = 1;
  sa.matrix = mat;
  sa.x = gkc_ref_mem(x, (size_t)m->rows * 4);
  double t[64];
  int nr = spmv_reps > 64 ? 64 : spmv_reps;
  for (int r = 0; r <= nr; r++) {
    gkc_out out = gkc_out_mem(y, (size_t)m->rows * 4);
    double t0 = bench_clock_s();
    if (gkc_spmv_ref(cn, &sa, &out, NULL) != 0) {
      fprintf(stderr, "bench_multi: spmv on %s: %s\n", sock, gkc_errmsg(cn));
      exit(1);
    }
    if (r > 0) t[r - 1] = bench_clock_s() - t0;
  }
  for (int s = 0; s < 256; s++) { /* rows sampled against float64 */
    int32_t r = (int32_t)((unsigned)(s * 2654435761u) % (unsigned)m->rows);
    double want = 0, mag = 0;
    for (int32_t p = m->row_ptr[r]; p < m->row_ptr[r + 1]; p++) {
      want += (double)m->values[p] * x[m->col_idx[p]];
      mag += fabs((double)m->values[p] * x[m->col_idx[p]]);
    }
    if (!(fabs(y[r] - want) <= 1e-5 * mag + 1e-30)) {
      fprintf(stderr, "bench_multi: spmv row %d: %.9g, want %.9g\n", r, y[r], want);
      exit(1);
    }
  }
  f->spmv_ms = median(t, nr) * 1e3;
  cg_rates(cn, sock, mat, m, x, y, "CG", &f->cg_its, &f->cg_marginal);
  gkc_release_matrix(cn, mat);
  gkc_close(cn);
  free(x);
  free(y);
  return 0;
}

/* The stencil uploaded without devices (a plain resident matrix): CG by the
 * single-device solver, as stencil_run's (wall and marginal iterations/s). */
static void plain_cg(const char *sock, const csr *m, double *wall, double *marginal) {
  gkc_conn *cn = connect_or_die(sock);
  gkc_csr A = {m->rows, m->rows, m->nnz, m->row_ptr, m->col_idx, m->values};
  uint32_t mat = 0;
  if (gkc_csr_upload(cn, &A, 0, &mat, NULL) != 0) {
    fprintf(stderr, "bench_multi: csr_upload (no devices) on %s: %s\n", sock, gkc_errmsg(cn));
    exit(1);
  }
  float *b = randv((size_t)m->rows), *x = floats((size_t)m->rows);
  cg_rates(cn, sock, mat, m, b, x, "single-device CG", wall, marginal);
  gkc_release_matrix(cn, mat);
  gkc_close(cn);
  free(b);
  free(x);
}

/* --- main ---------------------------------------------------------------------------- */

static void usage(FILE *f) {
  fprintf(f,
          "usage: bench_multi --one SOCK --all SOCK [options]   one device vs every device\n"
          "       bench_multi --fault SOCK [options]            a device lost mid-run\n"
          "options (sizes; defaults are the full GPU run):\n"
          "  --big-n N        (a) one sgemm N^3 by value (16384)\n"
          "  --many-n N       (b) sgemm N^3 requests (4096)\n"
          "  --many-count C   (b) how many (256)\n"
          "  --conns K        client connections for (b) and (e) (8)\n"
          "  --grid G         (c) 27-point stencil on G^3 (156: 101M nonzeros); 0 skips (c)\n"
          "  --spmv-reps R    (c) timed spmv calls (20)\n"
          "  --hbm-gbs G      (c) the HBM bandwidth the CG floor is counted at (4800: H200)\n"
          "  --cg-iters I     (c) CG iterations (200)\n"
          "  --reps R         (a) timed repetitions (3)\n"
          "  --fault-count C  (e) requests per connection (40)\n"
          "  --fault-n N      (e) their sgemm size (512)\n"
          "  --json FILE      the figures as JSON\n");
}

int main(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    const char *o = argv[i];
    if (!strcmp(o, "--help") || !strcmp(o, "-h")) {
      usage(stdout);
      return 0;
    }
    if (i + 1 >= argc) {
      fprintf(stderr, "bench_multi: %s needs a value\n", o);
      return 2;
    }
    const char *v = argv[++i];
    char *end;
    long x = strtol(v, &end, 10);
    int num = *v && !*end && x >= 0 && x <= 1 << 20;
    int *slot = !strcmp(o, "--big-n")         ? &big_n
                : !strcmp(o, "--many-n")      ? &many_n
                : !strcmp(o, "--many-count")  ? &many_count
                : !strcmp(o, "--conns")       ? &conns
                : !strcmp(o, "--grid")        ? &grid
                : !strcmp(o, "--spmv-reps")   ? &spmv_reps
                : !strcmp(o, "--cg-iters")    ? &cg_iters
                : !strcmp(o, "--reps")        ? &reps
                : !strcmp(o, "--fault-count") ? &fault_count
                : !strcmp(o, "--fault-n")     ? &fault_n
                                              : NULL;
    if (!strcmp(o, "--one")) sock_one = v;
    else if (!strcmp(o, "--all")) sock_all = v;
    else if (!strcmp(o, "--fault")) sock_fault = v;
    else if (!strcmp(o, "--json")) json_path = v;
    else if (!strcmp(o, "--hbm-gbs")) {
      hbm_gbs = strtod(v, &end);
      if (*end || !(hbm_gbs > 0 && hbm_gbs < 1e6)) {
        fprintf(stderr, "bench_multi: --hbm-gbs %s: want a bandwidth in GB/s, e.g. 4800\n", v);
        return 2;
      }
    }
    else if (!slot) {
      fprintf(stderr, "bench_multi: unknown option %s\n", o);
      usage(stderr);
      return 2;
    } else if (!num || (x == 0 && slot != &grid)) {
      fprintf(stderr, "bench_multi: %s %s: want a whole number in [%d, 1048576]\n", o, v, slot == &grid ? 0 : 1);
      return 2;
    } else {
      *slot = (int)x;
    }
  }
  if (reps > 16) reps = 16;
  if (!sock_fault && !(sock_one && sock_all)) {
    fprintf(stderr, "bench_multi: give --one SOCK --all SOCK, or --fault SOCK\n");
    usage(stderr);
    return 2;
  }
  if (json_path && !(json = fopen(json_path, "w"))) {
    perror(json_path);
    return 1;
  }
  if (json) fprintf(json, "{\n");
  if (sock_one && sock_all) {
    printf("%-42s %-12s %12s %12s %8s\n", "workload", "unit", "one device", "all devices", "all/one");
    char what[96];
    snprintf(what, sizeof what, "(a) sgemm FP32 %d^3, one request", big_n);
    double a1 = big(sock_one), a2 = big(sock_all);
    row(what, "TFLOP/s", a1, a2);
    snprintf(what, sizeof what, "(b) %d x sgemm %d^3, %d connections", many_count, many_n, conns);
    double b1 = many(sock_one), b2 = many(sock_all);
    row(what, "requests/s", b1, b2);
    if (grid > 0) {
      csr m;
      if (stencil(&m, grid) != 0) {
        fprintf(stderr, "bench_multi: --grid %d: the stencil does not fit int32 or memory\n", grid);
        return 1;
      }
      stencil_fig f1, f2;
      char why[300] = "";
      snprintf(what, sizeof what, "(c) spmv 27-pt %d^3 (%lld nnz)", grid, (long long)m.nnz);
      char cg[96];
      snprintf(cg, sizeof cg, "(c) CG 27-pt %d^3, %d iterations", grid, cg_iters);
      if (stencil_run(sock_one, &m, &f1, why, sizeof why) || stencil_run(sock_all, &m, &f2, why, sizeof why)) {
        char msg[400];
        snprintf(msg, sizeof msg, "csr_upload devices: \"all\" refused (%s)", why);
        skip(what, msg);
        skip(cg, msg);
      } else {
        row(what, "ms/call", f1.spmv_ms, f2.spmv_ms);
        row(cg, "iter/s", f1.cg_its, f2.cg_its);
        snprintf(cg, sizeof cg, "(c) CG, per iteration (marginal)");
        row(cg, "iter/s", f1.cg_marginal, f2.cg_marginal);
        double pw, pm;
        plain_cg(sock_one, &m, &pw, &pm);
        snprintf(cg, sizeof cg, "(c) CG, one: single-device solver");
        row(cg, "iter/s", pw, f2.cg_its);
        snprintf(cg, sizeof cg, "(c) CG, single-device solver, marginal");
        row(cg, "iter/s", pm, f2.cg_marginal);
        /* The memory floor of one CG iteration (float32 values, int32
         * indices, float64 vectors): the matrix once (values and col_idx,
         * row_ptr) and nine vector passes (the product reads p and writes
         * q; x, r read and written; p read twice, q and r read once more),
         * at the HBM bandwidth given (H200: 4.8 TB/s nominal). */
        double bytes = (double)m.nnz * 8 + (double)(m.rows + 1) * 4 + (double)m.rows * 8 * 9;
        double floor_its = hbm_gbs * 1e9 / bytes;
        printf("(c) single-device CG: %.1f MB per iteration, floor %.0f iter/s at %.0f GB/s: "
               "%.1f%% (marginal), %.1f%% (wall)\n", bytes / 1e6, floor_its, hbm_gbs,
               100 * pm / floor_its, 100 * pw / floor_its);
        if (json)
          fprintf(json, "%s  \"(c) single-device CG, share of the HBM floor\": {\"bytes_per_iteration\": %.0f, "
                  "\"hbm_gbs\": %.0f, \"floor_iter_s\": %.1f, \"marginal\": %.4f, \"wall\": %.4f}",
                  json_items++ ? ",\n" : "", bytes, hbm_gbs, floor_its, pm / floor_its, pw / floor_its);
      }
      csr_free(&m);
    }
  }
  if (sock_fault) {
    client sum;
    double dt = run_clients(sock_fault, fault_n, fault_count * conns, 1, &sum);
    printf("(e) device lost mid-run: %d requests served (checked), %d device_lost, %d failures, %.2f s\n",
           sum.served, sum.lost, sum.failed, dt);
    if (json)
      fprintf(json, "%s  \"(e) fault\": {\"served\": %d, \"device_lost\": %d, \"failures\": %d, \"seconds\": %.3f}",
              json_items++ ? ",\n" : "", sum.served, sum.lost, sum.failed, dt);
    if (sum.failed) {
      fprintf(stderr, "bench_multi: requests failed after the device was lost\n");
      return 1;
    }
    if (sum.lost == 0) printf("  (no request saw device_lost: was GKCD_FAULT set, and is after=K below the load?)\n");
  }
  if (json) {
    fprintf(json, "\n}\n");
    fclose(json);
  }
  return 0;
}
