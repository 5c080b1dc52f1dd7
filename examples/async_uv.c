/* async_uv.c: a libuv program that keeps reductions in flight on gkcd
 * while its own timer keeps ticking.
 *
 * One gkc_async connection, driven by the program's libuv loop through
 * gkc_async_attach_uv, keeps WINDOW sums in flight; each callback checks
 * its result and sends the next.  A 20 ms timer prints progress meanwhile:
 * nothing blocks the loop.  After TOTAL sums the context closes and
 * uv_run returns.
 *   cc async_uv.c $(pkg-config --cflags --libs gkc-uv) -o async_uv
 *   ./async_uv [SOCKET]
 */
#include <gkc_uv.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define N 4096
#define WINDOW 8
#define TOTAL 20000

static float x[N];
static double want;
static int sent, done, wrong, ticks;
static uv_timer_t timer;

static void send_next(gkc_async *ac);

static void on_sum(gkc_async *ac, const gkc_result *res, void *userdata) {
  (void)userdata;
  done++;
  if (res->status != 0) {
    fprintf(stderr, "async_uv: %s: %s\n", gkc_errname(res->status), res->errmsg);
    wrong++;
  } else if (fabs(res->value - want) > 1e-3 * fabs(want) + 1e-3) {
    wrong++;
  }
  if (sent < TOTAL && res->status == 0) send_next(ac); /* from inside the callback */
  if (done == sent) {                     /* the last one in flight */
    uv_timer_stop(&timer);
    uv_close((uv_handle_t *)&timer, NULL);
    gkc_async_close(ac);                  /* lets uv_run return */
  }
}

static void send_next(gkc_async *ac) {
  gkc_reduce_args a = GKC_REDUCE_ARGS_INIT;
  a.x = gkc_ref_mem(x, sizeof x); /* x stays untouched while in flight */
  if (gkc_async_reduce(ac, &a, on_sum, NULL) == 0)
    sent++;
  else
    fprintf(stderr, "async_uv: %s\n", gkc_async_errmsg(ac));
}

static void on_tick(uv_timer_t *t) {
  (void)t;
  printf("tick %d: %d sums done, %d in flight\n", ++ticks, done, sent - done);
}

int main(int argc, char **argv) {
  for (int i = 0; i < N; i++) x[i] = (float)(i % 100) / 100.0f, want += x[i];
  uv_loop_t *loop = uv_default_loop();
  gkc_async *ac;
  if (gkc_async_connect(&ac, argc > 1 ? argv[1] : NULL) != 0) {
    fprintf(stderr, "async_uv: %s\n", gkc_async_errmsg(ac));
    gkc_async_close(ac);
    return 1;
  }
  if (gkc_async_attach_uv(ac, loop) != 0) {
    fprintf(stderr, "async_uv: cannot watch the connection\n");
    gkc_async_close(ac);
    return 1;
  }
  uv_timer_init(loop, &timer);
  uv_timer_start(&timer, on_tick, 20, 20);
  for (int i = 0; i < WINDOW; i++) send_next(ac);
  uv_run(loop, UV_RUN_DEFAULT);
  printf("%d sums of %d floats, %d wrong or failed (want %.2f each)\n", done, N, wrong, want);
  uv_loop_close(loop);
  return wrong ? 1 : 0;
}
