/* scan: the verdict on every model file under folders and in archives, as
 * text, JSON Lines or SARIF 2.1.0 (the schemas are in the man page). */
#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "cli.h"
#include "scan.h"

static const tc_opt o_json = {.id = OPT_JSON, .lng = "json", .text = &tc_text_scan_json};
static const tc_opt o_sarif = {.id = OPT_SARIF, .lng = "sarif", .text = &tc_text_scan_sarif};
static const tc_opt o_all = {.id = OPT_ALL, .lng = "all", .text = &tc_text_scan_all};
static const tc_opt o_jobs = {.id = OPT_JOBS, .shrt = 'j', .lng = "jobs", .arg = "N", .text = &tc_text_scan_jobs,
                              .kind = TC_KIND_COUNT, .min = 1, .max = 1024};
static const tc_opt o_depth = {.id = OPT_ARCHIVE_DEPTH, .lng = "max-archive-depth", .arg = "N", .def = "4",
                               .text = &tc_text_scan_max_archive_depth, .kind = TC_KIND_COUNT, .max = 64};
static const tc_opt o_quiet = {.id = OPT_QUIET, .shrt = 'q', .lng = "quiet", .text = &tc_text_scan_quiet};
static const tc_opt o_verbose = {.id = OPT_VERBOSE, .shrt = 'v', .lng = "verbose", .text = &tc_text_scan_verbose};
static const tc_opt *const opts[] = {&tc_opt_help, &o_json,  &o_sarif, &o_all, &o_jobs, &o_depth, &o_quiet,
                                     &o_verbose, &tc_opt_safe_globals, TC_LIMIT_OPTS, NULL};

static const char *const verdict_name[] = {"safe", "unsafe", "unreadable", "skipped"};

typedef struct out {
    int mode;              /* 0 text, 1 JSON Lines, 2 SARIF */
    bool quiet;
    size_t nresults;       /* SARIF results written */
} out;

/* path!member!member, escaped for a terminal. */
static void display(const tc_scan_item *it, tc_buf *b, bool esc)
{
    if (esc)
        tc_buf_esc(b, it->path, strlen(it->path));
    else
        tc_buf_puts(b, it->path);
    for (size_t i = 0; i < it->nmember; i++) {
        tc_buf_putc(b, '!');
        if (esc)
            tc_buf_esc(b, it->member[i], strlen(it->member[i]));
        else
            tc_buf_puts(b, it->member[i]);
    }
}

static void put_json(cJSON *o)
{
    char *s = o ? cJSON_PrintUnformatted(o) : NULL;
    fputs(s ? s : "null", stdout);
    free(s);
    cJSON_Delete(o);
}

static cJSON *globals_json(const tc_scan_item *it)
{
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; i < it->nglobals; i++) {
        cJSON *g = cJSON_CreateObject();
        cJSON_AddStringToObject(g, "name", it->globals[i].name);
        cJSON_AddNumberToObject(g, "count", it->globals[i].count);
        if (it->globals[i].why)
            cJSON_AddStringToObject(g, "dangerous", it->globals[i].why);
        else
            cJSON_AddNullToObject(g, "dangerous");
        cJSON_AddItemToArray(a, g);
    }
    return a;
}

static cJSON *strings_json(const char *const *v, size_t n)
{
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; i < n; i++)
        cJSON_AddItemToArray(a, cJSON_CreateString(v[i]));
    return a;
}

static void item_json(const tc_scan_item *it)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "path", it->path);
    cJSON_AddItemToObject(o, "member", strings_json(it->member, it->nmember));
    if (it->target)
        cJSON_AddStringToObject(o, "target", it->target);
    else
        cJSON_AddNullToObject(o, "target");
    cJSON_AddStringToObject(o, "kind", it->kind);
    cJSON_AddStringToObject(o, "verdict", verdict_name[it->verdict]);
    cJSON_AddNumberToObject(o, "bytes", (double)it->size);
    if (it->reason)
        cJSON_AddStringToObject(o, "reason", it->reason);
    else
        cJSON_AddNullToObject(o, "reason");
    cJSON_AddItemToObject(o, "unsafe_globals", globals_json(it));
    cJSON_AddItemToObject(o, "hazards", strings_json(it->hazards, it->nhazards));
    put_json(o);
    fputc('\n', stdout);
}

/* A relative URI reference for a path (RFC 3986: every byte outside the
 * unreserved set and '/' percent-encoded), "file://" before an absolute one. */
static void uri_of(const char *path, tc_buf *b)
{
    while (path[0] == '.' && path[1] == '/')
        path += 2;
    if (path[0] == '/')
        tc_buf_puts(b, "file://");
    for (const unsigned char *p = (const unsigned char *)path; *p; p++) {
        if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || strchr("-._~/", *p))
            tc_buf_putc(b, (char)*p);
        else
            tc_buf_printf(b, "%%%02X", *p);
    }
}

/* FNV-1a of the text: a fingerprint that stays the same from one run to the next. */
static uint64_t fnv1a(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}

static void item_sarif(out *w, const tc_scan_item *it)
{
    if (it->verdict != TC_SCAN_UNSAFE && it->verdict != TC_SCAN_UNREADABLE)
        return;
    bool unsafe = it->verdict == TC_SCAN_UNSAFE;
    tc_buf name = TC_BUF_INIT(0), msg = TC_BUF_INIT(0), uri = TC_BUF_INIT(0), fp = TC_BUF_INIT(0);
    display(it, &name, false);
    tc_buf_printf(&msg, "%s: %s (%s): %s", unsafe ? "unsafe to load" : "cannot be judged", tc_buf_str(&name),
                  it->kind, it->reason ? it->reason : "");
    uri_of(it->path, &uri);
    tc_buf_printf(&fp, "%016" PRIx64, fnv1a(tc_buf_str(&name)) ^ (unsafe ? 0 : 1));
    cJSON *r = cJSON_CreateObject();
    cJSON_AddStringToObject(r, "ruleId", unsafe ? "unsafe-model-file" : "unreadable-model-file");
    cJSON_AddNumberToObject(r, "ruleIndex", unsafe ? 0 : 1);
    cJSON_AddStringToObject(r, "level", unsafe ? "error" : "warning");
    cJSON_AddItemToObject(r, "message", cJSON_CreateObject());
    cJSON_AddStringToObject(cJSON_GetObjectItem(r, "message"), "text", tc_buf_str(&msg));
    cJSON *loc = cJSON_CreateObject(), *phys = cJSON_AddObjectToObject(loc, "physicalLocation");
    cJSON_AddStringToObject(cJSON_AddObjectToObject(phys, "artifactLocation"), "uri", tc_buf_str(&uri));
    cJSON_AddNumberToObject(cJSON_AddObjectToObject(phys, "region"), "startLine", 1);
    if (it->nmember) {
        cJSON *ll = cJSON_CreateObject();
        cJSON_AddStringToObject(ll, "fullyQualifiedName", tc_buf_str(&name));
        cJSON_AddStringToObject(ll, "kind", "member");
        cJSON_AddItemToArray(cJSON_AddArrayToObject(loc, "logicalLocations"), ll);
    }
    cJSON_AddItemToArray(cJSON_AddArrayToObject(r, "locations"), loc);
    cJSON_AddStringToObject(cJSON_AddObjectToObject(r, "partialFingerprints"), "tensorctlItem/v1", tc_buf_str(&fp));
    cJSON *props = cJSON_AddObjectToObject(r, "properties");
    cJSON_AddStringToObject(props, "kind", it->kind);
    cJSON_AddItemToObject(props, "member", strings_json(it->member, it->nmember));
    cJSON_AddItemToObject(props, "unsafe_globals", globals_json(it));
    cJSON_AddItemToObject(props, "hazards", strings_json(it->hazards, it->nhazards));
    fputs(w->nresults++ ? ",\n" : "\n", stdout);
    put_json(r);
    tc_buf_free(&name);
    tc_buf_free(&msg);
    tc_buf_free(&uri);
    tc_buf_free(&fp);
}

static void item_text(out *w, const tc_scan_item *it)
{
    if (w->quiet && it->verdict != TC_SCAN_UNSAFE && it->verdict != TC_SCAN_UNREADABLE)
        return;
    static const char *const shown[] = {"safe", "UNSAFE", "unreadable", "skipped"};
    tc_buf line = TC_BUF_INIT(0);
    tc_buf_printf(&line, "%-10s  %-16s  ", shown[it->verdict], it->kind);
    display(it, &line, true);
    if (it->reason && it->verdict != TC_SCAN_SAFE) {
        tc_buf_puts(&line, ": ");
        tc_buf_esc(&line, it->reason, strlen(it->reason));
    }
    puts(tc_buf_str(&line));
    if (tc_verbosity > 1 && it->verdict == TC_SCAN_UNSAFE) {
        for (size_t i = 0; i < it->nglobals; i++) {
            tc_buf_reset(&line);
            tc_buf_printf(&line, "%-12s", it->globals[i].why ? "  DANGEROUS" : "  unsafe");
            tc_buf_esc(&line, it->globals[i].name, strlen(it->globals[i].name));
            if (it->globals[i].why)
                tc_buf_printf(&line, ": %s", it->globals[i].why);
            puts(tc_buf_str(&line));
        }
        for (size_t i = 0; i < it->nhazards; i++) {
            tc_buf_reset(&line);
            tc_buf_printf(&line, "%-12s", "  HAZARD");
            tc_buf_esc(&line, it->hazards[i], strlen(it->hazards[i]));
            puts(tc_buf_str(&line));
        }
    }
    tc_buf_free(&line);
}

static void on_item(void *ctx, const tc_scan_item *it)
{
    out *w = ctx;
    if (w->mode == 1)
        item_json(it);
    else if (w->mode == 2)
        item_sarif(w, it);
    else
        item_text(w, it);
}

static cJSON *summary_json(const tc_scan_totals *t, double secs, unsigned jobs)
{
    cJSON *s = cJSON_CreateObject();
    cJSON_AddNumberToObject(s, "files", (double)t->files);
    cJSON_AddNumberToObject(s, "members", (double)t->members);
    cJSON_AddNumberToObject(s, "judged", (double)(t->safe + t->unsafe + t->unreadable));
    cJSON_AddNumberToObject(s, "safe", (double)t->safe);
    cJSON_AddNumberToObject(s, "unsafe", (double)t->unsafe);
    cJSON_AddNumberToObject(s, "unreadable", (double)t->unreadable);
    cJSON_AddNumberToObject(s, "skipped", (double)t->skipped);
    cJSON_AddNumberToObject(s, "other_names", (double)t->other_names);
    cJSON_AddNumberToObject(s, "special_files", (double)t->special);
    cJSON_AddNumberToObject(s, "kernel_folders", (double)t->kernel_folders);
    cJSON_AddNumberToObject(s, "archives", (double)t->archives);
    cJSON_AddNumberToObject(s, "bytes", (double)t->bytes);
    cJSON_AddNumberToObject(s, "seconds", secs);
    cJSON_AddNumberToObject(s, "jobs", jobs);
    return s;
}

/* The SARIF log around the results: the tool and its two rules. */
static void sarif_head(void)
{
    fputs("{\"$schema\":\"https://json.schemastore.org/sarif-2.1.0.json\",\"version\":\"2.1.0\",\"runs\":[{\"tool\":",
          stdout);
    cJSON *tool = cJSON_CreateObject(), *drv = cJSON_AddObjectToObject(tool, "driver");
    cJSON_AddStringToObject(drv, "name", "tensorctl");
    cJSON_AddStringToObject(drv, "version", TC_VERSION);
    cJSON *rules = cJSON_AddArrayToObject(drv, "rules");
    static const struct {
        const char *id, *name, *brief, *full, *level, *severity;
    } rule[] = {
        {"unsafe-model-file", "UnsafeModelFile", "Loading this model file runs code",
         "Loading the file (torch.load with weights_only=False, pickle.load, joblib.load, numpy.load with "
         "allow_pickle=True) imports and calls Python globals outside torch's weights_only allowlist, or its bytes "
         "have a second reading that does. tensorctl ran nothing to find out.",
         "error", "9.0"},
        {"unreadable-model-file", "UnreadableModelFile", "A model file that could not be judged",
         "The file is malformed, truncated, encrypted, nested too deep or over a limit: it has no verdict, so it "
         "is not known to be safe.",
         "warning", "5.0"},
    };
    for (size_t i = 0; i < 2; i++) {
        cJSON *r = cJSON_CreateObject();
        cJSON_AddStringToObject(r, "id", rule[i].id);
        cJSON_AddStringToObject(r, "name", rule[i].name);
        cJSON_AddStringToObject(cJSON_AddObjectToObject(r, "shortDescription"), "text", rule[i].brief);
        cJSON_AddStringToObject(cJSON_AddObjectToObject(r, "fullDescription"), "text", rule[i].full);
        cJSON_AddStringToObject(cJSON_AddObjectToObject(r, "help"), "text", rule[i].full);
        cJSON_AddStringToObject(cJSON_AddObjectToObject(r, "defaultConfiguration"), "level", rule[i].level);
        cJSON *p = cJSON_AddObjectToObject(r, "properties");
        cJSON_AddItemToArray(cJSON_AddArrayToObject(p, "tags"), cJSON_CreateString("security"));
        cJSON_AddStringToObject(p, "security-severity", rule[i].severity);
        cJSON_AddItemToArray(rules, r);
    }
    put_json(tool);
    fputs(",\"results\":[", stdout);
}

static void sarif_tail(const tc_scan_totals *t, double secs, unsigned jobs, int exit_code)
{
    fputs("\n],\"invocations\":[", stdout);
    cJSON *inv = cJSON_CreateObject();
    cJSON_AddBoolToObject(inv, "executionSuccessful", exit_code != TC_EXIT_FAIL && exit_code != TC_EXIT_USAGE);
    cJSON_AddNumberToObject(inv, "exitCode", exit_code);
    put_json(inv);
    fputs("],\"properties\":{\"tensorctl\":", stdout);
    put_json(summary_json(t, secs, jobs));
    fputs("}}]}\n", stdout);
}

static void summary_text(const tc_scan_totals *t, double secs)
{
    char h[32];
    tc_human_bytes(t->bytes, h, sizeof h);
    uint64_t judged = t->safe + t->unsafe + t->unreadable;
    printf("\n%" PRIu64 " file%s judged", judged, judged == 1 ? "" : "s");
    if (t->members)
        printf(" (%" PRIu64 " inside archives)", t->members);
    printf(": %" PRIu64 " safe, %" PRIu64 " unsafe, %" PRIu64 " unreadable; %" PRIu64 " skipped", t->safe, t->unsafe,
           t->unreadable, t->skipped);
    const struct {
        uint64_t n;
        const char *one, *many;
    } kinds[] = {{t->skipped - t->other_names - t->special - t->kernel_folders, "not a model file", "not model files"},
                 {t->other_names, "other name of a judged file", "other names of judged files"},
                 {t->special, "special file", "special files"},
                 {t->kernel_folders, "kernel folder not entered", "kernel folders not entered"}};
    if (kinds[0].n == t->skipped) /* (all of one kind, the commonest: said without a count) */
        printf(" (not model files)\n");
    else {
        const char *sep = " (";
        for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++)
            if (kinds[i].n) {
                printf("%s%" PRIu64 " %s", sep, kinds[i].n, kinds[i].n == 1 ? kinds[i].one : kinds[i].many);
                sep = ", ";
            }
        printf(")\n");
    }
    printf("%" PRIu64 " file%s reached, %s, in %.2f s\n", t->files, t->files == 1 ? "" : "s", h, secs);
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int run(const tc_cmd *cmd, int argc, char **argv)
{
    tc_args a;
    int pr = tc_parse(cmd, argc, argv, &a);
    if (pr)
        return tc_parse_exit(pr);
    int ex = TC_EXIT_OK;
    tc_scan_opts o = {0};
    if (a.npos < 1) {
        tc_err(NULL, "scan: no PATH given (see 'tensorctl scan --help')");
        ex = TC_EXIT_USAGE;
        goto out;
    }
    if (a.set[OPT_JSON] && a.set[OPT_SARIF]) {
        tc_err(NULL, "scan: --json and --sarif cannot be combined: each is the whole output");
        ex = TC_EXIT_USAGE;
        goto out;
    }
    tc_limits_from_args(&a, &o.lim);
    o.jobs = a.set[OPT_JOBS] ? (unsigned)a.num[OPT_JOBS] : 0;
    o.max_archive_depth = a.set[OPT_ARCHIVE_DEPTH] ? (unsigned)a.num[OPT_ARCHIVE_DEPTH] : TC_SCAN_DEFAULT_ARCHIVE_DEPTH;
    out w = {a.set[OPT_JSON] ? 1 : a.set[OPT_SARIF] ? 2 : 0, tc_verbosity < 1, 0};
    o.safe_globals = a.globals; /* checked by tc_parse (TC_KIND_GLOBALS) */
    o.nsafe = a.nglobals;
    o.report_skipped = a.set[OPT_ALL];
    o.on_item = on_item;
    o.ctx = &w;
    if (w.mode == 2)
        sarif_head();
    tc_scan_totals t;
    tc_diag d = TC_DIAG_INIT;
    double t0 = now();
    int rc = tc_scan_run((const char *const *)a.pos, (size_t)a.npos, &o, &t, &d);
    double secs = now() - t0;
    unsigned jobs = o.jobs;
    if (!jobs) {
        long c = sysconf(_SC_NPROCESSORS_ONLN);
        jobs = c < 1 ? 1 : (unsigned)c;
    }
    ex = rc ? TC_EXIT_FAIL : t.unsafe ? TC_EXIT_UNSAFE : t.unreadable ? TC_EXIT_BADFILE : TC_EXIT_OK;
    if (w.mode == 1) {
        cJSON *s = cJSON_CreateObject();
        cJSON_AddItemToObject(s, "summary", summary_json(&t, secs, jobs));
        put_json(s);
        fputc('\n', stdout);
    } else if (w.mode == 2) {
        sarif_tail(&t, secs, jobs, ex);
    } else if (!w.quiet) {
        summary_text(&t, secs);
    }
    if (rc)
        tc_err_diag(&d);
    if (fflush(stdout) || ferror(stdout)) {
        tc_err(NULL, "scan: cannot write the output");
        ex = TC_EXIT_FAIL;
    }
out:
    free(a.pos);
    return ex;
}

const tc_cmd tc_cmd_scan = {
    "scan", "scan [options] PATH...",
    "Judge every model file under the PATHs (folders walked, symlinks followed, archives read member by\n"
    "member): each one's verdict, kind and the globals that make it unsafe, then a summary. The same\n"
    "verdict as inspect; reads pickles and headers only, never tensor data, and runs nothing.",
    opts, run};
