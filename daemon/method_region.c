/* method_region.c: the rows of shared-memory regions (PROTOCOL.md,
 * "Shared memory"): `shm_register` maps a client's sealed memfd (on a
 * worker: mapping takes a while, region.h) and, with "pinned", registers it
 * for DMA there too (else the pinner does, in the background);
 * `shm_release` unmaps it. */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "gkc_errors.h"
#include "methods.h"
#include "proto_rpc.h"
#include "region.h"
#include "res_object.h"

static int parse_shm_register(refs_ctx *r, size_t max) {
  static const char *const keys[] = {"bytes", "pinned", "reuse", NULL};
  /* rpc.c took the connection's oldest descriptor for this request; the job
   * owns it before anything is checked, so that a refused request still
   * consumes its own (job_free closes it): the next shm_register must never
   * map a file that was sent for an earlier one. */
  r->job->reg_fd = r->fd;
  r->fd = -1;
  int64_t bytes;
  int rc;
  if ((rc = args_known(r->a, keys)) || (rc = args_int(r->a, "bytes", 1, 1, (int64_t)max, &bytes)) ||
      (rc = args_bool(r->a, "pinned", 0, &r->job->reg_pin)) ||
      (rc = args_bool(r->a, "reuse", 0, &r->job->reg_reuse)))
    return rc;
  if ((rc = res_room(r->res, r->asker, RES_REGION, r->a->msg, r->a->msglen))) return rc;
  if (r->job->reg_fd < 0) {
    snprintf(r->a->msg, r->a->msglen, "no file descriptor came with this request (send the memfd"
             " as SCM_RIGHTS ancillary data with its bytes)");
    return GKC_EINVALID_ARGUMENT;
  }
  /* Counted against the connection's pinned bytes from now: two
   * registrations in flight cannot both fit under the limit by racing. */
  if ((rc = res_pin(r->res, r->asker, (size_t)bytes, r->a->msg, r->a->msglen))) return rc;
  r->job->pin_charge = (size_t)bytes;
  r->job->out_bytes = (size_t)bytes;
  r->job->reg_keep = &r->res->pinner;
  return 0;
}

static void pack_register(msgpack_packer *pk, const gkcd_job *job, double server_us,
                          uint32_t new_id) {
  (void)server_us;
  msgpack_pack_map(pk, 2);
  proto_pack_cstr(pk, "region"), msgpack_pack_uint32(pk, new_id);
  proto_pack_cstr(pk, "bytes"), msgpack_pack_uint64(pk, job->out_bytes);
}

static int answer_release(const method_env *env, const msgpack_object *params, msgpack_packer *pk,
                          void **body, size_t *body_len, char *msg, size_t msglen) {
  (void)body, (void)body_len;
  return methods_release(env, PROTO_M_SHM_RELEASE, params, pk, msg, msglen);
}

const gkcd_method method_row_SHM_REGISTER = {
    .id = PROTO_M_SHM_REGISTER, .where = METHOD_DAEMON, .makes = RES_REGION,
    .parse = parse_shm_register, .run_daemon = region_map, .pack = pack_register,
};

const gkcd_method method_row_SHM_RELEASE = {
    .id = PROTO_M_SHM_RELEASE, .where = METHOD_LOOP, .makes = -1, .answer = answer_release,
};
