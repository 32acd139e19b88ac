/* The zip container torch.save and torch.jit.save share (torch_zip.c): one
 * top folder, its small records, data.pkl and the data/<key> records of its
 * storages. The torch zip and TorchScript drivers are built on it.
 *
 * Ownership: a tc_tzip is its checkpoint's driver state (tc_ckpt_close
 * releases it, with what its driver hung on `extra`). */
#ifndef TC_TORCH_ZIP_H
#define TC_TORCH_ZIP_H

#include <stdint.h>

#include "format.h"
#include "torch_pickle.h"
#include "zip.h"

typedef struct tc_tzip {
    tc_torch_graph tg;        /* first: see tc_torch_graph_of */
    tc_zip zip;
    tc_zip_torch tz;          /* the archive folder and version, as torch's reader takes them */
    const char *archive;      /* tz.archive: the top folder, without "/" */
    const tc_zip_entry **rec; /* per storage: its data record */
    bool big;                 /* the byteorder record says big-endian: data is swapped as it is read */
    void *extra;              /* the driver's own, freed with free_extra */
    void (*free_extra)(void *);
} tc_tzip;

/* Read c's zip directory as driver's state, as torch's reader does (zip.h):
 * a version record torch reads, every entry inside one top folder; entries
 * torch's lookup could take one for another are a hazard of c. */
int tc_tzip_open(tc_ckpt *c, const tc_format *driver, tc_tzip **out, tc_diag *d);
/* The record <archive>/name, or NULL. */
const tc_zip_entry *tc_tzip_record(const tc_tzip *z, const char *name);
/* Whether torch.load's list of the records holds name exactly (letter case
 * too): how it tells a TorchScript archive ("constants.pkl"). */
bool tc_tzip_listed(const tc_tzip *z, const char *name);
/* A whole record read into a new buffer (free()), held to --max-pickle-size
 * and, when deflated, --max-inflate-ratio. */
int tc_tzip_read(const tc_tzip *z, const tc_ckpt *c, const tc_zip_entry *e, uint8_t **buf, size_t *len,
                 tc_diag *d);
/* The small records as facts (archive, version, byteorder, ...), checked as torch checks them. */
int tc_tzip_facts(tc_ckpt *c, tc_tzip *z, tc_diag *d);
/* data.pkl read into z->tg (its storages registered), each storage matched
 * with its data/<key> record. */
int tc_tzip_data(tc_ckpt *c, tc_tzip *z, tc_diag *d);
/* Storage i's bytes (tc_format.open_storage). */
int tc_tzip_open_storage(const tc_ckpt *c, size_t i, tc_rd *r, tc_diag *d);

#endif
