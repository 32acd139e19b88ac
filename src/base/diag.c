#include "diag.h"

#include <stdarg.h>
#include <stdio.h>

static int record(tc_diag *d, int code, const char *fmt, va_list ap)
{
    if (d && d->code == 0) {
        vsnprintf(d->msg, sizeof d->msg, fmt, ap);
        d->code = code;
        d->file[0] = '\0';
        d->offset = TC_NO_OFFSET;
    }
    return code;
}

int tc_fail(tc_diag *d, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    record(d, code, fmt, ap);
    va_end(ap);
    return code;
}

int tc_fail_at(tc_diag *d, int code, const char *file, uint64_t offset, const char *fmt, ...)
{
    if (!d || d->code)
        return code;
    va_list ap;
    va_start(ap, fmt);
    record(d, code, fmt, ap);
    va_end(ap);
    tc_diag_subject(d, file);
    d->offset = offset;
    return code;
}

void tc_diag_subject(tc_diag *d, const char *file)
{
    if (d && d->code && !d->file[0] && file)
        snprintf(d->file, sizeof d->file, "%s", file);
}

void tc_diag_clear(tc_diag *d)
{
    if (d) {
        d->code = 0;
        d->msg[0] = '\0';
        d->file[0] = '\0';
        d->offset = TC_NO_OFFSET;
    }
}

int tc_diag_copy(tc_diag *d, const tc_diag *from)
{
    if (d && !d->code)
        *d = *from;
    return from->code;
}
