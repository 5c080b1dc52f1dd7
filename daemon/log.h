/* log.h: one line per event on stderr, in the form journald understands.
 *
 * Each line starts with "<N>", N the syslog priority, so that journald
 * stores it at the right level when gkcd runs under systemd; on a terminal
 * the prefix is still easy to read.
 */
#ifndef GKCD_LOG_H
#define GKCD_LOG_H

enum { LOG_LVL_ERR = 3, LOG_LVL_WARN = 4, LOG_LVL_INFO = 6, LOG_LVL_DEBUG = 7 };

/* Accepts "error", "warn", "info", "debug"; returns -1 for anything else. */
int log_parse_level(const char *s);
void log_set_level(int level);
int log_enabled(int level);
void log_msg(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_err(...) log_msg(LOG_LVL_ERR, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_LVL_WARN, __VA_ARGS__)
#define log_info(...) log_msg(LOG_LVL_INFO, __VA_ARGS__)
#define log_debug(...) \
  do { if (log_enabled(LOG_LVL_DEBUG)) log_msg(LOG_LVL_DEBUG, __VA_ARGS__); } while (0)

#endif
