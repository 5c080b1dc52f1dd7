/* reader.h: threads that receive the rest of a big frame off the loop,
 * and send big reply bodies.
 *
 * Every socket is read on the event-loop thread, and a recvmsg is a copy
 * of every byte: with eight connections sending big inline frames at once
 * the loop thread was the ceiling, at about one core's socket-copy rate
 * (bench/RESULTS.md, "Inline GB/s").  Once the loop knows that the frame
 * in a connection's buffer is a big one and has a buffer that holds all of
 * it, it hands the socket and the buffer to a reader (reader_submit): one
 * of a few threads that receives until the buffer holds `want` bytes, the
 * peer stops sending or the socket fails, and then hands the task back to
 * the loop (its done hook, on the loop thread).  The loop does no reading
 * of that socket meanwhile; it may still write to it (a send and a receive
 * on one socket from two threads are independent in the kernel).  A task
 * may go the other way (write set): a big reply body sent from buf[len] up
 * to buf[want], the loop sending nothing on that socket meanwhile; the
 * reading and the writing task of one socket always go to two different
 * threads (reader_submit's `beside`), since one epoll set cannot hold one
 * descriptor twice.
 *
 * A reader knows nothing of connections: a task is a descriptor, a buffer
 * and a count.  Each thread waits on its tasks' sockets with an epoll set
 * of its own and reads whichever is ready, a few receives at a time, so a
 * client that sends slowly holds up nobody else's frame; threads start on
 * demand, one per task in flight up to READER_MAX_THREADS (never more than
 * the machine has cores, and at least two), and each new task goes to the
 * least busy.  Their epoll sets and eventfds are made with the pool, so
 * that the daemon's descriptors do not change with its load.  Descriptors
 * that come with the bytes (SCM_RIGHTS) are kept in the task for the loop
 * to take.
 *
 * Rules, so that the owner can close and free safely:
 *  - every task submitted comes back exactly once through its done hook,
 *    whatever happened (READER_DONE, _EOF, _ERROR, _CANCELLED); from
 *    reader_submit until then the task, its buffer up to cap and its
 *    descriptor are the reader's, and the owner must neither touch the
 *    buffer nor close the descriptor;
 *  - reader_cancel asks for the task back early (a deadline passed, the
 *    connection closes, the daemon stops); it still comes back through the
 *    hook, and may come back DONE or EOF if that happened first;
 *  - while any task is out, the pool's uv_async keeps the loop alive;
 *  - reader_stop (at shutdown, with no task out) joins the threads.
 *
 * Loop thread, except where it says otherwise.
 */
#ifndef GKCD_READER_H
#define GKCD_READER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#define READER_MAX_THREADS 8
#define READER_MAX_FDS 16 /* descriptors kept per task; more are closed */

enum { READER_DONE, READER_EOF, READER_ERROR, READER_CANCELLED };

typedef struct reader_task reader_task;
typedef struct reader_thread reader_thread;

struct reader_task {
  /* Set by the owner before reader_submit. */
  int fd;
  unsigned char *buf;
  size_t len;  /* bytes already in buf; the reader adds what it receives */
  size_t want; /* the task is done once len reaches it */
  size_t cap;  /* nothing is written at or past buf[cap]; cap > len, cap >= want */
  int write;   /* send buf[len..want) instead of receiving (cap unused) */
  void (*done)(reader_task *t); /* on the loop thread, once, after the reader let go */
  /* What came back, for the done hook. */
  int status; /* READER_* */
  int err;    /* errno, with READER_ERROR */
  int fds[READER_MAX_FDS];
  int nfds;
  int fds_closed; /* received beyond READER_MAX_FDS, or cut off (MSG_CTRUNC) */
  /* Bytes in buf as the reader last saw them: len while the task is out,
   * readable from the loop at any time (for messages). */
  atomic_size_t progress;
  /* reader.c's */
  size_t start; /* len when submitted */
  atomic_int cancel;
  reader_thread *th;
  reader_task *next;
};

struct reader_thread {
  pthread_t tid;
  int epfd, wakefd;
  pthread_mutex_t mu;
  reader_task *inbox; /* under mu: submitted, not yet watched */
  int stop;           /* under mu */
  size_t load;        /* the loop's: tasks out on this thread */
  struct reader_pool *pool;
};

typedef struct reader_pool {
  uv_loop_t *loop;
  int started;        /* reader_init succeeded: the async handle is set up */
  int nthreads, max_threads;
  size_t out;         /* tasks submitted and not yet handed back */
  size_t out_writes;  /* of them, sending */
  /* For status: tasks handed back since start and the bytes they moved,
   * receiving and sending. */
  uint64_t tasks, bytes, wtasks, wbytes;
  uv_async_t async;
  pthread_mutex_t mu;
  reader_task *done_list; /* under mu: back from the threads, for the loop */
  reader_thread th[READER_MAX_THREADS];
} reader_pool;

/* An empty pool on loop: its async handle, and each thread's epoll set
 * and eventfd; no thread starts until a task needs it.  0, or -1 (logged)
 * when it cannot be set up: reader_submit then always refuses. */
int reader_init(reader_pool *p, uv_loop_t *loop);
/* Hands t to a reader, another than the one that has beside when beside
 * (may be NULL) is out: 0, or -1 when no reader could take it (t is then
 * still the owner's, untouched). */
int reader_submit(reader_pool *p, reader_task *t, const reader_task *beside);
/* Asks for t back as soon as possible (it comes back through done). */
void reader_cancel(reader_task *t);
/* Stops and joins the threads, closes their descriptors and the async
 * handle.  Only with no task out; the pool may not be used afterwards. */
void reader_stop(reader_pool *p);

#endif
