/* Key surgery: new names for a list of tensor names.
 *
 * Every operation here takes one checkpoint's names and returns the new
 * ones, index for index, refusing a mapping that would give two tensors one
 * name, so that the commands that match tensors by name (diff) and those
 * that rename them can share it. For now there is one operation, stripping
 * a prefix; adding a prefix, renaming and dropping are meant to join it
 * behind the same shape.
 *
 * Ownership: *out is an array of n malloc'd strings and *used a malloc'd
 * string, both the caller's: tc_names_free(*out, n) and free(*used). Both
 * are set only on success; tc_names_free accepts NULL. */
#ifndef TC_NAMES_H
#define TC_NAMES_H

#include <stddef.h>

#include "diag.h"

/* Strip prefix from every name that starts with it; other names stay as
 * they are. prefix NULL: the prefix every name shares, made of whole dotted
 * components and leaving each name at least its last component ("module."
 * for a DataParallel state_dict, "model.encoder." when every name has it;
 * "" when the names share none). *used receives the prefix removed ("" when
 * no name had it).
 * Fails with TC_ERR_USAGE, naming both, when two names become one, and
 * when a name would become empty. */
int tc_names_strip_prefix(char ***out, char **used, const char *const *names, size_t n, const char *prefix,
                          tc_diag *d);

void tc_names_free(char **names, size_t n);

#endif
