#include "inspect_weights.h"

#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "format.h"
#include "weights.h"

/* "training checkpoint", "state_dict", "pickled module", "TorchScript module", "several candidates", "none", or the format */
static const char *kind_of(const tc_ckpt *c, const tc_weights *w)
{
    if (!w->n)
        return "none";
    if (w->n > 1)
        return "several candidates";
    if (!tc_ckpt_has_objects(c))
        return tc_ckpt_format(c);
    if (w->v[0].cls && !w->v[0].prefix[0])
        return tc_ckpt_can(c, TC_CAP_TORCHSCRIPT) ? "TorchScript module" : "pickled module";
    return w->training ? "training checkpoint" : "state_dict";
}

static double share(const tc_weights *w, const tc_wcand *x)
{
    return w->total_bytes ? 100.0 * (double)x->bytes / (double)w->total_bytes : 100.0;
}

static void cand_text(const tc_weights *w, const tc_wcand *x)
{
    char b[32];
    tc_human_bytes(x->bytes, b, sizeof b);
    printf("  %-24s %zu tensors, %s (%.0f%% of bytes): %s%s%s%s\n", x->prefix[0] ? TC_ESC(x->prefix) : ".", x->ntensors, b,
           share(w, x), TC_ESC(x->reason), x->shared[0] ? "; every key starts with '" : "", TC_ESC(x->shared),
           x->shared[0] ? "'" : "");
}

void tc_inspect_weights_text(const tc_ckpt *c)
{
    tc_weights w;
    tc_diag d = TC_DIAG_INIT;
    if (!tc_ckpt_ntensors(c) || tc_ckpt_can(c, TC_CAP_SHARD_INDEX) || tc_weights_find(c, &w, &d))
        return; /* a set's shards are state_dicts already */
    const char *kind = kind_of(c, &w);
    char ob[32], b[32];
    tc_human_bytes(w.optimizer_bytes, ob, sizeof ob);
    printf("\nweights: ");
    if (!w.n) {
        printf("none found outside training state; 'tensorctl extract --from KEY' takes an entry\n");
    } else if (w.n > 1) {
        printf("%zu candidates; 'tensorctl extract' needs --from KEY (or --ema) to choose\n", w.n);
        for (size_t i = 0; i < w.n; i++)
            cand_text(&w, &w.v[i]);
    } else {
        const tc_wcand *x = &w.v[0];
        tc_human_bytes(x->bytes, b, sizeof b);
        if (!strcmp(kind, "training checkpoint"))
            printf("training checkpoint: weights under '%s' (%s%s%s%.0f%% of bytes)", TC_ESC(x->prefix),
                   x->cls ? "a pickled nn.Module " : x->ema ? "an EMA copy, " : "", x->cls ? TC_ESC(x->cls) : "",
                   x->cls ? ", " : "", share(&w, x));
        else if (x->cls && !x->prefix[0])
            printf("%s %s", strcmp(kind, "pickled module") ? "TorchScript module" : "pickled module", TC_ESC(x->cls));
        else
            printf("%s", !strcmp(kind, "state_dict") ? "a state_dict" : kind);
        if (w.optimizer_bytes)
            printf(", optimizer state %s", ob);
        printf("; extract gives %zu tensor%s (%s)", x->ntensors, x->ntensors == 1 ? "" : "s", b);
        if (x->shared[0])
            printf("; every key starts with '%s'", TC_ESC(x->shared));
        printf("\n");
    }
    tc_weights_free(&w);
}

cJSON *tc_inspect_weights_json(const tc_ckpt *c)
{
    tc_weights w;
    tc_diag d = TC_DIAG_INIT;
    cJSON *o = cJSON_CreateObject();
    if (!o || tc_weights_find(c, &w, &d))
        return o;
    cJSON_AddStringToObject(o, "kind", kind_of(c, &w));
    cJSON_AddNumberToObject(o, "total_bytes", (double)w.total_bytes);
    cJSON_AddNumberToObject(o, "optimizer_bytes", (double)w.optimizer_bytes);
    cJSON *a = cJSON_AddArrayToObject(o, "candidates");
    for (size_t i = 0; a && i < w.n; i++) {
        const tc_wcand *x = &w.v[i];
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "from", x->prefix[0] ? x->prefix : ".");
        cJSON_AddStringToObject(e, "reason", x->reason);
        if (x->cls)
            cJSON_AddStringToObject(e, "class", x->cls);
        else
            cJSON_AddNullToObject(e, "class");
        cJSON_AddBoolToObject(e, "ema", x->ema);
        cJSON_AddNumberToObject(e, "tensors", (double)x->ntensors);
        cJSON_AddNumberToObject(e, "bytes", (double)x->bytes);
        cJSON_AddNumberToObject(e, "share_of_bytes", w.total_bytes ? (double)x->bytes / (double)w.total_bytes : 1.0);
        if (x->shared[0])
            cJSON_AddStringToObject(e, "shared_prefix", x->shared);
        else
            cJSON_AddNullToObject(e, "shared_prefix");
        cJSON_AddItemToArray(a, e);
    }
    tc_weights_free(&w);
    return o;
}
