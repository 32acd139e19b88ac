/* Pickles that are not torch checkpoints: a raw pickle file (pickle.dump,
 * joblib.dump, dill.dump), and the pickle numpy writes for an array of Python
 * objects. They are judged as pickle.load reads them: every global the
 * bytes name, up to where CPython's unpickler would stop, is one it imports
 * (and, most of the time, calls), and each is judged by the same allowlist
 * as a checkpoint's globals (verdict.h).
 *
 * Python 2 strings are read as latin-1, the decoding under which the
 * unpickler gets furthest (every byte sequence decodes), so no loader's
 * choice of encoding reaches a global this reading does not see. */
#ifndef TC_PICKLE_FILE_H
#define TC_PICKLE_FILE_H

#include <stdbool.h>
#include <stdint.h>

#include "ckpt.h"
#include "source.h"

/* What reading a pickle found. */
typedef struct tc_pickle_seen {
    bool parsed;        /* the first pickle was read to its STOP */
    bool cut;           /* reading stopped at --max-pickle-size, not where the unpickler would */
    size_t npickles;    /* pickles read to their STOP, back to back */
    uint64_t globals;   /* globals named (every mention) */
    tc_diag why;        /* when !parsed: where and why the unpickler stops */
} tc_pickle_seen;

/* Add to c every global the pickle at [off, off + len) of src names (held to
 * c's limits). With `consecutive`, a pickle written right after the first
 * one (its first byte a PROTO opcode, as pickle.dump writes from protocol 2
 * on) is read too, and so on, as a loop of pickle.load calls reads them.
 * Fails only when the bytes cannot be read or memory runs out; a pickle that
 * does not parse is reported in *seen. */
int tc_pickle_judge(tc_ckpt *c, const tc_src *src, uint64_t off, uint64_t len, bool consecutive, tc_pickle_seen *seen,
                    tc_diag *d);

/* A raw pickle file as a checkpoint without tensors (format "pickle"): its
 * globals and their verdict. src is kept (as tc_ckpt_new_src keeps it) and
 * named name. TC_ERR_FORMAT when its bytes are not a pickle: the first one
 * does not parse and names no global the allowlist refuses (one that does
 * is imported before the unpickler fails: the file is then read, unsafe). */
int tc_open_pickle(tc_ckpt **out, const char *name, const tc_src *src, const tc_limits *lim, tc_diag *d);

#endif
