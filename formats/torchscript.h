/* TorchScript archives (torch.jit.save): the declarations of their code/
 * files, read as text.
 *
 * A scripted or traced module is saved as data.pkl (objects of classes
 * named __torch__.*, each with its attributes as a dict), constants.pkl and
 * code/ .py files, the printed TorchScript of every class. Which attributes of a
 * module are parameters and buffers is said only there, by two lines of each
 * module class:
 *
 *     class Linear(Module):
 *       __parameters__ = ["weight", "bias", ]
 *       __buffers__ = []
 *
 * tc_script collects those declarations. Nothing of the code is run or
 * interpreted: only lines starting a class at the left margin and these two
 * assignments at the class body's own indentation are read, in one pass.
 *
 * Ownership: a tc_script owns its classes and names; tc_script_free accepts
 * NULL. */
#ifndef TC_TORCHSCRIPT_H
#define TC_TORCHSCRIPT_H

#include <stddef.h>

#include "diag.h"
#include "torch_pickle.h"

tc_script *tc_script_new(void);
void tc_script_free(tc_script *s);
/* The classes of one code file: module is its dotted name ("__torch__" for
 * code/__torch__.py, "__torch__.torch.nn.modules.linear" for
 * code/__torch__/torch/nn/modules/linear.py), what names it in messages. A
 * module class defined twice, or a declaration that is not a list of string
 * literals, is TC_ERR_FORMAT naming the file and line. */
int tc_script_parse(tc_script *s, const char *module, const char *what, const char *text, size_t n, tc_diag *d);
size_t tc_script_nclasses(const tc_script *s);

#endif
