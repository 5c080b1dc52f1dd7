/* fdstore.c: see fdstore.h.
 *
 * The manifest (memfd "gkc-manifest"), little-endian:
 *   header, 40 bytes: magic "GKCFDST1", u32 version (2; 1 is read too), u32 count,
 *     u64 shared_instance, u64 total bytes saved, u32 objects' next id hint
 *     (unused, 0), u32 reserved (0)
 *   count entries of 88 bytes (72 in version 1, without the masks): u32 id,
 *     u32 kind (1 array, 2 matrix),
 *     u32 dtype (0 f32, 1 i32, 2 f64: proto_dtypes.h; a matrix's is its values'), i32 uid,
 *     i32 rows, i32 cols, i64 nnz,
 *     u64 bytes (the object's), u64 saved (bytes in its memfd: a matrix's
 *     arrays and its spmv plan), u64 plan_off, i32 algo, i32 max_row,
 *     u32 crc32 of the saved bytes, i32 device,
 *     u64 rep_mask (a replicated object's devices, else 0),
 *     u64 part_mask (a partitioned matrix's devices, else 0)
 *   u32 crc32 of everything before it.
 * Object i's bytes are the memfd named "gkc-obj-<id>", exactly `saved`
 * long, sealed against any change: a replicated object's one copy (they are
 * equal, read-only), a partitioned matrix as the CSR it was made from (row
 * blocks, halos and send lists are rebuilt from it: they depend on how many
 * devices the next gkcd has).
 */
#include "fdstore.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <systemd/sd-daemon.h>
#include <time.h>
#include <unistd.h>

#include "backend.h"
#include "budget.h"
#include "crc.h"
#include "log.h"
#include "part.h"
#include "res_object.h"

#define MAGIC "GKCFDST1"
#define VERSION 2
#define HEAD 40
#define ENTRY 88
#define ENTRY_V1 72
#define MANIFEST_NAME "gkc-manifest"
#define OBJ_PREFIX "gkc-obj-"
#define MAX_FDS 8192 /* what systemd passes at most that we look at */

typedef struct {
  uint32_t id, kind, dtype;
  int32_t uid, rows, cols;
  int64_t nnz;
  uint64_t bytes, saved, plan_off;
  int32_t algo, max_row;
  uint32_t crc;
  int32_t device;
  uint64_t rep_mask, part_mask;
} entry;

/* Milliseconds on the monotonic clock: the save's and the restore's cost, logged. */
static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* --- little-endian fields ------------------------------------------------------------ */

static void put32(unsigned char *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static void put64(unsigned char *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static uint32_t get32(const unsigned char *p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; i--) v = v << 8 | p[i];
  return v;
}
static uint64_t get64(const unsigned char *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
  return v;
}

static void put_entry(unsigned char *p, const entry *e) {
  put32(p, e->id), put32(p + 4, e->kind), put32(p + 8, e->dtype), put32(p + 12, (uint32_t)e->uid);
  put32(p + 16, (uint32_t)e->rows), put32(p + 20, (uint32_t)e->cols), put64(p + 24, (uint64_t)e->nnz);
  put64(p + 32, e->bytes), put64(p + 40, e->saved), put64(p + 48, e->plan_off);
  put32(p + 56, (uint32_t)e->algo), put32(p + 60, (uint32_t)e->max_row);
  put32(p + 64, e->crc), put32(p + 68, (uint32_t)e->device);
  put64(p + 72, e->rep_mask), put64(p + 80, e->part_mask);
}

static void get_entry(const unsigned char *p, uint32_t version, entry *e) {
  e->id = get32(p), e->kind = get32(p + 4), e->dtype = get32(p + 8), e->uid = (int32_t)get32(p + 12);
  e->rows = (int32_t)get32(p + 16), e->cols = (int32_t)get32(p + 20), e->nnz = (int64_t)get64(p + 24);
  e->bytes = get64(p + 32), e->saved = get64(p + 40), e->plan_off = get64(p + 48);
  e->algo = (int32_t)get32(p + 56), e->max_row = (int32_t)get32(p + 60);
  e->crc = get32(p + 64), e->device = (int32_t)get32(p + 68);
  e->rep_mask = version >= 2 ? get64(p + 72) : 0;
  e->part_mask = version >= 2 ? get64(p + 80) : 0;
}

/* --- saving -------------------------------------------------------------------------------- */

/* A sealed memfd of n bytes filled by fill (0) or -1 after logging. */
static int sealed_memfd(const char *name, size_t n, int (*fill)(void *dst, void *arg), void *arg) {
  int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) {
    log_warn("fd store: memfd_create(%s): %s", name, strerror(errno));
    return -1;
  }
  void *p = MAP_FAILED;
  if (ftruncate(fd, (off_t)n) != 0) {
    log_warn("fd store: %s: cannot size it to %zu bytes: %s", name, n, strerror(errno));
    goto fail;
  }
  p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    log_warn("fd store: %s: mmap of %zu bytes: %s", name, n, strerror(errno));
    goto fail;
  }
  if (fill(p, arg) != 0) goto fail;
  if (munmap(p, n) != 0) log_warn("fd store: munmap: %s", strerror(errno));
  p = MAP_FAILED;
  /* Sealed: what systemd keeps cannot change or be resized by anyone. */
  if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) != 0) {
    log_warn("fd store: sealing %s: %s", name, strerror(errno));
    goto fail;
  }
  return fd;
fail:
  if (p != MAP_FAILED) munmap(p, n);
  close(fd);
  return -1;
}

typedef struct {
  gkcd_residents *t;
  gkcd_res *r;
  entry *e;
} obj_fill;

static int fill_object(void *dst, void *arg) {
  obj_fill *f = arg;
  gkcd_backend *be = f->t->devs->dev[f->r->device].be;
  char msg[256] = "";
  const gkcd_res *r = f->r;
  int rc;
  if (r->part) { /* the CSR it was made from, in a resident matrix's layout */
    char *d = dst;
    rc = part_to_csr(r->part, (int32_t *)d, (int32_t *)(d + ((size_t)r->rows + 1) * 4),
                     (float *)(d + res_values_offset(r->rows, r->nnz, DT_F32)), msg, sizeof msg);
  } else {
    rc = be->part->to_host(be, dst, r->ptr, f->e->saved, msg, sizeof msg);
  }
  if (rc != 0) {
    log_warn("fd store: copying object %" PRIu32 " to the host: %s", f->r->id, msg);
    return -1;
  }
  f->e->crc = crc_bytes(dst, f->e->saved);
  return 0;
}

typedef struct {
  const unsigned char *bytes;
  size_t n;
} buf_fill;

static int fill_buf(void *dst, void *arg) {
  buf_fill *b = arg;
  memcpy(dst, b->bytes, b->n);
  return 0;
}

/* Hands fd to systemd's store under name; 0, or -1 after logging. */
static int store(int fd, const char *name) {
  char state[128];
  snprintf(state, sizeof state, "FDSTORE=1\nFDNAME=%s", name);
  int rc = sd_pid_notify_with_fds(0, 0, state, &fd, 1);
  if (rc <= 0) {
    log_warn("fd store: handing %s to systemd failed: %s", name, rc < 0 ? strerror(-rc) :
             "NOTIFY_SOCKET is not set");
    return -1;
  }
  return 0;
}

/* Device d can give its objects' bytes back to the host. */
static int readable(gkcd_residents *t, int d) {
  if (d < 0 || d >= t->devs->n) return 0;
  gkcd_backend *be = t->devs->dev[d].be;
  return be->part && be->part->to_host && !atomic_load(&be->lost);
}

/* The shared objects that can be saved: arrays and matrices whose
 * device(s) can copy to the host (a replicated one's home copy; every
 * block of a partitioned one, float32 as partitioning makes them). */
static int savable(gkcd_residents *t, const gkcd_res *r) {
  if (r->owner || r->released || r->kind == RES_REGION) return 0;
  if (r->part) {
    if (r->kind != RES_MATRIX || r->dtype != DT_F32) return 0;
    for (int j = 0; j < r->part->plan.k; j++)
      if (!readable(t, r->part->dev[j])) return 0;
    return 1;
  }
  return r->ptr && readable(t, r->device);
}

/* What object r takes in its memfd: an array's bytes; a matrix's arrays and
 * its spmv plan; a partitioned matrix's CSR. */
static uint64_t saved_bytes(const gkcd_res *r) {
  if (r->part) return res_values_offset(r->rows, r->nnz, DT_F32) + (uint64_t)r->nnz * 4;
  return r->plan_off ? r->cap : r->bytes;
}

void fdstore_save(gkcd_residents *t, size_t max_bytes) {
  int nshared = 0, nsavable = 0;
  uint64_t want = 0;
  for (int b = 0; b < RES_BUCKETS; b++)
    for (gkcd_res *r = t->bucket[b]; r; r = r->next)
      if (!r->owner && r->kind != RES_REGION) {
        nshared++;
        if (savable(t, r)) nsavable++, want += saved_bytes(r);
      }
  if (nshared == 0) return;
  const char *ns = getenv("NOTIFY_SOCKET");
  if (!ns || !*ns) {
    log_info("not under systemd (no NOTIFY_SOCKET): releasing %d shared object(s) instead of"
             " saving them in an fd store", nshared);
    return;
  }
  if (max_bytes == 0) {
    log_info("--restore-max-bytes is 0: releasing %d shared object(s) instead of saving them",
             nshared);
    return;
  }
  if (nsavable < nshared)
    log_warn("fd store: %d shared object(s) are on a lost device: released, not saved",
             nshared - nsavable);
  double t0 = now_ms();
  entry *es = calloc((size_t)nsavable + 1, sizeof *es);
  unsigned char *man = NULL;
  if (!es) {
    log_warn("fd store: out of memory: releasing the shared objects");
    return;
  }
  int n = 0;
  uint64_t total = 0;
  for (int b = 0; b < RES_BUCKETS; b++)
    for (gkcd_res *r = t->bucket[b]; r; r = r->next) {
      if (!savable(t, r) || n >= nsavable) continue;
      entry *e = &es[n];
      e->saved = saved_bytes(r);
      if (e->saved > max_bytes - total) {
        log_warn("fd store: object %" PRIu32 " (%" PRIu64 " bytes) would take the saved bytes"
                 " past --restore-max-bytes %zu: released", r->id, e->saved, max_bytes);
        continue;
      }
      e->id = r->id, e->kind = (uint32_t)r->kind, e->dtype = (uint32_t)r->dtype, e->uid = r->uid;
      e->rows = r->rows, e->cols = r->cols, e->nnz = r->nnz, e->bytes = r->bytes;
      e->plan_off = r->plan_off, e->algo = r->algo, e->max_row = r->max_row;
      e->device = r->device;
      e->rep_mask = r->copies ? r->rep_mask : 0;
      if (r->part) e->part_mask = r->part->mask, e->bytes = e->saved, e->plan_off = 0;
      char name[32];
      snprintf(name, sizeof name, OBJ_PREFIX "%" PRIu32, r->id);
      obj_fill f = {t, r, e};
      int fd = sealed_memfd(name, e->saved, fill_object, &f);
      if (fd < 0) goto abandon;
      int rc = store(fd, name);
      close(fd); /* systemd holds its own copy */
      if (rc) goto abandon;
      total += e->saved;
      n++;
    }
  size_t mlen = HEAD + (size_t)n * ENTRY + 4;
  if (!(man = calloc(1, mlen))) goto abandon;
  memcpy(man, MAGIC, 8);
  put32(man + 8, VERSION), put32(man + 12, (uint32_t)n);
  put64(man + 16, t->shared_instance), put64(man + 24, total);
  for (int i = 0; i < n; i++) put_entry(man + HEAD + (size_t)i * ENTRY, &es[i]);
  put32(man + mlen - 4, crc_bytes(man, mlen - 4));
  buf_fill bf = {man, mlen};
  int fd = sealed_memfd(MANIFEST_NAME, mlen, fill_buf, &bf);
  if (fd < 0) goto abandon;
  int rc = store(fd, MANIFEST_NAME);
  close(fd);
  if (rc) goto abandon;
  char hex[17];
  res_instance_hex(t->shared_instance, hex);
  log_info("saved %d shared object(s), %" PRIu64 " bytes, in systemd's fd store in %.0f ms"
           " (shared instance %s); the next gkcd restores them", n, total, now_ms() - t0, hex);
  free(man);
  free(es);
  return;
abandon:
  /* Without a manifest the next start restores nothing, and removes what
   * was stored. */
  log_warn("fd store: saving stopped after %d object(s): no manifest written, nothing will be"
           " restored", n);
  free(man);
  free(es);
}

/* --- restoring ------------------------------------------------------------------------------ */

typedef struct {
  int fd;
  char *name;
  int used;
} passed;

/* Reads the whole manifest (at most max) from fd into a malloc'd buffer. */
static unsigned char *read_manifest(int fd, size_t *len, char *why, size_t whylen) {
  struct stat st;
  if (fstat(fd, &st) != 0) {
    snprintf(why, whylen, "fstat: %s", strerror(errno));
    return NULL;
  }
  size_t max = HEAD + (size_t)RES_MAX_SHARED * ENTRY + 4;
  if (!S_ISREG(st.st_mode) || st.st_size < HEAD + 4 || (uint64_t)st.st_size > max) {
    snprintf(why, whylen, "it is not a gkcd manifest (%s of %lld bytes)",
             S_ISREG(st.st_mode) ? "a file" : "not a file", (long long)st.st_size);
    return NULL;
  }
  unsigned char *m = malloc((size_t)st.st_size);
  if (!m) {
    snprintf(why, whylen, "out of memory");
    return NULL;
  }
  size_t got = 0;
  while (got < (size_t)st.st_size) {
    ssize_t r = pread(fd, m + got, (size_t)st.st_size - got, (off_t)got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      snprintf(why, whylen, "reading it: %s", r < 0 ? strerror(errno) : "short");
      free(m);
      return NULL;
    }
    got += (size_t)r;
  }
  *len = got;
  return m;
}

/* Checks one entry's fields against each other and the limits. */
static int entry_ok(const entry *e, char *why, size_t whylen) {
  if (e->id == 0) return snprintf(why, whylen, "an object with id 0"), -1;
  if (e->kind != RES_ARRAY && e->kind != RES_MATRIX)
    return snprintf(why, whylen, "object %" PRIu32 " has kind %" PRIu32, e->id, e->kind), -1;
  if (e->bytes == 0 || e->bytes % 4 || e->saved < e->bytes)
    return snprintf(why, whylen, "object %" PRIu32 ": %" PRIu64 " bytes, %" PRIu64 " saved",
                    e->id, e->bytes, e->saved), -1;
  /* An array of any dtype; a matrix's dtype is its values' (float). */
  if (e->dtype >= PROTO_DT_COUNT || (e->kind == RES_MATRIX && e->dtype == DT_I32))
    return snprintf(why, whylen, "%s %" PRIu32 " has dtype %" PRIu32,
                    e->kind == RES_ARRAY ? "array" : "matrix", e->id, e->dtype), -1;
  if (e->kind == RES_ARRAY && e->bytes % proto_dtype_size((int)e->dtype))
    return snprintf(why, whylen, "array %" PRIu32 ": %" PRIu64 " bytes of %s", e->id, e->bytes,
                    proto_dtype_wire((int)e->dtype)), -1;
  if (e->kind == RES_MATRIX) {
    if (e->rows < 1 || e->rows > INT32_MAX - 1 || e->cols < 1 || e->nnz < 0 || e->nnz > INT32_MAX)
      return snprintf(why, whylen, "matrix %" PRIu32 " has shape %" PRId32 "x%" PRId32 " nnz %" PRId64,
                      e->id, e->rows, e->cols, e->nnz), -1;
    /* row_ptr, col_idx, values: fits 64 bits by the bounds above */
    uint64_t need = res_values_offset(e->rows, e->nnz, (int)e->dtype) +
                    (uint64_t)e->nnz * proto_dtype_size((int)e->dtype);
    if (need != e->bytes)
      return snprintf(why, whylen, "matrix %" PRIu32 ": %" PRIu64 " bytes for arrays of %" PRIu64,
                      e->id, e->bytes, need), -1;
    if (e->plan_off && (e->plan_off < e->bytes || e->plan_off >= e->saved))
      return snprintf(why, whylen, "matrix %" PRIu32 ": its plan at %" PRIu64 " lies outside", e->id,
                      e->plan_off), -1;
  } else if (e->saved != e->bytes || e->plan_off) {
    return snprintf(why, whylen, "array %" PRIu32 ": saved %" PRIu64 " of %" PRIu64 " bytes", e->id,
                    e->saved, e->bytes), -1;
  }
  if (e->rep_mask && e->part_mask)
    return snprintf(why, whylen, "object %" PRIu32 " is both replicated and partitioned", e->id), -1;
  if (e->part_mask && (e->kind != RES_MATRIX || e->dtype != DT_F32 || e->plan_off || e->saved != e->bytes))
    return snprintf(why, whylen, "object %" PRIu32 ": a partitioned object must be a float32 matrix"
                    " saved as its CSR", e->id), -1;
  return 0;
}

/* The manifest parsed and checked: 0 with es (malloc'd) and *count, or -1
 * with why. */
static int parse_manifest(const unsigned char *m, size_t len, entry **es, int *count,
                          uint64_t *shared_instance, uint64_t *total, size_t max_bytes, char *why,
                          size_t whylen) {
  if (memcmp(m, MAGIC, 8) != 0) return snprintf(why, whylen, "it is not a gkcd manifest"), -1;
  /* Version 1 (before replicated and partitioned objects were saved): an
   * upgrade restarts into a newer gkcd, which reads what the older saved. */
  uint32_t version = get32(m + 8);
  if (version != 1 && version != VERSION)
    return snprintf(why, whylen, "manifest version %" PRIu32 ", this gkcd reads 1 to %d", version,
                    VERSION), -1;
  size_t esize = version == 1 ? ENTRY_V1 : ENTRY;
  uint32_t n = get32(m + 12);
  if (n > RES_MAX_SHARED || len != HEAD + (size_t)n * esize + 4)
    return snprintf(why, whylen, "the manifest names %" PRIu32 " objects in %zu bytes", n, len), -1;
  if (get32(m + len - 4) != crc_bytes(m, len - 4))
    return snprintf(why, whylen, "the manifest's checksum does not match (corrupt)"), -1;
  *shared_instance = get64(m + 16);
  *es = calloc((size_t)n + 1, sizeof **es);
  if (!*es) return snprintf(why, whylen, "out of memory"), -1;
  uint64_t sum = 0;
  for (uint32_t i = 0; i < n; i++) {
    entry *e = &(*es)[i];
    get_entry(m + HEAD + (size_t)i * esize, version, e);
    if (entry_ok(e, why, whylen) != 0) goto bad;
    for (uint32_t j = 0; j < i; j++)
      if ((*es)[j].id == e->id) {
        snprintf(why, whylen, "object %" PRIu32 " is named twice", e->id);
        goto bad;
      }
    if (e->saved > max_bytes || sum > max_bytes - e->saved) {
      snprintf(why, whylen, "the manifest names more than --restore-max-bytes %zu bytes",
               max_bytes);
      goto bad;
    }
    sum += e->saved;
  }
  if (sum != get64(m + 24)) {
    snprintf(why, whylen, "the manifest's total (%" PRIu64 ") disagrees with its entries (%" PRIu64 ")",
             get64(m + 24), sum);
    goto bad;
  }
  *count = (int)n;
  *total = sum;
  return 0;
bad:
  free(*es);
  *es = NULL;
  return -1;
}

/* Maps object e's memfd and checks its size and checksum: the mapping, or
 * NULL with why. */
static void *map_object(passed *ps, int np, const entry *e, char *why, size_t whylen) {
  char name[32];
  snprintf(name, sizeof name, OBJ_PREFIX "%" PRIu32, e->id);
  for (int i = 0; i < np; i++) {
    if (strcmp(ps[i].name, name) != 0) continue;
    ps[i].used = 1;
    struct stat st;
    if (fstat(ps[i].fd, &st) != 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size != e->saved) {
      snprintf(why, whylen, "%s is not %" PRIu64 " bytes", name, e->saved);
      return NULL;
    }
    void *p = mmap(NULL, e->saved, PROT_READ, MAP_PRIVATE, ps[i].fd, 0);
    if (p == MAP_FAILED) {
      snprintf(why, whylen, "mapping %s: %s", name, strerror(errno));
      return NULL;
    }
    if (crc_bytes(p, e->saved) != e->crc) {
      munmap(p, e->saved);
      snprintf(why, whylen, "%s's checksum does not match (a save cut short?)", name);
      return NULL;
    }
    return p;
  }
  snprintf(why, whylen, "%s is missing from the store (a save cut short?)", name);
  return NULL;
}

/* The devices of mask this gkcd has and serves (a restart may come up with
 * fewer than the one that saved). */
static uint64_t present(const gkcd_residents *t, uint64_t mask) {
  uint64_t live = 0;
  for (int d = 0; d < t->devs->n && d < GKCD_MAX_DEVICES; d++)
    if (!t->devs->dev[d].down) live |= 1ull << d;
  return mask & live;
}

/* Memory on device d holding the n bytes at src: 0, or -1 with why. */
static int to_device(gkcd_residents *t, int d, const entry *e, const void *src, void **ptr,
                     size_t *cap, char *why, size_t whylen) {
  gkcd_backend *be = t->devs->dev[d].be;
  char msg[256] = "";
  if (!be->part || !be->part->to_dev) {
    snprintf(why, whylen, "the %s backend cannot copy objects back", be->name);
    return -1;
  }
  if (be->res_alloc(be, e->saved, ptr, cap, msg, sizeof msg) != 0) {
    snprintf(why, whylen, "object %" PRIu32 " on device %d: %s", e->id, d, msg);
    return -1;
  }
  if (be->part->to_dev(be, *ptr, src, e->saved, msg, sizeof msg) != 0) {
    be->res_free(be, *ptr, *cap);
    snprintf(why, whylen, "object %" PRIu32 " on device %d: %s", e->id, d, msg);
    return -1;
  }
  return 0;
}

/* An array or matrix on its device (device 0 when that one is gone), or a
 * replicated one on each of its devices still here: 0 with *out, or -1. */
static int bring_object(gkcd_residents *t, const entry *e, const void *src, gkcd_res **out,
                        char *why, size_t whylen) {
  uint64_t mask = present(t, e->rep_mask);
  int home = e->device >= 0 && e->device < GKCD_MAX_DEVICES && present(t, 1ull << e->device)
                 ? e->device : 0;
  if (mask && !(mask & (1ull << home))) home = __builtin_ctzll(mask);
  gkcd_copy *copies = mask ? calloc(GKCD_MAX_DEVICES, sizeof *copies) : NULL;
  if (mask && !copies) return snprintf(why, whylen, "out of memory"), -1;
  void *ptr = NULL;
  size_t cap = 0;
  for (int d = 0; d < GKCD_MAX_DEVICES; d++) {
    if (!(mask ? mask & (1ull << d) : d == home)) continue;
    if (to_device(t, d, e, src, &ptr, &cap, why, whylen) != 0) goto fail;
    if (copies) copies[d] = (gkcd_copy){ptr, cap};
  }
  gkcd_res *r = res_add_id(t, (int)e->kind, NULL, e->id);
  if (!r) {
    snprintf(why, whylen, "object %" PRIu32 ": out of memory, or its id is taken", e->id);
    goto fail;
  }
  r->device = home, r->bytes = e->bytes;
  if (copies) {
    r->copies = copies, r->rep_mask = mask;
    r->ptr = copies[home].ptr, r->cap = copies[home].cap;
  } else {
    r->ptr = ptr, r->cap = cap;
  }
  *out = r;
  return 0;
fail:
  if (copies) {
    for (int d = 0; d < GKCD_MAX_DEVICES; d++)
      if (copies[d].ptr) t->devs->dev[d].be->res_free(t->devs->dev[d].be, copies[d].ptr, copies[d].cap);
    free(copies);
  } else if (ptr) {
    t->devs->dev[home].be->res_free(t->devs->dev[home].be, ptr, cap);
  }
  return -1;
}

/* A partitioned matrix cut again from its saved CSR over its devices still
 * here (all on device 0 when none is): 0 with *out, or -1. */
static int bring_part(gkcd_residents *t, const entry *e, const void *src, gkcd_res **out, char *why,
                      size_t whylen) {
  uint64_t mask = present(t, e->part_mask);
  if (!mask) mask = 1;
  const char *b = src;
  gkcd_part *p = NULL;
  part_build_fail fail;
  int rc = part_build(mask, e->rows, e->cols, (const int32_t *)b,
                      (const int32_t *)(b + ((size_t)e->rows + 1) * 4),
                      (const float *)(b + res_values_offset(e->rows, e->nnz, DT_F32)), &p, &fail);
  if (rc != 0) {
    snprintf(why, whylen, "matrix %" PRIu32 ": %s%s%.200s", e->id, fail.what,
             fail.device >= 0 ? " on a device: " : "", fail.msg);
    return -1;
  }
  gkcd_res *r = res_add_id(t, RES_MATRIX, NULL, e->id);
  if (!r) {
    part_free(p);
    snprintf(why, whylen, "object %" PRIu32 ": out of memory, or its id is taken", e->id);
    return -1;
  }
  r->part = p, r->bytes = p->bytes, r->device = p->dev[0];
  *out = r;
  return 0;
}

/* Brings back every object of es (all checked), or none: 0 or -1 with why. */
static int bring_back(gkcd_residents *t, passed *ps, int np, entry *es, int n, char *why,
                      size_t whylen) {
  void **maps = calloc((size_t)n + 1, sizeof *maps);
  gkcd_res **made = calloc((size_t)n + 1, sizeof *made);
  int rc = -1, i;
  if (!maps || !made) {
    snprintf(why, whylen, "out of memory");
    goto out;
  }
  for (i = 0; i < n; i++) /* every checksum first: nothing is allocated for a corrupt save */
    if (!(maps[i] = map_object(ps, np, &es[i], why, whylen))) goto out;
  for (i = 0; i < n; i++) {
    entry *e = &es[i];
    gkcd_res *r = NULL;
    if ((e->part_mask ? bring_part(t, e, maps[i], &r, why, whylen)
                      : bring_object(t, e, maps[i], &r, why, whylen)) != 0)
      goto out;
    r->uid = e->uid, r->dtype = (int)e->dtype;
    if (e->kind == RES_MATRIX) {
      r->rows = e->rows, r->cols = e->cols, r->nnz = e->nnz, r->max_row = e->max_row;
      r->algo = e->algo, r->plan_off = e->plan_off;
    }
    budget_take(t->budget, BUDGET_RESIDENT, res_charge(r));
    made[i] = r;
  }
  rc = 0;
out:
  if (rc != 0 && made)
    for (int k = 0; k < n; k++)
      if (made[k]) res_release(t, made[k]); /* gives its memory and budget back */
  if (maps)
    for (int k = 0; k < n; k++)
      if (maps[k]) munmap(maps[k], es[k].saved);
  free(maps);
  free(made);
  return rc;
}

/* Removes name from systemd's store (we hold the descriptor now). */
static void unstore(const char *name) {
  char state[160];
  snprintf(state, sizeof state, "FDSTOREREMOVE=1\nFDNAME=%s", name);
  int rc = sd_notify(0, state);
  if (rc < 0) log_warn("fd store: removing %s: %s", name, strerror(-rc));
}

void fdstore_restore(gkcd_residents *t, size_t max_bytes) {
  char **names = NULL;
  int n = sd_listen_fds_with_names(0, &names);
  if (n < 0) {
    log_warn("fd store: sd_listen_fds_with_names: %s: nothing restored", strerror(-n));
    return;
  }
  if (n == 0) return;
  passed *ps = calloc((size_t)n, sizeof *ps);
  int np = 0, manifest = -1;
  for (int i = 0; i < n && ps && i < MAX_FDS; i++) {
    int fd = SD_LISTEN_FDS_START + i;
    const char *name = names && names[i] ? names[i] : "unknown";
    /* Sockets are listen.c's (socket activation); everything else is ours
     * to read or to drop. */
    if (sd_is_socket(fd, AF_UNSPEC, 0, -1) > 0) continue;
    ps[np].fd = fd;
    ps[np].name = (char *)name;
    if (!strcmp(name, MANIFEST_NAME)) manifest = np;
    np++;
  }
  if (!ps) log_warn("fd store: out of memory: nothing restored");
  double t0 = now_ms();
  if (ps && np > 0) {
    char why[300] = "";
    entry *es = NULL;
    int count = 0;
    uint64_t shared_instance = 0, total = 0;
    size_t mlen = 0;
    unsigned char *m = NULL;
    if (manifest < 0) {
      snprintf(why, sizeof why, "it holds no manifest (%s); a save cut short leaves none",
               ps[0].name);
    } else if (max_bytes == 0) {
      snprintf(why, sizeof why, "--restore-max-bytes is 0");
    } else if ((m = read_manifest(ps[manifest].fd, &mlen, why, sizeof why)) &&
               parse_manifest(m, mlen, &es, &count, &shared_instance, &total, max_bytes, why,
                              sizeof why) == 0) {
      ps[manifest].used = 1;
      uint64_t charge = 0; /* a replicated object's bytes on each of its devices */
      for (int i = 0; i < count; i++) {
        uint64_t copies = (uint64_t)__builtin_popcountll(present(t, es[i].rep_mask));
        if (!copies) copies = 1;
        charge = es[i].saved > (UINT64_MAX - charge) / copies ? UINT64_MAX
                                                               : charge + es[i].saved * copies;
      }
      if (!budget_fits(t->budget, charge)) {
        snprintf(why, sizeof why, "its %" PRIu64 " bytes do not fit in --memory-budget %zu", charge,
                 t->budget->limit);
      } else if (bring_back(t, ps, np, es, count, why, sizeof why) == 0) {
        t->shared_instance = shared_instance;
        t->restored = (uint64_t)count, t->restored_bytes = total;
        char hex[17];
        res_instance_hex(shared_instance, hex);
        log_info("restored %d shared object(s), %" PRIu64 " bytes, from systemd's fd store in"
                 " %.0f ms (shared instance %s carries over)", count, total, now_ms() - t0, hex);
        why[0] = 0;
      }
    }
    if (why[0])
      log_warn("fd store: not restoring what systemd passed (%d descriptor(s)): %s; starting"
               " clean", np, why);
    /* Done with them: out of the store, and their memory let go.  The
     * numbers stay open (on /dev/null) until listen.c has called
     * sd_listen_fds, which marks every passed number close-on-exec and
     * fails on one that is closed; it closes them then. */
    int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
    for (int i = 0; i < np; i++) {
      if (!ps[i].used && strncmp(ps[i].name, "gkc-", 4) != 0)
        log_warn("fd store: descriptor '%s' is not gkcd's: dropped", ps[i].name);
      unstore(ps[i].name);
      if (null < 0 || dup2(null, ps[i].fd) < 0) close(ps[i].fd);
    }
    if (null >= 0) close(null);
    free(m);
    free(es);
  }
  free(ps);
  if (names)
    for (int i = 0; i < n; i++) free(names[i]);
  free(names);
}
