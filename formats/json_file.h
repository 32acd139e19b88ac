/* A small JSON file read whole (a shard index, a manifest): opened, its size
 * held to a limit, parsed with cJSON.
 *
 * Ownership: *out is the caller's (cJSON_Delete); set only on success. */
#ifndef TC_JSON_FILE_H
#define TC_JSON_FILE_H

#include <cjson/cJSON.h>
#include <stdint.h>

#include "diag.h"

typedef struct tc_json_file_msgs {
    const char *what;     /* the file in the size message: "index", "manifest" */
    const char *raise;    /* the option that raises max, or NULL */
    const char *bad_json; /* the message for text that is not JSON: one %zu, the byte offset */
} tc_json_file_msgs;

/* The JSON document of the file at path, at most max bytes. Failures name no
 * subject; the caller (who knows the file's role) does. */
int tc_json_file_read(const char *path, uint64_t max, const tc_json_file_msgs *m, cJSON **out, tc_diag *d);

#endif
