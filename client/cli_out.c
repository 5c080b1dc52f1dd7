/* cli_out.c: results as aligned text lines or as one JSON object. */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

void cli_out_begin(cli_out *o, int json) {
  o->json = json;
  o->nfields = 0;
}

/* Starts a field: the JSON key, or the text label padded to a column.
 * Returns 0 when the field has no form in this mode (NULL key or label). */
static int field(cli_out *o, const char *key, const char *label) {
  if (o->json ? !key : !label) return 0;
  if (o->json) {
    fputs(o->nfields ? ", " : "{", stdout);
    cli_json_str(stdout, key);
    fputs(": ", stdout);
  } else {
    char l[64];
    snprintf(l, sizeof l, "%s:", label);
    printf("%-15s ", l);
  }
  o->nfields++;
  return 1;
}

int cli_out_field(cli_out *o, const char *key, const char *label) {
  return field(o, key, label);
}

void cli_json_str(FILE *f, const char *s) {
  fputc('"', f);
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    switch (*p) {
      case '"': fputs("\\\"", f); break;
      case '\\': fputs("\\\\", f); break;
      case '\n': fputs("\\n", f); break;
      case '\t': fputs("\\t", f); break;
      case '\r': fputs("\\r", f); break;
      default:
        if (*p < 0x20)
          fprintf(f, "\\u%04x", *p);
        else
          fputc(*p, f);
    }
  }
  fputc('"', f);
}

void cli_out_str(cli_out *o, const char *key, const char *label, const char *v) {
  if (!field(o, key, label)) return;
  if (o->json)
    cli_json_str(stdout, v);
  else
    printf("%s\n", v);
}

void cli_out_int(cli_out *o, const char *key, const char *label, int64_t v) {
  if (!field(o, key, label)) return;
  printf(o->json ? "%" PRId64 : "%" PRId64 "\n", v);
}

void cli_out_bool(cli_out *o, const char *key, const char *label, int v) {
  if (!field(o, key, label)) return;
  printf(o->json ? "%s" : "%s\n", v ? (o->json ? "true" : "yes") : (o->json ? "false" : "no"));
}

/* JSON has no NaN or infinity. */
/* The shortest of %.15g and %.17g that reads back as v: a float64 value
 * (gkc dot on float64 files) keeps every bit, and 11.046 stays 11.046. */
static void json_num(double v) {
  if (!isfinite(v)) {
    fputs("null", stdout);
    return;
  }
  char buf[40];
  snprintf(buf, sizeof buf, "%.15g", v);
  if (strtod(buf, NULL) != v) snprintf(buf, sizeof buf, "%.17g", v);
  fputs(buf, stdout);
}

void cli_out_num(cli_out *o, const char *key, const char *label, double v, const char *text_fmt) {
  if (!field(o, key, label)) return;
  if (o->json) {
    json_num(v);
  } else {
    printf(text_fmt, v);
    putchar('\n');
  }
}

const char *cli_fmt_us(double us, char *buf, size_t len) {
  if (us < 1e3)
    snprintf(buf, len, "%.1f us", us);
  else if (us < 1e6)
    snprintf(buf, len, "%.3f ms", us / 1e3);
  else
    snprintf(buf, len, "%.3f s", us / 1e6);
  return buf;
}

const char *cli_fmt_bytes(uint64_t b, char *buf, size_t len) {
  static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = (double)b;
  int u = 0;
  while (v >= 1024 && u < 4) v /= 1024, u++;
  snprintf(buf, len, u ? "%.1f %s" : "%.0f %s", v, units[u]);
  return buf;
}

void cli_out_us(cli_out *o, const char *key, const char *label, double us) {
  if (!field(o, key, label)) return;
  if (o->json) {
    json_num(round(us * 1e3) / 1e3); /* to the nanosecond, not float noise */
  } else {
    char buf[32];
    printf("%s\n", cli_fmt_us(us, buf, sizeof buf));
  }
}

void cli_out_times(cli_out *o, const gkc_info *info) {
  /* Older daemons, and the CPU backend for the copies, leave these out. */
  if (isfinite(info->server_us)) cli_out_us(o, "server_us", "in gkcd", info->server_us);
  if (isfinite(info->queue_us)) cli_out_us(o, "queue_us", "  waiting", info->queue_us);
  if (isfinite(info->worker_us)) cli_out_us(o, "worker_us", "  in a worker", info->worker_us);
  if (isfinite(info->h2d_us)) cli_out_us(o, "h2d_us", "copy to GPU", info->h2d_us);
  if (isfinite(info->d2h_us)) cli_out_us(o, "d2h_us", "copy from GPU", info->d2h_us);
  /* Several devices: where it ran, and what had to move there first. */
  if (info->ndevices > 0) cli_out_int(o, "split_devices", "split over devices", info->ndevices);
  else if (info->device >= 0) cli_out_int(o, "device", "device", info->device);
  if (info->peer_bytes > 0) {
    cli_out_int(o, "peer_bytes", "moved from peers", (int64_t)info->peer_bytes);
    cli_out_us(o, "peer_us", "  moving", info->peer_us);
  }
}

void cli_out_shape(cli_out *o, const char *key, const char *label, int ndim, const int64_t *shape) {
  if (!field(o, key, label)) return;
  fputs(o->json ? "[" : "", stdout);
  for (int i = 0; i < ndim; i++)
    printf("%s%" PRId64, i ? (o->json ? ", " : " x ") : "", shape[i]);
  fputs(o->json ? "]" : "\n", stdout);
}

void cli_out_end(cli_out *o) {
  if (o->json) fputs(o->nfields ? "}\n" : "{}\n", stdout);
  fflush(stdout);
}
