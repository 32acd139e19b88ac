/* The items a file's judging makes (scan_int.h), every string their own:
 * below both the judge and the archive walker, which make them. */
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "scan_int.h"

static void item_free(scan_item *it)
{
    free(it->kind);
    free(it->reason);
    for (size_t i = 0; i < it->member.n; i++)
        free(it->member.v[i]);
    tc_vec_free(&it->member);
    for (size_t i = 0; i < it->globals.n; i++) {
        free((char *)it->globals.v[i].name);
        free((char *)it->globals.v[i].why);
    }
    tc_vec_free(&it->globals);
    for (size_t i = 0; i < it->hazards.n; i++)
        free(it->hazards.v[i]);
    tc_vec_free(&it->hazards);
}

void scan_items_free(scan_items *v)
{
    for (size_t i = 0; i < v->n; i++)
        item_free(&v->v[i]);
    tc_vec_free(v);
}

/* The scratch item for what is not kept, emptied of what its last use put in it. */
static scan_item *sink(scan_job *j)
{
    item_free(&j->sink);
    memset(&j->sink, 0, sizeof j->sink);
    return &j->sink;
}

void scan_job_end(scan_job *j) { sink(j); }

scan_item *scan_emit(scan_job *j, const char *kind, const char *wrap, tc_scan_verdict v, uint64_t size,
                     const char *reason)
{
    if (j->unwanted) /* another name of a file judged before: what is left of it is not said */
        return sink(j);
    if (v == TC_SCAN_SKIPPED && !j->o->report_skipped) {
        j->skipped++;
        return sink(j);
    }
    if (j->flush && j->out->n >= j->flush->at) { /* the items so far are complete: hand them on */
        int rc = j->flush->fn(j->flush->ctx, j->out);
        if (rc < 0)
            return NULL;
        if (rc) {
            j->unwanted = true;
            return sink(j);
        }
    }
    scan_item *it = tc_vec_extend(j->out, 1);
    if (!it)
        return NULL;
    tc_buf k = TC_BUF_INIT(0);
    if (wrap)
        tc_buf_printf(&k, "%s: ", wrap);
    tc_buf_puts(&k, kind);
    it->kind = tc_buf_take(&k);
    it->verdict = v;
    it->size = size;
    bool ok = it->kind && (!reason || (it->reason = strdup(reason))) && !tc_vec_reserve(&it->member, j->chain.n);
    for (size_t i = 0; ok && i < j->chain.n; i++)
        ok = (it->member.v[it->member.n] = strdup(j->chain.v[i])) && ++it->member.n;
    if (!ok) {
        item_free(it);
        j->out->n--;
        return NULL;
    }
    j->judged += v != TC_SCAN_SKIPPED;
    return it;
}
