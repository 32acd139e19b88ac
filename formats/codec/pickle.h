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

#include "buf.h"
#include "diag.h"

typedef enum pk_kind {
    PK_NONE,
    PK_BOOL,
    PK_INT,      /* fits int64: i */
    PK_BIGINT,   /* two's complement little-endian bytes in s/len */
    PK_FLOAT,
    PK_STR,      /* text in s/len: UTF-8, or with PK_F_SURROGATE UTF-8 plus lone surrogates */
    PK_BYTES,    /* raw bytes in s/len (bytes; py2 strings too when read as bytes) */
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

/* pk_obj.flags: how the reader made a node, where the kind alone does not say. */
enum {
    /* PK_STR/PK_BYTES from STRING, BINSTRING or SHORT_BINSTRING (a Python 2 str),
     * decoded as pk_read_opts.py2_strings says */
    PK_F_PY2STR = 1u << 0,
    /* PK_STR holding lone surrogates (BINUNICODE with 'surrogatepass', UNICODE
     * \ud800), each as its 3-byte UTF-8 form: s is then not valid UTF-8 */
    PK_F_SURROGATE = 1u << 1,
    /* PK_GLOBAL whose name fix_imports changed (protocol < 3): raw_module and
     * raw_name hold the text as written, s and name what CPython imports */
    PK_F_REMAPPED = 1u << 2,
    /* PK_GLOBAL read under protocol >= 4 with a '.' in its name: CPython imports
     * module s, then walks the attributes of name one dot at a time
     * (name "a.b" is getattr(getattr(module, "a"), "b")) */
    PK_F_DOTTED = 1u << 3,
};

/* A node: 112 bytes on LP64 (a pickle of many small objects is mostly nodes), the
 * fields only some kinds use sharing their room where no reader of another
 * kind looks (i, f and a global's raw names: each read only after its kind
 * is known). */
typedef struct pk_obj pk_obj;
struct pk_obj {
    uint8_t kind;
    uint8_t items_kind;  /* PK_CALL only */
    uint8_t newobj;      /* PK_CALL made by NEWOBJ */
    uint8_t mark;        /* scratch flag for walkers; reset with pk_graph_clear_marks */
    uint32_t depth;      /* nesting depth below this node, as read */
    uint32_t memo;       /* writer's memo slot + 1; 0 when not yet written */
    uint32_t tag;        /* the graph user's own (the torch reader: tensor index + 1); never set here */
    uint32_t flags;      /* PK_F_* */
    uint32_t cap;        /* room for items (0 with n > 0: items in the graph's arena); a bytearray's room */
    union {
        int64_t i;       /* PK_INT, PK_BOOL */
        double f;        /* PK_FLOAT */
        /* PK_GLOBAL with PK_F_REMAPPED: module and name as the pickle wrote
         * them (s and name are always the resolved names); NULL otherwise */
        struct {
            const char *raw_module, *raw_name;
        };
    };
    char *s;
    size_t len;
    char *name;
    pk_obj *func, *args, *state, *kwargs;
    pk_obj **items;
    size_t n;
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
    /* What Python 2 strings (STRING, BINSTRING, SHORT_BINSTRING) become. The
     * default (0) is torch.load's encoding='utf-8': str, strict UTF-8, so
     * invalid UTF-8 fails the read as it fails torch.load. */
    uint8_t py2_strings;   /* enum pk_py2str */
    /* true: names are imported as written even below protocol 3 (CPython's
     * fix_imports=False); torch.load keeps fix_imports on */
    bool no_fix_imports;
    /* if set, 32 bytes: the bit of each opcode read is set (which loaders
     * with a fixed opcode set, torch's weights_only ones, accept the pickle) */
    uint8_t *ops_seen;
    /* if set, raised to the decimal digits of the longest INT or LONG text
     * read past Python 3.11's int_max_str_digits (4300): Python 3.11 (and
     * 3.10.7, 3.9.14, 3.8.14, 3.7.14) raise ValueError there, older Pythons
     * read on, and pk_read reads on as they do */
    uint64_t *long_digits;
} pk_read_opts;

enum pk_py2str {
    PK_PY2STR_UTF8,   /* str, strict UTF-8 (torch.load) */
    PK_PY2STR_BYTES,  /* bytes (encoding='bytes') */
    PK_PY2STR_ASCII,  /* str, strict ASCII (pickle.load's default) */
    PK_PY2STR_LATIN1, /* str, every byte a code point (encoding='latin1', numpy's advice) */
};

/* Read one pickle from buf[0..n) as CPython 3.11's C unpickler reads it (the
 * one torch.load uses): the same objects, shared the same way; where CPython
 * raises, pk_read fails. On success *out is the object STOP returns (the top
 * of the stack; CPython ignores anything below it) and *used the bytes
 * consumed up to and including STOP.
 *
 * Where CPython would call into the program (a global, a call, a persistent
 * id), the graph records the request: a PK_GLOBAL, a PK_CALL, a PK_PERSID.
 * Such nodes stand for objects the reader cannot know, and pk_read treats
 * them as CPython treats objects that take every call: callable, a class for
 * NEWOBJ, hashable by identity; a call result takes APPENDS (list items) or
 * SETITEMS (dict items), then one BUILD. What such a node cannot record it
 * refuses with TC_ERR_UNSUPPORTED: a second BUILD, items after BUILD, list and
 * dict items on one object, ADDITEMS, BUILD or items on a global or a
 * persistent id. Names that no import can resolve (empty, NUL or newline
 * inside) are refused too. Dicts, sets and frozensets hold each key once, as
 * CPython's do (first key object, last value; 1 == 1.0 == True). */
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
/* The global o names, "module.name", appended to b whole however long it is: as CPython
 * imports it, or (raw) as the pickle wrote it where fix_imports changed it (PK_F_REMAPPED).
 * The verdict judges these names, so they are never cut to fit a buffer (tc_buf_oom says
 * when memory ran out). */
void pk_global_qualname(const pk_obj *o, bool raw, tc_buf *b);
/* For a PK_CALL whose func is a GLOBAL: that global, else NULL. */
const pk_obj *pk_call_global(const pk_obj *o);
bool pk_is_str(const pk_obj *o, const char *s);
/* Graphs from pk_read already hold the names CPython imports (fix_imports
 * applied only below protocol 3), so this returns module unchanged; kept for
 * callers written when the reader stored names as written. */
const char *pk_module_py3(const char *module);
/* CPython's fix_imports for protocols 0-2 (_compat_pickle.NAME_MAPPING, then
 * IMPORT_MAPPING): true when (module, name) is imported as another name, put
 * in *mod_out and *name_out (static strings). */
bool pk_compat_map(const char *module, const char *name, const char **mod_out, const char **name_out);
/* Reset every node's mark and writer memo. */
void pk_graph_clear_marks(pk_graph *g);
/* Forget every node and string of g, keeping one block of each for reuse:
 * a graph that holds one piece of a pickle written piece by piece
 * (pk_stream) at a time costs the memory of the largest piece. */
void pk_graph_reset(pk_graph *g);
/* Call fn for every node of the graph. */
void pk_graph_foreach(pk_graph *g, void (*fn)(void *ctx, pk_obj *o), void *ctx);

/* Write root as a protocol-2 pickle using only the opcodes torch's weights_only
 * loader accepts. Shared nodes are written once and fetched from the memo.
 * The output is appended to a growing buffer owned by the caller (free()).
 * Strings (Python 2 ones too) are written as BINUNICODE, what torch.load made
 * of them. A global is written as GLOBAL text, which a protocol-2 loader
 * passes through fix_imports: one read below protocol 3 goes out as it was
 * read; one the mapping would turn into another name (dbm.open read from a
 * protocol-3 pickle), a PK_F_DOTTED one, or one that is not UTF-8 text is
 * refused with TC_ERR_UNSUPPORTED naming it. */
int pk_write(pk_graph *g, pk_obj *root, uint32_t max_depth, uint8_t **out, size_t *out_len, tc_diag *d);

/* A dict pickle written pair by pair, byte for byte what pk_write writes for
 * the same root holding the same pairs, without the whole graph in memory:
 * each pair may live in a graph of its own, reset once the pair is written
 * (pk_graph_reset). What a later pair refers to (a string or global written
 * before, fetched from the memo) must outlive it: the writer remembers a
 * node's memo slot in the node itself. No persistent id may be reachable
 * from two pairs (pk_write finds such ids; here each pair is written as it
 * comes), nor twice within one.
 *
 *   pk_stream_new      the root (a PK_DICT, or a PK_CALL with items_kind
 *                      PK_ITEMS_DICT, without items or state) and the number
 *                      of pairs to follow
 *   pk_stream_pair     the next pair
 *   pk_stream_end      after the last pair: the pickle, as pk_write gives it
 *   pk_stream_free     the writer (and what it wrote, unless ended) */
typedef struct pk_stream pk_stream;
int pk_stream_new(pk_stream **out, pk_obj *root, size_t npairs, uint32_t max_depth, tc_diag *d);
int pk_stream_pair(pk_stream *s, pk_obj *key, pk_obj *value);
int pk_stream_end(pk_stream *s, uint8_t **out, size_t *out_len);
void pk_stream_free(pk_stream *s);

#endif
