/* devices.h: the devices gkcd serves from, and what becomes of one that
 * fails.
 *
 * Every device is one backend (backend.h): a GPU, a slice of one
 * (--split-device), or one of the CPU backend's virtual devices
 * (--cpu-devices).  Each has its own cost model, since a GPU slice with
 * fewer SMs, or a CPU device with fewer threads, runs the same request at
 * its own speed.  The scheduler places work on them (place.h); this module
 * opens and closes them, and turns backend_device_lost, which may come from
 * any thread, into a device taken out of service on the loop.
 *
 * A lost device stays in the list, marked lost, so that its index keeps
 * naming it in replies, in status and in the messages of requests whose
 * handles lived there.  Loop thread, except where said.
 */
#ifndef GKCD_DEVICES_H
#define GKCD_DEVICES_H

#include <stdatomic.h>
#include <stdint.h>
#include <uv.h>

#include "backend.h"
#include "config.h"
#include "cost.h"

typedef struct {
  gkcd_backend *be;
  gkcd_cost *cost;   /* its own rates, refined by what it runs */
  int down;          /* the loop has taken it out of service */
  uint64_t served;   /* jobs and parts of split jobs it finished */
} gkcd_device;

typedef struct gkcd_devices {
  gkcd_device dev[GKCD_MAX_DEVICES];
  int n;
  uv_async_t lost_async; /* a device was lost on some thread */
  atomic_int async_on;
  /* Called on the loop once a device is out of service (the server pumps
   * its scheduler, so queued work that can only run there is answered). */
  void (*on_lost)(int device, void *arg);
  void *arg;
} gkcd_devices;

/* Takes the n backends (numbering them 0..n-1) and gives each a cost model;
 * installs the hook of backend_device_lost.  0, or -1 after logging. */
int devices_init(gkcd_devices *d, uv_loop_t *loop, gkcd_backend **be, int n,
                 void (*on_lost)(int device, void *arg), void *arg);
/* Closes the async handle (at shutdown, on the loop). */
void devices_close(gkcd_devices *d);
/* After the loop has ended: destroys every backend. */
void devices_destroy(gkcd_devices *d);

/* Bit d set for each device that serves (not lost).  Any thread: it reads
 * the backends' lost flags. */
uint64_t devices_live(const gkcd_devices *d);
/* The backend of device i, or NULL when i is out of range.  Any thread: the
 * list does not change after devices_init. */
gkcd_backend *devices_backend(int i);
/* How many devices there are (lost ones included).  Any thread. */
int devices_count(void);

/* "device 1 (NAME) was lost: why" into buf, for DEVICE_LOST messages.
 * Any thread. */
const char *devices_lost_msg(gkcd_backend *be, char *buf, size_t len);
/* The device's name as status shows it.  Any thread. */
void devices_name(gkcd_backend *be, char *buf, size_t len);

#endif
