/* split.c: see split.h. */
#include "split.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend.h"
#include "devices.h"
#include "gkc_errors.h"
#include "method.h"


int split_kind(const gkcd_job *job) {
  if (job->pin_device >= 0 || !job->row->split) return SPLIT_NONE;
  return job->row->split(job);
}

static int host_span(const gkcd_span *s) { return !s->ptr || s->where == SPAN_HOST; }

int split_rule_rows(const gkcd_job *job) {
  const __typeof__(job->in.sgemm) *s = &job->in.sgemm;
  /* Row blocks of C are row blocks of A only when A is not transposed. */
  if (s->trans_a || s->m < 2 || !host_span(&s->a) || !host_span(&s->b) || !host_span(&s->c))
    return SPLIT_NONE;
  return job->out_kind == OUT_BIN || job->out_kind == OUT_HOST ? SPLIT_ROWS : SPLIT_NONE;
}

int split_rule_reduce(const gkcd_job *job) {
  return host_span(&job->in.reduce.x) && job->in.reduce.n >= 2 * SPLIT_REDUCE_MIN_PART
             ? SPLIT_REDUCE
             : SPLIT_NONE;
}

int split_rule_copies(const gkcd_job *job) { return job->replicate ? SPLIT_COPIES : SPLIT_NONE; }

int split_worth(const gkcd_job *job, double cost_us, int k, double handoff_us,
                double host_bytes_per_us) {
  int kind = split_kind(job);
  if (kind == SPLIT_COPIES) return 1;
  if (kind == SPLIT_NONE || k < 2) return 0;
  if (kind == SPLIT_ROWS && job->in.sgemm.m < k) k = job->in.sgemm.m;
  if (kind == SPLIT_REDUCE && job->in.reduce.n / SPLIT_REDUCE_MIN_PART < k)
    k = (int)(job->in.reduce.n / SPLIT_REDUCE_MIN_PART);
  if (k < 2) return 0;
  double extra = 0;
  if (kind == SPLIT_ROWS && host_bytes_per_us > 0)
    extra = (double)(k - 1) * (double)job->in.sgemm.b.bytes / host_bytes_per_us;
  double overhead = (double)k * handoff_us + extra;
  return cost_us / k + 2 * overhead < cost_us;
}

static void part_done(gkcd_job *part, void *arg);

/* A part starts as a copy of its parent that owns nothing, finished into
 * its parent (part_done). */
static gkcd_job *new_part(gkcd_job *parent) {
  gkcd_job *p = malloc(sizeof *p);
  if (!p) return NULL;
  memcpy(p, parent, sizeof *p);
  p->parent = parent;
  p->on_finish = part_done;
  p->finish_arg = parent;
  p->frame = NULL, p->out = NULL, p->priv[0] = p->priv[1] = NULL;
  p->history = NULL, p->copies = NULL, p->parts = NULL, p->nparts = 0;
  p->nres = 0, p->nmoved = 0, p->reg_fd = -1;
  p->err = 0, p->errmsg[0] = 0;
  p->next = p->run_prev = p->run_next = NULL;
  p->dispatched = 0, p->split_mask = 0;
  p->frame_charge = p->out_charge = p->reply_charge = 0;
  atomic_init(&p->cancel, 0);
  atomic_init(&p->parts_left, 0);
  return p;
}

int split_make(gkcd_job *parent, const int *dev, int k) {
  int kind = split_kind(parent);
  if (kind == SPLIT_ROWS && parent->in.sgemm.m < k) k = parent->in.sgemm.m;
  if (kind == SPLIT_REDUCE && parent->in.reduce.n / SPLIT_REDUCE_MIN_PART < k)
    k = (int)(parent->in.reduce.n / SPLIT_REDUCE_MIN_PART);
  parent->parts = calloc((size_t)k, sizeof *parent->parts);
  if (kind == SPLIT_ROWS && parent->out_kind == OUT_BIN && parent->parts)
    parent->out = malloc(parent->out_bytes ? parent->out_bytes : 1);
  if (kind == SPLIT_COPIES && parent->parts)
    parent->copies = calloc(GKCD_MAX_DEVICES, sizeof *parent->copies);
  if (!parent->parts || (kind == SPLIT_ROWS && parent->out_kind == OUT_BIN && !parent->out) ||
      (kind == SPLIT_COPIES && !parent->copies))
    goto oom;
  for (int i = 0; i < k; i++) {
    gkcd_job *p = new_part(parent);
    if (!p) goto oom;
    parent->parts[parent->nparts++] = p;
    p->device = dev[i];
    p->split_mask = 0;
    if (kind == SPLIT_ROWS) {
      __typeof__(p->in.sgemm) *s = &p->in.sgemm;
      int32_t m = parent->in.sgemm.m, r0 = (int32_t)((int64_t)m * i / k),
              r1 = (int32_t)((int64_t)m * (i + 1) / k);
      size_t arow = 4 * (size_t)s->k, crow = 4 * (size_t)s->n;
      s->m = r1 - r0;
      s->a.ptr = (const char *)s->a.ptr + arow * (size_t)r0;
      s->a.bytes = arow * (size_t)s->m;
      if (s->c.ptr) {
        s->c.ptr = (const char *)s->c.ptr + crow * (size_t)r0;
        s->c.bytes = crow * (size_t)s->m;
      }
      char *base = parent->out_kind == OUT_BIN ? parent->out : parent->out_ptr;
      p->out_kind = OUT_HOST;
      p->out_ptr = base + crow * (size_t)r0;
      p->out_bytes = crow * (size_t)s->m;
    } else if (kind == SPLIT_REDUCE) {
      int64_t n = parent->in.reduce.n, e0 = n * i / k, e1 = n * (i + 1) / k;
      p->in.reduce.x.ptr = (const char *)p->in.reduce.x.ptr + 4 * (size_t)e0;
      p->in.reduce.x.bytes = 4 * (size_t)(e1 - e0);
      p->in.reduce.n = e1 - e0;
    } /* SPLIT_COPIES: each part is the whole upload */
  }
  parent->split_mask = 0;
  for (int i = 0; i < k; i++) parent->split_mask |= 1ull << dev[i];
  parent->device = dev[0];
  atomic_store(&parent->parts_left, k);
  return 0;
oom:
  split_free(parent);
  job_fail(parent, GKC_EOUT_OF_MEMORY, "out of memory splitting the request across devices");
  return GKC_EOUT_OF_MEMORY;
}

/* The last part: the parent's results from its parts'. */
static void combine(gkcd_job *parent) {
  int kind = split_kind(parent);
  gkcd_job *first = parent->parts[0];
  parent->t_run_ns = first->t_run_ns;
  parent->algo_name = first->algo_name;
  double acc = kind == SPLIT_REDUCE ? first->value : 0;
  int have = 0;
  for (int i = 0; i < parent->nparts; i++) {
    gkcd_job *p = parent->parts[i];
    if (p->t_run_ns < parent->t_run_ns) parent->t_run_ns = p->t_run_ns;
    if (p->kernel_us > parent->kernel_us) parent->kernel_us = p->kernel_us;
    if (p->h2d_us > parent->h2d_us) parent->h2d_us = p->h2d_us;
    if (p->d2h_us > parent->d2h_us) parent->d2h_us = p->d2h_us;
    if (p->err && !parent->err) {
      parent->err = p->err;
      snprintf(parent->errmsg, sizeof parent->errmsg, "part %d of %d, on device %d: %.200s", i,
               parent->nparts, p->device, p->errmsg);
    }
    if (kind == SPLIT_REDUCE && !p->err) {
      /* Sum adds the partials in part order; min and max skip a part that
       * held only NaN (its NaN), as cpu_reduce treats NaN. */
      if (parent->in.reduce.op == 0) acc = i ? acc + p->value : p->value;
      else if (!isnan(p->value)) {
        if (!have || (parent->in.reduce.op == 1 ? p->value < acc : p->value > acc)) acc = p->value;
        have = 1;
      }
    }
  }
  if (kind == SPLIT_REDUCE) parent->value = parent->in.reduce.op == 0 || have ? acc : NAN;
  if (kind == SPLIT_COPIES) {
    for (int i = 0; i < parent->nparts; i++) {
      gkcd_job *p = parent->parts[i];
      if (p->out_ptr) parent->copies[p->device] = (gkcd_copy){p->out_ptr, p->out_cap};
      p->out_ptr = NULL; /* the parent's now: adopted, or freed by split_free */
    }
    if (!parent->err) {
      parent->out_ptr = first->out_ptr ? first->out_ptr : parent->copies[first->device].ptr;
      parent->out_cap = parent->copies[first->device].cap;
      parent->algo_used = first->algo_used;
      parent->plan_off = first->plan_off;
    }
  }
}

/* A part's finish hook (job_finish, any thread).  The last part combines
 * the results into the parent and finishes it: to the loop, like any job. */
static void part_done(gkcd_job *part, void *arg) {
  gkcd_job *parent = arg;
  (void)part; /* a part that is not the last may be freed as soon as it is counted */
  if (atomic_fetch_sub(&parent->parts_left, 1) != 1) return;
  combine(parent);
  job_finish(parent);
}

void split_free(gkcd_job *parent) {
  if (parent->copies) {
    /* Copies nobody adopted (a part failed, or the client left). */
    for (int d = 0; d < GKCD_MAX_DEVICES; d++) {
      gkcd_copy *c = &parent->copies[d];
      gkcd_backend *be = devices_backend(d);
      if (c->ptr && be) be->res_free(be, c->ptr, c->cap);
    }
    free(parent->copies);
    parent->copies = NULL;
  }
  for (int i = 0; i < parent->nparts; i++) free(parent->parts[i]);
  free(parent->parts);
  parent->parts = NULL;
  parent->nparts = 0;
}

static double mono_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

typedef struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int turn, rounds;
} pingpong;

static void *pong(void *arg) {
  pingpong *pp = arg;
  pthread_mutex_lock(&pp->mu);
  for (int i = 0; i < pp->rounds; i++) {
    while (pp->turn != 1) pthread_cond_wait(&pp->cv, &pp->mu);
    pp->turn = 0;
    pthread_cond_broadcast(&pp->cv);
  }
  pthread_mutex_unlock(&pp->mu);
  return NULL;
}

double split_measure_handoff(void) {
  pingpong pp = {.turn = 0, .rounds = 64};
  pthread_mutex_init(&pp.mu, NULL);
  pthread_cond_init(&pp.cv, NULL);
  pthread_t t;
  double best = 50; /* if no thread can be made: a hand-off on a busy VM */
  if (pthread_create(&t, NULL, pong, &pp) == 0) {
    pthread_mutex_lock(&pp.mu);
    for (int i = 0; i < pp.rounds; i++) {
      double t0 = mono_us();
      pp.turn = 1;
      pthread_cond_broadcast(&pp.cv);
      while (pp.turn != 0) pthread_cond_wait(&pp.cv, &pp.mu);
      double us = (mono_us() - t0) / 2; /* there and back: two hand-offs */
      if (i == 0 || us < best) best = us;
    }
    pthread_mutex_unlock(&pp.mu);
    pthread_join(t, NULL);
  }
  pthread_mutex_destroy(&pp.mu);
  pthread_cond_destroy(&pp.cv);
  return best;
}

double split_observed_overhead(const gkcd_job *parent) {
  double slowest = 0;
  for (int i = 0; i < parent->nparts; i++) {
    const gkcd_job *p = parent->parts[i];
    double us = p->t_done_ns > p->t_run_ns ? (double)(p->t_done_ns - p->t_run_ns) / 1e3 : 0;
    if (us > slowest) slowest = us;
  }
  double total = parent->t_done_ns > parent->t_run_ns ? (double)(parent->t_done_ns - parent->t_run_ns) / 1e3 : 0;
  double over = total - slowest;
  return parent->nparts ? (over > 0 ? over : 0) / parent->nparts : 0;
}
