/* Replays fuzz inputs without libFuzzer: every file named on the command line,
 * or found (sorted) in a named folder, goes once through
 * LLVMFuzzerTestOneInput. Built with the ordinary compiler so CI replays the
 * committed corpora and crashers; a regression crashes or aborts here. A run
 * that found no input at all fails: it checked nothing. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz_common.h"

static int run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "replay: %s: cannot open\n", path);
        return -1;
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    /* exactly n bytes, so a sanitizer catches a read one past the input */
    uint8_t *buf = malloc(n > 0 ? (size_t)n : 1);
    if (!buf || (n > 0 && fread(buf, 1, (size_t)n, f) != (size_t)n)) {
        fprintf(stderr, "replay: %s: cannot read\n", path);
        fclose(f);
        free(buf);
        return -1;
    }
    fclose(f);
    LLVMFuzzerTestOneInput(buf, (size_t)n);
    free(buf);
    return 0;
}

int main(int argc, char **argv)
{
    int files = 0, bad = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st)) {
            fprintf(stderr, "replay: %s: no such file or folder\n", argv[i]);
            return 1;
        }
        if (!S_ISDIR(st.st_mode)) {
            bad |= run_file(argv[i]);
            files++;
            continue;
        }
        struct dirent **ents;
        int n = scandir(argv[i], &ents, NULL, alphasort);
        if (n < 0) {
            fprintf(stderr, "replay: %s: cannot list\n", argv[i]);
            return 1;
        }
        for (int k = 0; k < n; k++) {
            if (ents[k]->d_name[0] != '.' && strncmp(ents[k]->d_name, "README", 6)) {
                char p[4096];
                snprintf(p, sizeof p, "%s/%s", argv[i], ents[k]->d_name);
                if (!stat(p, &st) && S_ISREG(st.st_mode)) {
                    bad |= run_file(p);
                    files++;
                }
            }
            free(ents[k]);
        }
        free(ents);
    }
    printf("replayed %d inputs\n", files);
    if (files == 0) {
        fprintf(stderr, "replay: no input found: nothing was replayed\n");
        return 1;
    }
    return bad ? 1 : 0;
}
