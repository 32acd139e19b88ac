/* Output files that appear whole or not at all.
 *
 * tc_out_open creates a temporary file beside the final path; tc_out_commit
 * fsyncs it, renames it over the final path and fsyncs the folder;
 * tc_out_abort removes it. A process killed in between leaves at most the
 * hidden temporary, never a partial output under the final name.
 * tc_out_pending_path gives the temporary's path to a signal handler, which
 * may unlink it (async-signal-safe: a static buffer). */
#ifndef TC_OUTFILE_H
#define TC_OUTFILE_H

#include <stdbool.h>

#include "diag.h"

typedef struct tc_outfile {
    int fd;
    char *final_path;
    char *tmp_path;
} tc_outfile;

/* force: replace an existing final_path. */
int tc_out_open(tc_outfile *o, const char *final_path, bool force, tc_diag *d);
int tc_out_commit(tc_outfile *o, tc_diag *d);
void tc_out_abort(tc_outfile *o);
const char *tc_out_pending_path(void);

/* True when a and b name the same existing file. */
bool tc_same_file(const char *a, const char *b);

#endif
