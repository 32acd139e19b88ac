/* TorchScript archives (torch.jit.save): the zip of torch.save with code/,
 * constants.pkl and data.pkl of __torch__.* objects. Tensors are named as
 * scripted_module.state_dict() names them, from the parameters and buffers
 * each module class declares in its code file (torchscript.h, read by
 * script_decl.c). */
#include "torchscript.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "torch_zip.h"

extern const tc_format tc_format_torchscript;

/* ---- the driver ----------------------------------------------------------------------- */

static void script_free(void *p) { tc_script_free(p); }

/* Every code/ .py files record's declarations; their text is held to --max-pickle-size in all. */
static int read_code(tc_ckpt *c, tc_tzip *z, tc_script *s, tc_diag *d)
{
    char prefix[300];
    snprintf(prefix, sizeof prefix, "%s/code/", z->archive);
    size_t pl = strlen(prefix);
    uint64_t total = 0, max = tc_ckpt_limits(c)->max_pickle_bytes;
    int rc = 0;
    for (size_t i = 0; i < z->zip.n && !rc; i++) {
        const tc_zip_entry *e = &z->zip.e[i];
        size_t nl = strlen(e->name);
        if (strncasecmp(e->name, prefix, pl) || nl < pl + 4 || strcasecmp(e->name + nl - 3, ".py"))
            continue; /* torch looks a module's file up ignoring case: code/a/B.PY is a/b's */
        if ((total += e->usize) > max)
            return tc_fail(d, TC_ERR_LIMIT, "the code/ records take more than %llu bytes (raise with --max-pickle-size)",
                           (unsigned long long)max);
        /* code/a/b/c.py -> a.b.c */
        char *module = strndup(e->name + pl, nl - pl - 3);
        if (!module)
            return tc_fail(d, TC_ERR_NOMEM, "out of memory");
        for (char *p = module; *p; p++)
            if (*p == '/')
                *p = '.';
        uint8_t *text = NULL;
        size_t len = 0;
        if (!(rc = tc_tzip_read(z, c, e, &text, &len, d)))
            rc = tc_script_parse(s, module, e->name + strlen(z->archive) + 1, (const char *)text, len, d);
        free(text);
        free(module);
    }
    return rc;
}

static bool probe(const tc_probe *p) { return p->n >= 4 && !memcmp(p->head, "PK\x03\x04", 4); }

static int open_script(tc_ckpt *c, tc_diag *d)
{
    tc_tzip *z;
    int rc = tc_tzip_open(c, &tc_format_torchscript, &z, d);
    if (rc)
        return rc;
    if (!tc_tzip_listed(z, "constants.pkl"))
        return TC_FORMAT_DECLINE;
    tc_script *s = tc_script_new();
    if (!s)
        return tc_fail(d, TC_ERR_NOMEM, "out of memory");
    z->extra = s;
    z->free_extra = script_free;
    z->tg.script = s;
    if ((rc = tc_tzip_facts(c, z, d)))
        return rc;
    if (z->big)
        return tc_fail(d, TC_ERR_UNSUPPORTED, "a big-endian TorchScript archive (byteorder record 'big'); only "
                       "little-endian ones are read");
    if ((rc = read_code(c, z, s, d)) || (rc = tc_tzip_data(c, z, d)))
        return rc;
    const pk_obj *f = pk_call_global(z->tg.root);
    tc_buf qual = TC_BUF_INIT(0);
    if (f)
        pk_global_qualname(f, false, &qual);
    bool declared = f && !tc_buf_oom(&qual) && tc_script_class_of(s, tc_buf_str(&qual));
    if (!declared)
        rc = tc_buf_oom(&qual) ? tc_fail(d, TC_ERR_NOMEM, "out of memory")
                               : tc_fail(d, TC_ERR_UNSUPPORTED,
                                         "a TorchScript archive whose data.pkl is not an object of a module class its "
                                         "code/ declares%s%s (%zu module classes declared)",
                                         f ? ": " : "", tc_buf_str(&qual), tc_script_nclasses(s));
    if (rc)
        goto done;
    /* constants.pkl: what torch.jit.load unpickles too, for the verdict (its tensors are no state_dict()'s) */
    const tc_zip_entry *ce = tc_tzip_record(z, "constants.pkl");
    uint8_t *buf = NULL;
    size_t len = 0;
    pk_obj *croot;
    if (!(rc = tc_tzip_read(z, c, ce, &buf, &len, d))) {
        pk_read_opts o = tc_torch_read_opts(&z->tg, "constants.pkl");
        o.on_persid = NULL;
        z->tg.pickle_bytes += len;
        rc = pk_read(z->tg.g, buf, len, &o, &croot, NULL, d);
        if (rc)
            rc = tc_torch_read_failed(&z->tg, rc, "constants.pkl", d);
    }
    free(buf);
    static const char *const refused[TC_NTORCH] = {"a TorchScript archive, which weights_only=True refuses",
                                                   "a TorchScript archive, which weights_only=True refuses"};
    if (rc || (rc = tc_torch_index(&z->tg, d)) || (rc = tc_weights_only(&z->tg, refused, d)))
        goto done;
    rc = tc_ckpt_add_fact(c, "torchscript", tc_buf_str(&qual), d);
done:
    tc_buf_free(&qual);
    return rc;
}

const tc_format tc_format_torchscript = {.name = "torchscript", .probe = probe, .open = open_script,
                                         .open_storage = tc_tzip_open_storage,
                                         .caps = TC_CAP_TORCH_GRAPH | TC_CAP_TORCHSCRIPT};
