/* e2e_devices: one gkcd serving from several devices (PROTOCOL.md,
 * "Devices"), on the CPU backend's virtual devices (--cpu-devices 3), so it
 * runs anywhere.
 *
 * What it shows: independent requests spread over the devices; a resident
 * object's requests run where it lives; `device` pins; a replicated array
 * is read on every device and refused as an `out`; operands on different
 * devices are moved and the reply says so; a split sgemm and a split
 * reduce give the single-device results; a device failed by fault
 * injection answers its requests device_lost while the others serve on;
 * bad values of `device` are refused naming the argument.  Every numeric
 * result is checked against a float64 reference on fresh random data.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>

#include "gkc.h"
#include "rawrpc.h"

#define MAXDEV 16

/* The daemon's devices: --cpu-devices 3 by default; GKC_DEVICES_ARGS
 * replaces those arguments (e.g. "--backend cuda --split-device 2" on a
 * GPU machine, see tests/e2e/devices/CMakeLists.txt's e2e_devices_gpu). */
static fixture g_fx;
static const char *g_args[MAXDEV + 1] = {"--cpu-devices", "3", NULL};
static char g_args_buf[512];
static int g_custom; /* GKC_DEVICES_ARGS given */
static int g_ndev = 3; /* from status, once the first daemon serves */
static int g_gpu;    /* the backend is cuda: larger sizes */

/* --- raw requests whose arguments name handles --------------------------- */

enum { D_INT, D_BIN, D_HANDLE, D_BOOL, D_STR, D_OUT_HANDLE, D_OUT_NEW };
typedef struct {
  const char *key;
  int t;
  int64_t i;
  const void *p;
  size_t n;
} dv_arg;
#define DI(k, v) {k, D_INT, (v), NULL, 0}
#define DB(k, p, n) {k, D_BIN, 0, (p), (n)}
#define DH(k, h) {k, D_HANDLE, (h), NULL, 0}
#define DT(k, v) {k, D_BOOL, (v), NULL, 0}
#define DS(k, s) {k, D_STR, 0, (s), 0}
#define DOUT(k, h) {"out", D_OUT_HANDLE, (h), (k), 0}
#define DOUTNEW(k) {"out", D_OUT_NEW, 0, (k), 0}
#define DARGS(...) (const dv_arg[]){__VA_ARGS__}, sizeof((const dv_arg[]){__VA_ARGS__}) / sizeof(dv_arg)

static void dv_pack(rr_frame *f, uint32_t msgid, const char *method, const dv_arg *a, size_t n) {
  msgpack_packer *pk = &f->pk;
  proto_pack_request_head(pk, msgid, method);
  msgpack_pack_map(pk, n);
  for (size_t i = 0; i < n; i++) {
    proto_pack_cstr(pk, a[i].key);
    switch (a[i].t) {
      case D_INT: msgpack_pack_int64(pk, a[i].i); break;
      case D_BIN: msgpack_pack_bin(pk, a[i].n), msgpack_pack_bin_body(pk, a[i].p, a[i].n); break;
      case D_BOOL: a[i].i ? msgpack_pack_true(pk) : msgpack_pack_false(pk); break;
      case D_STR: proto_pack_cstr(pk, a[i].p); break;
      case D_HANDLE:
        msgpack_pack_map(pk, 1);
        proto_pack_cstr(pk, "handle"), msgpack_pack_uint32(pk, (uint32_t)a[i].i);
        break;
      case D_OUT_HANDLE: /* out: {name: {handle: h}} */
        msgpack_pack_map(pk, 1);
        proto_pack_cstr(pk, a[i].p);
        msgpack_pack_map(pk, 1);
        proto_pack_cstr(pk, "handle"), msgpack_pack_uint32(pk, (uint32_t)a[i].i);
        break;
      case D_OUT_NEW: /* out: {name: "handle"} */
        msgpack_pack_map(pk, 1);
        proto_pack_cstr(pk, a[i].p);
        proto_pack_cstr(pk, "handle");
        break;
    }
  }
}

static uint32_t g_msgid = 1;

static void args_from_env(void) {
  const char *e = getenv("GKC_DEVICES_ARGS");
  if (!e || !*e) return;
  snprintf(g_args_buf, sizeof g_args_buf, "%s", e);
  int n = 0;
  for (char *save = NULL, *t = strtok_r(g_args_buf, " ", &save); t && n < MAXDEV;
       t = strtok_r(NULL, " ", &save))
    g_args[n++] = t;
  g_args[n] = NULL;
  g_custom = 1;
}

/* One request and its reply (rr_reply_free it). */
static uint32_t dv_call(rr_conn *c, const char *method, const dv_arg *a, size_t n, rr_reply *r) {
  rr_frame f;
  rr_frame_init(&f);
  uint32_t id = g_msgid++;
  dv_pack(&f, id, method, a, n);
  int e = rr_send_some(c->fd, f.sb.data, f.sb.size);
  rr_frame_free(&f);
  if (e) {
    memset(r, 0, sizeof *r);
    r->rf = RF_CLOSED;
    return id;
  }
  rr_get_reply(c, r, 60000);
  return id;
}

static int64_t get_int(const rr_reply *r, const char *key) {
  const msgpack_object *o = r->got && !r->is_error && r->result ? proto_map_get(r->result, key) : NULL;
  if (!o) return -999;
  if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER) return (int64_t)o->via.u64;
  if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER) return o->via.i64;
  return -998;
}

/* The "devices" array of a reply as a bit mask; 0 when absent. */
static uint64_t get_devices(const rr_reply *r) {
  const msgpack_object *o = r->got && !r->is_error && r->result ? proto_map_get(r->result, "devices") : NULL;
  uint64_t m = 0;
  if (!o || o->type != MSGPACK_OBJECT_ARRAY) return 0;
  for (uint32_t i = 0; i < o->via.array.size; i++)
    if (o->via.array.ptr[i].type == MSGPACK_OBJECT_POSITIVE_INTEGER && o->via.array.ptr[i].via.u64 < 64)
      m |= 1ull << o->via.array.ptr[i].via.u64;
  return m;
}

/* Uploads n floats (pinned to device, or -1; replicated) with libgkc;
 * returns the handle and sets *dev. */
static uint32_t upload_shared(gkc_conn *c, const float *x, size_t n, int device, int replicate,
                              int shared, int *dev) {
  gkc_placement w = {device, replicate, shared};
  uint32_t h = 0;
  int rc = gkc_upload_placed(c, gkc_ref_mem(x, n * 4), GKC_F32, &w, &h, dev);
  CHECK(rc == 0, "upload (device %d, replicate %d): %s", device, replicate, gkc_errmsg(c));
  return h;
}

static uint32_t upload(gkc_conn *c, const float *x, size_t n, int device, int replicate, int *dev) {
  return upload_shared(c, x, n, device, replicate, 0, dev);
}

static double ref_dot(const float *x, const float *y, size_t n, double *mag) {
  double s = 0, m = 0;
  for (size_t i = 0; i < n; i++) s += (double)x[i] * y[i], m += fabs((double)x[i] * y[i]);
  *mag = m;
  return s;
}

/* float32 accumulation of n terms: within n * eps32 of the sum of magnitudes. */
static int close_to(double got, double want, double mag, size_t n) {
  return fabs(got - want) <= (double)n * 6e-8 * mag + 1e-30;
}

/* --- the checks ----------------------------------------------------------- */

/* Independent requests, pipelined on one connection, land on every device.
 * Their operands are replicated and their results stay resident, so each
 * request is a few bytes while its product takes a while: requests queue,
 * and the rule spreads them.  (Operands given as handles never split.) */
static void spread(void) {
  rr_ctx = "spread";
  enum { N = 24 };
  const int S = g_gpu ? 2048 : 160;
  float *a = rr_rand_floats((size_t)S * S), *b = rr_rand_floats((size_t)S * S);
  rr_conn c;
  rr_open(&c, &g_fx);
  rr_reply r;
  uint32_t ha, hb;
  dv_call(&c, "upload", DARGS(DB("data", a, (size_t)S * S * 4), DS("dtype", "f32"), DT("replicate", 1)), &r);
  ha = (uint32_t)get_int(&r, "handle");
  CHECK(r.got && !r.is_error, "replicating A: %s", rr_reply_desc(&r));
  rr_reply_free(&r);
  dv_call(&c, "upload", DARGS(DB("data", b, (size_t)S * S * 4), DS("dtype", "f32"), DT("replicate", 1)), &r);
  hb = (uint32_t)get_int(&r, "handle");
  CHECK(r.got && !r.is_error, "replicating B: %s", rr_reply_desc(&r));
  rr_reply_free(&r);
  rr_frame f;
  rr_frame_init(&f);
  uint32_t first = g_msgid;
  for (int i = 0; i < N; i++)
    dv_pack(&f, g_msgid++, "sgemm", DARGS(DI("m", S), DI("n", S), DI("k", S), DH("a", ha),
                                          DH("b", hb), DOUTNEW("c")));
  CHECK(rr_send_some(c.fd, f.sb.data, f.sb.size) == 0, "sending %d sgemms", N);
  rr_frame_free(&f);
  int count[MAXDEV] = {0};
  uint32_t outs[N];
  for (int i = 0; i < N; i++) {
    rr_get_reply(&c, &r, 60000);
    CHECK(r.got && !r.is_error, "sgemm %d: %s", i, rr_reply_desc(&r));
    int64_t d = get_int(&r, "device");
    CHECK(d >= 0 && d < g_ndev, "sgemm %d: device %" PRId64, i, d);
    if (d >= 0 && d < g_ndev) count[d]++;
    CHECK(r.msgid >= first && r.msgid < first + N, "msgid %u", r.msgid);
    const msgpack_object *o = r.result ? proto_map_get(r.result, "c") : NULL;
    const msgpack_object *h = o && o->type == MSGPACK_OBJECT_MAP ? proto_map_get(o, "handle") : NULL;
    outs[i] = h && h->type == MSGPACK_OBJECT_POSITIVE_INTEGER ? (uint32_t)h->via.u64 : 0;
    rr_reply_free(&r);
  }
  /* Every result right (sampled entries against float64). */
  for (int i = 0; i < N; i++) {
    dv_call(&c, "download", DARGS(DI("handle", outs[i])), &r);
    const msgpack_object *cb = rr_result_bin(&r, "data", (size_t)S * S * 4);
    char why[160] = "no result";
    CHECK(cb && rr_sgemm_entries_ok(cb->via.bin.ptr, a, b, S, S, S, 1.0, 200, why, sizeof why),
          "sgemm %d: %s", i, why);
    rr_reply_free(&r);
  }
  fprintf(stderr, "  sgemms per device:");
  for (int d = 0; d < g_ndev; d++) fprintf(stderr, " %d", count[d]);
  fputc('\n', stderr);
  for (int d = 0; d < g_ndev; d++) CHECK(count[d] > 0, "device %d ran none of %d sgemms", d, N);
  rr_close(&c); /* its objects go with it */
  free(a);
  free(b);
}

/* A handle's requests run where it lives; `device` pins uploads and compute. */
static void affinity_and_pins(gkc_conn *g) {
  rr_ctx = "affinity";
  enum { LEN = 5000 };
  float *x = rr_rand_floats(LEN);
  double sum = 0, mag = 0;
  for (int i = 0; i < LEN; i++) sum += x[i], mag += fabs(x[i]);
  for (int pin = -1; pin < g_ndev; pin++) {
    int dev = -5;
    uint32_t h = upload(g, x, LEN, pin, 0, &dev);
    if (pin >= 0) CHECK(dev == pin, "upload pinned to %d went to %d", pin, dev);
    CHECK(dev >= 0 && dev < g_ndev, "upload's device %d", dev);
    for (int k = 0; k < 6; k++) {
      gkc_info info;
      double v = NAN;
      int rc = gkc_reduce_ref(g, gkc_ref_handle(h, LEN * 4), GKC_SUM, &v, NULL, NULL, &info);
      CHECK(rc == 0, "reduce on handle %u: %s", h, gkc_errmsg(g));
      CHECK(info.device == dev, "reduce on handle %u (device %d) ran on %d", h, dev, info.device);
      CHECK(close_to(v, sum, mag, LEN), "sum %.9g, float64 says %.9g", v, sum);
      CHECK(info.peer_bytes == 0, "nothing to move, yet peer_bytes %g", info.peer_bytes);
    }
    CHECK(gkc_release(g, h) == 0, "release: %s", gkc_errmsg(g));
  }
  /* Compute pinned with `device`, operands sent by value. */
  rr_ctx = "pins";
  rr_conn c;
  rr_open(&c, &g_fx);
  float *y = rr_rand_floats(LEN);
  double dmag, want = ref_dot(x, y, LEN, &dmag);
  for (int d = 0; d < g_ndev; d++)
    for (int k = 0; k < 3; k++) {
      rr_reply r;
      dv_call(&c, "dot", DARGS(DB("x", x, LEN * 4), DB("y", y, LEN * 4), DI("device", d)), &r);
      CHECK(get_int(&r, "device") == d, "dot pinned to %d: %s, device %" PRId64, d,
            rr_reply_desc(&r), get_int(&r, "device"));
      double v = r.result ? rr_num(proto_map_get(r.result, "value")) : NAN;
      CHECK(close_to(v, want, dmag, LEN), "pinned dot %.9g, float64 says %.9g", v, want);
      rr_reply_free(&r);
    }
  rr_close(&c);
  free(x);
  free(y);
}

/* Device d's memory_used from status. */
static uint64_t mem_used(gkc_conn *g, int d) {
  gkc_status_info *s = calloc(1, sizeof *s);
  uint64_t u = 0;
  if (s && gkc_status(g, s) == 0 && d < s->n_devices) u = s->devices[d].memory_used;
  free(s);
  return u;
}

/* A replicated array lives on every device, is read wherever a request
 * lands, and is never written. */
static void replicate(gkc_conn *g) {
  rr_ctx = "replicate";
  enum { LEN = 30000, N = 24 };
  float *x = rr_rand_floats(LEN), *y = rr_rand_floats(LEN);
  uint64_t before[MAXDEV];
  for (int d = 0; d < g_ndev; d++) before[d] = mem_used(g, d);
  rr_conn c;
  rr_open(&c, &g_fx);
  rr_reply r;
  dv_call(&c, "upload", DARGS(DB("data", x, LEN * 4), DS("dtype", "f32"), DT("replicate", 1)), &r);
  CHECK(r.got && !r.is_error, "replicated upload: %s", rr_reply_desc(&r));
  CHECK(get_devices(&r) == (1ull << g_ndev) - 1, "replicated upload's devices: mask %#" PRIx64,
        get_devices(&r));
  uint32_t h = (uint32_t)get_int(&r, "handle");
  rr_reply_free(&r);
  /* Each device's own pool now holds a copy (the other tests' memory is
   * released by now). */
  /* (On a GPU the figure is the whole GPU's, and the backend's cache may
   * serve the copies: checked on the CPU's own pools only.) */
  for (int d = 0; d < g_ndev && !g_gpu; d++)
    CHECK(mem_used(g, d) >= before[d] + LEN * 4, "device %d memory_used %" PRIu64 " -> %" PRIu64
          ", expected %d more", d, before[d], mem_used(g, d), LEN * 4);
  /* Pipelined dots on the replicated x, y sent: spread, and all right. */
  double mag, want = ref_dot(x, y, LEN, &mag);
  rr_frame f;
  rr_frame_init(&f);
  for (int i = 0; i < N; i++)
    dv_pack(&f, g_msgid++, "dot", DARGS(DH("x", h), DB("y", y, LEN * 4)));
  CHECK(rr_send_some(c.fd, f.sb.data, f.sb.size) == 0, "sending");
  rr_frame_free(&f);
  uint64_t seen = 0;
  for (int i = 0; i < N; i++) {
    rr_get_reply(&c, &r, 60000);
    int64_t d = get_int(&r, "device");
    if (d >= 0 && d < g_ndev) seen |= 1ull << d;
    double v = r.result ? rr_num(proto_map_get(r.result, "value")) : NAN;
    CHECK(close_to(v, want, mag, LEN), "dot on the replicated array: %s, %.9g vs %.9g",
          rr_reply_desc(&r), v, want);
    CHECK(r.result && !proto_map_get(r.result, "peer_bytes"), "a replicated operand is never moved");
    rr_reply_free(&r);
  }
  CHECK(__builtin_popcountll(seen) >= 2, "dots on a replicated array ran on devices %#" PRIx64
        " only", seen);
  /* Read-only: as an `out` it is refused, naming why. */
  dv_call(&c, "axpby", DARGS(DB("x", y, LEN * 4), DH("y", h), DOUT("y", h)), &r);
  CHECK(rr_reply_err(&r, r.msgid, "invalid_argument") && strstr(r.msg, "'out'") &&
        strstr(r.msg, "replicated"), "axpby into a replicated array: %s", rr_reply_desc(&r));
  rr_reply_free(&r);
  /* download gives back exactly what went up. */
  float *back = malloc(LEN * 4);
  CHECK(gkc_download(g, h, back, LEN * 4) != 0, "another connection's handle is not ours");
  dv_call(&c, "download", DARGS(DI("handle", h)), &r);
  const msgpack_object *data = rr_result_bin(&r, "data", LEN * 4);
  CHECK(data && !memcmp(data->via.bin.ptr, x, LEN * 4), "download of the replicated array: %s",
        rr_reply_desc(&r));
  rr_reply_free(&r);
  dv_call(&c, "release", DARGS(DI("handle", h)), &r);
  CHECK(r.got && !r.is_error, "release: %s", rr_reply_desc(&r));
  rr_reply_free(&r);
  rr_close(&c);
  free(back);
  free(x);
  free(y);
}

/* Operands on different devices: moved to where the request runs, and the
 * reply says how much. */
static void moves(gkc_conn *g) {
  rr_ctx = "moves";
  enum { LEN = 20000 };
  float *x = rr_rand_floats(LEN), *y = rr_rand_floats(LEN), *z = rr_rand_floats(LEN);
  int dx, dy, dz;
  const int zdev = g_ndev - 1; /* 2 of 3; 1 of 2 (then y is there already) */
  uint32_t hx = upload_shared(g, x, LEN, 0, 0, 1, &dx), hy = upload(g, y, LEN, 1, 0, &dy),
           hz = upload(g, z, LEN, zdev, 0, &dz);
  CHECK(dx == 0 && dy == 1 && dz == zdev, "pinned uploads went to %d %d %d", dx, dy, dz);
  double mag, want = ref_dot(x, y, LEN, &mag), v = NAN;
  gkc_info info;
  int rc = gkc_dot(g, gkc_ref_handle(hx, LEN * 4), gkc_ref_handle(hy, LEN * 4), &v, &info);
  CHECK(rc == 0, "dot of handles on devices 0 and 1: %s", gkc_errmsg(g));
  CHECK(info.device == 0 || info.device == 1, "it ran on device %d", info.device);
  CHECK(info.peer_bytes == LEN * 4, "peer_bytes %g, expected %d (one operand moved)",
        info.peer_bytes, LEN * 4);
  CHECK(info.peer_us >= 0, "peer_us %g", info.peer_us);
  CHECK(close_to(v, want, mag, LEN), "dot %.9g, float64 says %.9g", v, want);
  /* Written in place on the last device from operands on 0 and 1: runs there. */
  gkc_out out = gkc_out_handle(hz);
  rc = gkc_axpby(g, 2.0f, gkc_ref_handle(hx, LEN * 4), -0.5f, gkc_ref_handle(hy, LEN * 4), &out,
                 &info);
  CHECK(rc == 0, "axpby into device %d: %s", zdev, gkc_errmsg(g));
  CHECK(info.device == zdev, "axpby writing a handle on device %d ran on %d", zdev, info.device);
  int moved = (zdev != 0) + (zdev != 1);
  CHECK(info.peer_bytes == (double)moved * LEN * 4, "peer_bytes %g, expected %d", info.peer_bytes,
        moved * LEN * 4);
  float *got = malloc(LEN * 4);
  CHECK(gkc_download(g, hz, got, LEN * 4) == 0, "download: %s", gkc_errmsg(g));
  int bad = -1;
  for (int i = 0; i < LEN && bad < 0; i++) {
    double w = 2.0 * x[i] - 0.5 * y[i];
    if (fabs(got[i] - w) > 1e-6 * (fabs(2.0 * x[i]) + fabs(0.5 * y[i])) + 1e-30) bad = i;
  }
  CHECK(bad < 0, "axpby element %d: %.9g, float64 says %.9g", bad, bad < 0 ? 0 : got[bad],
        bad < 0 ? 0 : 2.0 * x[bad] - 0.5 * y[bad]);
  /* Pinned elsewhere than its operand (x is shared, so this connection
   * may name it): the operand moves. */
  rr_conn c;
  rr_open(&c, &g_fx);
  rr_reply r;
  dv_call(&c, "reduce", DARGS(DH("x", hx), DI("device", zdev)), &r);
  double sum = 0, smag = 0;
  for (int i = 0; i < LEN; i++) sum += x[i], smag += fabs(x[i]);
  CHECK(get_int(&r, "device") == zdev && get_int(&r, "peer_bytes") == LEN * 4,
        "reduce of device 0's x pinned to the last device: %s, device %" PRId64 ", peer_bytes %" PRId64,
        rr_reply_desc(&r), get_int(&r, "device"), get_int(&r, "peer_bytes"));
  double rv = r.result ? rr_num(proto_map_get(r.result, "value")) : NAN;
  CHECK(close_to(rv, sum, smag, LEN), "sum %.9g, float64 says %.9g", rv, sum);
  rr_reply_free(&r);
  rr_close(&c);

  /* A solve whose matrix and right-hand side were placed apart (issue 26:
   * it was refused): the operands are brought together, the reply says how
   * many bytes moved, and x solves the system. */
  enum { N = 300 };
  int32_t rp[N + 1], ci[3 * N];
  float va[3 * N], b[N], xs[N];
  int nz = 0;
  for (int i = 0; i < N; i++) { /* tridiagonal 4, -1: SPD and well conditioned, so */
    rp[i] = nz;                   /* float32 x meets the residual checked */
    for (int j = i - 1; j <= i + 1; j++)
      if (j >= 0 && j < N) ci[nz] = j, va[nz++] = j == i ? 4.0f : -1.0f;
    b[i] = (float)sin(0.1 * i) + 1.0f;
  }
  rp[N] = nz;
  gkc_csr A = {N, N, nz, rp, ci, va};
  gkc_placement on1 = {1, 0, 0}, on0 = {0, 0, 0};
  uint32_t ma, hb;
  int dm, db;
  CHECK(gkc_csr_upload_placed(g, &A, &on1, &ma, &dm) == 0, "csr_upload on 1: %s", gkc_errmsg(g));
  CHECK(gkc_upload_placed(g, gkc_ref_mem(b, sizeof b), GKC_F32, &on0, &hb, &db) == 0,
        "upload on 0: %s", gkc_errmsg(g));
  CHECK(dm == 1 && db == 0, "matrix on %d, b on %d", dm, db);
  gkc_solve_args sa = GKC_SOLVE_ARGS_INIT;
  sa.matrix = ma, sa.b = gkc_ref_handle(hb, sizeof b), sa.rtol = 1e-6, sa.max_iter = 5 * N;
  gkc_out xo = gkc_out_mem(xs, sizeof xs);
  gkc_solve_result sr;
  rc = gkc_solve(g, &sa, &xo, &sr, &info);
  CHECK(rc == 0 && sr.converged, "solve with its operands on devices 1 and 0: %s (%s)",
        rc ? gkc_errmsg(g) : "ran", sr.reason);
  CHECK(info.peer_bytes > 0, "solve: peer_bytes %g (an operand had to move)", info.peer_bytes);
  double rn = 0, bn = 0;
  for (int i = 0; i < N; i++) {
    double ax = 0;
    for (int t = rp[i]; t < rp[i + 1]; t++) ax += (double)va[t] * xs[ci[t]];
    rn += (b[i] - ax) * (b[i] - ax), bn += (double)b[i] * b[i];
  }
  CHECK(sqrt(rn / bn) < 1e-4, "solve: true relative residual %.3g", sqrt(rn / bn));
  /* batch writes its operands in place: apart, they are still refused, by
   * name; and a step may not write a replicated array. */
  gkc_step st[] = {gkc_step_axpby(gkc_scalar_num(1), hx, gkc_scalar_num(1), hy, hy)};
  gkc_batch_result br;
  rc = gkc_batch(g, st, 1, &br, NULL);
  CHECK(rc == GKC_EINVALID_ARGUMENT && strstr(gkc_errmsg(g), "writes them in place"),
        "batch on devices 0 and 1: %d %s", rc, gkc_errmsg(g));
  int dr;
  uint32_t hr = upload(g, y, LEN, -1, 1, &dr);
  gkc_step wr[] = {gkc_step_axpby(gkc_scalar_num(1), hr, gkc_scalar_num(1), hr, hr)};
  rc = gkc_batch(g, wr, 1, &br, NULL);
  CHECK(rc == GKC_EINVALID_ARGUMENT && strstr(gkc_errmsg(g), "read-only"),
        "batch writing a replicated array: %d %s", rc, gkc_errmsg(g));
  gkc_release(g, hr), gkc_release(g, hb), gkc_release_matrix(g, ma);
  gkc_release(g, hx), gkc_release(g, hy), gkc_release(g, hz);
  free(got);
  free(x), free(y), free(z);
}

/* A daemon of its own for one split: its split rule starts from the
 * hand-off time measured at start-up.  Afterwards it learns what splits
 * really cost here, and on a CI machine with fewer cores than virtual
 * devices it learns that they do not pay and stops splitting, rightly; so
 * each split checked gets a fresh daemon. */
static void split_daemon(fixture *fx, rr_conn *c) {
  fixture_start(fx, g_args, NULL);
  rr_open(c, fx);
}

static void split_daemon_stop(fixture *fx, rr_conn *c) {
  rr_close(c);
  int st = fixture_stop(fx, SIGTERM);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "gkcd exited %d", st);
}

/* The same request split across all devices and pinned to one: the same
 * answer, within float32 rounding. */
static void split_sgemm(void) {
  rr_ctx = "split sgemm";
  /* Long enough that the split rule splits it on any machine (hundreds of
   * MFLOP against hand-offs of microseconds). */
  const int M = g_gpu ? 8192 : 600, N = g_gpu ? 2048 : 300, K = g_gpu ? 2048 : 400;
  float *a = rr_rand_floats((size_t)M * K), *b = rr_rand_floats((size_t)K * N);
  fixture fx;
  rr_conn c;
  split_daemon(&fx, &c);
  rr_reply rs, r1;
  dv_call(&c, "sgemm", DARGS(DI("m", M), DI("n", N), DI("k", K), DB("a", a, (size_t)M * K * 4),
                             DB("b", b, (size_t)K * N * 4)), &rs);
  dv_call(&c, "sgemm", DARGS(DI("m", M), DI("n", N), DI("k", K), DB("a", a, (size_t)M * K * 4),
                             DB("b", b, (size_t)K * N * 4), DI("device", 1)), &r1);
  uint64_t parts = get_devices(&rs);
  CHECK(__builtin_popcountll(parts) >= 2, "the long sgemm was not split: %s, devices %#" PRIx64,
        rr_reply_desc(&rs), parts);
  CHECK(get_int(&r1, "device") == 1, "pinned sgemm: %s", rr_reply_desc(&r1));
  const msgpack_object *cs = rr_result_bin(&rs, "c", (size_t)M * N * 4),
                       *c1 = rr_result_bin(&r1, "c", (size_t)M * N * 4);
  CHECK(cs && c1, "results: %s / %s", rr_reply_desc(&rs), rr_reply_desc(&r1));
  if (cs && c1) {
    /* Each entry against float64, and the split against the single device:
     * all within K * eps32 * sum_k |a_ik b_kj| (the tolerance PROTOCOL.md,
     * "Devices", states). */
    int bad = -1;
    double worst = 0;
    /* Every entry on the CPU; on a GPU's large shapes, every 97th row and
     * 89th column (primes, so the parts' boundaries are crossed). */
    int step_i = g_gpu ? 97 : 1, step_j = g_gpu ? 89 : 1;
    for (int i = 0; i < M && bad < 0; i += step_i)
      for (int j = 0; j < N; j += step_j) {
        double w = 0, m = 0;
        for (int k = 0; k < K; k++) {
          double t = (double)a[(size_t)i * K + k] * b[(size_t)k * N + j];
          w += t, m += fabs(t);
        }
        double vs = rr_ld_f32(cs->via.bin.ptr, (size_t)i * N + j),
               v1 = rr_ld_f32(c1->via.bin.ptr, (size_t)i * N + j), tol = K * 6e-8 * m + 1e-30;
        if (!(fabs(vs - w) <= tol && fabs(v1 - w) <= tol && fabs(vs - v1) <= tol)) {
          bad = i * N + j;
          fprintf(stderr, "  c[%d,%d]: split %.9g, one device %.9g, float64 %.9g, tol %.3g\n", i, j,
                  vs, v1, w, tol);
          break;
        }
        if (fabs(vs - v1) > worst) worst = fabs(vs - v1);
      }
    CHECK(bad < 0, "split sgemm differs at %d", bad);
    fprintf(stderr, "  split sgemm on devices %#" PRIx64 ": largest |split - one device| %.3g\n",
            parts, worst);
  }
  rr_reply_free(&rs), rr_reply_free(&r1);
  split_daemon_stop(&fx, &c);
  free(a), free(b);
}

static void split_reduce(void) {
  rr_ctx = "split reduce";
  enum { LEN = 8 << 20 };
  float *x = rr_rand_floats(LEN);
  double sum = 0, mag = 0, mn = INFINITY, mx = -INFINITY;
  for (size_t i = 0; i < LEN; i++) {
    sum += x[i], mag += fabs(x[i]);
    mn = x[i] < mn ? x[i] : mn, mx = x[i] > mx ? x[i] : mx;
  }
  const char *ops[] = {"sum", "min", "max"};
  double want[] = {sum, mn, mx};
  for (int o = 0; o < 3; o++) {
    fixture fx;
    rr_conn c;
    split_daemon(&fx, &c);
    rr_reply rs, r1;
    dv_call(&c, "reduce", DARGS(DB("x", x, (size_t)LEN * 4), DS("op", ops[o])), &rs);
    dv_call(&c, "reduce", DARGS(DB("x", x, (size_t)LEN * 4), DS("op", ops[o]), DI("device", g_ndev - 1)), &r1);
    CHECK(__builtin_popcountll(get_devices(&rs)) >= 2, "%s over %d floats was not split: %s", ops[o],
          LEN, rr_reply_desc(&rs));
    CHECK(get_int(&r1, "device") == g_ndev - 1, "pinned reduce: %s", rr_reply_desc(&r1));
    double vs = rs.result ? rr_num(proto_map_get(rs.result, "value")) : NAN,
           v1 = r1.result ? rr_num(proto_map_get(r1.result, "value")) : NAN;
    if (o == 0) { /* both within n * eps32 * sum |x| of float64 */
      CHECK(close_to(vs, want[o], mag, LEN) && close_to(v1, want[o], mag, LEN),
            "sum: split %.12g, one device %.12g, float64 %.12g", vs, v1, want[o]);
    } else { /* min and max are exact */
      CHECK(vs == want[o] && v1 == want[o], "%s: split %.9g, one device %.9g, exact %.9g", ops[o],
            vs, v1, want[o]);
    }
    rr_reply_free(&rs), rr_reply_free(&r1);
    split_daemon_stop(&fx, &c);
  }
  free(x);
}

/* Each virtual device has its own memory: one runs out while the others
 * take more, and new objects go where they fit. */
static void memory(void) {
  rr_ctx = "device memory";
  fixture fx;
  const char *const args[] = {"--cpu-devices", "3", "--cpu-device-memory", "1M", NULL};
  fixture_start(&fx, args, NULL);
  gkc_conn *g;
  CHECK(gkc_connect(&g, fx.sock) == 0, "connect");
  enum { LEN = 150000 }; /* 600000 bytes: one fits a device of 1 MiB, two do not */
  float *x = rr_rand_floats(LEN);
  int d;
  uint32_t h0 = upload(g, x, LEN, 0, 0, &d);
  gkc_placement w = {0, 0, 0};
  uint32_t h;
  int rc = gkc_upload_placed(g, gkc_ref_mem(x, LEN * 4), GKC_F32, &w, &h, NULL);
  CHECK(rc == GKC_EOUT_OF_MEMORY && strstr(gkc_errmsg(g), "device 0"),
        "a second array on the full device 0: %d %s", rc, gkc_errmsg(g));
  /* Not pinned: it goes to a device with room, twice. */
  int da = -1, db = -1;
  uint32_t ha = upload(g, x, LEN, -1, 0, &da), hb = upload(g, x, LEN, -1, 0, &db);
  CHECK(da != db && da > 0 && db > 0, "placed uploads went to %d and %d", da, db);
  gkc_status_info s;
  CHECK(gkc_status(g, &s) == 0, "status");
  for (int i = 0; i < g_ndev; i++)
    CHECK(s.devices[i].memory_total == 1 << 20 && s.devices[i].memory_used == LEN * 4,
          "device %d: %" PRIu64 " of %" PRIu64 " used", i, s.devices[i].memory_used,
          s.devices[i].memory_total);
  /* Every device full now. */
  rc = gkc_upload_placed(g, gkc_ref_mem(x, LEN * 4), GKC_F32, NULL, &h, NULL);
  CHECK(rc == GKC_EOUT_OF_MEMORY, "a fourth array: %d %s", rc, gkc_errmsg(g));
  CHECK(gkc_release(g, h0) == 0, "release");
  CHECK(upload(g, x, LEN, -1, 0, &d) && d == 0, "after a release, device 0 has room: %d", d);
  gkc_close(g); /* its objects go with it */
  (void)ha, (void)hb;
  free(x);
  int st = fixture_stop(&fx, SIGTERM);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "gkcd exited %d", st);
}

/* `device` values that name no device are refused, precisely. */
static void bad_values(void) {
  rr_ctx = "bad device";
  rr_conn c;
  rr_open(&c, &g_fx);
  float x[4] = {1, 2, 3, 4};
  rr_reply r;
  dv_call(&c, "upload", DARGS(DB("data", x, 16), DS("dtype", "f32"), DI("device", -1)), &r);
  CHECK(rr_reply_err(&r, r.msgid, "invalid_argument") && strstr(r.msg, "'device'") &&
        strstr(r.msg, "-1"), "device -1: %s", rr_reply_desc(&r));
  rr_reply_free(&r);
  dv_call(&c, "reduce", DARGS(DB("x", x, 16), DI("device", g_ndev)), &r);
  char range[32];
  snprintf(range, sizeof range, "0 to %d", g_ndev - 1);
  CHECK(rr_reply_err(&r, r.msgid, "invalid_argument") && strstr(r.msg, "'device'") &&
        strstr(r.msg, range), "device %d: %s", g_ndev, rr_reply_desc(&r));
  rr_reply_free(&r);
  dv_call(&c, "reduce", DARGS(DB("x", x, 16), DS("device", "1")), &r);
  CHECK(rr_reply_err(&r, r.msgid, "invalid_argument") && strstr(r.msg, "'device'"),
        "device as a string: %s", rr_reply_desc(&r));
  rr_reply_free(&r);
  dv_call(&c, "upload", DARGS(DB("data", x, 16), DS("dtype", "f32"), DI("device", 1),
                              DT("replicate", 1)), &r);
  CHECK(rr_reply_err(&r, r.msgid, "invalid_argument") && strstr(r.msg, "'replicate'"),
        "device with replicate: %s", rr_reply_desc(&r));
  rr_reply_free(&r);
  rr_close(&c);
}

/* Device 1 fails (GKCD_FAULT=device_lost:dev=1:after=2): its request and
 * its handles say so, the others serve on, status and metrics show it. */
static void lost(void) {
  rr_ctx = "device lost";
  fixture fx;
  const char *const env[] = {"GKCD_FAULT=device_lost:dev=1:after=2", NULL};
  fixture_start(&fx, g_args, env);
  gkc_conn *g;
  CHECK(gkc_connect(&g, fx.sock) == 0, "connect");
  enum { LEN = 4096 };
  float *x = rr_rand_floats(LEN);
  double sum = 0, mag = 0;
  for (int i = 0; i < LEN; i++) sum += x[i], mag += fabs(x[i]);
  int d1, d1b, d0;
  uint32_t h1 = upload(g, x, LEN, 1, 0, &d1);  /* device 1's job 1 */
  uint32_t h1b = upload(g, x, LEN, 1, 0, &d1b); /* its job 2 */
  uint32_t h0 = upload(g, x, LEN, 0, 0, &d0);
  CHECK(d1 == 1 && d1b == 1 && d0 == 0, "uploads went to %d %d %d", d1, d1b, d0);
  double v;
  gkc_info info;
  /* Job 3 on device 1: the device is lost under it. */
  int rc = gkc_reduce_ref(g, gkc_ref_handle(h1, LEN * 4), GKC_SUM, &v, NULL, NULL, &info);
  CHECK(rc == GKC_EDEVICE_LOST && strstr(gkc_errmsg(g), "device 1") &&
        strstr(gkc_errmsg(g), "was lost"), "the request that met the failure: %d %s", rc,
        gkc_errmsg(g));
  /* Later: the loop has taken it out of service. */
  for (int tries = 0; tries < 100; tries++) {
    gkc_status_info s;
    if (gkc_status(g, &s) == 0 && s.devices[1].lost) break;
    rr_sleep_ms(20);
  }
  rc = gkc_reduce_ref(g, gkc_ref_handle(h1b, LEN * 4), GKC_SUM, &v, NULL, NULL, &info);
  char want[64];
  snprintf(want, sizeof want, "handle %u lived on device 1", h1b);
  CHECK(rc == GKC_EDEVICE_LOST && strstr(gkc_errmsg(g), want), "a handle on the lost device: %d %s",
        rc, gkc_errmsg(g));
  gkc_placement w = {1, 0, 0};
  uint32_t h;
  rc = gkc_upload_placed(g, gkc_ref_mem(x, LEN * 4), GKC_F32, &w, &h, NULL);
  CHECK(rc == GKC_EDEVICE_LOST && strstr(gkc_errmsg(g), "'device'") &&
        strstr(gkc_errmsg(g), "device 1"), "an upload pinned to the lost device: %d %s", rc,
        gkc_errmsg(g));
  /* The others serve on: a handle on device 0, and new work anywhere but 1. */
  rc = gkc_reduce_ref(g, gkc_ref_handle(h0, LEN * 4), GKC_SUM, &v, NULL, NULL, &info);
  CHECK(rc == 0 && info.device == 0 && close_to(v, sum, mag, LEN), "device 0's handle: %d %s",
        rc, gkc_errmsg(g));
  for (int k = 0; k < 12; k++) {
    rc = gkc_reduce(g, x, LEN, GKC_SUM, &v, NULL, &info);
    CHECK(rc == 0 && info.device != 1 && close_to(v, sum, mag, LEN), "reduce %d: %d %s, device %d",
          k, rc, gkc_errmsg(g), info.device);
  }
  int dnew = -1;
  uint32_t hn = upload(g, x, LEN, -1, 0, &dnew);
  CHECK(dnew >= 0 && dnew != 1 && dnew < g_ndev, "a new upload went to device %d", dnew);
  /* A replicate now covers the live devices only. */
  rr_conn c;
  rr_open(&c, &fx);
  rr_reply r;
  dv_call(&c, "upload", DARGS(DB("data", x, LEN * 4), DS("dtype", "f32"), DT("replicate", 1)), &r);
  CHECK(get_devices(&r) == (((1ull << g_ndev) - 1) & ~2ull), "replicate after the loss: %s, devices %#" PRIx64, rr_reply_desc(&r),
        get_devices(&r));
  rr_reply_free(&r);
  rr_close(&c);
  /* status and metrics show it. */
  gkc_status_info s;
  CHECK(gkc_status(g, &s) == 0 && s.n_devices == g_ndev, "status: %s", gkc_errmsg(g));
  CHECK(s.devices[1].lost && strstr(s.devices[1].lost_reason, "injected"),
        "device 1 lost %d (%s)", s.devices[1].lost, s.devices[1].lost_reason);
  for (int d = 0; d < g_ndev; d++)
    if (d != 1) CHECK(!s.devices[d].lost, "device %d is not lost", d);
  char *text = NULL;
  CHECK(gkc_metrics(g, &text) == 0 && strstr(text, "gkcd_device_up{device=\"1\"} 0") &&
        strstr(text, "gkcd_device_up{device=\"0\"} 1"), "metrics: gkcd_device_up");
  free(text);
  /* Handles on the lost device can still be released. */
  CHECK(gkc_release(g, h1) == 0 && gkc_release(g, h1b) == 0, "release: %s", gkc_errmsg(g));
  gkc_release(g, h0), gkc_release(g, hn);
  gkc_close(g);
  free(x);
  int st = fixture_stop(&fx, SIGTERM);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "gkcd exited %d (a leak under ASan exits non-zero)",
        st);
  if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0)) rr_dump_log(&fx, 0);
}

/* With its only device lost, gkcd answers what it holds and exits non-zero
 * (to be restarted by its service manager). */
static void last_lost(void) {
  rr_ctx = "last device lost";
  fixture fx;
  const char *const args[] = {"--cpu-devices", "1", NULL};
  const char *const env[] = {"GKCD_FAULT=device_lost:dev=0", NULL};
  fixture_start(&fx, args, env);
  gkc_conn *g;
  CHECK(gkc_connect(&g, fx.sock) == 0, "connect");
  float x[1000];
  for (int i = 0; i < 1000; i++) x[i] = (float)i;
  double v;
  int rc = gkc_reduce(g, x, 1000, GKC_SUM, &v, NULL, NULL);
  CHECK(rc == GKC_EDEVICE_LOST && strstr(gkc_errmsg(g), "device 0"), "reduce: %d %s", rc,
        gkc_errmsg(g));
  gkc_close(g);
  int st = -1;
  for (int i = 0; i < 500 && st < 0; i++) { /* it stops by itself */
    int w;
    if (waitpid(fx.pid, &w, WNOHANG) == fx.pid) st = w;
    else rr_sleep_ms(20);
  }
  CHECK(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 1, "gkcd with no device left: status %d",
        st);
  if (st >= 0) fx.pid = 0; /* reaped */
  fixture_stop(&fx, SIGTERM);
}

int main(void) {
  double t0 = rr_now_s();
  rr_rng = test_seed();
  args_from_env();
  int early = fixture_try_start(&g_fx, g_args, NULL);
  if (early >= 0) {
    rr_dump_log(&g_fx, 20);
    fixture_stop(&g_fx, SIGTERM);
    if (g_custom) { /* e.g. no GPU here: skipped, never passed */
      fprintf(stderr, "SKIP: gkcd %s did not start\n", getenv("GKC_DEVICES_ARGS"));
      return 77;
    }
    fprintf(stderr, "gkcd did not start (%d)\n", early);
    return 1;
  }
  gkc_conn *g;
  if (gkc_connect(&g, g_fx.sock) != 0) {
    fprintf(stderr, "connect: %s\n", gkc_errmsg(g));
    return 1;
  }
  gkc_status_info si;
  if (gkc_status(g, &si) != 0 || si.n_devices < 2 || si.n_devices > MAXDEV) {
    fprintf(stderr, "%s: gkcd serves %d device(s); this test needs 2 to %d\n",
            g_custom ? "SKIP" : "FAIL", si.n_devices, MAXDEV);
    gkc_close(g);
    fixture_stop(&g_fx, SIGTERM);
    return g_custom ? 77 : 1;
  }
  g_ndev = si.n_devices;
  g_gpu = !strcmp(si.backend, "cuda");
  fprintf(stderr, "%d %s devices (%s)\n", g_ndev, si.backend,
          g_custom ? getenv("GKC_DEVICES_ARGS") : "--cpu-devices 3");
  SECTION(spread());
  SECTION(affinity_and_pins(g));
  SECTION(replicate(g));
  SECTION(moves(g));
  SECTION(split_sgemm());
  SECTION(split_reduce());
  SECTION(bad_values());
  if (!g_custom) SECTION(memory()); /* --cpu-device-memory: the CPU's virtual devices */
  gkc_close(g);
  int st = fixture_stop(&g_fx, SIGTERM);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "gkcd exited %d", st);
  if (rr_env_flag("GKC_FAULT_INJECTION")) {
    SECTION(lost());
    if (!g_custom) SECTION(last_lost());
  }
  else
    fprintf(stderr, "device-lost checks skipped: gkcd built without GKC_FAULT_INJECTION\n");
  rr_print_totals("e2e_devices", t0);
  return rr_failed ? 1 : 0;
}
