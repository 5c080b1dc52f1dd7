/* bench_csv.h: --csv output of the bench programs: one header row, then one
 * row per measurement (RFC 4180: a field with a comma, a quote or a line
 * break is quoted, its quotes doubled).  Header only; C11.
 *
 *   bench_csv c;
 *   if (bench_csv_open(&c, path, "op,case,median_ms") != 0) ...   "-": stdout
 *   bench_csv_str(&c, "sgemm"); bench_csv_str(&c, "4096x4096x4096");
 *   bench_csv_num(&c, "%.6f", ms); bench_csv_end(&c);
 *   if (bench_csv_close(&c) != 0) ...                       a write failed
 *
 * A closed (or never opened) bench_csv ignores every call, so that callers
 * write rows unconditionally.
 */
#ifndef GKC_BENCH_CSV_H
#define GKC_BENCH_CSV_H

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

typedef struct {
  FILE *f;   /* NULL: off */
  int field; /* fields written in the current row */
} bench_csv;

/* 0 with the header row written, or -1 (perror'd) when path cannot be
 * opened for writing. */
static inline int bench_csv_open(bench_csv *c, const char *path, const char *header) {
  c->field = 0;
  c->f = strcmp(path, "-") == 0 ? stdout : fopen(path, "w");
  if (!c->f) {
    perror(path);
    return -1;
  }
  fprintf(c->f, "%s\n", header);
  return 0;
}

static inline void bench_csv_sep_(bench_csv *c) {
  if (c->field++) fputc(',', c->f);
}

/* A text field (NULL: empty). */
static inline void bench_csv_str(bench_csv *c, const char *s) {
  if (!c->f) return;
  bench_csv_sep_(c);
  if (!s) return;
  if (!strpbrk(s, ",\"\r\n")) {
    fputs(s, c->f);
    return;
  }
  fputc('"', c->f);
  for (; *s; s++) {
    if (*s == '"') fputc('"', c->f);
    fputc(*s, c->f);
  }
  fputc('"', c->f);
}

/* A number (or any field that needs no quoting), printf-formatted. */
static inline void bench_csv_num(bench_csv *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static inline void bench_csv_num(bench_csv *c, const char *fmt, ...) {
  if (!c->f) return;
  bench_csv_sep_(c);
  va_list ap;
  va_start(ap, fmt);
  vfprintf(c->f, fmt, ap);
  va_end(ap);
}

static inline void bench_csv_end(bench_csv *c) {
  if (!c->f) return;
  fputc('\n', c->f);
  c->field = 0;
  fflush(c->f);
}

/* 0, or -1 when a write failed. */
static inline int bench_csv_close(bench_csv *c) {
  if (!c->f) return 0;
  int bad = ferror(c->f) != 0;
  if (c->f == stdout)
    bad |= fflush(c->f) != 0;
  else
    bad |= fclose(c->f) != 0;
  c->f = NULL;
  if (bad) perror("bench: writing the CSV");
  return bad ? -1 : 0;
}

#endif
