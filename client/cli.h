/* cli.h: what the gkc command-line client's files share.
 *
 * gkc_cli.c parses the global options and dispatches to one cli_<command>.c
 * per command.  Every command follows the same contract: validate all
 * arguments and read all input files before talking to gkcd, except for
 * its limits (cli_limits_get), so that a usage error never depends on the
 * daemon; then return an exit code:
 *   CLI_OK (0), CLI_FAIL (1: server, connection or --check failure),
 *   CLI_USAGE (2: bad option or argument, unreadable or mismatched input).
 *
 * Implemented in: cli_check.c, cli_conn.c, cli_files.c, cli_limits.c, cli_opts.c, cli_out.c, cli_rand.c
 */
#ifndef GKC_CLI_H
#define GKC_CLI_H

#include <getopt.h>
#include <stdint.h>
#include <stdio.h>

#include "gkc.h"
#include "npy.h"

enum { CLI_OK = 0, CLI_FAIL = 1, CLI_USAGE = 2 };

/* A --check fails when the scaled error is over this. */
#define CLI_CHECK_TOL 1e-4

typedef struct cli_cmd cli_cmd;

/* Options that may come before or after the command. */
typedef struct {
  const char *socket; /* --socket, NULL: gkc_socket_path's default */
  int json;           /* --json */
  int no_shm;         /* --no-shm: every array through the socket (gkc_set_shm) */
  const cli_cmd *cmd; /* the command being run */
} cli_globals;

struct cli_cmd {
  const char *name;
  const char *summary; /* one line for `gkc --help` */
  void (*usage)(FILE *f);
  int (*run)(cli_globals *g, int argc, char **argv); /* argv[0] is the command */
};

extern const cli_cmd cli_ping_cmd, cli_status_cmd, cli_sgemm_cmd, cli_reduce_cmd, cli_dot_cmd,
    cli_axpby_cmd, cli_nrm2_cmd, cli_spmv_cmd, cli_solve_cmd, cli_metrics_cmd, cli_top_cmd;
extern const cli_cmd cli_batch_cmd;

/* --- options (cli_opts.c) ------------------------------------------------- */

/* Long-only option values; commands number theirs from CLI_O_FIRST. */
enum { CLI_O_SOCKET = 256, CLI_O_JSON, CLI_O_NO_SHM, CLI_O_FIRST };

#define CLI_COMMON_OPTIONS                              \
  {"socket", required_argument, 0, CLI_O_SOCKET},       \
      {"json", no_argument, 0, CLI_O_JSON}, {"no-shm", no_argument, 0, CLI_O_NO_SHM}, \
      {"help", no_argument, 0, 'h'}

/* The --help text shared by every command. */
#define CLI_COMMON_HELP                                                      \
  "\nCommon options:\n"                                                      \
  "  --socket PATH   gkcd's socket (default: $GKC_SOCKET, else\n"            \
  "                  $XDG_RUNTIME_DIR/gkcd.sock, else /run/gkcd/gkcd.sock)\n" \
  "  --json          print one JSON object instead of text\n"                \
  "  --no-shm        send every array through the socket, not through\n"     \
  "                  shared memory (also GKC_NO_SHM=1)\n"                    \
  "  -h, --help      show this help and exit\n"

/* Starts getopt_long over a command's argv (argv[0] = the command). */
void cli_getopt_begin(void);
/* Handles what every command's option loop shares: the common options,
 * --help, and getopt's '?' and ':' (optstring must begin with ':').
 * Returns -1 to go on, else the exit code. */
int cli_common_opt(cli_globals *g, const struct option *opts, int o, char **argv);
/* After the loop: a stray positional argument is a usage error. */
int cli_no_operands(const cli_globals *g, int argc, char **argv);

/* Prints "gkc: <message>" and "Try 'gkc CMD --help'." to stderr; returns CLI_USAGE. */
int cli_usage_error(const cli_globals *g, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* "invalid OPT 'VAL': WANT" as a usage error. */
int cli_bad_value(const cli_globals *g, const char *opt, const char *val, const char *want);

/* Option values shared by several commands: 0, or (after the usage error
 * naming opt) CLI_USAGE. */
int cli_opt_float(const cli_globals *g, const char *opt, const char *arg, float *out);
/* A finite number, kept in double (float64 work). */
int cli_opt_double(const cli_globals *g, const char *opt, const char *arg, double *out);
/* --dtype f32|f64 (or float32|float64): *f64 set. */
int cli_opt_dtype(const cli_globals *g, const char *arg, int *f64);
/* --seed N: sets *seed and *seeded. */
int cli_opt_seed(const cli_globals *g, const char *arg, uint64_t *seed, int *seeded);
/* --devices all|D,D,...: the matrix partitioned over those devices
 * (gkc_csr_upload_partitioned: GKC_DEVICES_ALL or a mask of devices 0..63). */
int cli_opt_devices(const cli_globals *g, const char *arg, uint64_t *mask);
#define CLI_DEVICES_HELP \
  "  --devices all|D,D keep A partitioned by rows over every device gkcd serves\n" \
  "                    (all) or over those listed, balanced by nonzeros; each\n" \
  "                    device computes its rows (PROTOCOL.md, partitioned matrices)\n"
/* --device N: a device number (gkcd says whether it has it). */
int cli_opt_device(const cli_globals *g, const char *arg, int *device);

/* Parsers: 0, or -1 when s is not entirely a valid value. */
int cli_parse_float(const char *s, float *out);      /* finite, in float32 range */
int cli_parse_double(const char *s, double *out);    /* finite */
int cli_parse_u64(const char *s, uint64_t *out);     /* decimal or 0x hex, no sign */
/* "AxBxC" with exactly n positive parts, each <= max; with allow_cube a
 * single number N means N repeated n times. */
int cli_parse_dims(const char *s, int n, int64_t max, int allow_cube, int64_t *out);

/* --- input and output files (cli_files.c) ---------------------------------- */

/* "(2, 3)" as numpy writes a shape. */
const char *cli_shape_str(int ndim, const int64_t *shape, char *buf, size_t len);
/* Checks before any work that path can be created (its folder exists and is
 * writable); returns 0 or a usage error. */
int cli_check_writable(const cli_globals *g, const char *opt, const char *path);
/* Writes a .npy; on failure prints the reason and returns CLI_FAIL. */
int cli_write_npy(const char *path, int ndim, const int64_t *shape, const float *data);
/* The same for float64 data. */
int cli_write_npy_f64(const char *path, int ndim, const int64_t *shape, const double *data);
/* Converts a loaded array to float64 (f64) or float32 in place, as --dtype
 * asked (never on its own: a command that needs one dtype refuses the
 * other, naming the file); CLI_OK or CLI_FAIL when out of memory. */
int cli_npy_convert(npy_array *a, int f64);

/* --- talking to gkcd (cli_conn.c) ------------------------------------------ */

/* Connects; on failure prints why, the socket and a hint, returns CLI_FAIL. */
int cli_connect(const cli_globals *g, gkc_conn **out);
/* Prints "gkc: <errname>: <message>" for a failed call; returns CLI_FAIL. */
int cli_call_failed(gkc_conn *c, int rc);
/* Microseconds on a monotonic clock. */
double cli_now_us(void);

/* --- sizes against the limits (cli_limits.c) ------------------------------- */

/* A command with big inputs checks them before it allocates or reads them:
 * against gkcd's limits (from status, on a connection made early and kept
 * for the call) and against this machine's available memory.  A size over
 * a limit is a failure (exit 1) whose message names the limit, not a usage
 * error: it depends on gkcd and on this machine. */
typedef struct {
  gkc_conn *conn;                            /* the early connection, or NULL */
  uint64_t max_request_bytes, memory_budget; /* gkcd's; 0: unknown */
  uint64_t mem_available;                    /* /proc/meminfo; 0: unknown */
} cli_limits;

/* One planned call: bytes of arrays sent, of the array result returned (0:
 * none), and held by this process at its peak (about). */
typedef struct {
  const char *what; /* the call or file, for messages: "sgemm 10x10x10" */
  uint64_t request;
  const char *request_what; /* "A and B" */
  uint64_t result;
  const char *result_what; /* "C" */
  uint64_t local;
} cli_plan;

/* Sizes that saturate at UINT64_MAX instead of wrapping. */
uint64_t cli_add_sat(uint64_t a, uint64_t b);
uint64_t cli_mul_sat(uint64_t a, uint64_t b);

/* Reads the limits.  Never fails: when gkcd cannot be reached its limits
 * stay unknown, and cli_limits_connect says why later, after the usage
 * checks that do not depend on gkcd. */
void cli_limits_get(const cli_globals *g, cli_limits *l);
/* The early connection (then owned by the caller), or cli_connect. */
int cli_limits_connect(const cli_globals *g, cli_limits *l, gkc_conn **out);
void cli_limits_close(cli_limits *l); /* an early connection not taken */
/* CLI_OK, or CLI_FAIL after a message naming the limit and both sizes. */
int cli_plan_check(const cli_limits *l, const cli_plan *p);
/* Reads a float32 .npy for option opt: a file that cannot be read is a usage
 * error naming opt (CLI_USAGE); one whose data, added to the request and
 * local bytes already planned, would pass a limit is refused after its
 * header, before its data is read (CLI_FAIL). */
int cli_load_npy_limited(const cli_globals *g, const cli_limits *l, const char *opt,
                         const char *path, uint64_t request, uint64_t local, npy_array *out);
/* The same for a float32 or float64 .npy (out->f64 says which; float64
 * stays float64). */
int cli_load_npy_any(const cli_globals *g, const cli_limits *l, const char *opt,
                     const char *path, uint64_t request, uint64_t local, npy_array *out);

/* --- random data (cli_rand.c) ---------------------------------------------- */

/* splitmix64: tiny, seedable, good enough for test data. */
typedef struct {
  uint64_t state;
} cli_rng;

/* A seed from the clock and pid, small enough to type back in. */
uint64_t cli_default_seed(void);
void cli_rng_init(cli_rng *r, uint64_t seed);
uint64_t cli_rng_next(cli_rng *r);
double cli_rng_unit(cli_rng *r); /* uniform in (0, 1] */
/* n floats uniform in [-1, 1]; never all zero. */
void cli_rng_fill(cli_rng *r, float *x, size_t n);

/* --- printing results (cli_out.c) ----------------------------------------- */

/* Results are printed field by field, either as aligned "label: value" text
 * lines or as members of one JSON object, so text and --json cannot drift
 * apart.  A NULL key makes a text-only field, a NULL label a JSON-only one.
 * Call cli_out_end once, also after a failed --check. */
typedef struct {
  int json;
  int nfields;
} cli_out;

void cli_out_begin(cli_out *o, int json);
void cli_out_str(cli_out *o, const char *key, const char *label, const char *v);
void cli_out_int(cli_out *o, const char *key, const char *label, int64_t v);
void cli_out_bool(cli_out *o, const char *key, const char *label, int v);
/* text_fmt formats v for the text form, e.g. "%.1f". */
void cli_out_num(cli_out *o, const char *key, const char *label, double v, const char *text_fmt);
/* A duration in microseconds: a number in JSON, "1.234 ms" in text. */
void cli_out_us(cli_out *o, const char *key, const char *label, double us);
/* A shape: [2, 3] in JSON, "2 x 3" in text. */
/* The daemon's time breakdown of a call, where it reported one. */
void cli_out_times(cli_out *o, const gkc_info *info);
void cli_out_shape(cli_out *o, const char *key, const char *label, int ndim, const int64_t *shape);
void cli_out_end(cli_out *o);
/* Starts a field whose value the caller prints itself: a JSON value, or the
 * rest of a text line with its newline.  Returns 0 when the field has no
 * form in this mode (NULL key or label): then print nothing. */
int cli_out_field(cli_out *o, const char *key, const char *label);
/* Writes s as a JSON string literal, quotes included. */
void cli_json_str(FILE *f, const char *s);
/* "1.234 ms" for a duration in microseconds. */
const char *cli_fmt_us(double us, char *buf, size_t len);
/* "512 B", "1.5 GiB": a byte count in binary units, one decimal above B. */
const char *cli_fmt_bytes(uint64_t b, char *buf, size_t len);

/* --- --check helpers (cli_check.c) ------------------------------------------ */

/* Largest |got - ref| / scale over n results, where scale is the sum of the
 * absolute values of the terms that make up ref (so cancellation does not
 * inflate the error); where scale is 0 the plain difference counts. */
double cli_max_scaled_err(const float *got, const double *ref, const double *scale, size_t n);
/* Prints the check's fields; returns CLI_OK or (after an stderr line) CLI_FAIL. */
int cli_report_check(cli_out *o, double err);
/* The same against another tolerance (TF32 results are rounded coarser). */
int cli_report_check_tol(cli_out *o, double err, double tol);

#endif
