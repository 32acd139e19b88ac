/* One on-disk checkpoint format behind one interface.
 *
 * A format probes the first bytes (and the file name), then opens: it fills
 * the tc_ckpt's storages, tensors, globals and facts from metadata alone.
 * Adding a format is one file, one line in tc_formats[] (formats/registry.c),
 * a sample and a test. */
#ifndef TC_FORMAT_H
#define TC_FORMAT_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#include "ckpt.h"

typedef struct tc_format {
    const char *name;
    /* head: the first n bytes of the file (n may be short for tiny files). */
    bool (*probe)(const uint8_t *head, size_t n, const char *path);
    int (*open)(tc_ckpt *c, tc_diag *d);
} tc_format;

extern const tc_format tc_format_torch_zip;
extern const tc_format tc_format_torch_legacy;
extern const tc_format tc_format_safetensors;

/* NULL-terminated, in probing order. */
extern const tc_format *const tc_formats[];

#endif
