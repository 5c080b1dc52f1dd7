/* cputime.c: what CPU time the bench, a server and the whole machine used
 * during a run: the cost per request on each side, and a check that nothing
 * else was running. */
#include <dirent.h>
#include <stdio.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "rpc.h"

uint64_t cputime_self_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* CPU time of every thread of pid, from /proc/PID/task/TID/schedstat (its
 * first field is ns on a CPU).  -1 when unreadable (another user's daemon). */
int64_t cputime_proc_ns(pid_t pid) {
  char path[300];
  snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
  DIR *d = opendir(path);
  if (!d) return -1;
  int64_t sum = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    snprintf(path, sizeof path, "/proc/%d/task/%s/schedstat", (int)pid, e->d_name);
    FILE *f = fopen(path, "r");
    unsigned long long ns;
    if (f && fscanf(f, "%llu", &ns) == 1) sum += (int64_t)ns;
    if (f) fclose(f);
  }
  closedir(d);
  return sum;
}

/* Busy (steal excluded) and stolen CPU time of the whole machine, in ns,
 * from the first line of /proc/stat; both 0 when unreadable. */
void cputime_machine_ns(int64_t *busy, int64_t *steal) {
  unsigned long long v[8] = {0};
  *busy = *steal = 0;
  FILE *f = fopen("/proc/stat", "r");
  if (!f) return;
  int n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3],
                 &v[4], &v[5], &v[6], &v[7]);
  fclose(f);
  if (n != 8) return;
  double ns_per_tick = 1e9 / (double)sysconf(_SC_CLK_TCK);
  *busy = (int64_t)((double)(v[0] + v[1] + v[2] + v[5] + v[6]) * ns_per_tick);
  *steal = (int64_t)((double)v[7] * ns_per_tick);
}
