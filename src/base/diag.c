#include "diag.h"

#include <stdarg.h>
#include <stdio.h>

int tc_fail(tc_diag *d, int code, const char *fmt, ...)
{
    if (d && d->code == 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(d->msg, sizeof d->msg, fmt, ap);
        va_end(ap);
        d->code = code;
    }
    return code;
}

void tc_diag_clear(tc_diag *d)
{
    if (d) {
        d->code = 0;
        d->msg[0] = '\0';
    }
}
