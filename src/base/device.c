#include "device.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "buf.h"

/* The device types c10's parse_type knows in torch 1.13 and in 2.x both
 * (1.13 adds "ort", 2.x "maia" and "mtia": a string only one of them parses is
 * a file the other cannot load). */
static const char *const known[] = {"cpu", "cuda", "ipu", "xpu", "mkldnn", "opengl", "opencl", "ideep", "hip",
                                    "ve", "fpga", "xla", "lazy", "vulkan", "mps", "meta", "hpu", "privateuseone",
                                    NULL};

/* what torch.load's restore_location restores with data, with or without an index (torch/serialization.py) */
const char *const tc_device_indexed[] = {"cuda", "mps", "xpu", "hpu", "privateuseone", NULL};

static int bad(tc_diag *d, const char *s, const char *why)
{
    char e[80];
    return tc_fail(d, TC_ERR_USAGE, "'%s' is not a device string torch accepts (%s)", tc_esc(s, e, sizeof e), why);
}

static int parse(const char *s, bool any_type, tc_device *out, tc_diag *d)
{
    size_t tl = strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_");
    const char *ix = s + tl;
    char e[80];
    if (!*s)
        return bad(d, s, "empty");
    if (!tl || (*ix && *ix != ':'))
        return bad(d, s, "TYPE or TYPE:INDEX, TYPE made of letters and '_'");
    if (*ix == ':') {
        ix++;
        if (!*ix)
            return bad(d, s, "no index after ':'");
        if (strspn(ix, "0123456789") != strlen(ix))
            return bad(d, s, "the index is not a number: digits only, no sign or space");
        if (ix[0] == '0' && ix[1])
            return bad(d, s, "the index has a leading zero");
    }
    if (tl >= sizeof out->type)
        return tc_fail(d, TC_ERR_USAGE, "'%s': '%.*s' is not a device type torch knows", tc_esc(s, e, sizeof e),
                       (int)tl, s);
    tc_device v = {.index = -1};
    memcpy(v.type, s, tl);
    v.type[tl] = 0;
    if (!any_type) {
        const char *const *k = known;
        while (*k && strcmp(*k, v.type))
            k++;
        if (!*k)
            return tc_fail(d, TC_ERR_USAGE,
                           "'%s': '%s' is not a device type torch knows (cpu, cuda, mps, xpu, hpu, meta, ...)",
                           tc_esc(s, e, sizeof e), v.type);
    }
    if (*ix) {
        /* torch reads the index with std::stoi, then keeps its low 8 bits */
        uint64_t n = 0;
        for (const char *p = ix; *p && n <= INT32_MAX; p++)
            n = n * 10 + (uint64_t)(*p - '0');
        if (n > INT32_MAX)
            return tc_fail(d, TC_ERR_USAGE, "'%s': torch cannot read the device index '%s' (over 2^31 - 1)",
                           tc_esc(s, e, sizeof e), ix);
        if (n > 127) {
            int8_t w = (int8_t)(uint8_t)n;
            char as[48];
            if (w == -1)
                snprintf(as, sizeof as, "%s (no index)", v.type);
            else
                snprintf(as, sizeof as, "%s:%d", v.type, w);
            return tc_fail(d, TC_ERR_USAGE,
                           "'%s': torch keeps a device index in 8 bits (at most 127) and would read this as %s",
                           tc_esc(s, e, sizeof e), as);
        }
        v.index = (int)n;
    }
    *out = v;
    return 0;
}

int tc_device_parse(const char *s, tc_device *out, tc_diag *d) { return parse(s, false, out, d); }

int tc_device_parse_tag(const char *s, tc_device *out, tc_diag *d) { return parse(s, true, out, d); }

int tc_device_target(const char *s, char *out, size_t n, tc_diag *d)
{
    /* torch.device(N): the CUDA device N */
    char tmp[32];
    if (*s >= '0' && *s <= '9' && strlen(s) < sizeof tmp - 5) {
        snprintf(tmp, sizeof tmp, "cuda:%s", s);
        tc_device v;
        if (!parse(tmp, false, &v, NULL))
            s = tmp;
    }
    tc_device v;
    int rc = parse(s, false, &v, d);
    if (rc)
        return rc;
    char e[80];
    /* what torch.load's restore_location does with each tag (torch/serialization.py) */
    bool ok = v.index < 0 && !strcmp(v.type, "cpu"); /* only "cpu" itself: "cpu:0" is no tag it restores */
    for (const char *const *k = tc_device_indexed; *k && !ok; k++)
        ok = !strcmp(v.type, *k);
    if (!strcmp(v.type, "meta"))
        return tc_fail(d, TC_ERR_USAGE, "'%s': torch.load restores a storage tagged meta without its data",
                       tc_esc(s, e, sizeof e));
    if (!ok)
        return tc_fail(d, TC_ERR_USAGE,
                       "'%s': torch.load does not know how to restore a storage tagged so (it restores cpu, "
                       "and cuda, mps, xpu, hpu, privateuseone with or without an index)",
                       tc_esc(s, e, sizeof e));
    int w = v.index < 0 && !strcmp(v.type, "cuda") ? snprintf(out, n, "cuda:0")
            : v.index < 0                          ? snprintf(out, n, "%s", v.type)
                                                   : snprintf(out, n, "%s:%d", v.type, v.index);
    if (w < 0 || (size_t)w >= n)
        return tc_fail(d, TC_ERR_USAGE, "'%s': too long for a location tag", tc_esc(s, e, sizeof e));
    return 0;
}
