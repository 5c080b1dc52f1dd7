/* reader.c: see reader.h.
 *
 * A thread sleeps in epoll_wait on its tasks' sockets and on an eventfd
 * the loop writes to when it hands the thread a task, cancels one or stops
 * it.  Sockets are level-triggered: a ready one gets up to PUMP_RECVS
 * receives, then the next ready one its turn, so one fast sender cannot
 * starve the others of its thread.  A task that ends is taken off the epoll
 * set before it goes on the pool's done list, and the loop's async handle
 * hands it back: from then on the reader holds no reference to it, its
 * buffer or its descriptor.
 *
 * Within one epoll_wait batch the sockets are served before the eventfd:
 * cancelling a task hands it back, and the owner may then reuse or free it
 * at once, so no later entry of the same batch may still point at it.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "reader.h"

#include "log.h"
#include "threads.h"

#define PUMP_RECVS 16
#define BATCH 16

/* The loop's async callback: tasks back from the threads go to their
 * owners, oldest first. */
static void on_async(uv_async_t *h) {
  reader_pool *p = h->data;
  pthread_mutex_lock(&p->mu);
  reader_task *list = p->done_list;
  p->done_list = NULL;
  pthread_mutex_unlock(&p->mu);
  /* The list was pushed newest first. */
  reader_task *rev = NULL;
  while (list) {
    reader_task *next = list->next;
    list->next = rev;
    rev = list;
    list = next;
  }
  while (rev) {
    reader_task *t = rev;
    rev = t->next;
    t->next = NULL;
    t->th->load--;
    t->th = NULL;
    if (t->write) {
      p->out_writes--;
      p->wtasks++;
      p->wbytes += t->len - t->start;
    } else {
      p->tasks++;
      p->bytes += t->len - t->start;
    }
    if (--p->out == 0) uv_unref((uv_handle_t *)&p->async); /* nothing of ours keeps the loop */
    t->done(t); /* may submit t again */
  }
}

static void wake(reader_thread *th) {
  uint64_t one = 1;
  ssize_t w;
  do {
    w = write(th->wakefd, &one, sizeof one);
  } while (w < 0 && errno == EINTR);
  /* EAGAIN: the counter is full of wake-ups already, which is as good. */
}

/* t has ended: off the epoll set, onto the done list, the loop woken. */
static void finish(reader_thread *th, reader_task **mine, reader_task *t, int status, int err) {
  epoll_ctl(th->epfd, EPOLL_CTL_DEL, t->fd, NULL);
  for (reader_task **pp = mine; *pp; pp = &(*pp)->next)
    if (*pp == t) {
      *pp = t->next;
      break;
    }
  t->status = status;
  t->err = err;
  reader_pool *p = th->pool;
  pthread_mutex_lock(&p->mu);
  t->next = p->done_list;
  p->done_list = t;
  pthread_mutex_unlock(&p->mu);
  uv_async_send(&p->async);
}

/* Keeps the descriptors a message carried, up to READER_MAX_FDS. */
static void take_rights(reader_task *t, struct msghdr *mh) {
  for (struct cmsghdr *cm = CMSG_FIRSTHDR(mh); cm; cm = CMSG_NXTHDR(mh, cm)) {
    if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS) continue;
    int n = (int)((cm->cmsg_len - CMSG_LEN(0)) / sizeof(int));
    int fds[READER_MAX_FDS * 2];
    if (n > (int)(sizeof fds / sizeof fds[0])) n = (int)(sizeof fds / sizeof fds[0]);
    memcpy(fds, CMSG_DATA(cm), (size_t)n * sizeof(int)); /* CMSG_DATA need not be aligned for int */
    for (int i = 0; i < n; i++) {
      if (t->nfds < READER_MAX_FDS) {
        t->fds[t->nfds++] = fds[i];
      } else {
        close(fds[i]);
        t->fds_closed++;
      }
    }
  }
  if (mh->msg_flags & MSG_CTRUNC) t->fds_closed++;
}

/* A few sends from t; 1 when it has ended (and was finished). */
static int pump_out(reader_thread *th, reader_task **mine, reader_task *t) {
  for (int i = 0; i < PUMP_RECVS && t->len < t->want; i++) {
    ssize_t n = send(t->fd, t->buf + t->len, t->want - t->len, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
      finish(th, mine, t, READER_ERROR, errno);
      return 1;
    }
    t->len += (size_t)n;
    atomic_store_explicit(&t->progress, t->len, memory_order_relaxed);
  }
  if (t->len < t->want) return 0;
  finish(th, mine, t, READER_DONE, 0);
  return 1;
}

/* A few receives into t (or sends from it); 1 when it has ended (and was
 * finished). */
static int pump(reader_thread *th, reader_task **mine, reader_task *t) {
  if (t->write) return pump_out(th, mine, t);
  for (int i = 0; i < PUMP_RECVS; i++) {
    if (t->len >= t->want) { /* handed over whole already */
      finish(th, mine, t, READER_DONE, 0);
      return 1;
    }
    struct iovec iov = {t->buf + t->len, t->cap - t->len};
    union {
      char buf[CMSG_SPACE(sizeof(int) * READER_MAX_FDS)];
      struct cmsghdr align;
    } ctl;
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf,
                        .msg_controllen = sizeof ctl.buf};
    ssize_t n = recvmsg(t->fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
      finish(th, mine, t, READER_ERROR, errno);
      return 1;
    }
    if (mh.msg_controllen > 0) take_rights(t, &mh);
    if (n == 0) {
      finish(th, mine, t, READER_EOF, 0);
      return 1;
    }
    t->len += (size_t)n;
    atomic_store_explicit(&t->progress, t->len, memory_order_relaxed);
  }
  if (t->len >= t->want) {
    finish(th, mine, t, READER_DONE, 0);
    return 1;
  }
  return 0;
}

static void *thread_main(void *arg) {
  reader_thread *th = arg;
  reader_task *mine = NULL; /* the tasks on this thread's epoll set */
  for (;;) {
    struct epoll_event ev[BATCH];
    int n = epoll_wait(th->epfd, ev, BATCH, -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      log_err("reader: epoll_wait: %s", strerror(errno));
      n = 0; /* serve the eventfd anyway, below */
    }
    int woken = n == 0;
    for (int i = 0; i < n; i++) {
      if (ev[i].data.ptr == NULL) {
        woken = 1;
        continue;
      }
      pump(th, &mine, ev[i].data.ptr);
    }
    if (!woken) continue;
    /* Drained first: a cancel or a task that comes after this read wakes
     * the next epoll_wait. */
    uint64_t count;
    while (read(th->wakefd, &count, sizeof count) < 0 && errno == EINTR) {
    }
    pthread_mutex_lock(&th->mu);
    reader_task *in = th->inbox;
    th->inbox = NULL;
    int stop = th->stop;
    pthread_mutex_unlock(&th->mu);
    while (in) {
      reader_task *t = in;
      in = t->next;
      t->next = mine;
      mine = t;
      struct epoll_event e = {.events = t->write ? EPOLLOUT : EPOLLIN, .data.ptr = t};
      if (epoll_ctl(th->epfd, EPOLL_CTL_ADD, t->fd, &e) != 0) {
        finish(th, &mine, t, READER_ERROR, errno);
        continue;
      }
      /* Bytes may be waiting already (room to send, usually): now rather
       * than after a round through epoll. */
      pump(th, &mine, t);
    }
    for (reader_task *t = mine, *next; t; t = next) {
      next = t->next;
      if (atomic_load(&t->cancel)) finish(th, &mine, t, READER_CANCELLED, 0);
    }
    if (stop) {
      if (mine) log_err("reader: stopped with tasks out");
      return NULL;
    }
  }
}

int reader_init(reader_pool *p, uv_loop_t *loop) {
  memset(p, 0, sizeof *p);
  p->loop = loop;
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  p->max_threads = ncpu < 2 ? 2 : ncpu > READER_MAX_THREADS ? READER_MAX_THREADS : (int)ncpu;
  for (int i = 0; i < READER_MAX_THREADS; i++) p->th[i].epfd = p->th[i].wakefd = -1;
  int err = pthread_mutex_init(&p->mu, NULL);
  int rc = err ? 0 : uv_async_init(loop, &p->async, on_async);
  if (err || rc) {
    if (!err) pthread_mutex_destroy(&p->mu);
    log_warn("reader: cannot set up: %s", err ? strerror(err) : uv_strerror(rc));
    p->max_threads = 0; /* every frame is read on the loop */
    return -1;
  }
  p->async.data = p;
  uv_unref((uv_handle_t *)&p->async); /* only tasks out keep the loop */
  p->started = 1;
  /* Every slot's epoll set and eventfd now, so the daemon's descriptors do
   * not change with its load (tests count them to find leaks); a slot
   * that cannot have them has no thread. */
  for (int i = 0; i < p->max_threads; i++) {
    reader_thread *th = &p->th[i];
    th->pool = p;
    th->epfd = epoll_create1(EPOLL_CLOEXEC);
    th->wakefd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    struct epoll_event e = {.events = EPOLLIN, .data.ptr = NULL};
    if (th->epfd < 0 || th->wakefd < 0 || epoll_ctl(th->epfd, EPOLL_CTL_ADD, th->wakefd, &e) != 0 ||
        pthread_mutex_init(&th->mu, NULL) != 0) {
      log_warn("reader: %d threads at most: %s", i, strerror(errno));
      if (th->epfd >= 0) close(th->epfd);
      if (th->wakefd >= 0) close(th->wakefd);
      th->epfd = th->wakefd = -1;
      p->max_threads = i;
      break;
    }
  }
  return 0;
}

static int start_thread(reader_pool *p) {
  reader_thread *th = &p->th[p->nthreads];
  /* Started from the loop thread: with SIGINT and SIGTERM blocked all the
   * same (threads.h; e2e_lifecycle saw "killed by signal 15" without). */
  int err = thread_start(&th->tid, thread_main, th);
  if (err) {
    log_warn("reader: cannot start a thread: %s", strerror(err));
    errno = err;
    return -1;
  }
  pthread_setname_np(th->tid, "gkcd-reader"); /* for top -H, perf and the benchmarks */
  p->nthreads++;
  return 0;
}

int reader_submit(reader_pool *p, reader_task *t, const reader_task *beside) {
  /* The least busy thread (not beside's); a new one while each has a task
   * and there is room for one more. */
  const reader_thread *avoid = beside ? beside->th : NULL;
  reader_thread *th = NULL;
  for (int i = 0; i < p->nthreads; i++)
    if (&p->th[i] != avoid && (!th || p->th[i].load < th->load)) th = &p->th[i];
  if ((!th || th->load > 0) && p->nthreads < p->max_threads && start_thread(p) == 0)
    th = &p->th[p->nthreads - 1];
  if (!th) return -1;
  t->status = READER_DONE;
  t->err = 0;
  t->nfds = t->fds_closed = 0;
  t->start = t->len;
  atomic_store(&t->progress, t->len);
  atomic_store(&t->cancel, 0);
  t->th = th;
  th->load++;
  p->out_writes += t->write != 0;
  if (p->out++ == 0) uv_ref((uv_handle_t *)&p->async); /* the loop lives until it is back */
  pthread_mutex_lock(&th->mu);
  t->next = th->inbox;
  th->inbox = t;
  pthread_mutex_unlock(&th->mu);
  wake(th);
  return 0;
}

void reader_cancel(reader_task *t) {
  if (!t->th) return; /* not out */
  atomic_store(&t->cancel, 1);
  wake(t->th);
}

void reader_stop(reader_pool *p) {
  if (p->out) log_err("reader: stopping with %zu tasks out", p->out);
  for (int i = 0; i < p->nthreads; i++) {
    reader_thread *th = &p->th[i];
    pthread_mutex_lock(&th->mu);
    th->stop = 1;
    pthread_mutex_unlock(&th->mu);
    wake(th);
    pthread_join(th->tid, NULL);
  }
  p->nthreads = 0;
  for (int i = 0; i < p->max_threads; i++) {
    reader_thread *th = &p->th[i];
    close(th->epfd);
    close(th->wakefd);
    th->epfd = th->wakefd = -1;
    pthread_mutex_destroy(&th->mu);
  }
  p->max_threads = 0;
  if (p->started) {
    uv_close((uv_handle_t *)&p->async, NULL);
    pthread_mutex_destroy(&p->mu);
    p->started = 0;
  }
}
