/* Error codes and diagnostics.
 *
 * Functions of every layer below the command line return 0 or a negative
 * tc_status and, on failure, leave one line of explanation in a tc_diag:
 * what went wrong and where inside the file (record, offset, tensor name),
 * plus its subject: the file the failure is about and, when known, the byte
 * offset in it. The first failure recorded wins, so callers up the stack add
 * nothing that hides the root cause.
 *
 * The subject is filled by whoever holds the file when the failure happens:
 * a byte source names its input, a byte destination its output, an opening
 * function the file it opens (tc_diag_subject, which never overrides). The
 * command line prints "tensorctl: SUBJECT: message" and never guesses the
 * file from the message text.
 *
 * A message is escaped as it is recorded (buf.h's tc_buf_esc), so it is one
 * line fit for a terminal whatever names it quotes; the subject is kept as
 * given (a path) and escaped where it is printed. */
#ifndef TC_DIAG_H
#define TC_DIAG_H

#include <stddef.h>
#include <stdint.h>

typedef enum tc_status {
    TC_OK = 0,
    TC_ERR_IO = -1,          /* reading or writing a file failed */
    TC_ERR_FORMAT = -2,      /* the input is malformed or not a checkpoint */
    TC_ERR_LIMIT = -3,       /* a configured limit was exceeded */
    TC_ERR_NOMEM = -4,
    TC_ERR_UNSUPPORTED = -5, /* valid, but tensorctl cannot handle it */
    TC_ERR_UNSAFE = -6,      /* refused: loading the file would run code */
    TC_ERR_USAGE = -7,       /* the request itself is inconsistent */
} tc_status;

#define TC_NO_OFFSET UINT64_MAX

typedef struct tc_diag {
    int code;
    char file[1024];   /* the subject; "" when the failure is about no file */
    uint64_t offset;   /* byte offset in file, TC_NO_OFFSET when unknown */
    char msg[1024];
} tc_diag;

#define TC_DIAG_INIT {.code = 0, .file = "", .offset = TC_NO_OFFSET, .msg = ""}

/* Record a failure (if none is recorded yet) and return code. */
int tc_fail(tc_diag *d, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* The same, with its subject: file and byte offset (TC_NO_OFFSET if none). */
int tc_fail_at(tc_diag *d, int code, const char *file, uint64_t offset, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* Name the subject of a recorded failure that has none yet. */
void tc_diag_subject(tc_diag *d, const char *file);
/* Record the failure in from, subject and all, if none is recorded yet; returns its code. */
int tc_diag_copy(tc_diag *d, const tc_diag *from);
/* Forget any recorded failure. */
void tc_diag_clear(tc_diag *d);

#endif
