/* log.c: see log.h. */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static int g_level = LOG_LVL_INFO;

int log_parse_level(const char *s) {
  static const struct { const char *name; int level; } names[] = {
      {"error", LOG_LVL_ERR}, {"warn", LOG_LVL_WARN},
      {"info", LOG_LVL_INFO}, {"debug", LOG_LVL_DEBUG}};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (strcmp(s, names[i].name) == 0) return names[i].level;
  return -1;
}

void log_set_level(int level) { g_level = level; }
int log_enabled(int level) { return level <= g_level; }

void log_msg(int level, const char *fmt, ...) {
  if (!log_enabled(level)) return;
  /* Format the whole line first so that lines from worker threads never
   * interleave: one fputs of a complete line is atomic enough for stderr. */
  char line[1024];
  int n = snprintf(line, sizeof line, "<%d>gkcd: ", level);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line + n, sizeof line - n - 1, fmt, ap);
  va_end(ap);
  size_t len = strlen(line);
  for (size_t i = (size_t)n; i < len; i++)
    if (line[i] == '\n') line[i] = ' '; /* one event, one line */
  line[len] = '\n';
  fwrite(line, 1, len + 1, stderr);
}
