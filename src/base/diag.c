#include "diag.h"

#include <stdarg.h>
#include <stdio.h>

#include "buf.h"

static int record(tc_diag *d, int code, const char *fmt, va_list ap)
{
    if (d && d->code == 0) {
        /* Escaped as it is made (tc_buf_esc): the names every layer puts in
         * its messages come from the file or the command line and may hold
         * newlines, terminal controls or bytes that are not UTF-8. Escaped
         * text passes unchanged, so a message quoting another stays as it
         * was. In arrays: "out of memory" must still be said. */
        char raw[sizeof d->msg];
        tc_buf r = tc_buf_fixed(raw, sizeof raw);
        tc_buf_vprintf(&r, fmt, ap);
        tc_buf m = tc_buf_fixed(d->msg, sizeof d->msg);
        tc_buf_esc(&m, raw, tc_buf_len(&r));
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
