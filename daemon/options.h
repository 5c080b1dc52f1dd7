/* options.h: gkcd's settings, from the command line and the config file.
 *
 * One table (options.c) lists every setting once: its flag, its config-file
 * key (the flag's name with '_' for '-'), how its value is parsed and
 * checked, and its help text.  The command line is read, then the config
 * file it names (or /etc/gkcd/gkcd.conf when that exists), then the command
 * line again so that flags override the file.
 */
#ifndef GKCD_OPTIONS_H
#define GKCD_OPTIONS_H

#include "config.h"

#define GKCD_DEFAULT_CONFIG "/etc/gkcd/gkcd.conf"

/* Fills cfg with defaults, then from argv and the config file.  Returns -1
 * to go on, or an exit code: 0 after --help/--version, 2 on a usage or
 * config error (already printed, naming the flag or the file and line). */
int options_load(gkcd_config *cfg, int argc, char **argv);

/* Resolves allow_users/allow_groups names to ids; 0, or -1 after printing. */
int options_resolve_access(gkcd_config *cfg);

#endif
