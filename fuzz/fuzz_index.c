/* A shard index (the input: its JSON) over two small fixed shards, through
 * tc_open as inspect opens it: names, shard paths (folders, "..", absolute
 * paths, indexes naming indexes), the check of every shard against the index,
 * and every storage read through the shard that holds it. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "format.h"
#include "fuzz_common.h"

/* A folder with a.safetensors (tensors "x", "y") and b.safetensors ("z"), made once. */
static const char *folder(void)
{
    static char dir[64];
    if (dir[0])
        return dir;
    snprintf(dir, sizeof dir, "/tmp/tc-fuzz-index-%d", (int)getpid());
    mkdir(dir, 0700);
    static const char a[] = "{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                            "\"y\":{\"dtype\":\"I64\",\"shape\":[],\"data_offsets\":[8,16]}}";
    static const char b[] = "{\"z\":{\"dtype\":\"U8\",\"shape\":[3],\"data_offsets\":[0,3]}}  ";
    const char *hdr[2] = {a, b};
    const char *name[2] = {"a.safetensors", "b.safetensors"};
    size_t data[2] = {16, 3};
    for (int i = 0; i < 2; i++) {
        char p[128];
        snprintf(p, sizeof p, "%s/%s", dir, name[i]);
        FILE *f = fopen(p, "wb");
        if (!f)
            abort();
        uint64_t n = strlen(hdr[i]);
        uint8_t len[8];
        tc_put64(len, n);
        fwrite(len, 1, 8, f);
        fwrite(hdr[i], 1, n, f);
        for (size_t k = 0; k < data[i]; k++)
            fputc((int)k, f);
        fclose(f);
    }
    return dir;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[128];
    snprintf(path, sizeof path, "%s/m.safetensors.index.json", folder());
    FILE *f = fopen(path, "wb");
    if (!f)
        return 0;
    if (size)
        fwrite(data, 1, size, f);
    fclose(f);
    tc_limits lim = {.max_pickle_bytes = 1u << 20, .max_objects = 20000, .max_depth = 100,
                     .max_entries = 10000, .max_header = 1u << 20, .max_inflate_ratio = 100};
    tc_ckpt *c = NULL;
    tc_diag d = TC_DIAG_INIT;
    if (tc_open(&c, path, &lim, &d)) {
        FZ_CHECK(!c && d.code && d.msg[0], "a failure says why and returns nothing");
        return 0;
    }
    for (size_t i = 0; i < tc_ckpt_ntensors(c); i++) {
        const tc_tensor *t = tc_ckpt_tensor(c, i);
        FZ_CHECK(t->storage >= 0 && (size_t)t->storage < tc_ckpt_nstorages(c), "storage index");
        const tc_storage *s = tc_ckpt_storage(c, (size_t)t->storage);
        FZ_CHECK(s->shard >= 0 && (size_t)s->shard < tc_ckpt_nshards(c), "shard index");
        FZ_CHECK(!strchr(tc_ckpt_shard(c, (size_t)s->shard), '\\') &&
                     !strstr(tc_ckpt_shard(c, (size_t)s->shard), ".."),
                 "a shard outside the folder was accepted");
        tc_rd r;
        tc_diag d2 = TC_DIAG_INIT;
        if (tc_storage_open(c, (size_t)t->storage, &r, &d2))
            continue;
        uint8_t buf[64];
        size_t got = 0, total = 0;
        while (!tc_rd_read(&r, buf, sizeof buf, &got, &d2) && got)
            total += got;
        FZ_CHECK(total <= s->nbytes, "a storage gave more bytes than it has");
        tc_rd_close(&r);
    }
    tc_ckpt_close(c);
    return 0;
}
