/* server_loop.c: the loop's run (server_run, with --spin-us polling and
 * server_expect's hints, the shared-memory rings polled while it spins and
 * their doorbells asked for before it sleeps) and its end once a drain has nothing left
 * (server_maybe_finish).  Apart from server.c, which wires rpc.c in, so that
 * rpc.c can call these without a circle. */
#include <sched.h>
#include <time.h>

#include "log.h"
#include "server.h"

void server_maybe_finish(gkcd_server *srv) {
  static int finished;
  if (!srv->draining || finished || srv->conns.n > 0 || srv->in_flight > 0) return;
  finished = 1;
  pool_stop(srv->pool);
  srv->pool = NULL;
  uv_close((uv_handle_t *)&srv->done, NULL); /* no worker is left to finish a job */
  sched_destroy(srv->sched);
  srv->sched = NULL; /* freed once its timer closes; nothing may pump it now */
  conn_linger_close_all(&srv->conns);
  /* Closing the signal handles would give SIGTERM back its default action,
   * and a second signal during teardown would kill us with a non-zero
   * status.  Unreferenced, they let uv_run return; server_close blocks the
   * signals before closing them. */
  uv_unref((uv_handle_t *)&srv->sigint);
  uv_unref((uv_handle_t *)&srv->sigterm);
  log_info("all requests answered; exiting");
}

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void server_expect(gkcd_server *srv, double cost_us) {
  const uint64_t spin_ns = (uint64_t)srv->cfg.spin_us * 1000;
  if (!spin_ns || !(cost_us > 0) || cost_us * 1e3 > (double)(SERVER_SPIN_AHEAD * spin_ns)) return;
  uint64_t end = now_ns() + (uint64_t)(cost_us * 1e3) + spin_ns;
  if (end > srv->expect_ns) srv->expect_ns = end;
}

void server_run(gkcd_server *srv) {
  const uint64_t spin_ns = (uint64_t)srv->cfg.spin_us * 1000;
  uint64_t until = 0, seen = srv->events;
  for (;;) {
    int alive;
    uint64_t now = spin_ns ? now_ns() : 0;
    if (spin_ns && (now < until || now < srv->expect_ns)) {
      srv->polling = 1;
      if (srv->conns.nrings) (void)conn_rings_poll(&srv->conns, 1); /* clients ring no doorbell meanwhile */
      /* Finished jobs are answered as soon as they are queued, not after
       * the async handle's eventfd has gone round the poll (3-3.5 us of
       * every GPU request's hand-back on the H200 host). */
      if (job_done_waiting(&srv->done_q)) srv->take_done(&srv->done);
      alive = uv_run(srv->loop, UV_RUN_NOWAIT);
      srv->polling = 0;
      sched_yield(); /* the CPU goes to whoever else needs it first */
    } else if (srv->conns.nrings && conn_rings_poll(&srv->conns, 0)) {
      /* A ring had work after all (it arrived as its flags went up): what
       * it started is looked at before sleeping. */
      alive = uv_run(srv->loop, UV_RUN_NOWAIT);
    } else {
      alive = uv_run(srv->loop, UV_RUN_ONCE);
    }
    if (!alive) return;
    if (spin_ns && srv->events != seen) {
      seen = srv->events;
      until = now_ns() + spin_ns;
    }
  }
}
