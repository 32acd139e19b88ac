/* Format drivers: one on-disk checkpoint format each, behind one interface.
 *
 * A driver probes a file's first bytes (and name), opens it (fills a
 * tc_ckpt from metadata alone, keeping what it needs as private state),
 * reads a storage's bytes when asked, writes the format, and releases its
 * state with the checkpoint. Adding a format is one file, one line in
 * tc_formats[] (registry.c), samples and tests.
 *
 * Writing is split between the driver and its caller: the driver lays out
 * the container (records, headers, names, the object graph) and asks the
 * job's data callback to put each block's bytes at the offsets it chose; the
 * operations layer above supplies the callback (copying, casting, in
 * parallel). So a driver never reads tensor data to write it. */
#ifndef TC_FORMAT_H
#define TC_FORMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ckpt.h"
#include "dest.h"

/* What a probe sees: the first n bytes of the file (n < 64 for tiny files). */
/* The __metadata__ key of a safetensors file under which tensorctl records
 * the tensors that share another's storage, as a JSON object {name: {"of":
 * tensor, "offset": elements, "shape": [...], "stride": [...], "same": bool}}.
 * The safetensors driver reads them back as tensors (views of that storage);
 * writers regenerate the record from the tensors they write. */
#define TC_ST_ALIASES_KEY "tensorctl.aliases"

/* How many of a file's first bytes a probe sees (fewer when the file is shorter): a
 * tar header block is 512. */
#define TC_PROBE_BYTES 512

typedef struct tc_probe {
    const uint8_t *head;
    size_t n;
    uint64_t size;
    const char *path;
} tc_probe;

/* A reader of one storage's bytes. When the bytes lie uncompressed in a file,
 * src is that file and [off, off + size) their range, for callers that read
 * them in parallel or copy them in the kernel; read works in every case. */
typedef struct tc_rd tc_rd;
struct tc_rd {
    const tc_src *src;   /* NULL when the bytes are not a plain range of a file */
    uint64_t off, size;
    uint64_t done;       /* bytes returned by read */
    const char *what;    /* names the bytes in messages: the storage key */
    int (*read)(tc_rd *r, void *buf, size_t n, size_t *got, tc_diag *d);
    void (*close)(tc_rd *r);
    void *state;
};

/* ---- writing ---------------------------------------------------------------- */

/* What becomes of one storage of a checkpoint rewritten whole. */
typedef struct tc_out_storage {
    const char *location;  /* its new location tag */
    tc_dtype dtype;        /* its new element type (== the old one when not cast) */
    bool cast;
    uint64_t nbytes;       /* its new size */
} tc_out_storage;

/* A block of bytes to write: a storage (torch) or a tensor's data (safetensors). */
typedef struct tc_wblock {
    uint64_t nbytes;
    tc_dtype dtype;        /* element type of the written bytes */
    const char *location;  /* torch: location tag */
    bool cast;             /* its bytes are cast from another type */
} tc_wblock;

/* One named tensor of a flat state_dict: a view of a block. */
typedef struct tc_witem {
    const char *name;
    size_t block;
    tc_dtype dtype;
    int ndim;
    const int64_t *shape, *stride;
    int64_t offset;        /* elements */
    bool requires_grad, parameter;
    long same_as;          /* an earlier item that is the same tensor object (tied weights), or -1 */
} tc_witem;

/* The bytes of block k, written at off of dst (tc_dst_pwrite, from any
 * thread); *crc receives their CRC-32 when crc is not NULL. */
typedef int (*tc_data_fn)(void *ctx, size_t k, tc_dst *dst, uint64_t off, uint32_t *crc, tc_diag *d);

/* Where block k's bytes lie already, when the data callback will pass them
 * through unchanged from a plain range of an input file: true, and *off
 * their offset in that file. A driver that can put the block anywhere should
 * put it at an offset congruent to *off modulo TC_SHARE_BLOCK: the callback
 * then shares the whole blocks with the input (reflink) instead of copying
 * them. Ignoring the hint loses only that. */
typedef bool (*tc_origin_fn)(void *ctx, size_t k, uint64_t *off);

/* Key surgery on a whole rewrite: item `item` of keyed container `keyed`
 * (tc_ckpt_keyed) gets the key `key`, or is removed when key is NULL. */
typedef struct tc_keyedit {
    size_t keyed, item;
    const char *key;
} tc_keyedit;

/* A whole checkpoint rewritten with its object graph (a torch zip kept as
 * torch.save made it, its storages moved or cast): one block per storage, in
 * order. */
typedef struct tc_rewrite_job {
    tc_ckpt *whole;
    const tc_out_storage *storages; /* what becomes of each storage */
    const tc_keyedit *edits; /* sorted by (keyed, item), each item at most once; storages no path reaches then are left out */
    size_t nedits;
    tc_data_fn data;
    tc_origin_fn origin;   /* may be NULL: no block has one */
    void *ctx;             /* for data and origin */
    uint32_t max_depth;    /* pickle nesting the writer may emit */
} tc_rewrite_job;

/* A flat state_dict of items over blocks, made anew. */
typedef struct tc_write_job {
    const tc_witem *items;
    size_t nitems;
    const tc_wblock *blocks;
    size_t nblocks;
    const tc_kv *meta;     /* safetensors __metadata__, in order */
    size_t nmeta;
    tc_data_fn data;
    tc_origin_fn origin;   /* may be NULL: no block has one */
    void *ctx;             /* for data and origin */
    uint32_t max_depth;    /* pickle nesting the writer may emit */
    /* A torch state_dict's values that are not tensors, after the items:
     * obj_names[k] -> the value pickled in obj_pickles[k] (obj_lens[k]
     * bytes; no persistent ids). */
    const char *const *obj_names;
    const uint8_t *const *obj_pickles;
    const size_t *obj_lens;
    size_t nobjs;
    bool plain_dict;       /* the state_dict is a dict (as dcp_to_torch_save writes), not an OrderedDict */
    const struct tc_gguf_job *gguf; /* GGUF output: each block's ggml type and the metadata (gguf.h) */
} tc_write_job;

/* What open returns when a file its probe accepted turns out to be another
 * driver's (a zip that is a TorchScript archive): tc_open starts over with
 * the next driver whose probe accepts it. */
#define TC_FORMAT_DECLINE 1

/* What a driver is and can do. Layers above the drivers ask these, never a
 * driver's name (which is for messages): a new driver that has the trait gets
 * the behaviour without a line changing above it. */
typedef enum tc_format_cap {
    /* reads a torch object graph with the shared torch pickle reader
     * (torch_pickle.h): its private state is that reader's */
    TC_CAP_TORCH_GRAPH = 1u << 0,
    /* a TorchScript archive: code/ and constants beside the graph, loaded
     * by torch.jit.load; rewritten whole it would lose its code */
    TC_CAP_TORCHSCRIPT = 1u << 1,
    /* tensors assembled from chunks of other storages (a save in pieces) */
    TC_CAP_ASSEMBLED = 1u << 2,
    /* an index over shard files, each opened with its own driver */
    TC_CAP_SHARD_INDEX = 1u << 3,
    /* a folder of files, opened through the one that describes it */
    TC_CAP_FOLDER = 1u << 4,
    /* torch.load is not what reads it: the readings torch.load could take
     * of its bytes (tc_judge_readings) are not a consumer's */
    TC_CAP_OWN_READER = 1u << 5,
    /* torch's legacy pickle stream: the driver judges the pickle at byte 0
     * as torch.load reads it */
    TC_CAP_LEGACY_STREAM = 1u << 6,
    /* write takes a flat state_dict as a torch zip (.pt), and rewrite a
     * checkpoint whole with its object graph */
    TC_CAP_WRITES_TORCH = 1u << 7,
    /* write takes a flat state_dict as safetensors */
    TC_CAP_WRITES_SAFETENSORS = 1u << 8,
    /* torch's legacy tar archive: torch.load reads its members (a tar
     * first); the other readings of its bytes are judged beside it */
    TC_CAP_LEGACY_TAR = 1u << 9,
    /* write takes a flat state_dict of ggml-typed blocks (job.gguf) as GGUF */
    TC_CAP_WRITES_GGUF = 1u << 10,
    /* a GGUF file: its private state is the GGUF reader's (gguf_priv.h:
     * its files, metadata and tensor infos, which inspect and convert ask) */
    TC_CAP_GGUF = 1u << 11,
} tc_format_cap;

struct tc_format {
    const char *name;   /* for messages and inspect's output only */
    bool (*probe)(const tc_probe *p);
    int (*open)(tc_ckpt *c, tc_diag *d); /* 0, a tc_status, or TC_FORMAT_DECLINE */
    int (*open_storage)(const tc_ckpt *c, size_t i, tc_rd *r, tc_diag *d);
    /* NULL for formats tensorctl reads only */
    int (*write)(const tc_write_job *job, tc_dst *dst, tc_diag *d);
    unsigned caps;      /* tc_format_cap bits */
    /* NULL for formats that cannot keep a checkpoint's object graph */
    int (*rewrite)(const tc_rewrite_job *job, tc_dst *dst, tc_diag *d);
};

/* NULL-terminated, in probing order. */
extern const tc_format *const tc_formats[];

/* Open path with the first driver whose probe accepts it. On failure *out
 * is NULL and d (its subject: path) says why. */
int tc_open(tc_ckpt **out, const char *path, const tc_limits *lim, tc_diag *d);
/* The checkpoint a model folder holds (a Hugging Face save: model.safetensors,
 * pytorch_model.bin, or a sharded set's *.index.json): 0 and *file, the
 * folder's path joined with the file's name (the caller frees it); 1 when
 * path is not a folder, opens itself (a distributed checkpoint's .metadata,
 * a DeepSpeed ZeRO save) or holds none of them; TC_ERR_USAGE when it holds
 * several, d listing them. tc_open reads a model folder so too. */
int tc_model_folder(const char *path, char **file, tc_diag *d);
/* The same for bytes that are not a file of their own (a member of an
 * archive): src (kept alive by the caller until the checkpoint is closed),
 * named name in messages and to the probes. A driver that reads other files
 * beside the one it opens (a shard index, a distributed checkpoint) looks for
 * them beside name, so name should be a path no file can lie under. */
int tc_open_src(tc_ckpt **out, const char *name, const tc_src *src, const tc_limits *lim, tc_diag *d);
/* The name of c's driver, for messages ("unknown" before one is set). */
const char *tc_ckpt_format(const tc_ckpt *c);
/* Whether c's driver has every trait of caps (tc_format_cap bits). */
bool tc_ckpt_can(const tc_ckpt *c, unsigned caps);
/* The writer of the registry with the trait cap (TC_CAP_WRITES_TORCH,
 * TC_CAP_WRITES_SAFETENSORS, TC_CAP_WRITES_GGUF), or NULL when none has it. */
const tc_format *tc_format_writer(unsigned cap);
/* job written by that writer; TC_ERR_UNSUPPORTED when there is none. */
int tc_format_write(unsigned cap, const tc_write_job *job, tc_dst *dst, tc_diag *d);
/* job written by the first driver with the trait cap that rewrites whole;
 * TC_ERR_UNSUPPORTED when there is none. */
int tc_format_rewrite(unsigned cap, const tc_rewrite_job *job, tc_dst *dst, tc_diag *d);

/* Storage i's bytes, through c's driver. */
int tc_storage_open(const tc_ckpt *c, size_t i, tc_rd *r, tc_diag *d);
/* Fill buf with exactly min(n, left) bytes; *got is 0 only at the end. */
int tc_rd_read(tc_rd *r, void *buf, size_t n, size_t *got, tc_diag *d);
void tc_rd_close(tc_rd *r);

/* For drivers: a reader of the plain range [off, off + size) of src. */
void tc_rd_range(tc_rd *r, const tc_src *src, uint64_t off, uint64_t size);

#endif
