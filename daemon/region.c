/* region.c: see region.h. */
#include "region.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "gkc_errors.h"
#include "log.h"
#include "pinner.h"

void region_map(gkcd_backend *be, gkcd_job *job) {
  int fd = job->reg_fd;
  job->reg_fd = -1;
  struct stat st;
  if (fstat(fd, &st) != 0) {
    job_fail(job, GKC_EINVALID_ARGUMENT, "the descriptor cannot be inspected: %s", strerror(errno));
    goto out;
  }
  if (!S_ISREG(st.st_mode)) {
    job_fail(job, GKC_EINVALID_ARGUMENT, "the descriptor is not a memfd or regular file");
    goto out;
  }
  int seals = fcntl(fd, F_GET_SEALS);
  int need = F_SEAL_SHRINK | F_SEAL_GROW;
  if (seals < 0 || (seals & need) != need) {
    job_fail(job, GKC_EINVALID_ARGUMENT, "the memfd is not sealed against resizing: add"
             " F_SEAL_SHRINK and F_SEAL_GROW (fcntl F_ADD_SEALS) before sending it");
    goto out;
  }
  if ((uint64_t)st.st_size != job->out_bytes) {
    job_fail(job, GKC_EINVALID_ARGUMENT, "argument 'bytes' is %zu but the memfd holds %lld bytes",
             job->out_bytes, (long long)st.st_size);
    goto out;
  }
  job->reg_dev = (uint64_t)st.st_dev;
  job->reg_ino = job->reg_reuse ? (uint64_t)st.st_ino : 0; /* kept after its connection, if asked */
  /* The same file registered before, by a connection since closed (a
   * client's kept region, pinner.h): its mapping and registration serve. */
  int pinned = 0;
  void *p = job->reg_keep ? pinner_take_kept(job->reg_keep, job->reg_dev, (uint64_t)st.st_ino,
                                             job->out_bytes, &pinned)
                          : NULL;
  if (p) {
    job->out_ptr = p;
    job->reg_pinned = pinned;
    log_debug("shm_register: a kept %zu-byte region taken again%s", job->out_bytes,
              pinned ? " (registered for DMA)" : "");
    goto out;
  }
  p = mmap(NULL, job->out_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    job_fail(job, errno == ENOMEM ? GKC_EOUT_OF_MEMORY : GKC_EINVALID_ARGUMENT,
             "cannot map the region: %s", strerror(errno));
    goto out;
  }
  job->out_ptr = p;
  /* Registered for DMA later, off the request's path (pinner.h), unless the
   * client asked to wait for it: it set the region up ahead of its calls
   * (gkc_shm_reserve), and wants the first of them to copy from it directly. */
  if (job->reg_pin && be && be->region_pin) {
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int rc = be->region_pin(be, p, job->out_bytes);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    job->reg_pinned = rc == 0;
    if (job->out_bytes >= ((size_t)64 << 20) || rc)
      log_info("registered a %zu MiB region for DMA before answering, in %.1f ms%s",
               job->out_bytes >> 20,
               (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6,
               rc ? " (refused: copied through the pinned ring instead)" : "");
  }
out:
  close(fd);
}
