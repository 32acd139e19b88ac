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

/* Python's tarfile: the first 512 bytes parse as a header block when its
 * checksum field (octal, or base-256) matches the unsigned or the signed sum
 * of the block with that field read as spaces. All-zero blocks are the end
 * of an archive, not a member. */
static bool tar_header(const uint8_t *b, size_t n)
{
    if (n < 512)
        return false;
    bool zero = true;
    for (size_t i = 0; i < 512 && zero; i++)
        zero = b[i] == 0;
    if (zero)
        return false;
    long long want = 0;
    if (b[148] == 0x80 || b[148] == 0xff) { /* base-256 */
        for (int i = 149; i < 156; i++)
            want = want * 256 + b[i];
        if (b[148] == 0xff)
            want -= 1LL << 56;
    } else {
        char f[9];
        size_t k = 0;
        for (int i = 148; i < 156 && b[i]; i++)
            f[k++] = (char)b[i];
        f[k] = 0;
        char *p = f, *end;
        while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r' || *p == '\v' || *p == '\f')
            p++;
        if (!*p) {
            want = 0;
        } else {
            want = strtoll(p, &end, 8);
            while (*end == ' ' || *end == '\t' || *end == '\n' || *end == '\r' || *end == '\v' || *end == '\f')
                end++;
            if (*end || *p == '+' || *p == '-')
                return false; /* int(x, 8) would raise: no header */
        }
    }
    long long us = 256, ss = 256;
    for (size_t i = 0; i < 512; i++) {
        if (i >= 148 && i < 156)
            continue;
        us += b[i];
        ss += (signed char)b[i];
    }
    return want == us || want == ss;
}

typedef struct scan {
    char *out;
    size_t n;
} scan;

static void note_global(void *ctx, pk_obj *o)
{
    scan *sc = ctx;
    if (o->kind != PK_GLOBAL || sc->out[0])
        return;
    char name[1100];
    snprintf(name, sizeof name, "%s.%s", pk_module_py3(o->s), o->name);
    if (!tc_verdict_of(name).allowed)
        snprintf(sc->out, sc->n, "%s", name);
}

void tc_first_unsafe_global(pk_graph *g, char *out, size_t n)
{
    scan sc = {out, n};
    out[0] = 0;
    pk_graph_foreach(g, note_global, &sc);
}

int tc_pickle_at_zero(const tc_src *src, const tc_limits *lim, char *unsafe, size_t n, tc_diag *d)
{
    uint64_t cap = 1u << 16;
    unsafe[0] = 0;
    for (;;) {
        uint64_t len = src->size < cap ? src->size : cap;
        uint8_t *buf = malloc(len ? len : 1);
        pk_graph *g = pk_graph_new();
        if (!buf || !g) {
            free(buf);
            pk_graph_free(g);
            return tc_fail(d, TC_ERR_NOMEM, "out of memory");
        }
        int rc = tc_src_read(src, 0, buf, len, "a pickle read from byte 0", d);
        bool hit_end = false;
        if (!rc) {
            pk_read_opts o = {.limits = {lim->max_objects, lim->max_depth, lim->max_objects},
                              .what = "a pickle read from byte 0", .hit_end = &hit_end};
            pk_obj *root;
            tc_diag scratch = TC_DIAG_INIT; /* where it stops is not the point: what it named before */
            (void)pk_read(g, buf, (size_t)len, &o, &root, NULL, &scratch);
        }
        free(buf);
        if (!rc && hit_end && len < src->size && cap < lim->max_pickle_bytes) {
            pk_graph_free(g);
            cap = cap * 8 < lim->max_pickle_bytes ? cap * 8 : lim->max_pickle_bytes;
            continue;
        }
        if (!rc)
            tc_first_unsafe_global(g, unsafe, n);
        pk_graph_free(g);
        return rc;
    }
}

int tc_judge_readings(tc_ckpt *c, const uint8_t *head, size_t n, tc_diag *d)
{
    const char *fmt = tc_ckpt_format(c);
    if (!strcmp(fmt, "safetensors-index") || !strcmp(fmt, "torch-index"))
        return 0; /* a JSON index: torch.load is not what reads it */
    if (!strcmp(fmt, "dcp"))
        return 0; /* .metadata is read by pickle.load from byte 0: the reading its driver judged */
    bool zip = n >= 4 && !memcmp(head, "PK\x03\x04", 4);
    int rc = 0;
    if (!zip) {
        uint8_t block[512];
        const tc_src *src = tc_ckpt_src(c);
        if (src->size >= 512 && !(rc = tc_src_read(src, 0, block, 512, "a tar header", d)) && tar_header(block, 512))
            rc = tc_ckpt_add_hazard(c,
                                    "its first 512 bytes are also a tar header: torch.load tries the legacy .tar "
                                    "reading first, which unpickles the archive's members",
                                    d);
    }
    /* a file that is not a zip and not torch's legacy stream is still unpickled from byte 0 */
    if (!rc && !zip && strcmp(fmt, "torch-legacy")) {
        char unsafe[1100];
        if (!(rc = tc_pickle_at_zero(tc_ckpt_src(c), tc_ckpt_limits(c), unsafe, sizeof unsafe, d)) && unsafe[0]) {
            char text[1400];
            snprintf(text, sizeof text,
                     "read from byte 0, as torch.load reads a file that is not a zip (whatever its name, "
                     "but for .safetensors paths in newer torch), its bytes are a pickle that imports %s",
                     unsafe);
            rc = tc_ckpt_add_hazard(c, text, d);
        }
    }
    return rc;
}
