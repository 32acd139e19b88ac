#include "cli.h"

int main(int argc, char **argv)
{
    return tc_cli(argc, argv);
}
