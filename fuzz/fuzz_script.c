/* The declarations of a TorchScript code file (tc_script_parse): any bytes as
 * the text of code/__torch__.py. A parse either fails saying why or gives
 * classes whose declared names are NUL-free strings found again by name. */
#include <string.h>

#include "fuzz_common.h"
#include "torchscript.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tc_script *s = tc_script_new();
    if (!s)
        return 0;
    tc_diag d = TC_DIAG_INIT;
    /* the input exactly as large as it is, so a read past it is caught */
    char *text = malloc(size ? size : 1);
    if (!text) {
        tc_script_free(s);
        return 0;
    }
    memcpy(text, data, size);
    int rc = tc_script_parse(s, "__torch__", "code/__torch__.py", text, size, &d);
    if (rc)
        FZ_CHECK(d.code == rc && d.msg[0], "a failure says why");
    /* a second file of the same module defines the same classes again: refused when there were any */
    if (!rc && tc_script_nclasses(s)) {
        tc_diag d2 = TC_DIAG_INIT;
        FZ_CHECK(tc_script_parse(s, "__torch__", "code/again.py", text, size, &d2) == TC_ERR_FORMAT,
                 "a class defined twice is refused");
    }
    free(text);
    tc_script_free(s);
    return 0;
}
