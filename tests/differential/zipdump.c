/* zipdump: what tensorctl's zip reader makes of archives, in the form
 * zipdiff.py's torch worker prints for torch._C.PyTorchFileReader:
 *
 *   FILE <path>
 *   OPEN ERR | OPEN POLICY | OPEN UNDEF (torch's reader fails | tensorctl refuses beyond torch | its
 *                                     version record is bytes torch never wrote: torch reads garbage)
 *   RECORDS ERR | RECORDS <n>         (get_all_records)
 *   REC <name as hex> ERR | <len> <crc32> <adler32> | UNDEF <len>   (get_record: fails | bytes | bytes
 *                                     torch hands out without reading them)
 *   END
 *
 * Paths come one a line on stdin. Records are read as torch reads them: no
 * CRC-32 check. --torch 1 or --torch 2: as that torch's reader does (its
 * central directory checks differ), else as either would open it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "zip.h"

static void hex(const char *s)
{
    for (; *s; s++)
        printf("%02x", (unsigned char)*s);
}

static unsigned readers = TC_ZIP_ANY_TORCH;

static void dump(const char *path)
{
    printf("FILE %s\n", path);
    tc_src src;
    tc_zip z;
    tc_zip_torch t;
    tc_diag d = TC_DIAG_INIT;
    tc_zip_limits lim = {.max_entries = 1u << 30, .readers = readers};
    if (tc_src_open_file(&src, path, &d)) {
        printf("OPEN ERR\nEND\n");
        return;
    }
    if (tc_zip_open(&z, &src, &lim, &d)) {
        /* the one refusal beyond torch's reader at open: entries sharing bytes */
        printf("OPEN %s\nEND\n", strstr(d.msg, "overlap") ? "POLICY" : "ERR");
        tc_src_close(&src);
        return;
    }
    if (tc_zip_torch_init(&t, &z, 1ull << 32, &d)) {
        /* a version record torch hands out without reading: torch parses whatever memory held */
        printf("OPEN %s\nEND\n", strstr(d.msg, "holds a NUL byte") ? "POLICY"
                                   : strstr(d.msg, "never wrote") ? "UNDEF" : "ERR");
    } else if (tc_zip_torch_records(&t, &z, &d)) {
        printf("OPEN ok\nRECORDS ERR\nEND\n");
    } else {
        printf("OPEN ok\nRECORDS %zu\n", z.n);
        for (size_t i = 0; i < z.n; i++) {
            char name[512];
            tc_zip_listed_name(&z.e[i], name);
            const char *rec = name + t.alen + 1;
            const tc_zip_entry *e = tc_zip_torch_find(&t, &z, rec);
            printf("REC ");
            hex(rec);
            uint8_t *buf = NULL;
            size_t len = 0;
            tc_diag rd = TC_DIAG_INIT;
            if (!e)
                printf(" ERR\n");
            else if (!e->bad && (e->dir || !e->csize) && e->usize)
                printf(" UNDEF %llu\n", (unsigned long long)e->usize);
            else if (tc_zip_read_all(&z, e, 1ull << 32, false, &buf, &len, &rd) && strstr(rd.msg, "never wrote"))
                printf(" UNDEF %llu\n", (unsigned long long)e->usize); /* tinfl failed: torch hands out its buffer */
            else if (rd.code)
                printf(" ERR\n");
            else
                printf(" %zu %08lx %08lx\n", len, crc32(0, buf, (uInt)len), adler32(1, buf, (uInt)len));
            free(buf);
        }
        printf("END\n");
        tc_zip_torch_free(&t);
    }
    tc_zip_free(&z);
    tc_src_close(&src);
}

int main(int argc, char **argv)
{
    char line[8192];
    if (argc == 3 && !strcmp(argv[1], "--torch"))
        readers = argv[2][0] == '1' ? TC_ZIP_TORCH1 : TC_ZIP_TORCH2;
    while (fgets(line, sizeof line, stdin)) {
        line[strcspn(line, "\n")] = 0;
        if (line[0])
            dump(line);
        fflush(stdout);
    }
    return 0;
}
