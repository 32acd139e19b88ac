/* The checkpoint model: what a file holds, whatever its format.
 *
 * A tc_ckpt lists every tensor reachable in the file under its name, every
 * storage (a block of bytes that tensors view) with its saved location and
 * where its bytes lie, every Python global the file names with its safety
 * verdict, and facts for inspect (records, metadata, non-tensor contents).
 * A format driver (formats/) fills it from metadata alone; tensor data stays
 * in the file until an operation reads it through the driver.
 *
 * The model knows no container or pickle types: a driver keeps what it needs
 * to read and rewrite the file (its object graph, its records) as private
 * state attached with tc_ckpt_set_driver.
 *
 * Ownership: a tc_ckpt owns every table, string and its driver state;
 * tc_ckpt_close releases it all and accepts NULL. Pointers returned by the
 * accessors stay valid until the next call that adds to the same table. */
#ifndef TC_CKPT_H
#define TC_CKPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "diag.h"
#include "dtype.h"
#include "qtype.h"
#include "source.h"

typedef enum tc_tensor_kind {
    TC_TENSOR_DENSE,
    TC_TENSOR_QUANT,
    TC_TENSOR_META,    /* no data */
    TC_TENSOR_OTHER,   /* wrapper subclasses and the like: reported, not rewritten */
} tc_tensor_kind;

#define TC_MAX_DIMS 64

typedef struct tc_storage {
    char *key;           /* the container's name for it: data/<key>, a safetensors tensor name (the checkpoint's) */
    char *location;      /* as saved: "cpu", "cuda:0", ... ("-" when the format has none); set with
                            tc_ckpt_set_location (kept once per distinct text), or malloc'd by the driver */
    uint64_t numel;
    uint64_t nbytes;
    /* stored uncompressed in the checkpoint's own file at file_off (else read through the driver) */
    uint64_t file_off;
    uint32_t ntensors;   /* tensors viewing it (aliases of one tensor count once; a file holds fewer than
                            pk_limits' nodes) */
    int32_t shard;       /* sharded sets: the shard holding it (tc_ckpt_shard), else -1 */
    tc_dtype dtype;      /* element type; uint8 for an UntypedStorage */
    uint32_t crc;
    bool untyped;        /* UntypedStorage (numel counts bytes) */
    bool unreached;      /* no path from the file's object reaches it: its persistent ids lie only in objects
                            the pickle discarded (torch.load reads it, then drops it); rewrites leave it out */
    bool stored;
    bool crc_known;
    /* Stored as blocks of a ggml block type (qtype.h) that read as float32 (dtype): numel and
     * nbytes count the float32 values, enc_bytes the blocks its driver's reader returns; the
     * operations layer decodes them. TC_Q_NONE: the bytes are the elements themselves. */
    tc_qtype enc;
    uint64_t enc_bytes;
} tc_storage;

/* A tensor costs the same whatever else the file holds: a fixed record, its
 * name and its dimensions once each in the checkpoint's own memory. */
typedef struct tc_tensor {
    char *name;            /* the checkpoint's; never freed or changed by others */
    const int64_t *shape, *stride; /* ndim each, the checkpoint's (tc_ckpt_set_dims) */
    int64_t offset;        /* in elements of dtype */
    long storage;          /* index into the storages, -1 when none */
    uint64_t numel, nbytes;
    long alias_of;         /* the first tensor that is the same Python object, or -1 */
    long keyed;            /* the container holding it under a key (tc_ckpt_keyed), or -1 (a list element, a part of another tensor) */
    size_t item;           /* its key's position among that container's items */
    const char *badkey;    /* a key on its path is no name a state_dict can have ("bytes", "a tuple", "text that
                              is not UTF-8 ..."; a static string): name shows it as repr() does, and no output
                              that names tensors flat takes it; NULL for a name */
    tc_tensor_kind kind;
    tc_dtype dtype;
    int ndim;
    bool requires_grad, parameter;
    bool aux;              /* part of another tensor (quantizer scales): never cast */
    bool subclass;         /* a tensor subclass, or with Python state: its bytes are kept, never cast */
    bool restored;         /* a view the safetensors aliases record restores (TC_ST_ALIASES_KEY): not in the
                              header, and no index lists it */
    bool frozen;           /* a parameter its optimizer does not train (DeepSpeed ZeRO): tc_ckpt_drop_frozen leaves it out */
    const char *device;    /* for tensors without storage: a static string ("meta", "?" for a wrapper, "-" where the
                              format saves none); "" when unset */
} tc_tensor;

/* A Python global the file names, as CPython would import it. */
typedef struct tc_global {
    char *name;            /* "module.name" */
    uint32_t count;        /* how many times the file names it */
    bool allowed;          /* torch's weights_only loader accepts it, or the user admitted it */
    bool admitted;         /* allowed only because the user said so (--safe-globals) */
    const char *torch;     /* allowed by torch: which versions' weights_only accept it */
    bool dangerous;        /* a known way to run code or touch the system (a label, not the verdict) */
    const char *why;       /* for dangerous ones: what it does */
    const char *reader;    /* allowed only by the format's own reader's allowlist (whose, for inspect), not by
                              torch's weights_only loader: NULL for every other */
} tc_global;

typedef struct tc_kv {
    char *key, *value;
} tc_kv;

/* An entry of a checkpoint's top-level object (depth 1) or of one of its
 * dict-like entries (depth 2): what inspect's contents and convert's list of
 * dropped objects are made of. */
typedef struct tc_entry {
    char *name;            /* "epoch", "optimizer.param_groups" */
    char *text;            /* a short description: "3", "[{'lr': 0.0003, ...}]" */
    char *kind;            /* its type: "int", "dict", "OrderedDict", ... */
    int depth;             /* 1 or 2 */
    size_t ntensors;       /* tensors under it (the names starting with name) */
    bool is_tensor;        /* the entry is itself a tensor */
    bool has_items;        /* it has named entries of its own (listed at depth 2 when depth is 1) */
    bool attr;             /* an attribute of an object (its state), not an item of a dict */
} tc_entry;

/* A container of the object graph that holds tensors directly under keys: a
 * dict (a state_dict, an optimizer's per-parameter state) or the parameters
 * and buffers of a pickled object (nn.Module). Where key surgery on a whole
 * rewrite acts: it renames and removes the items of dicts; attributes of
 * objects it cannot rename. */
typedef struct tc_keyed {
    char *name;            /* its tensors are named name + "." + key ("" at the root: key alone); the first path found */
    bool attrs;            /* attributes of an object, not items of a dict */
    size_t nkeys;
    char **keys;           /* every item's key as tensor names show it */
    bool *text;            /* per item: its key is a str (other keys are never renamed) */
} tc_keyed;

/* An nn.Module pickled whole (torch.save(model)), not inside another: its
 * tensors are named prefix + "." + what its state_dict() would name them. */
typedef struct tc_module {
    char *prefix;          /* "" when it is the file's root object */
    char *cls;             /* its class, "module.Name" */
} tc_module;

typedef struct tc_limits {
    uint64_t max_pickle_bytes;
    uint64_t max_objects;
    uint32_t max_depth;
    uint64_t max_entries;  /* zip entries, safetensors tensors, index entries */
    uint64_t max_header;   /* safetensors JSON header */
    uint64_t max_inflate_ratio; /* a deflated pickle inflates to at most this times its size, past 1 MiB */
    int names;             /* not a limit, a reading: the tensor names a driver gives (TC_NAMES_*) */
} tc_limits;

/* TC_NAMES_HF: a driver whose format has names of its own that Hugging Face's loaders map back
 * (GGUF's llama family, as transformers' GGUF loader does) gives those names, and the tensors as
 * that loader builds them. Other drivers' names are Hugging Face's already, or have no mapping:
 * they ignore it. */
enum { TC_NAMES_FILE, TC_NAMES_HF };

#define TC_LIMITS_DEFAULT                                                                          \
    {.max_pickle_bytes = 1ull << 30, .max_objects = 20000000, .max_depth = 1000,                   \
     .max_entries = 1000000, .max_header = 100u << 20, .max_inflate_ratio = 100}

typedef struct tc_ckpt tc_ckpt;
/* A format driver (formats/format.h); the model only holds one. */
typedef struct tc_format tc_format;

/* A new, empty checkpoint reading path (opened now). */
int tc_ckpt_new(tc_ckpt **out, const char *path, const tc_limits *lim, tc_diag *d);
void tc_ckpt_close(tc_ckpt *c);

const char *tc_ckpt_path(const tc_ckpt *c);
const tc_src *tc_ckpt_src(const tc_ckpt *c);
const tc_limits *tc_ckpt_limits(const tc_ckpt *c);

size_t tc_ckpt_ntensors(const tc_ckpt *c);
const tc_tensor *tc_ckpt_tensor(const tc_ckpt *c, size_t i);
size_t tc_ckpt_nstorages(const tc_ckpt *c);
const tc_storage *tc_ckpt_storage(const tc_ckpt *c, size_t i);
/* The index of the storage with this key, or -1. */
long tc_ckpt_find_storage(const tc_ckpt *c, const char *key);
/* The index of the tensor with this name, or -1. */
long tc_ckpt_find_tensor(const tc_ckpt *c, const char *name);
size_t tc_ckpt_nglobals(const tc_ckpt *c);
const tc_global *tc_ckpt_global(const tc_ckpt *c, size_t i);
bool tc_ckpt_has_dangerous(const tc_ckpt *c);
/* Reasons other than its globals that a file is not safe to load (a second
 * reading of its bytes, a container trick), in the order found. */
size_t tc_ckpt_nhazards(const tc_ckpt *c);
const char *tc_ckpt_hazard(const tc_ckpt *c, size_t i);
/* The verdict: safe when every global is allowed and there is no hazard. */
bool tc_ckpt_is_safe(const tc_ckpt *c);
/* What torch.load(weights_only=True) of each torch tensorctl knows does
 * with the file: torch 1.13's weights_only unpickler and 2.x's accept
 * different opcodes, globals and containers. Set by the drivers of the
 * formats torch.load reads (unknown otherwise); why says, in a phrase, what
 * that torch refuses ("BINFLOAT (opcode 71 'G'), which its weights_only
 * unpickler lacks"). */
enum { TC_TORCH_1_13, TC_TORCH_2, TC_NTORCH };
extern const char *const tc_torch_names[TC_NTORCH]; /* "1.13", "2.x" */
int tc_ckpt_set_weights_only(tc_ckpt *c, int torch, bool loads, const char *why, tc_diag *d);
/* False when the format is not one torch.load reads; else *loads, and *why when it refuses. */
bool tc_ckpt_weights_only(const tc_ckpt *c, int torch, bool *loads, const char **why);
/* Admit the globals named (as torch.serialization.add_safe_globals does);
 * names tc_verdict_admissible refuses stay unsafe. */
void tc_ckpt_admit(tc_ckpt *c, const char *const *names, size_t n);
size_t tc_ckpt_nfacts(const tc_ckpt *c);
const tc_kv *tc_ckpt_fact(const tc_ckpt *c, size_t i);
size_t tc_ckpt_nmeta(const tc_ckpt *c);
const tc_kv *tc_ckpt_meta(const tc_ckpt *c, size_t i);
/* The value of a metadata key, or NULL. */
const char *tc_ckpt_meta_get(const tc_ckpt *c, const char *key);
size_t tc_ckpt_nentries(const tc_ckpt *c);
const tc_entry *tc_ckpt_entry(const tc_ckpt *c, size_t i);
size_t tc_ckpt_nshards(const tc_ckpt *c);
const char *tc_ckpt_shard(const tc_ckpt *c, size_t i);
size_t tc_ckpt_nkeyed(const tc_ckpt *c);
const tc_keyed *tc_ckpt_keyed(const tc_ckpt *c, size_t i);
size_t tc_ckpt_nmodules(const tc_ckpt *c);
const tc_module *tc_ckpt_module(const tc_ckpt *c, size_t i);
/* The location a tensor's data would load on: its storage's, or its own. */
const char *tc_tensor_device(const tc_ckpt *c, const tc_tensor *t);
/* Whether t's elements lie in C order, one after another (dimensions of
 * size 1 may have any stride), as torch's is_contiguous() says. */
bool tc_tensor_contiguous(const tc_tensor *t);

/* ---- for format drivers ------------------------------------------------------ */

/* The driver that filled c (format.h says what one is; opaque here) and
 * its private state, which tc_ckpt_close releases with free_priv. */
void tc_ckpt_set_driver(tc_ckpt *c, const tc_format *driver, void *priv, void (*free_priv)(void *));
/* NULL until a driver is set. */
const tc_format *tc_ckpt_driver(const tc_ckpt *c);
void *tc_ckpt_priv(const tc_ckpt *c);
/* How c's driver opens another file that c is made of, whatever its format
 * (an index's shards): tc_open's signature (format.h). Whoever asks a driver
 * to open c hands it one (the registry: its own), so that a driver opens
 * files of every format without calling up to the registry. */
typedef int (*tc_opener)(tc_ckpt **out, const char *path, const tc_limits *lim, tc_diag *d);
void tc_ckpt_set_opener(tc_ckpt *c, tc_opener opener);
/* NULL until one is set. */
tc_opener tc_ckpt_opener(const tc_ckpt *c);
/* True for formats that hold a Python object graph (device tags, non-tensor objects). */
void tc_ckpt_set_objects(tc_ckpt *c, bool has);
bool tc_ckpt_has_objects(const tc_ckpt *c);

/* A new storage with this key (copied); returns its index, or -1 (d says why). */
long tc_ckpt_add_storage(tc_ckpt *c, const char *key, tc_diag *d);
tc_storage *tc_ckpt_storage_mut(tc_ckpt *c, size_t i);
/* Forget every storage (a driver reading again from the start). */
void tc_ckpt_clear_storages(tc_ckpt *c);
/* A new tensor named name (copied), zeroed, storage, alias_of and keyed -1, no dimensions; returns its index or -1. */
long tc_ckpt_add_tensor(tc_ckpt *c, const char *name, tc_diag *d);
tc_tensor *tc_ckpt_tensor_mut(tc_ckpt *c, size_t i);
/* Tensor i has ndim dimensions of this shape and stride (copied; stride
 * NULL: C order, contiguous). */
int tc_ckpt_set_dims(tc_ckpt *c, size_t i, int ndim, const int64_t *shape, const int64_t *stride, tc_diag *d);
/* Storage i's location tag (copied once per distinct text for the whole checkpoint). */
int tc_ckpt_set_location(tc_ckpt *c, size_t i, const char *location, tc_diag *d);
/* Count one more mention of a global "module.name"; the verdict is taken the first time. */
int tc_ckpt_add_global(tc_ckpt *c, const char *name, tc_diag *d);
int tc_ckpt_add_fact(tc_ckpt *c, const char *key, const char *value, tc_diag *d);
int tc_ckpt_add_hazard(tc_ckpt *c, const char *text, tc_diag *d);
int tc_ckpt_add_meta(tc_ckpt *c, const char *key, const char *value, tc_diag *d);
/* An entry (its strings copied). */
int tc_ckpt_add_entry(tc_ckpt *c, const tc_entry *e, tc_diag *d);
/* A keyed container (name, keys[0..n) and text copied); returns its index or -1. */
long tc_ckpt_add_keyed(tc_ckpt *c, const char *name, bool attrs, const char *const *keys, const bool *text, size_t n,
                       tc_diag *d);
/* A module pickled whole (strings copied). */
int tc_ckpt_add_module(tc_ckpt *c, const char *prefix, const char *cls, tc_diag *d);
/* A shard name (copied); returns its index or -1. */
long tc_ckpt_add_shard(tc_ckpt *c, const char *name, tc_diag *d);
/* Sort the globals by name (once every global is added). */
void tc_ckpt_sort_globals(tc_ckpt *c);

/* ---- checkpoints made of pieces (distributed checkpoints) ---------------------- */

/* A block of a whole tensor held by a storage of its own: the elements of
 * the box [offsets, offsets + sizes) of the whole tensor, laid out in that
 * storage from element soffset with strides (in elements). */
typedef struct tc_chunk {
    size_t storage;
    int64_t soffset;
    const int64_t *offsets, *sizes, *strides; /* ndim each */
} tc_chunk;

/* Storage i holds a whole tensor of ndim dimensions and this shape, in C
 * order, assembled from the chunks v[0..n) (copied): the storages they name
 * hold its bytes, and no bytes of its own lie anywhere. The operations
 * layer assembles it; its driver does not read it. */
int tc_ckpt_set_chunks(tc_ckpt *c, size_t i, int ndim, const int64_t *shape, const tc_chunk *v, size_t n,
                       tc_diag *d);
/* The chunks of storage i: NULL when it is not assembled from chunks (not
 * NULL, n 0, for an assembled tensor of no elements). */
const tc_chunk *tc_ckpt_chunks(const tc_ckpt *c, size_t i, size_t *n);
/* The shape of the whole tensor storage i holds (assembled from chunks), or NULL. */
const int64_t *tc_ckpt_chunk_shape(const tc_ckpt *c, size_t i, int *ndim);
/* A storage assembled from storage i (the last one given it as a chunk: the
 * flat buffer of a ZeRO rank holds pieces of many), or -1 when i is not a chunk's. */
long tc_ckpt_chunk_of(const tc_ckpt *c, size_t i);
/* Count one more mention of a global that the format's own reader imports
 * and its own allowlist accepts (by: whose, for inspect); it is allowed
 * whatever torch's weights_only loader says. Unless torch's loader accepts
 * it as well, tc_global.reader says so: such a file does not load with
 * weights_only=True. */
int tc_ckpt_add_global_allowed(tc_ckpt *c, const char *name, const char *by, tc_diag *d);

/* A checkpoint saved in pieces by the processes of a training run (a
 * distributed checkpoint, a DeepSpeed ZeRO folder): what it is, in words for
 * messages ("a DeepSpeed ZeRO checkpoint"; the string is not copied).
 * consolidate writes such a checkpoint whole; convert and the moves refuse
 * it. NULL for every other checkpoint. */
void tc_ckpt_set_distributed(tc_ckpt *c, const char *what);
const char *tc_ckpt_distributed(const tc_ckpt *c);
/* Forget the tensors flagged frozen, and every tensor that is another name
 * for one of them (DeepSpeed's converter never adds an alias whose source it
 * left out): what --exclude-frozen asks for. */
int tc_ckpt_drop_frozen(tc_ckpt *c, tc_diag *d);

/* A checkpoint read from src (copied; a window or memory source the caller
 * keeps alive), named name in messages; for drivers that read containers
 * nested in other files. */
int tc_ckpt_new_src(tc_ckpt **out, const char *name, const tc_src *src, const tc_limits *lim, tc_diag *d);

/* A value of a checkpoint stored apart from its tensors (the pickled
 * non-tensor items of a distributed checkpoint): its name, a short
 * description, and either its value as a pickle that can be carried into
 * another checkpoint (no tensors, nothing torch's weights_only loaders
 * refuse) or why it cannot be. */
typedef struct tc_object {
    char *name, *text, *kind;
    uint8_t *pickle;       /* NULL when it cannot be carried */
    size_t pickle_len;
    char *why_not;         /* when pickle is NULL */
} tc_object;

/* Add an object (strings and the pickle, which may be NULL, copied). */
int tc_ckpt_add_object(tc_ckpt *c, const char *name, const char *text, const char *kind, const uint8_t *pickle,
                       size_t pickle_len, const char *why_not, tc_diag *d);
size_t tc_ckpt_nobjects(const tc_ckpt *c);
const tc_object *tc_ckpt_object(const tc_ckpt *c, size_t i);

#endif
