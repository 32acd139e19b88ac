/* An inert Python pickle object graph: reader (protocols 0 to 5) and a
 * protocol-2 writer.
 *
 * Reading never calls anything. GLOBAL yields a pk_obj naming module and
 * name; REDUCE, NEWOBJ, INST and OBJ yield PK_CALL nodes holding the callable
 * and its arguments; BUILD attaches state; SETITEMS/APPENDS on a call result
 * attach items. Shared references (the memo) stay shared pointers, so tied
 * weights remain one node reachable from two places.
 *
 * Ownership: a pk_graph owns every node and string made from it; pk_graph_free
 * releases all of them at once. Nodes are never freed individually. */
#ifndef TC_PICKLE_H
#define TC_PICKLE_H

#include <stdint.h>
#include <stddef.h>
#include <stdbool.h>

#include "diag.h"

typedef enum pk_kind {
    PK_NONE,
    PK_BOOL,
    PK_INT,      /* fits int64: i */
    PK_BIGINT,   /* two's complement little-endian bytes in s/len */
    PK_FLOAT,
    PK_STR,      /* UTF-8 text in s/len */
    PK_BYTES,    /* raw bytes in s/len (bytes, or a protocol-0 STRING) */
    PK_BYTEARRAY,
    PK_TUPLE,
    PK_LIST,
    PK_DICT,     /* items are key, value, key, value... */
    PK_SET,
    PK_FROZENSET,
    PK_GLOBAL,   /* module in s, attribute in name */
    PK_CALL,     /* func(*args) for REDUCE; cls.__new__(cls, *args) for NEWOBJ (newobj=1) */
    PK_PERSID,   /* persistent id: pid in args */
} pk_kind;

/* What items of a PK_CALL are, when SETITEMS or APPENDS targeted it. */
enum { PK_ITEMS_NONE, PK_ITEMS_LIST, PK_ITEMS_DICT };

typedef struct pk_obj pk_obj;
struct pk_obj {
    uint8_t kind;
    uint8_t items_kind;  /* PK_CALL only */
    uint8_t newobj;      /* PK_CALL made by NEWOBJ */
    uint8_t mark;        /* scratch flag for walkers; reset with pk_graph_clear_marks */
    uint32_t depth;      /* nesting depth below this node, as read */
    uint32_t memo;       /* writer's memo slot + 1; 0 when not yet written */
    uint32_t tag;        /* the graph user's own (the torch reader: tensor index + 1); never set here */
    int64_t i;
    double f;
    char *s;
    size_t len;
    char *name;
    pk_obj *func, *args, *state, *kwargs;
    pk_obj **items;
    size_t n, cap;
};

typedef struct pk_limits {
    uint64_t max_objects; /* nodes made while reading */
    uint32_t max_depth;   /* nesting of containers */
    uint64_t max_memo;    /* highest memo index honoured */
} pk_limits;

#define PK_LIMITS_DEFAULT {.max_objects = 20000000, .max_depth = 1000, .max_memo = 20000000}

typedef struct pk_graph pk_graph;

pk_graph *pk_graph_new(void);
void pk_graph_free(pk_graph *g);
uint64_t pk_graph_count(const pk_graph *g);

/* Called for every persistent id met while reading, in stream order. */
typedef int (*pk_persid_fn)(void *ctx, pk_obj *persid, tc_diag *d);

typedef struct pk_read_opts {
    pk_limits limits;
    const char *what;      /* record name for messages, e.g. "data.pkl" */
    uint64_t base_offset;  /* added to offsets in messages */
    pk_persid_fn on_persid;
    void *ctx;
    bool *hit_end;         /* if set, becomes true when the input ended mid-pickle */
} pk_read_opts;

/* Read one pickle from buf[0..n). On success *out is the root object and
 * *used the bytes consumed up to and including STOP. */
int pk_read(pk_graph *g, const uint8_t *buf, size_t n, const pk_read_opts *opts, pk_obj **out,
            size_t *used, tc_diag *d);

/* Node construction, for rewriters. Strings are copied into the graph. */
pk_obj *pk_new(pk_graph *g, pk_kind kind);
pk_obj *pk_new_int(pk_graph *g, int64_t v);
pk_obj *pk_new_str(pk_graph *g, const char *s, size_t len);
pk_obj *pk_new_global(pk_graph *g, const char *module, const char *name);
/* Append a child to a tuple/list/set or a key/value pair to a dict. -1 on OOM. */
int pk_push(pk_graph *g, pk_obj *container, pk_obj *child);
pk_obj *pk_new_tuple(pk_graph *g, size_t n, pk_obj *const *items);

/* Helpers for readers of the graph. */
bool pk_is_global(const pk_obj *o, const char *module, const char *name);
/* For a PK_CALL whose func is a GLOBAL: that global, else NULL. */
const pk_obj *pk_call_global(const pk_obj *o);
bool pk_is_str(const pk_obj *o, const char *s);
/* Map Python 2 names as unpickling does ("__builtin__" -> "builtins"). */
const char *pk_module_py3(const char *module);
/* Reset every node's mark and writer memo. */
void pk_graph_clear_marks(pk_graph *g);
/* Call fn for every node of the graph. */
void pk_graph_foreach(pk_graph *g, void (*fn)(void *ctx, pk_obj *o), void *ctx);

/* Write root as a protocol-2 pickle using only the opcodes torch's weights_only
 * loader accepts. Shared nodes are written once and fetched from the memo.
 * The output is appended to a growing buffer owned by the caller (free()). */
int pk_write(pk_graph *g, pk_obj *root, uint32_t max_depth, uint8_t **out, size_t *out_len, tc_diag *d);

#endif
