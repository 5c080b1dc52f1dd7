/* method_table.c: see method.h.  The table is proto_methods.h's list: a
 * method named there needs a row (method_row_NAME) or gkcd does not link. */
#include "method.h"

#include "proto_methods.h"

static const gkcd_method *const table[PROTO_M_COUNT] = {
#define METHOD__ROW(name, str) [PROTO_M_##name] = &method_row_##name,
    PROTO_METHOD_MAP(METHOD__ROW)
#undef METHOD__ROW
};

const gkcd_method *method_row(int m) { return m >= 0 && m < PROTO_M_COUNT ? table[m] : NULL; }
