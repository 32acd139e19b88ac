#!/usr/bin/env python3
"""Hostile DeepSpeed ZeRO save folders, made byte by byte (no torch, no DeepSpeed), checked as
hostile.py checks its cases (same runs, same rules: one pinned stderr line naming the folder,
nothing left behind, the input unchanged, nothing run).

    hostile_zero.py list | gen OUTDIR | check --tensorctl T --case NAME [--tmp DIR]
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hostile  # noqa: E402
from hostile import (FALSE, PROTO, STOP, dict_of, newobj, op_global, op_int, op_str, op_tuple, tensor,  # noqa: E402
                     torch_zip)

TAG = 'global_step1'
SYSTEM = op_global('posix', 'system') + op_tuple([op_str('echo pwned')]) + b'R'


def size(dims):
    return op_global('torch', 'Size') + op_tuple([op_tuple([op_int(x) for x in dims])]) + b'R'


def lst(items):
    return b'](' + b''.join(items) + b'e'


def floats(n):
    return b''.join(bytes([0, 0, 0x80, 0x3f]) for _ in range(n))  # 1.0 each


def model_file(shapes=((2, 2),), extra=()):
    """mp_rank_00_model_states.pt: parameters w0, w1, ... of these shapes, in one optimizer group."""
    names = ['w%d' % i for i in range(len(shapes))]
    module = [(n, tensor(key=str(i), numel=0, shape=(0,), stride=(1,))) for i, n in enumerate(names)]
    body = dict_of([('module', dict_of(module)), ('buffer_names', lst([])), ('optimizer', b'N'),
                    ('param_shapes', lst([dict_of([(n, size(s)) for n, s in zip(names, shapes)])])),
                    ('frozen_param_shapes', b'N'), ('shared_params', b'}'), ('frozen_param_fragments', b'N'),
                    ('ds_version', op_str('0.19.8'))] + list(extra))
    return torch_zip(PROTO + body + STOP, {str(i): b'' for i in range(len(shapes))})


def optim_file(numel=4, world=1, scaler=None, stage=2, stype='FloatStorage', storage_numel=None, osd=None):
    """zero_pp_rank_0_mp_rank_00_optim_states.pt: one flat fp32 group of numel elements."""
    scaler = scaler if scaler is not None else newobj('deepspeed.runtime.fp16.loss_scaler', 'LossScaler',
                                                      dict_of([('cur_scale', op_int(1))]))
    group = tensor(key='0', numel=storage_numel if storage_numel is not None else numel, shape=(numel,),
                   stride=(1,), stype=stype)
    body = osd if osd is not None else dict_of([
        ('loss_scaler', scaler), ('dynamic_loss_scale', FALSE),
        ('zero_stage', op_global('deepspeed.runtime.zero.config', 'ZeroStageEnum') + op_tuple([op_int(stage)]) + b'R'),
        ('partition_count', lst([op_int(world)])),
        ('single_partition_of_fp32_groups', lst([group])), ('group_paddings', lst([op_int(0)]))])
    return torch_zip(PROTO + dict_of([('optimizer_state_dict', body), ('ds_version', op_str('0.19.8'))]) + STOP,
                     {'0': floats(storage_numel if storage_numel is not None else numel)})


def zero(model=None, optim=None, latest=TAG, files=None):
    out = {'latest': latest.encode() if isinstance(latest, str) else latest,
           TAG + '/mp_rank_00_model_states.pt': model if model is not None else model_file(),
           TAG + '/zero_pp_rank_0_mp_rank_00_optim_states.pt': optim if optim is not None else optim_file()}
    out.update(files or {})
    return out


RUNS = lambda frag, status=3: [([], frag, status), (['consolidate-out'], frag, status)]

CASES = {
    'zero_good': (zero, [([], None, 0), (['consolidate-out'], None, 0)]),
    # a payload where DeepSpeed's loader unpickles the loss scaler: torch.load(weights_only=False) runs it
    'zero_payload_loss_scaler': (lambda: zero(optim=optim_file(scaler=SYSTEM)), RUNS('posix.system', 4)),
    # the payload, and a file that is not what it should be: still unsafe, not just malformed
    'zero_payload_then_broken': (lambda: zero(optim=optim_file(osd=dict_of([('loss_scaler', SYSTEM)]))),
                                 RUNS('posix.system', 4)),
    # a DeepSpeed class outside the four the format needs: unsafe for inspect; consolidate keeps tensors only
    'zero_other_deepspeed_class': (lambda: zero(optim=optim_file(
        scaler=newobj('deepspeed.runtime.engine', 'DeepSpeedEngine', dict_of([])))),
        [([], 'deepspeed.runtime.engine.DeepSpeedEngine', 4), (['consolidate-out'], None, 0)]),
    'zero_payload_in_model_file': (lambda: zero(model=model_file(extra=[('lr_scheduler', SYSTEM)])),
                                   RUNS('posix.system', 4)),
    'zero_group_past_storage': (lambda: zero(optim=optim_file(numel=4, storage_numel=2)),
                                RUNS('offset or strides past the storage')),
    'zero_shape_overflows': (lambda: zero(model=model_file(shapes=((1 << 40, 1 << 40),))),
                             RUNS('is not a torch.Size')),
    'zero_group_too_short': (lambda: zero(model=model_file(shapes=((2, 2), (3,)))),
                             RUNS('flat groups shorter than param_shapes need')),
    'zero_padding_off': (lambda: zero(optim=optim_file(numel=8)), RUNS('padding that does not add up')),
    'zero_many_ranks_claimed': (lambda: zero(optim=optim_file(world=1000000)), RUNS('partition_count says 1000000')),
    'zero_latest_escapes': (lambda: zero(latest='../../etc'), RUNS('not the name of a step folder')),
    'zero_latest_huge': (lambda: zero(latest=b'g' * 100000), RUNS('not the name of a step folder')),
    'zero_latest_nowhere': (lambda: zero(latest='global_step7'), RUNS("names step folder 'global_step7'")),
    'zero_rank_file_symlink': (lambda: zero(optim=optim_file(world=2), files={
        TAG + '/zero_pp_rank_1_mp_rank_00_optim_states.pt':
            ('symlink', '/etc/passwd')}), RUNS('symbolic link')),
    'zero_rank_file_pickle_payload': (lambda: zero(optim=PROTO + SYSTEM + STOP),
                                      RUNS('would unpickle it from byte 0', 4)),
    'zero_no_model_states': (lambda: {k: v for k, v in zero().items() if 'model_states' not in k},
                             RUNS('no *_model_states.pt file')),
    'zero_stage_unknown': (lambda: zero(optim=optim_file(stage=7)), RUNS('not 1, 2 or 3')),
}

if __name__ == '__main__':
    hostile.CASES = CASES
    sys.exit(hostile.main())
