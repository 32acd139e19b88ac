#include "verdict.h"

#include <string.h>

#include "dtype.h"

static const char *const allowed_exact[] = {
    "collections.OrderedDict", "collections.Counter", "torch.nn.parameter.Parameter",
    "torch.serialization._get_layout", "torch.Size", "torch.Tensor", "torch.device", "_codecs.encode",
    "builtins.bytearray", "builtins.set", "builtins.complex", "torch._tensor._rebuild_from_type_v2",
    "torch.storage.UntypedStorage", "torch.storage.TypedStorage", "torch.per_tensor_affine",
    "torch.per_tensor_symmetric", "torch.per_channel_affine", "torch.per_channel_symmetric",
    "torch.per_channel_affine_float_qparams", "torch.sparse_coo", "torch.sparse_csr", "torch.strided",
    NULL};

static const char *const rebuild_fns[] = {
    "_rebuild_parameter", "_rebuild_parameter_with_state", "_rebuild_qtensor", "_rebuild_tensor",
    "_rebuild_tensor_v2", "_rebuild_tensor_v3", "_rebuild_sparse_tensor", "_rebuild_meta_tensor_no_storage",
    "_rebuild_nested_tensor", "_rebuild_wrapper_subclass", "_rebuild_device_tensor_from_numpy",
    "_rebuild_device_tensor_from_cpu_tensor", NULL}; /* torch 2.x: not _rebuild_sparse_csr_tensor */

/* Modules whose every attribute can reach the system, and single names that can. */
static const char *const danger_modules[] = {
    "os", "posix", "nt", "subprocess", "sys", "shutil", "socket", "pty", "runpy", "importlib", "pickle",
    "_pickle", "cPickle", "dill", "webbrowser", "code", "codeop", "commands", "ctypes", "marshal",
    "multiprocessing", "asyncio", "http", "urllib", "urllib2", "requests", "httplib", "ftplib",
    "smtplib", "telnetlib", "signal", "platform", "pip", "setuptools", "distutils", "pdb", "bdb",
    "timeit", "trace", "profile", "cProfile", "_posixsubprocess", "posixpath", "ntpath", "glob",
    "tempfile", "zipimport", "imp", "builtins.__import__", "torch.hub", "torch.jit", "torch._C",
    "torch.utils.cpp_extension", "numpy.testing", "_io", "io", NULL};
static const char *const danger_names[] = {
    "builtins.eval", "builtins.exec", "builtins.compile", "builtins.open", "builtins.__import__",
    "builtins.getattr", "builtins.setattr", "builtins.delattr", "builtins.globals", "builtins.locals",
    "builtins.vars", "builtins.breakpoint", "builtins.input", "builtins.apply", "builtins.execfile",
    "builtins.file", "builtins.reload", "builtins.exit", "builtins.quit", "types.FunctionType",
    "types.CodeType", "types.MethodType", "types.LambdaType", "operator.attrgetter",
    "operator.methodcaller", "operator.itemgetter", "functools.partial", "functools.reduce",
    "copyreg._reconstructor", "torch.load", "torch.save", "numpy.load", "numpy.fromfile",
    "torch.serialization.load", NULL};

static bool in_list(const char *const *l, const char *s)
{
    for (; *l; l++)
        if (!strcmp(*l, s))
            return true;
    return false;
}

tc_verdict tc_verdict_of(const char *name)
{
    tc_verdict v = {false, in_list(danger_names, name), NULL};
    for (const char *const *m = danger_modules; *m && !v.dangerous; m++) {
        size_t l = strlen(*m);
        v.dangerous = !strncmp(name, *m, l) && name[l] == '.';
    }
    if (v.dangerous) {
        v.why = "runs code or touches the system when unpickled";
        return v;
    }
    if (in_list(allowed_exact, name)) {
        v.allowed = true;
    } else if (!strncmp(name, "torch._utils.", 13)) {
        v.allowed = in_list(rebuild_fns, name + 13);
    } else if (!strncmp(name, "torch.", 6) && !strchr(name + 6, '.')) {
        const char *n = name + 6;
        size_t l = strlen(n);
        v.allowed = tc_dtype_from_name(n) != TC_DT_INVALID || (l > 7 && !strcmp(n + l - 7, "Storage")) ||
                    (l > 6 && !strcmp(n + l - 6, "Tensor")) ||
                    ((!strncmp(n, "uint", 4) || !strncmp(n, "int", 3)) && l <= 5);
    } else if (!strncmp(name, "torch.cuda.", 11) || !strncmp(name, "torch.sparse.", 13)) {
        const char *n = strrchr(name, '.') + 1;
        size_t l = strlen(n);
        v.allowed = !strchr(name + (name[6] == 'c' ? 11 : 13), '.') && l > 6 && !strcmp(n + l - 6, "Tensor");
    }
    return v;
}
