/* A checkpoint opened for inspection or rewriting.
 *
 * tc_ckpt_open probes the file's format through the registry in
 * formats/format.h, reads the metadata (never tensor data) and fills the
 * tables below: every tensor reachable from the root with its name, every
 * storage with its location and where its bytes lie, every Python global the
 * pickle names with a safety verdict.
 *
 * Ownership: a tc_ckpt owns everything it points to, the object graph
 * included; tc_ckpt_close releases it all and accepts NULL. */
#ifndef TC_CKPT_H
#define TC_CKPT_H

#include <stdint.h>
#include <stdbool.h>

#include "diag.h"
#include "dtype.h"
#include "source.h"
#include "pickle.h"
#include "zip.h"

typedef enum tc_tensor_kind {
    TC_TENSOR_DENSE,
    TC_TENSOR_QUANT,
    TC_TENSOR_META,    /* no data */
    TC_TENSOR_OTHER,   /* wrapper subclasses and the like: reported, not rewritten */
} tc_tensor_kind;

#define TC_MAX_DIMS 64

typedef struct tc_storage {
    char *key;           /* record key: data/<key> */
    char *location;      /* as saved: "cpu", "cuda:0", ... */
    tc_dtype dtype;      /* element type; uint8 for an UntypedStorage */
    bool untyped;        /* UntypedStorage (numel counts bytes) */
    uint64_t numel;
    uint64_t nbytes;
    /* where the bytes are */
    uint64_t file_off;   /* raw bytes at this offset of the input (stored records) */
    bool raw;            /* false: read through rec (deflated) */
    const tc_zip_entry *rec;
    bool crc_known;
    uint32_t crc;
    /* every persistent-id tuple naming this storage */
    pk_obj **pids;
    size_t npids, pcap;
    size_t ntensors;
} tc_storage;

typedef struct tc_tensor {
    char *name;
    tc_tensor_kind kind;
    tc_dtype dtype;
    int ndim;
    int64_t shape[TC_MAX_DIMS], stride[TC_MAX_DIMS];
    int64_t offset;
    bool requires_grad, parameter;
    long storage;          /* index into storages, -1 when none */
    char device[32];       /* for tensors without storage (meta, wrapper) */
    uint64_t numel, nbytes;
    pk_obj *node;          /* the rebuild call */
    pk_obj *param;         /* the _rebuild_parameter call wrapping it, if any */
    long alias_of;         /* index of the first tensor built by the same node, or -1 */
    bool aux;              /* part of another tensor (quantizer scales): never cast */
} tc_tensor;

typedef struct tc_global {
    char *name;            /* "module.name" with Python 3 module names */
    bool allowed;          /* torch's weights_only loader accepts it */
    bool dangerous;        /* can run code or touch the system when unpickled */
    uint32_t count;
} tc_global;

typedef struct tc_limits {
    uint64_t max_pickle_bytes;
    uint64_t max_objects;
    uint32_t max_depth;
    uint64_t max_entries;  /* zip entries, safetensors tensors */
    uint64_t max_header;   /* safetensors JSON header */
} tc_limits;

#define TC_LIMITS_DEFAULT                                                                          \
    {.max_pickle_bytes = 1ull << 30, .max_objects = 20000000, .max_depth = 1000,                   \
     .max_entries = 1000000, .max_header = 100u << 20}

struct tc_format;

typedef struct tc_kv {
    char *key, *value;
} tc_kv;

typedef struct tc_ckpt {
    const char *path;
    const struct tc_format *fmt;
    tc_src src;
    tc_limits lim;
    pk_graph *g;
    pk_obj *root;
    tc_tensor *t;
    size_t nt, tcap;
    tc_storage *s;
    size_t ns, scap;
    tc_global *gl;
    size_t ngl;
    /* format facts for inspect: ("version", "3"), ("byteorder", "little") ... */
    tc_kv *facts;
    size_t nfacts;
    /* safetensors __metadata__ */
    tc_kv *meta;
    size_t nmeta;
    /* torch zip */
    tc_zip zip;
    char *archive;         /* top folder, without "/" */
    /* storage key lookup */
    long *hash;
    size_t hcap;
} tc_ckpt;

/* Open and read the metadata of path. On failure *out is NULL and d says why. */
int tc_ckpt_open(tc_ckpt **out, const char *path, const tc_limits *lim, tc_diag *d);
void tc_ckpt_close(tc_ckpt *c);

/* Name of the format ("torch-zip", "torch-legacy", "safetensors"). */
const char *tc_ckpt_format(const tc_ckpt *c);
bool tc_ckpt_has_dangerous(const tc_ckpt *c);

/* Sequential reader of one storage's bytes, whatever the container. */
typedef struct tc_srd {
    const tc_ckpt *c;
    const tc_storage *s;
    uint64_t done;
    tc_zip_rd zr;
    bool zip;
} tc_srd;

int tc_srd_open(tc_srd *r, const tc_ckpt *c, const tc_storage *s, tc_diag *d);
/* Fill buf with exactly min(n, remaining) bytes; *got 0 at the end. */
int tc_srd_read(tc_srd *r, void *buf, size_t n, size_t *got, tc_diag *d);
void tc_srd_close(tc_srd *r);

/* For format readers in formats/. */
int tc_ckpt_add_fact(tc_ckpt *c, const char *key, const char *value, tc_diag *d);
/* Persistent-id callback for pk_read: registers storages. */
int tc_ckpt_on_persid(void *ctx, pk_obj *persid, tc_diag *d);
/* Walk the graph from root and fill the tensor and global tables. */
int tc_ckpt_index_graph(tc_ckpt *c, tc_diag *d);
tc_storage *tc_ckpt_storage(tc_ckpt *c, const char *key);
/* Add a storage (formats without pickles); returns its index or -1. */
long tc_ckpt_new_storage(tc_ckpt *c, const char *key, tc_diag *d);
/* Record a persistent-id tuple naming s (once). */
int tc_storage_add_pid(tc_storage *s, pk_obj *pid, tc_diag *d);
/* Add a tensor entry with a copy of name; returns it, or NULL. */
tc_tensor *tc_ckpt_new_tensor(tc_ckpt *c, const char *name, tc_diag *d);

/* Safety verdict for one global, "module.name". */
void tc_global_verdict(const char *name, bool *allowed, bool *dangerous);

#endif
