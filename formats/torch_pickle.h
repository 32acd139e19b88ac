/* torch.save's pickle: what the zip and legacy drivers share.
 *
 * Reading: persistent ids become storages of the model, the object graph is
 * walked from its root for tensors (named by their path of keys, modules as
 * state_dict() names them), globals and a summary of the non-tensor contents.
 * Writing: the graph of a checkpoint rewritten whole (storages re-keyed,
 * re-tagged, cast), or a new state_dict pickle of given tensors, protocol 2
 * with only the opcodes torch's weights_only loader accepts.
 *
 * Ownership: a tc_torch_graph owns its pk_graph and side tables;
 * tc_torch_graph_free releases them and accepts a zeroed one. */
#ifndef TC_TORCH_PICKLE_H
#define TC_TORCH_PICKLE_H

#include <stdint.h>

#include "buf.h"
#include "ckpt.h"
#include "format.h"
#include "pickle.h"

/* The persistent-id tuples naming one storage: the first held here (most
 * storages have no other; a heap block each would cost more than the tuple),
 * the rest in more. */
typedef struct tc_pids {
    pk_obj *one;
    pk_obj **more;
    size_t n, cap;      /* n in all; cap: room in more */
} tc_pids;
static inline pk_obj *tc_pids_at(const tc_pids *p, size_t j) { return j ? p->more[j - 1] : p->one; }

/* TorchScript: the module classes an archive's code declares, by qualified
 * name ("__torch__.torch.nn.modules.linear.Linear"), each with the
 * attributes it declares as parameters and buffers, in order (torchscript.c). */
typedef struct tc_script tc_script;
typedef struct tc_script_class {
    char **params;
    size_t nparams;
    char **buffers;
    size_t nbuffers;
    bool declared;      /* both __parameters__ and __buffers__ are declared */
} tc_script_class;
/* The module class named qualname, or NULL. */
const tc_script_class *tc_script_class_of(const tc_script *s, const char *qualname);

typedef struct tc_torch_graph {
    pk_graph *g;
    pk_obj *root;
    tc_ckpt *c;         /* while reading: the checkpoint being filled */
    tc_pids *pids;      /* per storage: every persistent-id tuple naming it */
    size_t npids;
    pk_obj **tnode;     /* per tensor: its rebuild call */
    pk_obj **tparam;    /* per tensor: the Parameter call wrapping it, or NULL */
    size_t ntnode;
    uint64_t pickle_bytes; /* of the pickles read: what the walk's name budget scales with */
    pk_obj **keyed;     /* per keyed container of the checkpoint (tc_ckpt_keyed): the node holding its items */
    size_t nkeyed, keyedcap;
    const tc_script *script; /* TorchScript: modules are named by their declarations, not by _parameters */
    uint8_t ops[32];    /* every opcode the pickles read hold (a bit each) */
    uint64_t long_digits; /* the longest INT/LONG text past Python 3.11's int_max_str_digits, in digits */
} tc_torch_graph;

/* The object graph of a checkpoint a torch pickle driver opened (zip,
 * legacy), or NULL for other formats. Those drivers keep a tc_torch_graph as
 * the first member of their private state. */
tc_torch_graph *tc_torch_graph_of(const tc_ckpt *c);

/* A new, empty graph for c. */
int tc_torch_graph_init(tc_torch_graph *tg, tc_ckpt *c, tc_diag *d);
void tc_torch_graph_free(tc_torch_graph *tg);

/* A ('storage', type, key, location, numel) persistent id met in a pickle of
 * tg (ctx), registered as a storage of its checkpoint. */
int tc_torch_persid(void *ctx, pk_obj *persid, tc_diag *d);
/* Read options for a torch pickle: the checkpoint's limits, persistent ids
 * registered as storages of tg (tc_torch_persid). */
pk_read_opts tc_torch_read_opts(tc_torch_graph *tg, const char *what);
/* A pickle that failed to read (rc, d) may have named globals before the
 * point it failed at, which CPython's unpickler would have imported and
 * called by then: when one is not allowed, the failure becomes TC_ERR_UNSAFE
 * saying so. Returns the resulting code. */
int tc_torch_read_failed(tc_torch_graph *tg, int rc, const char *what, tc_diag *d);

/* A short description of o as inspect shows contents ("7", "[0.1, 'a']")
 * into text, and its kind ("int", "list") into *kind. */
void tc_torch_describe(const tc_torch_graph *tg, const pk_obj *o, char *text, size_t n, const char **kind);

/* What torch.load(weights_only=True) of each torch does with the file whose
 * pickles tg holds (weights_only.c), into its checkpoint; refused[t], when
 * refused and refused[t] are not NULL, is why torch t refuses its container
 * whatever it holds. */
int tc_weights_only(tc_torch_graph *tg, const char *const refused[TC_NTORCH], tc_diag *d);

/* After the pickle is read: tensors, globals and contents of c from tg->root. */
int tc_torch_index(tc_torch_graph *tg, tc_diag *d);
/* The name a dict key k gives its tensors, into b: str() of text, ints,
 * bools, None and floats; for any other key (bytes, a tuple, text that is not
 * UTF-8 or holds a NUL) its repr(), and *bad says what it is (else NULL):
 * a key no state_dict name can be (torch_walk.c). */
void tc_torch_key_name(const pk_obj *k, tc_buf *b, const char **bad);

/* The tensors alone (torch_walk.c), for tc_torch_index. */
int tc_torch_walk(tc_torch_graph *tg, tc_diag *d);
/* keep[i] (one per storage, false on entry) becomes true where some path from tg->root reaches a
 * persistent id of storage i: not where its ids lie only in objects the pickle discarded (POP, the
 * stack below STOP's object) or that an edit cut off (torch_walk.c). */
int tc_torch_reach(tc_torch_graph *tg, bool *keep, tc_diag *d);

/* The graph of a checkpoint rewritten as job says: key surgery on its keyed
 * containers (job->edits), storages re-keyed in order (the k-th written
 * becomes record data/<k>), written as a pickle (*pkl: the caller frees it).
 * keep (one per storage) receives whether the written graph still refers to
 * each storage: an edit that removes every path to one leaves it out. */
int tc_torch_rewrite(tc_torch_graph *tg, const tc_rewrite_job *job, bool *keep, uint8_t **pkl, size_t *len,
                     tc_diag *d);
/* A state_dict pickle of the items (block k becomes record data/<k>). */
int tc_torch_state_dict(const tc_write_job *job, uint8_t **pkl, size_t *len, tc_diag *d);

#endif
