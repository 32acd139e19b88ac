#include "format.h"

const tc_format *const tc_formats[] = {
    &tc_format_torch_zip,
    &tc_format_torch_legacy,
    NULL,
};
