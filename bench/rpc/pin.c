/* pin.c: where the bench and the servers run.  On some machines (VMs
 * especially) a wake-up that crosses CPUs costs more than the request, and
 * the scheduler's choice flips from run to run; so each placement is a
 * choice made here, not left to chance. */
#include <sched.h>
#include <stdio.h>

#include "rpc.h"

/* "0,1,5": the CPUs of set. */
static void cpu_list(const cpu_set_t *set, char *buf, size_t n) {
  size_t len = 0;
  buf[0] = 0;
  for (int c = 0; c < CPU_SETSIZE && len < n; c++)
    if (CPU_ISSET(c, set)) len += (size_t)snprintf(buf + len, n - len, "%s%d", len ? "," : "", c);
}

int pin_plan(int mode, const cpu_set_t *all, placement *pl) {
  int n = CPU_COUNT(all);
  if (mode == PIN_SPLIT && n < 2) return -1;
  pl->mode = mode;
  CPU_ZERO(&pl->bench);
  CPU_ZERO(&pl->server);
  for (int c = 0, k = 0; c < CPU_SETSIZE; c++) {
    if (!CPU_ISSET(c, all)) continue;
    if (mode == PIN_NONE || (mode == PIN_SAME && k == 0))
      CPU_SET(c, &pl->bench), CPU_SET(c, &pl->server);
    else if (mode == PIN_SPLIT) CPU_SET(c, k < n / 2 ? &pl->bench : &pl->server);
    k++;
  }
  cpu_list(&pl->bench, pl->bench_list, sizeof pl->bench_list);
  cpu_list(&pl->server, pl->server_list, sizeof pl->server_list);
  return 0;
}
