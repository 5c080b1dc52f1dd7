/* e2e_shm_cli.c: the gkc CLI gets libgkc's transparent shared memory, and
 * --no-shm (or GKC_NO_SHM=1) turns it off.
 *
 * Whether a run used the arena is read from gkcd's counters: each gkc run
 * is one connection, whose arena, when it has one, costs one shm_register.
 * The printed values must not depend on the path. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fixture.h"
#include "gkc.h"
#include "test.h"

static const char *gkc_bin;
static fixture F;

/* requests of method `name` gkcd has served, from its status. */
static long requests_of(const char *name) {
  gkc_conn *c;
  if (gkc_connect(&c, F.sock) != 0) TEST_FAIL("connect: %s", gkc_errmsg(c));
  char *json, key[64];
  ASSERT_EQ(gkc_status_json(c, &json), 0);
  snprintf(key, sizeof key, "\"%s\": {\"requests\": ", name);
  const char *p = strstr(json, key);
  if (!p) TEST_FAIL("status has no counters for %s", name);
  long n = strtol(p + strlen(key), NULL, 10);
  free(json);
  gkc_close(c);
  return n;
}

/* Runs gkc with args (NULL-terminated) and env ("K=V" or NULL); its stdout
 * into out (NUL-terminated); returns its exit status. */
static int run(const char *const *args, const char *env, char *out, size_t outlen) {
  char path[400];
  snprintf(path, sizeof path, "%s/gkc.out", F.dir);
  pid_t pid = fork();
  ASSERT(pid >= 0);
  if (pid == 0) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || dup2(fd, 1) < 0) _exit(125);
    if (env) putenv((char *)env);
    const char *argv[32];
    int n = 0;
    argv[n++] = gkc_bin;
    for (int i = 0; args[i] && n < 31; i++) argv[n++] = args[i];
    argv[n] = NULL;
    execv(gkc_bin, (char *const *)argv);
    _exit(126);
  }
  int st;
  ASSERT_EQ(waitpid(pid, &st, 0), pid);
  FILE *f = fopen(path, "r");
  ASSERT(f);
  size_t k = fread(out, 1, outlen - 1, f);
  out[k] = 0;
  fclose(f);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* The "value" of gkc reduce --json's object. */
static void value_of(const char *json, char *dst, size_t n) {
  const char *p = strstr(json, "\"value\": ");
  if (!p) TEST_FAIL("no value in: %s", json);
  p += strlen("\"value\": ");
  size_t k = strcspn(p, ",}");
  snprintf(dst, n, "%.*s", (int)k, p);
}

int main(void) {
  gkc_bin = getenv("GKC_BIN");
  if (!gkc_bin) TEST_SKIP("GKC_BIN is not set (the gkc CLI was not built)");
  unsetenv("GKC_NO_SHM");
  unsetenv("GKC_SHM_THRESHOLD");
  unsetenv("GKC_SHM_MAX_BYTES");
  fixture_start(&F, NULL, NULL);
  char out[8192], want[64], got[64];

  /* --help says so, globally and for a command. */
  const char *help[] = {"--help", NULL}, *rhelp[] = {"reduce", "--help", NULL};
  ASSERT_EQ(run(help, NULL, out, sizeof out), 0);
  ASSERT_CONTAINS(out, "--no-shm");
  ASSERT_CONTAINS(out, "GKC_NO_SHM");
  ASSERT_EQ(run(rhelp, NULL, out, sizeof out), 0);
  ASSERT_CONTAINS(out, "--no-shm");

  /* 1 Mi floats (4 MiB): over the default threshold, through the arena. */
  const char *big[] = {"--socket", F.sock, "reduce", "--random", "1048576", "--seed", "7",
                       "--json", NULL};
  long r0 = requests_of("shm_register");
  ASSERT_EQ(run(big, NULL, out, sizeof out), 0);
  value_of(out, want, sizeof want);
  ASSERT_EQ(requests_of("shm_register"), r0 + 1);

  /* --no-shm, before or after the command, and GKC_NO_SHM: the same value,
   * no region. */
  const char *off1[] = {"--socket", F.sock, "--no-shm", "reduce", "--random", "1048576", "--seed",
                        "7", "--json", NULL};
  const char *off2[] = {"--socket", F.sock, "reduce", "--random", "1048576", "--seed", "7",
                        "--json", "--no-shm", NULL};
  const char *const *offs[] = {off1, off2, big};
  for (int k = 0; k < 3; k++) {
    ASSERT_EQ(run(offs[k], k == 2 ? "GKC_NO_SHM=1" : NULL, out, sizeof out), 0);
    value_of(out, got, sizeof got);
    ASSERT_STR_EQ(got, want);
    ASSERT_EQ(requests_of("shm_register"), r0 + 1);
  }

  /* Small arrays never need one. */
  const char *small[] = {"--socket", F.sock, "reduce", "--random", "1000", NULL};
  ASSERT_EQ(run(small, NULL, out, sizeof out), 0);
  ASSERT_EQ(requests_of("shm_register"), r0 + 1);

  /* sgemm's A, B and C through the arena, checked against gkc's own reference. */
  const char *sg[] = {"--socket", F.sock, "sgemm", "--random", "384x384x384", "--check", NULL};
  ASSERT_EQ(run(sg, NULL, out, sizeof out), 0);
  ASSERT_CONTAINS(out, "check:          passed");
  ASSERT_EQ(requests_of("shm_register"), r0 + 2);

  ASSERT_EQ(fixture_stop(&F, SIGTERM), 0);
  printf("e2e_shm_cli: all passed\n");
  return 0;
}
