/* Device strings (device.h): any bytes, up to their first NUL, as --device,
 * --map's FROM and a target. What is taken has torch's syntax, TYPE[:INDEX]
 * with an index of at most 127 and no leading zero, and is the text's own type
 * and index; a target is written back as a tag that is taken again as itself;
 * a refusal says why. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device.h"
#include "fuzz_common.h"

/* c10::Device's grammar, written independently of device.c: letters and '_',
 * then optionally ':' and "0" or [1-9][0-9]*, here at most 127. */
static bool torch_syntax(const char *s)
{
    size_t t = strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_");
    if (!t)
        return false;
    if (!s[t])
        return true;
    const char *ix = s + t + 1;
    size_t k = strspn(ix, "0123456789");
    return s[t] == ':' && k && !ix[k] && (k == 1 || ix[0] != '0') && (k < 3 || (k == 3 && strcmp(ix, "127") <= 0));
}

/* v is s's own type and index. */
static bool same(const char *s, const tc_device *v)
{
    size_t t = strlen(v->type);
    if (!t || strncmp(s, v->type, t))
        return false;
    if (!s[t])
        return v->index == -1;
    char ix[8];
    snprintf(ix, sizeof ix, "%d", v->index);
    return s[t] == ':' && v->index >= 0 && !strcmp(s + t + 1, ix);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* the string exactly as long as it is (to the first NUL), so a read past it is caught */
    size_t n = strnlen((const char *)data, size);
    char *s = malloc(n + 1);
    if (!s)
        return 0;
    memcpy(s, data, n);
    s[n] = 0;
    tc_device v;
    tc_diag d = TC_DIAG_INIT;
    if (!tc_device_parse_tag(s, &v, &d))
        FZ_CHECK(torch_syntax(s) && same(s, &v), "a tag taken has torch's syntax and is the text's");
    else
        FZ_CHECK(d.code == TC_ERR_USAGE && d.msg[0], "a refusal says why");
    tc_diag_clear(&d);
    if (!tc_device_parse(s, &v, &d)) {
        FZ_CHECK(torch_syntax(s) && same(s, &v), "a device taken has torch's syntax and is the text's");
    } else {
        FZ_CHECK(d.code == TC_ERR_USAGE && d.msg[0], "a refusal says why");
    }
    tc_diag_clear(&d);
    char tag[32];
    if (!tc_device_target(s, tag, sizeof tag, &d)) {
        char again[32];
        tc_diag d2 = TC_DIAG_INIT;
        FZ_CHECK(torch_syntax(tag) && strcmp(tag, "meta") && strcmp(tag, "cpu:0"), "a target is a restorable tag");
        FZ_CHECK(!tc_device_target(tag, again, sizeof again, &d2) && !strcmp(tag, again),
                 "a target's tag is taken again as itself");
        tc_diag_clear(&d2);
    } else {
        FZ_CHECK(d.code == TC_ERR_USAGE && d.msg[0], "a refusal says why");
    }
    tc_diag_clear(&d);
    free(s);
    return 0;
}
