/* cli_batch.c: gkc batch, a list of vector steps on named resident arrays in
 * one request (PROTOCOL.md, "batch").
 *
 * Arrays and matrices are named on the command line (--array, --zeros,
 * --random, --matrix), the steps refer to them by name (--step 'dot x y'),
 * and everything is read and checked here before gkcd is reached: every
 * name, word count, number and scalar reference.  Then, on one connection,
 * each array is uploaded, the steps run as one gkc_batch call, and the
 * --save arrays are downloaded.  The resident objects belong to the
 * connection and go when it closes.  Lengths are gkcd's to check: its
 * message names the step.
 */
#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli_csr.h"

#define MAX_NAMES 64 /* --array, --zeros, --random and --matrix together */
#define MAX_NAME_LEN 32
#define MAX_WORDS 12 /* sgemm's 10, and a little more to say "too many" */

typedef enum { DEF_ARRAY, DEF_ZEROS, DEF_RANDOM, DEF_MATRIX } def_kind;
static const char *const def_opts[] = {"--array", "--zeros", "--random", "--matrix"};

typedef struct {
  def_kind kind;
  char name[MAX_NAME_LEN + 1];
  const char *path; /* --array, --matrix: the file */
  int64_t n;        /* --zeros, --random: the length */
  npy_array a;      /* arrays, owned: from the file, or 1-D zeros or random */
  mtx_csr m;        /* --matrix, owned */
  uint32_t id;      /* on gkcd: handle or matrix; 0 before the upload */
  int in_region;    /* --in-region: in the shared-memory region, not resident */
  uint64_t off;     /* ... at this byte offset */
} batch_def;

typedef struct {
  int def; /* the array */
  const char *path;
} batch_save;

/* A step as parsed: names resolved to indices into the defs (-1: none). */
typedef struct {
  const char *text;
  gkc_step_op op;
  gkc_reduce_op fn;
  int x, y, out, matrix, a, b, c;
  int trans_a, trans_b;
  int32_t m, n, k;
  gkc_scalar alpha, beta;
} batch_step;

typedef struct {
  batch_def defs[MAX_NAMES];
  int ndefs;
  const char *step_text[GKC_BATCH_MAX_STEPS];
  batch_step steps[GKC_BATCH_MAX_STEPS];
  int nsteps;
  batch_save saves[MAX_NAMES];
  const char *save_arg[MAX_NAMES];
  int nsaves;
  int seeded, any_random;
  uint64_t seed;
  const char *in_region[MAX_NAMES]; /* --in-region NAME, as given */
  int nin_region;
  size_t region_bytes;              /* all of them, packed at 64-byte offsets */
  gkc_region *region;
} batch_job;

static const char *const op_names[] = {"dot", "reduce", "axpby", "spmv", "sgemm"};
static const char *const fn_names[] = {"sum", "min", "max"};

static void usage(FILE *f) {
  fprintf(f,
          "Usage: gkc batch [--array NAME=X.npy]... [--zeros NAME=N]... [--random NAME=N]...\n"
          "                 [--matrix NAME=A.mtx]... --step 'STEP'... [--save NAME=F.npy]...\n"
          "Runs up to %d vector steps on gkcd's resident arrays as one request: a\n"
          "whole iteration of your own solver in one round trip.  Steps run in the\n"
          "order given and are numbered from 0; a later step reads what an earlier\n"
          "one wrote.\n\n"
          "Options:\n"
          "  --array NAME=X.npy   a float32 array from a file (any shape, flattened)\n"
          "  --zeros NAME=N       an array of N zeros\n"
          "  --random NAME=N      N random values, uniform in [-1, 1]\n"
          "  --matrix NAME=A.mtx  a sparse matrix, Matrix Market (.mtx or .mtx.gz)\n"
          "  --step 'STEP'        one step (repeat for each, %d at most), see below\n"
          "  --save NAME=F.npy    write array NAME, as the batch left it, to a file\n"
          "  --in-region NAME     keep array NAME in a shared-memory region instead of\n"
          "                       on gkcd: an spmv step's x or out only (PROTOCOL.md)\n"
          "  --seed N             seed of the --random data (default: from the clock)\n"
          "NAME: a letter or _, then letters, digits or _ (%d characters at most).\n\n"
          "Steps (words separated by spaces):\n"
          "  dot X Y                  value = X . Y\n"
          "  reduce X [sum|min|max]   value = the sum (default), min or max of X\n"
          "  axpby ALPHA X BETA Y [OUT]\n"
          "                           OUT = ALPHA X + BETA Y (OUT default Y: in place)\n"
          "  spmv A ALPHA X BETA Y|- OUT\n"
          "                           OUT = ALPHA A X + BETA Y (-: no Y, BETA must be 0)\n"
          "  sgemm M N K ALPHA A[^T] B[^T] BETA C|- OUT\n"
          "                           OUT (M x N) = ALPHA op(A) op(B) + BETA C, row-major;\n"
          "                           ^T: the operand transposed; -: no C, BETA 0\n"
          "ALPHA and BETA are a number or a reference to the values of earlier dot\n"
          "and reduce steps: $i (the value of step i), S*$i, -$i, $i/$j, S*$i/$j,\n"
          "-$i/$j and S/$j, meaning S * value[i] / value[j].  Quote steps with '...'\n"
          "so that the shell leaves $ alone.\n"
          CLI_COMMON_HELP
          "\nPrints each step (and the value of dot and reduce), the algo and times.\n\n"
          "Example, one conjugate gradient iteration for A x = b from x = 0 (N: the\n"
          "length of b):\n"
          "  gkc batch --matrix A=A.mtx --array r=b.npy --array p=b.npy \\\n"
          "    --zeros x=N --zeros q=N \\\n"
          "    --step 'dot r r' --step 'spmv A 1 p 0 - q' --step 'dot p q' \\\n"
          "    --step 'axpby $0/$2 p 1 x' --step 'axpby -$0/$2 q 1 r' \\\n"
          "    --step 'dot r r' --step 'axpby 1 r $5/$0 p' --save x=x.npy\n",
          GKC_BATCH_MAX_STEPS, GKC_BATCH_MAX_STEPS, MAX_NAME_LEN);
}

static int valid_name(const char *s, size_t len) {
  if (len == 0 || len > MAX_NAME_LEN || !(isalpha((unsigned char)s[0]) || s[0] == '_')) return 0;
  for (size_t i = 1; i < len; i++)
    if (!(isalnum((unsigned char)s[i]) || s[i] == '_')) return 0;
  return 1;
}

static int find_def(const batch_job *s, const char *name) {
  for (int i = 0; i < s->ndefs; i++)
    if (strcmp(s->defs[i].name, name) == 0) return i;
  return -1;
}

/* NAME=VALUE of option opt: the name checked and not yet defined (when
 * define) or any valid name; *value points after the '='. */
static int split_arg(const cli_globals *g, const char *opt, const char *arg, char *name,
                     const char **value) {
  const char *eq = strchr(arg, '=');
  if (!eq || !valid_name(arg, (size_t)(eq - arg)) || eq[1] == 0)
    return cli_bad_value(g, opt, arg, "expected NAME=VALUE, NAME a letter or _ then letters,"
                         " digits or _ (32 at most)");
  memcpy(name, arg, (size_t)(eq - arg));
  name[eq - arg] = 0;
  *value = eq + 1;
  return 0;
}

static int add_def(cli_globals *g, batch_job *s, def_kind kind, const char *arg) {
  const char *opt = def_opts[kind], *value;
  char name[MAX_NAME_LEN + 1];
  int rc = split_arg(g, opt, arg, name, &value);
  if (rc) return rc;
  int prev = find_def(s, name);
  if (prev >= 0)
    return cli_usage_error(g, "%s %s: '%s' is already defined by %s %s", opt, arg, name,
                           def_opts[s->defs[prev].kind], s->defs[prev].name);
  if (s->ndefs == MAX_NAMES)
    return cli_usage_error(g, "%s %s: more than %d arrays and matrices", opt, arg, MAX_NAMES);
  batch_def *d = &s->defs[s->ndefs];
  d->kind = kind;
  strcpy(d->name, name);
  if (kind == DEF_ZEROS || kind == DEF_RANDOM) {
    if (cli_parse_dims(value, 1, INT64_MAX / 8, 0, &d->n))
      return cli_bad_value(g, opt, arg, "expected NAME=N, N a positive integer");
    if (kind == DEF_RANDOM) s->any_random = 1;
  } else {
    d->path = value;
  }
  s->ndefs++;
  return 0;
}

/* "--step 3 'axpby $5 x 1 y': " before every message about a step. */
#define STEP_FMT "--step %d '%s': "

/* Splits text into words (at most MAX_WORDS kept; *nw gets the count, maybe more). */
static void split_words(char *buf, char **w, int *nw) {
  int n = 0;
  for (char *t = strtok(buf, " \t\n"); t; t = strtok(NULL, " \t\n")) {
    if (n < MAX_WORDS) w[n] = t;
    n++;
  }
  *nw = n;
}

/* The def index of array (want_matrix 0) or matrix (1) word, else a usage error. */
static int lookup(const cli_globals *g, const batch_job *s, int i, const char *word,
                  int want_matrix, int *out) {
  const char *text = s->step_text[i];
  int d = find_def(s, word);
  if (d < 0)
    return cli_usage_error(g, STEP_FMT "'%s' is not defined (define it with %s)", i, text, word,
                           want_matrix ? "--matrix" : "--array, --zeros or --random");
  if ((s->defs[d].kind == DEF_MATRIX) != want_matrix)
    return cli_usage_error(g, STEP_FMT "'%s' is %s, not %s", i, text, word,
                           want_matrix ? "an array" : "a matrix",
                           want_matrix ? "a matrix" : "an array");
  *out = d;
  return 0;
}

/* $N at *p (advanced past it): N a step index that is earlier than step i
 * and has a value; else a usage error naming what (ALPHA or BETA) and word. */
static int scalar_ref(const cli_globals *g, const batch_job *s, int i, const char *what,
                      const char *word, const char **p, int *out) {
  const char *q = *p + 1;
  long v = 0;
  int digits = 0;
  while (isdigit((unsigned char)*q) && digits < 4) v = v * 10 + (*q++ - '0'), digits++;
  if (!digits || isdigit((unsigned char)*q))
    return cli_usage_error(g, STEP_FMT "%s '%s': expected a step number after '$'", i,
                           s->step_text[i], what, word);
  int len = (int)(q - *p);
  if (v >= i)
    return cli_usage_error(g, STEP_FMT "%.*s is not an earlier dot or reduce step (step %ld %s)",
                           i, s->step_text[i], len, *p, v,
                           v == i ? "is this one" : "comes later");
  if (s->steps[v].op != GKC_STEP_DOT && s->steps[v].op != GKC_STEP_REDUCE)
    return cli_usage_error(g, STEP_FMT "%.*s is not an earlier dot or reduce step (step %ld is"
                           " %s, which has no value)", i, s->step_text[i], len, *p, v,
                           op_names[s->steps[v].op]);
  *out = (int)v;
  *p = q;
  return 0;
}

/* ALPHA or BETA of step i: a number, or [S*|-|S/]$i[/$j]. */
static int parse_scalar(const cli_globals *g, const batch_job *s, int i, const char *what,
                        const char *word, gkc_scalar *out) {
  float v;
  if (cli_parse_float(word, &v) == 0) {
    *out = gkc_scalar_num(v);
    return 0;
  }
  const char *dollar = strchr(word, '$');
  if (!dollar)
    goto bad;
  float scale = 1.0f;
  int over_only = 0, step = -1, over = -1, rc;
  size_t plen = (size_t)(dollar - word);
  if (plen == 1 && word[0] == '-') {
    scale = -1.0f;
  } else if (plen > 1 && (word[plen - 1] == '*' || word[plen - 1] == '/')) {
    char num[64];
    if (plen - 1 >= sizeof num) goto bad;
    memcpy(num, word, plen - 1);
    num[plen - 1] = 0;
    if (cli_parse_float(num, &scale))
      return cli_usage_error(g, STEP_FMT "%s '%s': '%s' is not a finite float32 number", i,
                             s->step_text[i], what, word, num);
    over_only = word[plen - 1] == '/';
  } else if (plen != 0) {
    goto bad;
  }
  const char *p = dollar;
  if ((rc = scalar_ref(g, s, i, what, word, &p, over_only ? &over : &step))) return rc;
  if (!over_only && *p == '/') {
    p++;
    if (*p != '$') goto bad;
    if ((rc = scalar_ref(g, s, i, what, word, &p, &over))) return rc;
  }
  if (*p) goto bad;
  *out = gkc_scalar_ref(step, over, scale);
  return 0;
bad:
  return cli_usage_error(g, STEP_FMT "%s '%s': expected a number, or $i, S*$i, -$i, $i/$j,"
                         " S*$i/$j, -$i/$j or S/$j (i, j earlier dot or reduce steps)",
                         i, s->step_text[i], what, word);
}

/* A positive int32 dimension of sgemm. */
static int parse_dim(const cli_globals *g, const batch_job *s, int i, const char *what,
                     const char *word, int32_t *out) {
  int64_t v;
  if (cli_parse_dims(word, 1, INT32_MAX, 0, &v))
    return cli_usage_error(g, STEP_FMT "%s '%s': expected a positive integer", i,
                           s->step_text[i], what, word);
  *out = (int32_t)v;
  return 0;
}

/* An sgemm operand, NAME or NAME^T. */
static int parse_operand(const cli_globals *g, const batch_job *s, int i, char *word, int *def,
                         int *trans) {
  size_t len = strlen(word);
  *trans = len > 2 && strcmp(word + len - 2, "^T") == 0;
  if (*trans) word[len - 2] = 0;
  return lookup(g, s, i, word, 0, def);
}

/* Y or C that may be '-' (none; then the scalar must be the number 0). */
static int parse_optional(const cli_globals *g, const batch_job *s, int i, const char *word,
                          const char *what, const gkc_scalar *beta, int *def) {
  if (strcmp(word, "-") != 0) return lookup(g, s, i, word, 0, def);
  if (beta->is_ref || beta->value != 0.0f)
    return cli_usage_error(g, STEP_FMT "%s is '-' (none), so BETA must be 0", i,
                           s->step_text[i], what);
  *def = -1;
  return 0;
}

static const char *const forms[] = {
    "dot X Y", "reduce X [sum|min|max]", "axpby ALPHA X BETA Y [OUT]",
    "spmv A ALPHA X BETA Y|- OUT", "sgemm M N K ALPHA A[^T] B[^T] BETA C|- OUT"};
static const int min_words[] = {3, 2, 5, 7, 10}, max_words[] = {3, 3, 6, 7, 10};

static int parse_step(const cli_globals *g, batch_job *s, int i) {
  const char *text = s->step_text[i];
  batch_step *st = &s->steps[i];
  char buf[1024], *w[MAX_WORDS];
  int nw, rc;
  *st = (batch_step){.text = text, .x = -1, .y = -1, .out = -1, .matrix = -1,
                     .a = -1, .b = -1, .c = -1};
  if (strlen(text) >= sizeof buf)
    return cli_usage_error(g, "--step %d: longer than %zu characters", i, sizeof buf - 1);
  strcpy(buf, text);
  split_words(buf, w, &nw);
  if (nw == 0) return cli_usage_error(g, STEP_FMT "empty step", i, text);
  int op = -1;
  for (int k = 0; k < 5; k++)
    if (strcmp(w[0], op_names[k]) == 0) op = k;
  if (op < 0)
    return cli_usage_error(g, STEP_FMT "unknown op '%s': expected dot, reduce, axpby, spmv or"
                           " sgemm", i, text, w[0]);
  if (nw < min_words[op] || nw > max_words[op])
    return cli_usage_error(g, STEP_FMT "%s %d words, expected '%s'", i, text,
                           nw < min_words[op] ? "only" : "too many:", nw, forms[op]);
  st->op = (gkc_step_op)op;
  switch (st->op) {
    case GKC_STEP_DOT:
      if ((rc = lookup(g, s, i, w[1], 0, &st->x)) || (rc = lookup(g, s, i, w[2], 0, &st->y)))
        return rc;
      break;
    case GKC_STEP_REDUCE:
      if ((rc = lookup(g, s, i, w[1], 0, &st->x))) return rc;
      st->fn = GKC_SUM;
      if (nw == 3) {
        int fn = -1;
        for (int k = 0; k < 3; k++)
          if (strcmp(w[2], fn_names[k]) == 0) fn = k;
        if (fn < 0)
          return cli_usage_error(g, STEP_FMT "'%s': expected sum, min or max", i, text, w[2]);
        st->fn = (gkc_reduce_op)fn;
      }
      break;
    case GKC_STEP_AXPBY:
      if ((rc = parse_scalar(g, s, i, "ALPHA", w[1], &st->alpha)) ||
          (rc = lookup(g, s, i, w[2], 0, &st->x)) ||
          (rc = parse_scalar(g, s, i, "BETA", w[3], &st->beta)) ||
          (rc = lookup(g, s, i, w[4], 0, &st->y)))
        return rc;
      st->out = st->y;
      if (nw == 6 && (rc = lookup(g, s, i, w[5], 0, &st->out))) return rc;
      break;
    case GKC_STEP_SPMV:
      if ((rc = lookup(g, s, i, w[1], 1, &st->matrix)) ||
          (rc = parse_scalar(g, s, i, "ALPHA", w[2], &st->alpha)) ||
          (rc = lookup(g, s, i, w[3], 0, &st->x)) ||
          (rc = parse_scalar(g, s, i, "BETA", w[4], &st->beta)) ||
          (rc = parse_optional(g, s, i, w[5], "Y", &st->beta, &st->y)) ||
          (rc = lookup(g, s, i, w[6], 0, &st->out)))
        return rc;
      break;
    case GKC_STEP_SGEMM:
      if ((rc = parse_dim(g, s, i, "M", w[1], &st->m)) ||
          (rc = parse_dim(g, s, i, "N", w[2], &st->n)) ||
          (rc = parse_dim(g, s, i, "K", w[3], &st->k)) ||
          (rc = parse_scalar(g, s, i, "ALPHA", w[4], &st->alpha)) ||
          (rc = parse_operand(g, s, i, w[5], &st->a, &st->trans_a)) ||
          (rc = parse_operand(g, s, i, w[6], &st->b, &st->trans_b)) ||
          (rc = parse_scalar(g, s, i, "BETA", w[7], &st->beta)) ||
          (rc = parse_optional(g, s, i, w[8], "C", &st->beta, &st->c)) ||
          (rc = lookup(g, s, i, w[9], 0, &st->out)))
        return rc;
      break;
  }
  return 0;
}

/* Only an spmv step's x and out may be --in-region arrays (PROTOCOL.md,
 * "batch": region operands). */
static int check_region_use(const cli_globals *g, const batch_job *s, int i) {
  const batch_step *b = &s->steps[i];
  const int uses[] = {b->x, b->y, b->out, b->a, b->b, b->c};
  for (int k = 0; k < 6; k++) {
    int d = uses[k];
    if (d < 0 || !s->defs[d].in_region) continue;
    if (b->op == GKC_STEP_SPMV && (k == 0 || k == 2)) continue;
    return cli_usage_error(g, STEP_FMT "'%s' is --in-region: only an spmv step's x and out may be"
                           " in the region", i, s->step_text[i], s->defs[d].name);
  }
  return 0;
}

static int parse(cli_globals *g, batch_job *s, int argc, char **argv) {
  enum { O_ARRAY = CLI_O_FIRST, O_ZEROS, O_RANDOM, O_MATRIX, O_STEP, O_SAVE, O_SEED, O_IN_REGION };
  static const struct option opts[] = {
      CLI_COMMON_OPTIONS,
      {"array", required_argument, 0, O_ARRAY},   {"zeros", required_argument, 0, O_ZEROS},
      {"random", required_argument, 0, O_RANDOM}, {"matrix", required_argument, 0, O_MATRIX},
      {"step", required_argument, 0, O_STEP},     {"save", required_argument, 0, O_SAVE},
      {"seed", required_argument, 0, O_SEED},     {"in-region", required_argument, 0, O_IN_REGION},
      {0, 0, 0, 0}};
  int o, rc;
  cli_getopt_begin();
  while ((o = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
    switch (o) {
      case O_ARRAY: case O_ZEROS: case O_RANDOM: case O_MATRIX:
        if ((rc = add_def(g, s, (def_kind)(o - O_ARRAY), optarg))) return rc;
        break;
      case O_STEP:
        if (s->nsteps == GKC_BATCH_MAX_STEPS)
          return cli_usage_error(g, STEP_FMT "more than %d steps (one batch's most)",
                                 s->nsteps, optarg, GKC_BATCH_MAX_STEPS);
        s->step_text[s->nsteps++] = optarg;
        break;
      case O_SAVE:
        if (s->nsaves == MAX_NAMES)
          return cli_usage_error(g, "--save %s: more than %d --save", optarg, MAX_NAMES);
        s->save_arg[s->nsaves++] = optarg;
        break;
      case O_SEED: if ((rc = cli_opt_seed(g, optarg, &s->seed, &s->seeded))) return rc; break;
      case O_IN_REGION:
        if (s->nin_region == MAX_NAMES)
          return cli_usage_error(g, "--in-region %s: more than %d --in-region", optarg, MAX_NAMES);
        s->in_region[s->nin_region++] = optarg;
        break;
      default:
        if ((rc = cli_common_opt(g, opts, o, argv)) >= 0) return rc;
    }
  }
  if ((rc = cli_no_operands(g, argc, argv)) >= 0) return rc;
  if (s->nsteps == 0) return cli_usage_error(g, "missing --step: give at least one");
  for (int i = 0; i < s->nin_region; i++) {
    int d = find_def(s, s->in_region[i]);
    if (d < 0 || s->defs[d].kind == DEF_MATRIX)
      return cli_usage_error(g, "--in-region %s: '%s' is %s", s->in_region[i], s->in_region[i],
                             d < 0 ? "not defined (define it with --array, --zeros or --random)"
                                   : "a matrix: only arrays go in the region");
    s->defs[d].in_region = 1;
  }
  /* Steps after all the options: a name may be defined after its first use. */
  for (int i = 0; i < s->nsteps; i++) {
    if ((rc = parse_step(g, s, i))) return rc;
    if ((rc = check_region_use(g, s, i))) return rc;
  }
  for (int i = 0; i < s->nsaves; i++) {
    char name[MAX_NAME_LEN + 1];
    const char *path;
    if ((rc = split_arg(g, "--save", s->save_arg[i], name, &path))) return rc;
    int d = find_def(s, name);
    if (d < 0 || s->defs[d].kind == DEF_MATRIX)
      return cli_usage_error(g, "--save %s: '%s' is %s", s->save_arg[i], name,
                             d < 0 ? "not defined (define it with --array, --zeros or --random)"
                                   : "a matrix: only arrays can be saved");
    if ((rc = cli_check_writable(g, "--save", path))) return rc;
    s->saves[i] = (batch_save){d, path};
  }
  return -1;
}

/* Reads the files and makes the zeros and random arrays, in the order given. */
static int load(cli_globals *g, const cli_limits *l, batch_job *s) {
  uint64_t local = 0;
  cli_rng r;
  if (s->any_random) {
    if (!s->seeded) s->seed = cli_default_seed();
    cli_rng_init(&r, s->seed);
  }
  for (int i = 0; i < s->ndefs; i++) {
    batch_def *d = &s->defs[i];
    char opt[MAX_NAME_LEN + 16], sh[96];
    snprintf(opt, sizeof opt, "%s %s", def_opts[d->kind], d->name);
    int rc;
    switch (d->kind) {
      case DEF_ARRAY:
        if ((rc = cli_load_npy_limited(g, l, opt, d->path, 0, local, &d->a))) return rc;
        if (d->a.count == 0)
          return cli_usage_error(g, "%s=%s: the array is empty (shape %s)", opt, d->path,
                                 cli_shape_str(d->a.ndim, d->a.shape, sh, sizeof sh));
        break;
      case DEF_ZEROS: case DEF_RANDOM: {
        uint64_t bytes = cli_mul_sat((uint64_t)d->n, 4);
        char what[96];
        snprintf(what, sizeof what, "batch %s=%lld", opt, (long long)d->n);
        cli_plan p = {what, bytes, d->name, 0, NULL, cli_add_sat(local, bytes)};
        if ((rc = cli_plan_check(l, &p))) return rc;
        d->a.ndim = 1;
        d->a.shape[0] = d->a.count = d->n;
        if ((uint64_t)d->n > SIZE_MAX / 4 || !(d->a.data = calloc((size_t)d->n, 4))) {
          fprintf(stderr, "gkc: cannot allocate %lld floats for %s\n", (long long)d->n, opt);
          return CLI_FAIL;
        }
        if (d->kind == DEF_RANDOM) cli_rng_fill(&r, d->a.data, (size_t)d->n);
        break;
      }
      case DEF_MATRIX: {
        /* Its upload against gkcd's limits, from the header, before the
         * entries are read (an unreadable header is cli_csr_read's to say). */
        int64_t rows, cols, nnz;
        int sym;
        if (cli_csr_peek(d->path, &rows, &cols, &nnz, &sym) == 0) {
          uint64_t hi = cli_mul_sat((uint64_t)nnz, sym ? 2 : 1);
          uint64_t in = cli_add_sat(cli_mul_sat((uint64_t)rows + 1, 4), cli_mul_sat(hi, 8));
          char what[MAX_NAME_LEN + 600];
          snprintf(what, sizeof what, "batch %s=%s (%lld x %lld, %lld entries%s)", opt, d->path,
                   (long long)rows, (long long)cols, (long long)nnz, sym ? ", symmetric" : "");
          cli_plan p = {what, in, d->name, 0, NULL,
                        cli_add_sat(local, cli_add_sat(in, cli_mul_sat((uint64_t)nnz, 12)))};
          if ((rc = cli_plan_check(l, &p))) return rc;
        }
        if ((rc = cli_csr_read(g, opt, d->path, &d->m))) return rc;
        if (d->m.nnz > INT32_MAX)
          return cli_usage_error(g, "%s=%s has %lld entries, more than gkcd's int32 indices"
                                 " allow", opt, d->path, (long long)d->m.nnz);
        local = cli_add_sat(local, cli_mul_sat((uint64_t)d->m.nnz, 8));
        continue;
      }
    }
    local = cli_add_sat(local, cli_mul_sat((uint64_t)d->a.count, 4));
  }
  return CLI_OK;
}

/* Uploads every def, and copies the --in-region ones into a region made
 * for them; 0 or the failed call's error. */
static int upload_all(gkc_conn *conn, batch_job *s) {
  for (int i = 0; i < s->ndefs; i++)
    if (s->defs[i].in_region) {
      s->defs[i].off = s->region_bytes;
      s->region_bytes += ((size_t)s->defs[i].a.count * 4 + 63) / 64 * 64;
    }
  if (s->region_bytes) {
    int err = gkc_region_create(conn, s->region_bytes, &s->region);
    if (err) {
      fprintf(stderr, "gkc: making the region for --in-region:\n");
      return err;
    }
  }
  for (int i = 0; i < s->ndefs; i++) {
    batch_def *d = &s->defs[i];
    int err;
    if (d->in_region) {
      memcpy((char *)gkc_region_data(s->region) + d->off, d->a.data, (size_t)d->a.count * 4);
      continue;
    }
    if (d->kind == DEF_MATRIX) {
      gkc_csr A = {d->m.rows, d->m.cols, d->m.nnz, d->m.row_ptr, d->m.col_idx, d->m.values};
      err = gkc_csr_upload(conn, &A, 0, &d->id, NULL);
    } else {
      err = gkc_upload(conn, gkc_ref_mem(d->a.data, (size_t)d->a.count * 4), GKC_F32, 0, &d->id);
    }
    if (err) {
      fprintf(stderr, "gkc: uploading %s %s:\n", def_opts[d->kind], d->name);
      return err;
    }
  }
  return 0;
}

static uint32_t id_of(const batch_job *s, int def) { return def < 0 ? 0 : s->defs[def].id; }

/* An spmv step's --in-region x and out as region operands (else zeroed). */
static gkc_step_region to_region(const batch_job *s, const batch_step *b) {
  gkc_step_region g;
  memset(&g, 0, sizeof g);
  if (b->op != GKC_STEP_SPMV) return g;
  const batch_def *x = &s->defs[b->x], *o = &s->defs[b->out];
  if (x->in_region) g.x = gkc_ref_region(s->region, x->off, (size_t)x->a.count * 4);
  if (o->in_region) g.out = gkc_out_region(s->region, o->off);
  return g;
}

static gkc_step to_step(const batch_job *s, const batch_step *b) {
  switch (b->op) {
    case GKC_STEP_DOT: return gkc_step_dot(id_of(s, b->x), id_of(s, b->y));
    case GKC_STEP_REDUCE: return gkc_step_reduce(id_of(s, b->x), b->fn);
    case GKC_STEP_AXPBY:
      return gkc_step_axpby(b->alpha, id_of(s, b->x), b->beta, id_of(s, b->y), id_of(s, b->out));
    case GKC_STEP_SPMV:
      return gkc_step_spmv(id_of(s, b->matrix), b->alpha, id_of(s, b->x), b->beta,
                           id_of(s, b->y), id_of(s, b->out));
    case GKC_STEP_SGEMM: break;
  }
  return gkc_step_sgemm(b->m, b->n, b->k, b->alpha, id_of(s, b->a), b->trans_a, id_of(s, b->b),
                        b->trans_b, b->beta, id_of(s, b->c), id_of(s, b->out));
}

/* The steps: a "steps" array in JSON, one text line each. */
static void print_steps(cli_out *o, const batch_job *s, const gkc_batch_result *br) {
  if (o->json && cli_out_field(o, "steps", NULL)) fputc('[', stdout);
  for (int i = 0; i < s->nsteps; i++) {
    const batch_step *st = &s->steps[i];
    int has_value = st->op == GKC_STEP_DOT || st->op == GKC_STEP_REDUCE;
    const char *op = op_names[st->op];
    if (o->json) {
      printf("%s{\"op\": \"%s\"", i ? ", " : "", op);
      if (st->op == GKC_STEP_REDUCE) printf(", \"fn\": \"%s\"", fn_names[st->fn]);
      if (has_value) {
        fputs(", \"value\": ", stdout);
        /* %.17g: the float64 exactly (a float32 min or max reads back as itself). */
        if (isfinite(br->value[i])) printf("%.17g", br->value[i]);
        else fputs("null", stdout);
      } else {
        fputs(", \"array\": ", stdout);
        cli_json_str(stdout, s->defs[st->out].name);
      }
      fputs(", \"text\": ", stdout);
      cli_json_str(stdout, st->text);
      fputc('}', stdout);
    } else {
      char label[32], line[1100];
      snprintf(label, sizeof label, "step %d", i);
      if (has_value)
        snprintf(line, sizeof line, "%s = %.9g", st->text, br->value[i]);
      else
        snprintf(line, sizeof line, "%s -> %s", st->text, s->defs[st->out].name);
      cli_out_str(o, NULL, label, line);
    }
  }
  if (o->json) fputc(']', stdout);
}

static void print_saves(cli_out *o, const batch_job *s) {
  if (o->json && cli_out_field(o, "saved", NULL)) {
    fputc('[', stdout);
    for (int i = 0; i < s->nsaves; i++) {
      fputs(i ? ", {\"name\": " : "{\"name\": ", stdout);
      cli_json_str(stdout, s->defs[s->saves[i].def].name);
      fputs(", \"path\": ", stdout);
      cli_json_str(stdout, s->saves[i].path);
      fputc('}', stdout);
    }
    fputc(']', stdout);
  }
  for (int i = 0; i < s->nsaves && !o->json; i++) {
    char line[1200];
    snprintf(line, sizeof line, "%s (%s)", s->saves[i].path, s->defs[s->saves[i].def].name);
    cli_out_str(o, NULL, "wrote", line);
  }
}

static void free_job(batch_job *s) {
  for (int i = 0; i < s->ndefs; i++) {
    npy_free(&s->defs[i].a);
    if (s->defs[i].kind == DEF_MATRIX) mtx_free(&s->defs[i].m);
  }
}

static int run(cli_globals *g, int argc, char **argv) {
  batch_job *s = calloc(1, sizeof *s);
  gkc_conn *conn = NULL;
  cli_limits lim;
  if (!s) {
    fprintf(stderr, "gkc: out of memory\n");
    return CLI_FAIL;
  }
  int rc = parse(g, s, argc, argv);
  if (rc >= 0) {
    free_job(s);
    free(s);
    return rc;
  }
  cli_limits_get(g, &lim);
  if ((rc = load(g, &lim, s)) || (rc = cli_limits_connect(g, &lim, &conn))) goto done;

  int err;
  double t0 = cli_now_us();
  if ((err = upload_all(conn, s))) {
    rc = cli_call_failed(conn, err);
    goto done;
  }
  double upload_us = cli_now_us() - t0;
  gkc_step steps[GKC_BATCH_MAX_STEPS];
  gkc_step_region regions[GKC_BATCH_MAX_STEPS];
  for (int i = 0; i < s->nsteps; i++)
    steps[i] = to_step(s, &s->steps[i]), regions[i] = to_region(s, &s->steps[i]);
  gkc_batch_result br;
  gkc_info info;
  t0 = cli_now_us();
  err = gkc_batch_regions(conn, steps, s->region ? regions : NULL, s->nsteps, &br, &info);
  double rtt = cli_now_us() - t0;
  if (err) {
    rc = cli_call_failed(conn, err);
    goto done;
  }
  for (int i = 0; i < s->nsaves; i++) {
    batch_def *d = &s->defs[s->saves[i].def];
    if (d->in_region)
      memcpy(d->a.data, (char *)gkc_region_data(s->region) + d->off, (size_t)d->a.count * 4);
    else if ((err = gkc_download(conn, d->id, d->a.data, (size_t)d->a.count * 4))) {
      fprintf(stderr, "gkc: downloading %s for --save:\n", d->name);
      rc = cli_call_failed(conn, err);
      goto done;
    }
    if ((rc = cli_write_npy(s->saves[i].path, d->a.ndim, d->a.shape, d->a.data))) goto done;
  }
  cli_out o;
  cli_out_begin(&o, g->json);
  print_steps(&o, s, &br);
  cli_out_str(&o, "algo", "algo", info.algo);
  cli_out_us(&o, "kernel_us", "kernel time", info.kernel_us);
  cli_out_times(&o, &info);
  cli_out_us(&o, "round_trip_us", "round trip", rtt);
  cli_out_us(&o, "upload_us", "uploads", upload_us);
  print_saves(&o, s);
  if (s->any_random) cli_out_int(&o, "seed", "seed", (int64_t)s->seed);
  cli_out_end(&o);
done:
  if (s->region) gkc_region_release(conn, s->region);
  gkc_close(conn); /* frees what was uploaded: it belongs to the connection */
  cli_limits_close(&lim);
  free_job(s);
  free(s);
  return rc;
}

const cli_cmd cli_batch_cmd = {"batch", "run steps (dot, axpby, spmv, ...) on named arrays in one"
                               " request", usage, run};
