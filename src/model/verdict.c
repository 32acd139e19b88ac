#include "verdict.h"

#include <stdlib.h>
#include <string.h>

enum { ALL, NEW, OLD };
static const char *const since[] = {"1.13 and 2.x", "2.x", "1.13"};

/* Every global torch's weights_only unpickler accepts: _get_allowed_globals()
 * and the globals torch itself registers with add_safe_globals, read off
 * torch 1.13 (OLD) and 2.15 (NEW; ALL: both). Sorted, for bsearch. */
static const struct allowed {
    const char *name;
    int when;
} allowlist[] = {
    {"_codecs.encode", NEW},
    {"builtins.bytearray", NEW},
    {"builtins.complex", NEW},
    {"builtins.set", NEW},
    {"collections.Counter", NEW},
    {"collections.OrderedDict", ALL},
    {"torch.BFloat16Storage", ALL},
    {"torch.BFloat16Tensor", ALL},
    {"torch.BoolStorage", ALL},
    {"torch.BoolTensor", ALL},
    {"torch.ByteStorage", ALL},
    {"torch.ByteTensor", ALL},
    {"torch.CharStorage", ALL},
    {"torch.CharTensor", ALL},
    {"torch.ComplexDoubleStorage", ALL},
    {"torch.ComplexFloatStorage", ALL},
    {"torch.DoubleStorage", ALL},
    {"torch.DoubleTensor", ALL},
    {"torch.FloatStorage", ALL},
    {"torch.FloatTensor", ALL},
    {"torch.HalfStorage", ALL},
    {"torch.HalfTensor", ALL},
    {"torch.IntStorage", ALL},
    {"torch.IntTensor", ALL},
    {"torch.LongStorage", ALL},
    {"torch.LongTensor", ALL},
    {"torch.QInt32Storage", ALL},
    {"torch.QInt8Storage", ALL},
    {"torch.QUInt2x4Storage", ALL},
    {"torch.QUInt4x2Storage", ALL},
    {"torch.QUInt8Storage", ALL},
    {"torch.ShortStorage", ALL},
    {"torch.ShortTensor", ALL},
    {"torch.Size", ALL},
    {"torch.Tensor", ALL},
    {"torch._tensor._rebuild_from_type_v2", NEW},
    {"torch._utils._rebuild_device_tensor_from_cpu_tensor", NEW},
    {"torch._utils._rebuild_device_tensor_from_numpy", NEW},
    {"torch._utils._rebuild_meta_tensor_no_storage", ALL},
    {"torch._utils._rebuild_parameter", ALL},
    {"torch._utils._rebuild_parameter_with_state", NEW},
    {"torch._utils._rebuild_qtensor", NEW},
    {"torch._utils._rebuild_sparse_csr_tensor", OLD},
    {"torch._utils._rebuild_sparse_tensor", ALL},
    {"torch._utils._rebuild_tensor", ALL},
    {"torch._utils._rebuild_tensor_v2", ALL},
    {"torch._utils._rebuild_tensor_v3", NEW},
    {"torch._utils._rebuild_wrapper_subclass", NEW},
    {"torch.bcomplex32", NEW},
    {"torch.bfloat16", NEW},
    {"torch.bits16", NEW},
    {"torch.bits1x8", NEW},
    {"torch.bits2x4", NEW},
    {"torch.bits4x2", NEW},
    {"torch.bits8", NEW},
    {"torch.bool", NEW},
    {"torch.complex128", ALL},
    {"torch.complex32", ALL},
    {"torch.complex64", ALL},
    {"torch.cuda.BFloat16Storage", ALL},
    {"torch.cuda.BFloat16Tensor", ALL},
    {"torch.cuda.BoolStorage", ALL},
    {"torch.cuda.BoolTensor", ALL},
    {"torch.cuda.ByteStorage", ALL},
    {"torch.cuda.ByteTensor", ALL},
    {"torch.cuda.CharStorage", ALL},
    {"torch.cuda.CharTensor", ALL},
    {"torch.cuda.ComplexDoubleStorage", ALL},
    {"torch.cuda.ComplexFloatStorage", ALL},
    {"torch.cuda.DoubleStorage", ALL},
    {"torch.cuda.DoubleTensor", ALL},
    {"torch.cuda.FloatStorage", ALL},
    {"torch.cuda.FloatTensor", ALL},
    {"torch.cuda.HalfStorage", ALL},
    {"torch.cuda.HalfTensor", ALL},
    {"torch.cuda.IntStorage", ALL},
    {"torch.cuda.IntTensor", ALL},
    {"torch.cuda.LongStorage", ALL},
    {"torch.cuda.LongTensor", ALL},
    {"torch.cuda.ShortStorage", ALL},
    {"torch.cuda.ShortTensor", ALL},
    {"torch.cuda.sparse.BFloat16Tensor", ALL},
    {"torch.cuda.sparse.ByteTensor", ALL},
    {"torch.cuda.sparse.CharTensor", ALL},
    {"torch.cuda.sparse.DoubleTensor", ALL},
    {"torch.cuda.sparse.FloatTensor", ALL},
    {"torch.cuda.sparse.HalfTensor", ALL},
    {"torch.cuda.sparse.IntTensor", ALL},
    {"torch.cuda.sparse.LongTensor", ALL},
    {"torch.cuda.sparse.ShortTensor", ALL},
    {"torch.device", NEW},
    {"torch.distributed._mesh_layout._FlatLayout", NEW},
    {"torch.distributed._mesh_layout._MeshLayout", NEW},
    {"torch.float16", ALL},
    {"torch.float32", ALL},
    {"torch.float4_e2m1fn_x2", NEW},
    {"torch.float64", ALL},
    {"torch.float8_e4m3fn", NEW},
    {"torch.float8_e4m3fnuz", NEW},
    {"torch.float8_e5m2", NEW},
    {"torch.float8_e5m2fnuz", NEW},
    {"torch.float8_e8m0fnu", NEW},
    {"torch.int1", NEW},
    {"torch.int16", ALL},
    {"torch.int2", NEW},
    {"torch.int3", NEW},
    {"torch.int32", ALL},
    {"torch.int4", NEW},
    {"torch.int5", NEW},
    {"torch.int6", NEW},
    {"torch.int64", ALL},
    {"torch.int7", NEW},
    {"torch.int8", ALL},
    {"torch.nn.parameter.Parameter", ALL},
    {"torch.per_channel_affine", NEW},
    {"torch.per_channel_affine_float_qparams", NEW},
    {"torch.per_channel_symmetric", NEW},
    {"torch.per_tensor_affine", NEW},
    {"torch.per_tensor_symmetric", NEW},
    {"torch.qint32", NEW},
    {"torch.qint8", NEW},
    {"torch.quint2x4", NEW},
    {"torch.quint4x2", NEW},
    {"torch.quint8", NEW},
    {"torch.serialization._get_layout", ALL},
    {"torch.sparse.BFloat16Tensor", ALL},
    {"torch.sparse.ByteTensor", ALL},
    {"torch.sparse.CharTensor", ALL},
    {"torch.sparse.DoubleTensor", ALL},
    {"torch.sparse.FloatTensor", ALL},
    {"torch.sparse.HalfTensor", ALL},
    {"torch.sparse.IntTensor", ALL},
    {"torch.sparse.LongTensor", ALL},
    {"torch.sparse.ShortTensor", ALL},
    {"torch.storage.TypedStorage", ALL},
    {"torch.storage.UntypedStorage", ALL},
    {"torch.uint1", NEW},
    {"torch.uint16", NEW},
    {"torch.uint2", NEW},
    {"torch.uint3", NEW},
    {"torch.uint32", NEW},
    {"torch.uint4", NEW},
    {"torch.uint5", NEW},
    {"torch.uint6", NEW},
    {"torch.uint64", NEW},
    {"torch.uint7", NEW},
    {"torch.uint8", NEW},
};

static int cmp_allowed(const void *key, const void *row)
{
    return strcmp(key, ((const struct allowed *)row)->name);
}

/* Known ways a global runs code or touches the system when a pickle names it:
 * labels for the report, not the gate. An entry ending in '.' covers a module. */
static const struct danger {
    const char *name;
    const char *why;
} dangers[] = {
    {"os.", "runs shell commands and touches files"},
    {"posix.", "runs shell commands and touches files"},
    {"nt.", "runs shell commands and touches files"},
    {"subprocess.", "runs programs"},
    {"_posixsubprocess.", "runs programs"},
    {"pty.", "runs programs"},
    {"sys.", "reaches the interpreter's state"},
    {"builtins.eval", "evaluates Python code"},
    {"builtins.exec", "runs Python code"},
    {"builtins.compile", "compiles Python code"},
    {"builtins.__import__", "imports any module"},
    {"builtins.getattr", "returns any attribute, so any callable"},
    {"builtins.setattr", "changes any object"},
    {"builtins.delattr", "changes any object"},
    {"builtins.globals", "reaches the interpreter's state"},
    {"builtins.vars", "reaches the interpreter's state"},
    {"builtins.open", "opens, truncates or creates files"},
    {"builtins.breakpoint", "starts a debugger"},
    {"builtins.input", "waits for input"},
    {"builtins.exit", "ends the process"},
    {"builtins.quit", "ends the process"},
    {"importlib.", "imports any module"},
    {"pkgutil.resolve_name", "resolves a name to any callable"},
    {"pydoc.locate", "resolves a name to any callable"},
    {"operator.attrgetter", "returns any attribute, so any callable"},
    {"operator.methodcaller", "calls any method"},
    {"functools.partial", "calls anything it is given"},
    {"functools.reduce", "calls anything it is given"},
    {"types.", "makes functions and code objects"},
    {"copyreg._reconstructor", "builds any object"},
    {"pickle.", "unpickles nested bytes tensorctl never sees"},
    {"_pickle.", "unpickles nested bytes tensorctl never sees"},
    {"marshal.", "loads code objects"},
    {"dill.", "unpickles code"},
    {"torch.load", "loads a nested checkpoint"},
    {"torch.serialization.load", "loads a nested checkpoint"},
    {"torch.storage._load_from_bytes", "unpickles nested bytes tensorctl never sees"},
    {"torch.hub.", "downloads and runs code"},
    {"torch.jit.", "compiles and runs TorchScript"},
    {"torch._C.", "calls into torch's C++ directly"},
    {"torch.utils.cpp_extension.", "compiles and loads native code"},
    {"numpy.load", "unpickles nested bytes"},
    {"numpy.testing.", "runs programs"},
    {"shutil.", "copies, moves and deletes files"},
    {"tempfile.", "creates files"},
    {"io.", "opens files"},
    {"_io.", "opens files"},
    {"codecs.open", "opens files"},
    {"socket.", "opens network connections"},
    {"urllib.", "opens network connections"},
    {"http.", "opens network connections"},
    {"requests.", "opens network connections"},
    {"webbrowser.", "starts programs"},
    {"ctypes.", "calls native code"},
    {"runpy.", "runs Python modules"},
    {"code.", "runs Python code"},
    {"codeop.", "compiles Python code"},
    {"timeit.", "runs Python code"},
    {"pdb.", "starts a debugger"},
    {"bdb.", "starts a debugger"},
    {"trace.", "runs Python code"},
    {"profile.", "runs Python code"},
    {"cProfile.", "runs Python code"},
    {"multiprocessing.", "starts processes"},
    {"asyncio.", "runs programs and connections"},
    {"signal.", "changes signal handling"},
    {"zipimport.", "imports code"},
    {"glob.", "lists files"},
    {"pip.", "installs packages"},
    {"setuptools.", "runs build code"},
    {"distutils.", "runs build code"},
};

tc_verdict tc_verdict_of(const char *name)
{
    tc_verdict v = {false, NULL, NULL};
    const struct allowed *a =
        bsearch(name, allowlist, sizeof allowlist / sizeof allowlist[0], sizeof allowlist[0], cmp_allowed);
    if (a) {
        v.allowed = true;
        v.torch = since[a->when];
    }
    /* (every global of every pickle comes here: the first byte is checked before the rest) */
    for (size_t i = 0; i < sizeof dangers / sizeof dangers[0] && !v.why; i++) {
        const char *dn = dangers[i].name;
        if (dn[0] != name[0])
            continue;
        size_t l = strlen(dn);
        if (dn[l - 1] == '.' ? !strncmp(name, dn, l) : !strcmp(name, dn))
            v.why = dangers[i].why;
    }
    return v;
}

bool tc_verdict_admissible(const char *name)
{
    static const char *const blocked[] = {"sys.", "os.", "posix.", "nt."};
    const char *dot = strrchr(name, '.');
    if (!dot || dot == name || !dot[1])
        return false;
    for (size_t i = 0; i < sizeof blocked / sizeof blocked[0]; i++)
        if (!strncmp(name, blocked[i], strlen(blocked[i])))
            return false;
    return true;
}

/* ---- DeepSpeed ZeRO -----------------------------------------------------------
 * The DeepSpeed classes its ZeRO optimizers (stages 1-3, DeepSpeed 0.19)
 * pickle into *_optim_states.pt: the loss scaler's state, the stage, the
 * address of a parameter's fragment in a rank's partition. Plain data
 * classes: no __call__, __setstate__ or __reduce__ of their own, so
 * building them as a pickle does (REDUCE on the class, NEWOBJ, BUILD of a
 * dict) sets attributes and nothing else. DeepSpeed's loaders
 * (load_checkpoint, zero_to_fp32) import them with torch.load(weights_only=
 * False); torch's weights_only loader refuses them. Exactly these names:
 * nothing else under deepspeed. is allowed. Sorted, for bsearch. */
static const char *const deepspeed_zero[] = {
    "deepspeed.runtime.fp16.loss_scaler.DynamicLossScaler",
    "deepspeed.runtime.fp16.loss_scaler.LossScaler",
    "deepspeed.runtime.zero.config.ZeroStageEnum",
    "deepspeed.utils.tensor_fragment.fragment_address",
};

static int cmp_ds_name(const void *key, const void *elem) { return strcmp(key, *(const char *const *)elem); }

bool tc_verdict_deepspeed_zero(const char *name)
{
    return bsearch(name, deepspeed_zero, sizeof deepspeed_zero / sizeof *deepspeed_zero, sizeof *deepspeed_zero,
                   cmp_ds_name) != NULL;
}
