/* Error codes and diagnostics of the tensorctl core.
 *
 * Core functions return 0 or a negative tc_status and, on failure, leave one
 * line of explanation in a tc_diag: where (record, offset, tensor name), what,
 * and the likely cause when known. The first failure recorded wins, so callers
 * up the stack may add nothing that hides the root cause. Only the command
 * front ends in src/cli print diagnostics or exit. */
#ifndef TC_DIAG_H
#define TC_DIAG_H

#include <stddef.h>

typedef enum tc_status {
    TC_OK = 0,
    TC_ERR_IO = -1,          /* reading or writing a file failed */
    TC_ERR_FORMAT = -2,      /* the input is malformed or not a checkpoint */
    TC_ERR_LIMIT = -3,       /* a configured limit was exceeded */
    TC_ERR_NOMEM = -4,
    TC_ERR_UNSUPPORTED = -5, /* valid, but tensorctl cannot handle it */
    TC_ERR_UNSAFE = -6,      /* refused: the file references dangerous globals */
    TC_ERR_USAGE = -7,       /* the request itself is inconsistent */
} tc_status;

typedef struct tc_diag {
    int code;
    char msg[1024];
} tc_diag;

/* Record a failure (if none is recorded yet) and return code. */
int tc_fail(tc_diag *d, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Forget any recorded failure. */
void tc_diag_clear(tc_diag *d);

#endif
