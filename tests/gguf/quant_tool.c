/* The block codecs as a command, for tests that compare them with gguf-py:
 *   quant_tool decode TYPE IN OUT [ref|cpu]   blocks -> float32
 *   quant_tool encode TYPE IN OUT [ref|cpu]   float32 -> blocks
 * TYPE is ggml's name (Q4_K, ...); the default path is cpu. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "quant.h"

static void *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    rewind(f);
    void *p = malloc(sz > 0 ? (size_t)sz : 1);
    if (p && fread(p, 1, (size_t)sz, f) != (size_t)sz) {
        free(p);
        p = NULL;
    }
    fclose(f);
    *n = (size_t)sz;
    return p;
}

int main(int argc, char **argv)
{
    if (argc < 5 || (strcmp(argv[1], "decode") && strcmp(argv[1], "encode"))) {
        fprintf(stderr, "usage: quant_tool decode|encode TYPE IN OUT [ref|cpu]\n");
        return 2;
    }
    bool enc = !strcmp(argv[1], "encode"), ref = argc > 5 && !strcmp(argv[5], "ref");
    tc_qtype q = tc_qtype_from_name(argv[2]);
    const tc_qtype_info *t = tc_qtype_get(q);
    size_t n;
    void *in = slurp(argv[3], &n);
    if (!in || !t->block) {
        fprintf(stderr, "quant_tool: cannot read %s or unknown type %s\n", argv[3], argv[2]);
        return 2;
    }
    size_t in_unit = enc ? (size_t)t->block * 4 : t->bytes, out_unit = enc ? t->bytes : (size_t)t->block * 4;
    size_t nb = n / in_unit;
    void *out = malloc(nb * out_unit + 1);
    int rc = enc ? (ref ? tc_quant_encode_ref : tc_quant_encode)(q, out, in, nb)
                 : (ref ? tc_quant_decode_ref : tc_quant_decode)(q, out, in, nb);
    if (rc) {
        fprintf(stderr, "quant_tool: %s has no %s\n", argv[2], enc ? "encoder" : "decoder");
        return 1;
    }
    FILE *f = fopen(argv[4], "wb");
    if (!f || fwrite(out, 1, nb * out_unit, f) != nb * out_unit || fclose(f)) {
        fprintf(stderr, "quant_tool: cannot write %s\n", argv[4]);
        return 1;
    }
    free(in);
    free(out);
    return 0;
}
