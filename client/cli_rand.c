/* cli_rand.c: reproducible random test data (splitmix64). */
#include <time.h>
#include <unistd.h>

#include "cli.h"

void cli_rng_init(cli_rng *r, uint64_t seed) { r->state = seed; }

uint64_t cli_rng_next(cli_rng *r) {
  uint64_t z = (r->state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

double cli_rng_unit(cli_rng *r) { return (double)((cli_rng_next(r) >> 11) + 1) * 0x1p-53; }

void cli_rng_fill(cli_rng *r, float *x, size_t n) {
  int any = 0;
  for (size_t i = 0; i < n; i++) {
    x[i] = (float)(2.0 * cli_rng_unit(r) - 1.0);
    any |= x[i] != 0.0f;
  }
  if (n && !any) x[0] = 1.0f; /* a chance of 2^-53 per value, but the promise is kept */
}

uint64_t cli_default_seed(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  cli_rng r = {((uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec) ^
               ((uint64_t)getpid() << 32)};
  return cli_rng_next(&r) & 0xffffffffu; /* short enough to retype with --seed */
}
