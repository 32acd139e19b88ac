/* DeepSpeed ZeRO save folders (zero.c), for tc_open. */
#ifndef TC_ZERO_H
#define TC_ZERO_H

#include "diag.h"

/* The file through which folder dir opens as a DeepSpeed ZeRO checkpoint:
 * dir is a save folder (its 'latest' names the step folder) or a step folder
 * itself, and the file is the first model-states file of that step folder
 * (rank 0's), or its first optimizer-states file when it has none (the
 * driver then says what is missing). 0 and *file (the caller frees it); 1
 * when dir is no ZeRO folder at all (no 'latest', no rank files, no step
 * folders); else a failure, d naming dir or its 'latest'. */
int tc_zero_folder(const char *dir, char **file, tc_diag *d);

#endif
