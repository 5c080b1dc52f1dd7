/* test_place: the placement rule (daemon/place.c) and the split rule
 * (daemon/split.c) on their own, against brute force and hand-made cases,
 * with the device list stubbed: which devices live is this test's to say. */
#include <stdatomic.h>

#include "backend.h"
#include "devices.h"
#include "gkc_errors.h"
#include "place.h"
#include "proto_methods.h"
#include "resident.h"
#include "method.h"
#include "split.h"
#include "test.h"

/* --- stubs of the device list --------------------------------------------- */

static uint64_t g_live = 7;
uint64_t devices_live(const gkcd_devices *d) { (void)d; return g_live; }
const char *devices_lost_msg(gkcd_backend *be, char *buf, size_t len) {
  snprintf(buf, len, "device %d (test) was lost: on purpose", be->device);
  return buf;
}
const char *backend_lost_reason(const gkcd_backend *be) { (void)be; return "on purpose"; }
gkcd_backend *devices_backend(int i) { (void)i; return NULL; }
void job_finish(gkcd_job *job) { (void)job; }

static gkcd_devices g_devs;
static gkcd_backend g_be[3];

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next_u64(void) {
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return rng;
}

/* --- place_pick ------------------------------------------------------------ */

static void test_pick(void) {
  double out[8] = {0}, cost[8] = {0};
  ASSERT_EQ(place_pick(8, 0, out, cost), -1);
  /* Ties go to the lower index. */
  ASSERT_EQ(place_pick(8, 0xff, out, cost), 0);
  ASSERT_EQ(place_pick(8, 0xf0, out, cost), 4);
  /* Least outstanding + own cost, not least of either alone. */
  out[0] = 100, cost[0] = 10;  /* 110 */
  out[1] = 50, cost[1] = 70;   /* 120 */
  out[2] = 0, cost[2] = 105;   /* 105 */
  ASSERT_EQ(place_pick(3, 7, out, cost), 2);
  ASSERT_EQ(place_pick(3, 3, out, cost), 0);
  ASSERT_EQ(place_pick(2, 7, out, cost), 0); /* n bounds the candidates */
  /* Against brute force on random loads. */
  for (int t = 0; t < 20000; t++) {
    int n = 1 + (int)(next_u64() % 8);
    uint64_t cand = next_u64() & ((1u << n) - 1);
    for (int d = 0; d < n; d++) {
      out[d] = (double)(next_u64() % 1000);
      cost[d] = (double)(next_u64() % 1000);
    }
    int best = -1;
    for (int d = 0; d < n; d++)
      if ((cand >> d & 1) && (best < 0 || out[d] + cost[d] < out[best] + cost[best])) best = d;
    ASSERT_EQ(place_pick(n, cand, out, cost), best);
  }
}

/* --- place_operands -------------------------------------------------------- */

static gkcd_res arr(uint32_t id, int device) {
  gkcd_res r;
  memset(&r, 0, sizeof r);
  r.id = id, r.kind = RES_ARRAY, r.device = device, r.bytes = 64;
  return r;
}

/* The rows' split rules as the method table names them (method_*.c): this
 * test links split.c alone, not the rows. */
static const gkcd_method *row_of(int method) {
  static const gkcd_method sgemm = {.id = PROTO_M_SGEMM, .split = split_rule_rows};
  static const gkcd_method reduce = {.id = PROTO_M_REDUCE, .split = split_rule_reduce};
  static const gkcd_method copies = {.id = PROTO_M_UPLOAD, .split = split_rule_copies};
  static const gkcd_method batch = {.id = PROTO_M_BATCH, .in_place = 1};
  static const gkcd_method region = {.id = PROTO_M_SHM_REGISTER, .makes = RES_REGION};
  static const gkcd_method none = {.id = -1, .makes = -1};
  switch (method) {
    case PROTO_M_SGEMM: return &sgemm;
    case PROTO_M_REDUCE: return &reduce;
    case PROTO_M_UPLOAD:
    case PROTO_M_CSR_UPLOAD: return &copies;
    case PROTO_M_BATCH: return &batch;
    case PROTO_M_SHM_REGISTER: return &region;
  }
  return &none;
}

static gkcd_job job_with(int method, gkcd_res **res, int n) {
  gkcd_job j;
  memset(&j, 0, sizeof j);
  j.method = method, j.row = row_of(method), j.pin_device = -1, j.out_kind = OUT_BIN;
  for (int i = 0; i < n; i++) j.res[j.nres++] = res[i];
  return j;
}

static void test_operands(void) {
  char msg[400];
  g_live = 7;
  gkcd_res a0 = arr(10, 0), a1 = arr(11, 1), a2 = arr(12, 2), rep = arr(13, 0);
  rep.rep_mask = 7;
  gkcd_res reg = arr(14, 0);
  reg.kind = RES_REGION; /* host memory: no device */

  gkcd_job j = job_with(PROTO_M_DOT, NULL, 0);
  ASSERT_EQ(place_operands(&j, &g_devs, msg, sizeof msg), 0);
  ASSERT_EQ(j.dev_mask, 7); /* nothing resident: anywhere */

  gkcd_res *one[] = {&a2, &reg};
  j = job_with(PROTO_M_REDUCE, one, 2);
  ASSERT_EQ(place_operands(&j, &g_devs, msg, sizeof msg), 0);
  ASSERT_EQ(j.dev_mask, 4); /* where its array lives; the region is no constraint */
  ASSERT(!place_needs_move(&j, 2) && place_needs_move(&j, 0));

  gkcd_res *two[] = {&a0, &a1};
  j = job_with(PROTO_M_DOT, two, 2);
  ASSERT_EQ(place_operands(&j, &g_devs, msg, sizeof msg), 0);
  ASSERT_EQ(j.dev_mask, 3); /* on either; the other operand moves */
  ASSERT(place_needs_move(&j, 0) && place_needs_move(&j, 1));

  gkcd_res *withrep[] = {&rep, &a1};
  j = job_with(PROTO_M_DOT, withrep, 2);
  ASSERT_EQ(place_operands(&j, &g_devs, msg, sizeof msg), 0);
  ASSERT_EQ(j.dev_mask, 2); /* the replicated one is everywhere */
  ASSERT(!place_needs_move(&j, 1));

  j = job_with(PROTO_M_DOT, two, 2);
  j.pin_device = 2;
  ASSERT_EQ(place_operands(&j, &g_devs, msg, sizeof msg), 0);
  ASSERT_EQ(j.dev_mask, 4); /* pinned: both move there */

  j = job_with(PROTO_M_AXPBY, two, 2);
  j.out_kind = OUT_RES, j.out_res = &a2;
  ASSERT_EQ(place_operands(&j, &g_devs, msg, sizeof msg), 0);
  ASSERT_EQ(j.dev_mask, 4); /* runs where it writes */

  j = job_with(PROTO_M_AXPBY, two, 2);
  j.out_kind = OUT_RES, j.out_res = &a2, j.pin_device = 0;
  ASSERT_EQ(place_operands(&j, &g_devs, msg, sizeof msg), GKC_EINVALID_ARGUMENT);
  ASSERT(strstr(msg, "'device'") && strstr(msg, "'out'"));

  /* solve reads its operands: apart, they are moved (issue 26).  batch
   * writes them in place (its row's in_place): they must share a device. */
  j = job_with(PROTO_M_SOLVE, two, 2);
  ASSERT_EQ(place_operands(&j, &g_devs, msg, sizeof msg), 0);
  ASSERT_EQ(j.dev_mask, 3);
  j = job_with(PROTO_M_BATCH, two, 2);
  ASSERT_EQ(place_operands(&j, &g_devs, msg, sizeof msg), GKC_EINVALID_ARGUMENT);
  ASSERT(strstr(msg, "writes them in place") && strstr(msg, "handle 10 on device 0") &&
         strstr(msg, "handle 11 on device 1"));
  j = job_with(PROTO_M_BATCH, withrep, 2);
  ASSERT_EQ(place_operands(&j, &g_devs, msg, sizeof msg), 0);
  ASSERT_EQ(j.dev_mask, 2);

  /* A replicate is made from sent bytes, never from a handle. */
  j = job_with(PROTO_M_UPLOAD, &one[0], 1);
  j.replicate = 1;
  ASSERT_EQ(place_operands(&j, &g_devs, msg, sizeof msg), GKC_EINVALID_ARGUMENT);
  ASSERT(strstr(msg, "'replicate'") && strstr(msg, "handle 12"));

  /* Device 1 lost. */
  g_live = 5;
  j = job_with(PROTO_M_REDUCE, &one[0], 1);
  ASSERT_EQ(place_operands(&j, &g_devs, msg, sizeof msg), 0);
  gkcd_res *lost1[] = {&a1};
  j = job_with(PROTO_M_REDUCE, lost1, 1);
  ASSERT_EQ(place_operands(&j, &g_devs, msg, sizeof msg), GKC_EDEVICE_LOST);
  ASSERT(strstr(msg, "handle 11 lived on device 1, which was lost"));
  j = job_with(PROTO_M_DOT, NULL, 0);
  j.pin_device = 1;
  ASSERT_EQ(place_operands(&j, &g_devs, msg, sizeof msg), GKC_EDEVICE_LOST);
  ASSERT(strstr(msg, "argument 'device'") && strstr(msg, "device 1"));
  j = job_with(PROTO_M_DOT, NULL, 0);
  ASSERT_EQ(place_operands(&j, &g_devs, msg, sizeof msg), 0);
  ASSERT_EQ(j.dev_mask, 5); /* new work avoids it */
  gkcd_res *reponly[] = {&rep};
  g_live = 6; /* the replicated array's home (0) lost: its copies serve */
  j = job_with(PROTO_M_REDUCE, reponly, 1);
  ASSERT_EQ(place_operands(&j, &g_devs, msg, sizeof msg), 0);
  ASSERT_EQ(j.dev_mask, 6);
  /* Every device lost (the loop has not yet heard, so gkcd still serves):
   * work with nothing resident, a pinned device or a shm_register is
   * refused device_lost, never placed nowhere. */
  g_live = 0;
  j = job_with(PROTO_M_SGEMM, NULL, 0);
  ASSERT_EQ(place_operands(&j, &g_devs, msg, sizeof msg), GKC_EDEVICE_LOST);
  ASSERT(strstr(msg, "every device was lost"));
  j = job_with(PROTO_M_SHM_REGISTER, NULL, 0);
  ASSERT_EQ(place_operands(&j, &g_devs, msg, sizeof msg), GKC_EDEVICE_LOST);
  j = job_with(PROTO_M_DOT, NULL, 0);
  j.pin_device = 2;
  ASSERT_EQ(place_operands(&j, &g_devs, msg, sizeof msg), GKC_EDEVICE_LOST);
  ASSERT(strstr(msg, "argument 'device'"));
  g_live = 7;
}

/* --- split_kind, split_worth ------------------------------------------------ */

static void test_split(void) {
  static float dummy[16];
  gkcd_job j = job_with(PROTO_M_SGEMM, NULL, 0);
  j.in.sgemm.m = 512, j.in.sgemm.n = 512, j.in.sgemm.k = 512;
  j.in.sgemm.a = (gkcd_span){dummy, 4, SPAN_HOST, 0, 0, 0};
  j.in.sgemm.b = (gkcd_span){dummy, 1 << 20, SPAN_HOST, 0, 0, 0};
  ASSERT_EQ(split_kind(&j), SPLIT_ROWS);
  /* cost / k + 2 k handoff < cost: 3000/3 + 2*3*100 = 1600 < 3000. */
  ASSERT(split_worth(&j, 3000, 3, 100, 0));
  /* 850/3 + 600 > 850: the hand-offs eat the gain. */
  ASSERT(!split_worth(&j, 850, 3, 100, 0));
  ASSERT(!split_worth(&j, 1e9, 1, 1, 0)); /* one device: nothing to split over */
  /* The extra copies of B over the host link count: 2 extra MiB at 1 B/us. */
  ASSERT(!split_worth(&j, 3000, 3, 100, 1.0));
  j.in.sgemm.m = 2; /* only two rows: at most two parts, so fewer hand-offs */
  ASSERT(split_worth(&j, 850, 3, 100, 0)); /* 425 + 400 < 850 with k = 2 */
  ASSERT(!split_worth(&j, 800, 3, 100, 0)); /* 400 + 400 = 800 */
  j.in.sgemm.m = 512;
  j.in.sgemm.trans_a = 1;
  ASSERT_EQ(split_kind(&j), SPLIT_NONE); /* row blocks of A^T are not contiguous */
  j.in.sgemm.trans_a = 0;
  j.pin_device = 0;
  ASSERT_EQ(split_kind(&j), SPLIT_NONE); /* pinned */
  j.pin_device = -1;
  j.in.sgemm.b.where = SPAN_RES;
  ASSERT_EQ(split_kind(&j), SPLIT_NONE); /* resident operands stay where they are */
  j.in.sgemm.b.where = SPAN_HOST;
  j.out_kind = OUT_RES_NEW;
  ASSERT_EQ(split_kind(&j), SPLIT_NONE);

  j = job_with(PROTO_M_REDUCE, NULL, 0);
  j.in.reduce.x = (gkcd_span){dummy, 4, SPAN_HOST, 0, 0, 0};
  j.in.reduce.n = 1000;
  ASSERT_EQ(split_kind(&j), SPLIT_NONE); /* too short to be worth parts */
  j.in.reduce.n = 1 << 22;
  ASSERT_EQ(split_kind(&j), SPLIT_REDUCE);
  ASSERT(split_worth(&j, 3000, 3, 100, 0));

  j = job_with(PROTO_M_UPLOAD, NULL, 0);
  ASSERT_EQ(split_kind(&j), SPLIT_NONE);
  j.replicate = 1;
  ASSERT_EQ(split_kind(&j), SPLIT_COPIES);
  ASSERT(split_worth(&j, 1, 3, 1e9, 0)); /* a replicate always goes to every device */

  double h = split_measure_handoff();
  ASSERT(h > 0 && h < 1e6);
  fprintf(stderr, "measured hand-off: %.1f us\n", h);
}

/* --- place_home ----------------------------------------------------------- */

static void test_home(void) {
  uint64_t room[4] = {100, 100, 100, 100};
  int homes[4] = {0, 0, 0, 0};
  ASSERT_EQ(place_home(4, 0, -1, room, homes, 10), -1);   /* nothing live */
  ASSERT_EQ(place_home(4, 15, -1, room, homes, 10), 0);   /* all equal: the lower index */
  ASSERT_EQ(place_home(4, 15, 2, room, homes, 10), 2);    /* the home, while it has room */
  ASSERT_EQ(place_home(4, 11, 2, room, homes, 10), 0);    /* a lost home: another */
  homes[0] = 2, homes[1] = 1, homes[3] = 1;
  ASSERT_EQ(place_home(4, 15, -1, room, homes, 10), 2);   /* the fewest homes */
  room[1] = 150;
  homes[2] = 1;
  ASSERT_EQ(place_home(4, 15, -1, room, homes, 10), 1);   /* then the most room */
  /* A home without room: the fewest homes among those with room, the
   * connection itself not counted at its old home.  Homes 2 1 1 1, room
   * 200 150 50 100: from home 2 (no room for 60), devices 1 and 3 count 1,
   * 1 has more room; from home 0, which has room for 160, it stays. */
  room[0] = 200;
  room[2] = 50;
  ASSERT_EQ(place_home(4, 15, 2, room, homes, 60), 1);
  ASSERT_EQ(place_home(4, 15, 0, room, homes, 160), 0);
  room[0] = 100, room[1] = 100, homes[0] = 2, homes[1] = 2, homes[2] = 2, homes[3] = 2;
  ASSERT_EQ(place_home(4, 15, 2, room, homes, 60), 0);  /* 0, 1, 3 count 2: the lower index */
  homes[0] = 2, homes[3] = 0;
  ASSERT_EQ(place_home(4, 15, 0, room, homes, 160), 3); /* no room anywhere: the fewest homes */
  /* Nowhere has room: the usual choice among all live (the upload then
   * fails there, out of memory, as before). */
  ASSERT_EQ(place_home(4, 14, -1, room, homes, 1000), 3);
  /* Against brute force. */
  for (int t = 0; t < 20000; t++) {
    int n = 1 + (int)(next_u64() % 4), home = (int)(next_u64() % 5) - 1;
    uint64_t live = next_u64() & ((1u << n) - 1), bytes = next_u64() % 100;
    for (int d = 0; d < 4; d++) room[d] = next_u64() % 200, homes[d] = (int)(next_u64() % 4);
    if (home >= n) home = -1;
    if (home >= 0 && !homes[home]) homes[home] = 1;
    int want = -1;
    if (home >= 0 && (live >> home & 1) && room[home] >= bytes) {
      want = home;
    } else {
      int any_room = 0;
      for (int d = 0; d < n; d++) any_room |= (live >> d & 1) && room[d] >= bytes;
      for (int d = 0; d < n; d++) {
        if (!(live >> d & 1) || (any_room && room[d] < bytes)) continue;
        int h = homes[d] - (d == home), hw = want >= 0 ? homes[want] - (want == home) : 0;
        if (want < 0 || h < hw || (h == hw && room[d] > room[want])) want = d;
      }
    }
    ASSERT_EQ(place_home(n, live, home, room, homes, bytes), want);
  }
}

int main(void) {
  g_devs.n = 3;
  for (int i = 0; i < 3; i++) {
    g_be[i].device = i;
    g_devs.dev[i].be = &g_be[i];
  }
  test_pick();
  test_operands();
  test_split();
  test_home();
  printf("test_place: ok\n");
  return 0;
}
