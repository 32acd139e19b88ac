/* gen_man TEMPLATE OUT: the man page, generated from the command tables
 * (see man.c). Run by the build; a test keeps man/tensorctl.1 equal to it. */
#include <stdio.h>

#include "cli.h"

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: gen_man TEMPLATE OUT\n");
        return 2;
    }
    FILE *out = fopen(argv[2], "w");
    if (!out) {
        perror(argv[2]);
        return 1;
    }
    int rc = tc_man_page(out, argv[1]);
    if (fclose(out) != 0)
        rc = -1;
    if (rc)
        remove(argv[2]);
    return rc ? 1 : 0;
}
