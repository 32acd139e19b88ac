/* Every way torch.load could read a file's bytes, beside the one a driver
 * took. torch.load (1.13 to 2.x) reads a path ending in .safetensors with
 * the safetensors library (2.x only); a file whose first four bytes are
 * PK\3\4 as a zip; anything else as a tar archive first (when its first
 * block is a valid tar header), then as pickles from byte 0, unpickling the
 * first one before it looks at what it holds. A file with a second reading
 * is never safe: the second reading is a hazard, and one that names globals
 * outside the allowlist says which. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"
#include "pickle.h"
#include "readings.h"
#include "verdict.h"
#include "zip.h"

/* Whether src's bytes open as an archive torch's own zip reader reads
 * (torch.jit.load, torch._C.PyTorchFileReader), wherever it lies in them. */
static bool zip_reading(const tc_src *src, const tc_limits *lim)
{
    tc_zip z;
    tc_zip_torch t;
    tc_diag scratch = TC_DIAG_INIT;
    tc_zip_limits zl = {.max_entries = lim->max_entries};
    if (tc_zip_open(&z, src, &zl, &scratch))
        return false;
    bool ok = !tc_zip_torch_init(&t, &z, lim->max_pickle_bytes, &scratch);
    tc_zip_torch_free(&t);
    tc_zip_free(&z);
    return ok;
}

int tc_judge_readings(tc_ckpt *c, const uint8_t *head, size_t n, tc_diag *d)
{
    if (tc_ckpt_can(c, TC_CAP_OWN_READER))
        return 0; /* a JSON index, a DCP's .metadata (read by pickle.load from byte 0: the reading its driver judged) */
    bool zip = n >= 4 && !memcmp(head, "PK\x03\x04", 4), tar = tc_ckpt_can(c, TC_CAP_LEGACY_TAR);
    const tc_src *src = tc_ckpt_src(c);
    int rc;
    if (!zip && !tar && src->size >= 512) {
        uint8_t block[512];
        if ((rc = tc_src_read(src, 0, block, 512, "a tar header", d)))
            return rc;
        if (tc_tar_header(block, 512) &&
            (rc = tc_ckpt_add_hazard(c,
                                     "its first 512 bytes are also a tar header: torch.load tries the legacy .tar "
                                     "reading first, which unpickles the archive's members",
                                     d)))
            return rc;
    }
    /* a tar archive is read as a legacy stream from byte 0 by torch.load of a stream that is no file (and of the
     * file itself after a tar error) */
    bool stream = false;
    if (tar) {
        if ((rc = tc_legacy_at_zero(src, tc_ckpt_limits(c), &stream, d)))
            return rc;
        if (stream && (rc = tc_ckpt_add_hazard(c,
                                               "its bytes are also a legacy torch stream from byte 0, which torch.load "
                                               "reads when given them as a stream (a BytesIO, not a file)",
                                               d)))
            return rc;
    }
    /* a file that is not a zip and not torch's legacy stream is still unpickled from byte 0 */
    if (!zip && !stream && !tc_ckpt_can(c, TC_CAP_LEGACY_STREAM)) {
        char unsafe[1100];
        if ((rc = tc_pickle_at_zero(src, tc_ckpt_limits(c), unsafe, sizeof unsafe, d)))
            return rc;
        if (unsafe[0]) {
            char text[1400];
            snprintf(text, sizeof text,
                     "read from byte 0, as torch.load reads a file that is not a zip (whatever its name, "
                     "but for .safetensors paths in newer torch), its bytes are a pickle that imports %s",
                     unsafe);
            if ((rc = tc_ckpt_add_hazard(c, text, d)))
                return rc;
        }
    }
    /* torch's zip reader finds its archive by the end record, wherever the archive starts */
    if (!zip && zip_reading(src, tc_ckpt_limits(c)))
        return tc_ckpt_add_hazard(c,
                                  "its bytes also hold a zip archive that torch's own zip reader opens (torch.jit.load "
                                  "and torch._C.PyTorchFileReader read it; torch.load reads the file as it starts)",
                                  d);
    return 0;
}
