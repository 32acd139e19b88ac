/* Device strings as torch reads them.
 *
 * torch parses "TYPE" or "TYPE:INDEX" in c10::Device(const std::string&):
 * TYPE is one or more letters and underscores and must be a device type
 * torch knows; INDEX is "0" or a digit 1-9 followed by digits (no sign, no
 * leading zero, no space). The index is stored in a DeviceIndex of 8 bits, so
 * "cuda:128" reads as cuda:-128 and "cuda:256" as cuda:0 (torch 1.13 and 2.x
 * alike): such strings are refused here, as they do not mean what they say.
 *
 * A device string names where a storage is to be restored (--device, --map's
 * target, convert -d) only when torch.load restores a storage tagged with it,
 * data and all, in torch 1.13 or 2.x: "cpu" (exactly), and "cuda", "mps",
 * "xpu", "hpu", "privateuseone" with or without an index (torch.load sends
 * each to its backend; torch 1.13 knows only cuda and mps without an index).
 * "meta" restores a storage without its bytes; "cpu:0" and the other types
 * are tags torch.load does not know how to restore: all refused, by name.
 *
 * Nothing here allocates. */
#ifndef TC_DEVICE_H
#define TC_DEVICE_H

#include <stdbool.h>
#include <stddef.h>

#include "diag.h"

typedef struct tc_device {
    char type[16];  /* "cuda" */
    int index;      /* -1: none given */
} tc_device;

/* Parse s as torch.device(s) does, types limited to those torch 1.13 and 2.x
 * both know. TC_ERR_USAGE naming s and what is wrong with it, else 0 and *out. */
int tc_device_parse(const char *s, tc_device *out, tc_diag *d);

/* Parse s with torch's syntax but any type name: a location tag as a file may
 * carry it (a backend registered under its own name, such as "npu:0"). */
int tc_device_parse_tag(const char *s, tc_device *out, tc_diag *d);

/* s as the location tag to write on storages: a device string (or a bare
 * index N, which torch.device(N) takes as cuda:N) that torch.load restores
 * with its data. "cuda" becomes "cuda:0", as torch.save writes it. The tag
 * goes to out (n bytes); TC_ERR_USAGE naming s when it is none. */
int tc_device_target(const char *s, char *out, size_t n, tc_diag *d);

/* The device types tc_device_target takes besides "cpu", each alone or with
 * ":N"; NULL-terminated. */
extern const char *const tc_device_indexed[];

#endif
