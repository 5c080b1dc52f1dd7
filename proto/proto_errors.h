/* proto_errors.h: mapping between gkc_error values and their wire strings.
 *
 * Implemented in: proto_tables.c
 */
#ifndef PROTO_ERRORS_H
#define PROTO_ERRORS_H

#include <stddef.h>
#include "gkc_errors.h"

/* "invalid_argument" etc.; "unknown" for a value not in the table. */
const char *proto_err_wire(int code);
/* Default English text for code. */
const char *proto_err_text(int code);
/* The code whose wire string is s[0..len); GKC_EUNKNOWN_CODE if none. */
int proto_err_from_wire(const char *s, size_t len);

#endif
