/* mdwe_exec.c: run a program under the same restriction as systemd's
 * MemoryDenyWriteExecute=yes, to find out whether gkcd (and the CUDA
 * runtime inside it) can live with it.
 *
 *   mdwe_exec PROGRAM [ARGS...]
 *
 * Installs a seccomp filter, as systemd does, that fails with EPERM every
 * mmap asking for PROT_WRITE|PROT_EXEC, every mprotect or pkey_mprotect
 * adding PROT_EXEC, and shmat with SHM_EXEC, then execs PROGRAM. */
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/shm.h>
#include <sys/syscall.h>
#include <unistd.h>

#define ARG_LO(n) offsetof(struct seccomp_data, args[n])
#define DENY (SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA))

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: mdwe_exec PROGRAM [ARGS...]\n");
    return 2;
  }
  struct sock_filter f[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_mmap, 0, 3),          /* 4 */
      /* mmap(addr, len, prot, ...): deny when prot has both WRITE and EXEC */
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LO(2)),                 /* 5 */
      BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, PROT_WRITE, 0, 9),        /* 6 */
      BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, PROT_EXEC, 7, 8),         /* 7 */
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_mprotect, 1, 0),       /* 8 */
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_pkey_mprotect, 0, 2),  /* 9 */
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LO(2)),                 /* 10 */
      BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, PROT_EXEC, 3, 4),         /* 11 */
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_shmat, 0, 3),          /* 12 */
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LO(2)),                 /* 13 */
      BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, SHM_EXEC, 0, 1),          /* 14 */
      BPF_STMT(BPF_RET | BPF_K, DENY),                               /* 15 */
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),                  /* 16 */
  };
  struct sock_fprog prog = {(unsigned short)(sizeof f / sizeof f[0]), f};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
      prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) {
    fprintf(stderr, "mdwe_exec: cannot install the filter: %s\n", strerror(errno));
    return 1;
  }
  /* Prove the filter works before trusting a success of the program. */
  void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p != MAP_FAILED) {
    fprintf(stderr, "mdwe_exec: the filter did not refuse a W+X mapping\n");
    return 1;
  }
  p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED || mprotect(p, 4096, PROT_READ | PROT_EXEC) == 0) {
    fprintf(stderr, "mdwe_exec: the filter did not refuse mprotect(PROT_EXEC)\n");
    return 1;
  }
  execv(argv[1], argv + 1);
  fprintf(stderr, "mdwe_exec: exec %s: %s\n", argv[1], strerror(errno));
  return 127;
}
