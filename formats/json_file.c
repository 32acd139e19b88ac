#include "json_file.h"

#include <inttypes.h>
#include <stdlib.h>

#include "source.h"

int tc_json_file_read(const char *path, uint64_t max, const tc_json_file_msgs *m, cJSON **out, tc_diag *d)
{
    tc_src src = {.fd = -1};
    char *buf = NULL;
    int rc = tc_src_open_file(&src, path, d);
    if (rc)
        return rc;
    if (src.size > max) {
        if (m->raise)
            rc = tc_fail(d, TC_ERR_LIMIT, "%s is %" PRIu64 " bytes, over the limit of %" PRIu64 " (%s raises it)",
                         m->what, src.size, max, m->raise);
        else
            rc = tc_fail(d, TC_ERR_LIMIT, "%s is %" PRIu64 " bytes, over the limit of %" PRIu64, m->what, src.size,
                         max);
    } else if (!(buf = malloc((size_t)src.size + 1))) {
        rc = tc_fail(d, TC_ERR_NOMEM, "out of memory");
    } else if (!(rc = tc_src_read(&src, 0, buf, (size_t)src.size, m->what, d))) {
        buf[src.size] = 0;
        if (!(*out = cJSON_ParseWithLength(buf, (size_t)src.size))) {
            const char *ep = cJSON_GetErrorPtr();
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
            rc = tc_fail(d, TC_ERR_FORMAT, m->bad_json, ep && ep >= buf ? (size_t)(ep - buf) : (size_t)0);
#pragma GCC diagnostic pop
        }
    }
    free(buf);
    tc_src_close(&src);
    return rc;
}
