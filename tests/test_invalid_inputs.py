"""Invalid input gets PyTorch's exception type and message.

Each case runs the same code on torch and on fusegrad (`m` is the module) and compares the
exception: same type, same message (or, where a case names `key`, both contain it).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import fusegrad


def _x(m):
    return m.arange(12.0).reshape(3, 4)


def _t(m, v, **kw):
    return m.tensor(v, **kw)


def _step(m, name, **group):
    """One step of optimizer `name` whose parameter group holds `group`."""
    p = m.nn.Parameter(m.ones(2))
    opt = getattr(m.optim, name)([{"params": [p], **group}])
    p.grad = m.ones(2)
    opt.step()


CASES = {
    # ---------------------------------------------------------------- index ranges
    "embedding negative": lambda m: m.nn.functional.embedding(_t(m, [-1]), m.ones(5, 3)),
    "embedding too large": lambda m: m.nn.functional.embedding(_t(m, [[1, 5]]), m.ones(5, 3)),
    "embedding int32 negative": lambda m: m.nn.functional.embedding(
        _t(m, [-1], dtype=m.int32), m.ones(5, 3)),
    "index_select negative": lambda m: _x(m).index_select(0, _t(m, [-1])),
    "index_select too large": lambda m: _x(m).index_select(0, _t(m, [3])),
    "index_select dim 1": lambda m: _x(m).index_select(1, _t(m, [0, -1, 5])),
    "index_select 3-d last dim": lambda m: m.zeros(2, 3, 4).index_select(2, _t(m, [4])),
    "index_select empty dim": lambda m: m.zeros(0, 4).index_select(0, _t(m, [0])),
    "index_select float index": lambda m: _x(m).index_select(0, _t(m, [1.0])),
    "index_select scalar self": lambda m: _t(m, 5.0).index_select(0, _t(m, [1])),
    "index_select scalar self two": lambda m: _t(m, 5.0).index_select(0, _t(m, [0, 0])),
    "gather negative": lambda m: _x(m).gather(1, _t(m, [[-1]])),
    "gather scalar negative": lambda m: _t(m, 5.0).gather(0, _t(m, -1)),
    "gather float index": lambda m: _x(m).gather(1, _t(m, [[1.0]])),
    "gather int16 index": lambda m: _x(m).gather(1, _t(m, [[1]], dtype=m.int16)),
    "scatter_ negative": lambda m: _x(m).scatter_(1, _t(m, [[-1]]), m.ones(1, 1)),
    "scatter_ value negative": lambda m: _x(m).scatter_(1, _t(m, [[-1]]), 2.0),
    "scatter_ scalar self": lambda m: _t(m, 5.0).scatter_(0, _t(m, 1), _t(m, 2.0)),
    "scatter_ float index": lambda m: _x(m).scatter_(1, _t(m, [[1.0]]), 2.0),
    "scatter_add_ negative": lambda m: _x(m).scatter_add_(1, _t(m, [[-1]]), m.ones(1, 1)),
    "scatter_add_ float index": lambda m: _x(m).scatter_add_(1, _t(m, [[1.0]]), m.ones(1, 1)),
    "scatter_reduce negative": lambda m: _x(m).scatter_reduce(
        1, _t(m, [[-1]]), m.ones(1, 1), "sum"),
    "scatter_reduce too large": lambda m: _x(m).scatter_reduce(
        1, _t(m, [[4]]), m.ones(1, 1), "amax"),
    "scatter_reduce float index": lambda m: _x(m).scatter_reduce(
        1, _t(m, [[1.0]]), m.ones(1, 1), "sum"),
    "index_add_ negative": lambda m: _x(m).index_add_(0, _t(m, [-1]), m.ones(1, 4)),
    "index_add too large": lambda m: _x(m).index_add(1, _t(m, [0, 5, -2]), m.ones(3, 3)),
    "index_add_ float index": lambda m: _x(m).index_add_(0, _t(m, [1.0]), m.ones(1, 4)),
    "index_add_ matrix index": lambda m: _x(m).index_add_(0, _t(m, [[1.0]]), m.ones(1, 4)),
    "index_copy_ negative": lambda m: _x(m).index_copy_(0, _t(m, [-1]), m.ones(1, 4)),
    "index_copy too large": lambda m: _x(m).index_copy(1, _t(m, [0, -2, 5]), m.ones(3, 3)),
    "index_copy_ scalar self": lambda m: _t(m, 5.0).index_copy_(0, _t(m, [1]), _t(m, [2.0])),
    "index_copy_ int32 index": lambda m: _x(m).index_copy_(
        0, _t(m, [1], dtype=m.int32), m.ones(1, 4)),
    "index_copy_ matrix index": lambda m: _x(m).index_copy_(0, _t(m, [[1]]), m.ones(1, 4)),
    "index_fill_ too large": lambda m: _x(m).index_fill_(0, _t(m, [3]), 1.0),
    "index_fill_ too negative": lambda m: _x(m).index_fill_(1, _t(m, [0, -5, 7]), 1.0),
    "index_fill_ float index": lambda m: _x(m).index_fill_(0, _t(m, [1.0]), 1.0),
    "index_fill_ matrix index": lambda m: _x(m).index_fill_(0, _t(m, [[1]]), 1.0),
    "take float index": lambda m: _x(m).take(_t(m, [1.0])),
    "put_ int32 index": lambda m: _x(m).put_(_t(m, [1], dtype=m.int32), _t(m, [1.0])),
    "take_along_dim float index": lambda m: m.take_along_dim(_x(m), _t(m, [[-1.0]]), 1),
    "take_along_dim int32 index": lambda m: m.take_along_dim(
        _x(m), _t(m, [[1]], dtype=m.int32), 1),
    "take_along_dim flat negative": lambda m: m.take_along_dim(_x(m), _t(m, [-13])),
    "embedding_bag negative": lambda m: m.nn.functional.embedding_bag(
        _t(m, [[0, -1]]), m.ones(3, 2)),
    "embedding_bag too large": lambda m: m.nn.functional.embedding_bag(
        _t(m, [3, 0]), m.ones(3, 2), _t(m, [0])),
    "select_scatter too large": lambda m: m.zeros(3, 2).select_scatter(m.ones(2), 0, 3),
    "select_scatter too negative": lambda m: m.zeros(3, 2).select_scatter(m.ones(3), 1, -3),
    "repeat_interleave negative repeats": lambda m: m.zeros(2).repeat_interleave(
        _t(m, [1, -1])),
    "repeat_interleave negative counts": lambda m: m.repeat_interleave(_t(m, [1, -1])),
    "repeat_interleave negative int": lambda m: m.zeros(2).repeat_interleave(-1),
    # ---------------------------------------------------------------- Python indices
    "getitem float": lambda m: _x(m)[1.5],
    "getitem whole float": lambda m: _x(m)[1.0],
    "getitem float in tuple": lambda m: _x(m)[0, 1.5],
    "getitem float after slice": lambda m: _x(m)[:, 2.0],
    "getitem float after ellipsis": lambda m: _x(m)[..., 2.0],
    "getitem float with index tensor": lambda m: _x(m)[_t(m, [1]), 1.5],
    "getitem numpy float": lambda m: _x(m)[__import__("numpy").float64(1.0)],
    "getitem dict": lambda m: _x(m)[{}],
    "getitem float slice bound": lambda m: _x(m)[1.5:],
    "setitem float": lambda m: _x(m).__setitem__(1.5, 0.0),
    # ---------------------------------------------------------------- one_hot
    "one_hot class too large": lambda m: m.nn.functional.one_hot(_t(m, [3]), 2),
    "one_hot negative class": lambda m: m.nn.functional.one_hot(_t(m, [-1])),
    "one_hot negative class with count": lambda m: m.nn.functional.one_hot(_t(m, [-1]), 3),
    "one_hot zero classes": lambda m: m.nn.functional.one_hot(_t(m, [0]), 0),
    "one_hot int32": lambda m: m.nn.functional.one_hot(_t(m, [1], dtype=m.int32), 3),
    "one_hot empty without count": lambda m: m.nn.functional.one_hot(
        _t(m, [], dtype=m.int64)),
    # ---------------------------------------------------------------- convolution
    "conv2d kernel larger than input": lambda m: m.nn.functional.conv2d(
        m.ones(1, 1, 2, 2), m.ones(1, 1, 3, 3)),
    "conv1d kernel larger than input": lambda m: m.nn.functional.conv1d(
        m.ones(1, 1, 2), m.ones(1, 1, 3)),
    "conv2d dilated kernel too large": lambda m: m.nn.functional.conv2d(
        m.ones(1, 1, 4, 4), m.ones(1, 1, 3, 3), dilation=2),
    "conv2d stride 0": lambda m: m.nn.functional.conv2d(
        m.ones(1, 1, 4, 4), m.ones(1, 1, 3, 3), stride=0),
    "conv1d stride 0": lambda m: m.nn.functional.conv1d(m.ones(1, 1, 4), m.ones(1, 1, 3),
                                                        stride=0),
    "Conv2d module stride 0": lambda m: m.nn.Conv2d(1, 1, 3, stride=0)(m.ones(1, 1, 4, 4)),
    "conv2d negative padding": lambda m: m.nn.functional.conv2d(
        m.ones(1, 1, 4, 4), m.ones(1, 1, 3, 3), stride=0, padding=-1),
    "conv2d dilation 0": lambda m: m.nn.functional.conv2d(
        m.ones(1, 1, 4, 4), m.ones(1, 1, 3, 3), dilation=(1, 0)),
    "conv1d dilation 0": lambda m: m.nn.functional.conv1d(m.ones(1, 1, 4), m.ones(1, 1, 3),
                                                          dilation=0),
    "conv2d negative dilation": lambda m: m.nn.functional.conv2d(
        m.ones(1, 1, 4, 4), m.ones(1, 1, 3, 3), dilation=-1),
    "conv2d kernel size 0": lambda m: m.nn.functional.conv2d(
        m.ones(1, 1, 4, 4), m.ones(1, 1, 0, 3)),
    "Conv1d module kernel size 0": lambda m: m.nn.Conv1d(1, 1, 0)(m.ones(1, 1, 4)),
    "conv2d groups 0": lambda m: m.nn.functional.conv2d(
        m.ones(1, 1, 4, 4), m.ones(1, 1, 3, 3), groups=0),
    "conv_transpose2d stride 0": lambda m: m.nn.functional.conv_transpose2d(
        m.ones(1, 1, 4, 4), m.ones(1, 1, 3, 3), stride=0),
    "conv_transpose1d stride 0": lambda m: m.nn.functional.conv_transpose1d(
        m.ones(1, 1, 4), m.ones(1, 1, 3), stride=0),
    "conv_transpose2d negative output_padding": lambda m: m.nn.functional.conv_transpose2d(
        m.ones(1, 1, 4, 4), m.ones(1, 1, 3, 3), output_padding=-1),
    "conv_transpose2d output_padding too large": lambda m: m.nn.functional.conv_transpose2d(
        m.ones(1, 1, 4, 4), m.ones(1, 1, 3, 3), stride=2, output_padding=2),
    "conv_transpose1d output_padding too large": lambda m: m.nn.functional.conv_transpose1d(
        m.ones(1, 1, 4), m.ones(1, 1, 3), output_padding=1),
    "conv_transpose2d dilation 0": lambda m: m.nn.functional.conv_transpose2d(
        m.ones(1, 1, 4, 4), m.ones(1, 1, 3, 3), dilation=0),
    "conv_transpose2d kernel size 0": lambda m: m.nn.functional.conv_transpose2d(
        m.ones(1, 1, 4, 4), m.ones(1, 1, 0, 3)),
    "conv_transpose2d output too small": lambda m: m.nn.functional.conv_transpose2d(
        m.ones(1, 1, 4, 4), m.ones(1, 1, 3, 3), padding=(0, 4)),
    "conv_transpose1d output too small": lambda m: m.nn.functional.conv_transpose1d(
        m.ones(1, 1, 4), m.ones(1, 1, 3), padding=4),
    "unfold stride 0": lambda m: m.nn.functional.unfold(m.ones(1, 1, 4, 4), 2, stride=0),
    "unfold kernel 0": lambda m: m.nn.functional.unfold(m.ones(1, 1, 4, 4), 0, stride=0),
    "unfold dilation 0": lambda m: m.nn.functional.unfold(m.ones(1, 1, 4, 4), 2, dilation=0),
    "unfold negative padding": lambda m: m.nn.functional.unfold(m.ones(1, 1, 4, 4), 2,
                                                                padding=-1),
    "unfold kernel too large": lambda m: m.nn.functional.unfold(m.ones(1, 1, 4, 4), 5),
    "fold kernel 0": lambda m: m.nn.functional.fold(m.ones(1, 4, 4), (3, 3), 0, stride=0),
    "fold stride 0": lambda m: m.nn.functional.fold(m.ones(1, 4, 4), (3, 3), 2, stride=0,
                                                    dilation=0),
    "fold dilation 0": lambda m: m.nn.functional.fold(m.ones(1, 4, 4), (3, 3), 2, dilation=0,
                                                      padding=-1),
    "fold negative padding": lambda m: m.nn.functional.fold(m.ones(1, 4, 4), (3, 3), 2,
                                                            padding=-1),
    "fold channels not divisible": lambda m: m.nn.functional.fold(m.ones(4, 4), (3, 3), 5),
    "channel_shuffle groups 0": lambda m: m.nn.functional.channel_shuffle(m.ones(1, 4, 2, 2),
                                                                          0),
    "local_response_norm size 0": lambda m: m.nn.functional.local_response_norm(
        m.ones(1, 4, 2, 2), 0),
    "pixel_shuffle factor 0": lambda m: m.nn.functional.pixel_shuffle(m.ones(1, 4, 2, 2), 0),
    "pixel_unshuffle factor 0": lambda m: m.nn.functional.pixel_unshuffle(m.ones(1, 1, 4, 4),
                                                                          0),
    # ---------------------------------------------------------------- pooling
    "max_pool2d stride 0": lambda m: m.nn.functional.max_pool2d(m.ones(2, 3, 4, 4), 2,
                                                                stride=0),
    "MaxPool2d module stride 0": lambda m: m.nn.MaxPool2d(2, stride=0)(m.ones(2, 3, 4, 4)),
    "max_pool2d kernel 0": lambda m: m.nn.functional.max_pool2d(m.ones(2, 3, 4, 4), 0),
    "max_pool2d kernel 0 stride 1": lambda m: m.nn.functional.max_pool2d(
        m.ones(2, 3, 4, 4), (2, 0), stride=1),
    "max_pool2d negative kernel": lambda m: m.nn.functional.max_pool2d(
        m.ones(2, 3, 4, 4), -1, stride=1),
    "max_pool2d negative stride": lambda m: m.nn.functional.max_pool2d(
        m.ones(2, 3, 4, 4), 2, stride=-1),
    "max_pool2d kernel too large": lambda m: m.nn.functional.max_pool2d(m.ones(2, 3, 4, 4),
                                                                        (5, 1)),
    "max_pool2d dilated kernel too large": lambda m: m.nn.functional.max_pool2d(
        m.ones(3, 4, 4), 2, dilation=4),
    "max_pool2d padding above half": lambda m: m.nn.functional.max_pool2d(
        m.ones(2, 3, 4, 4), 2, padding=(0, 2)),
    "max_pool2d negative padding": lambda m: m.nn.functional.max_pool2d(
        m.ones(2, 3, 4, 4), 2, padding=-1),
    "max_pool2d dilation 0": lambda m: m.nn.functional.max_pool2d(m.ones(2, 3, 4, 4), 2,
                                                                  dilation=0),
    "max_pool2d indices stride 0": lambda m: m.nn.functional.max_pool2d(
        m.ones(2, 3, 4, 4), 2, stride=0, return_indices=True),
    "max_pool1d stride 0": lambda m: m.nn.functional.max_pool1d(m.ones(2, 3, 4), 2, stride=0),
    "max_pool1d kernel 0": lambda m: m.nn.functional.max_pool1d(m.ones(2, 3, 4), 0),
    "max_pool1d kernel too large": lambda m: m.nn.functional.max_pool1d(
        m.ones(2, 3, 4, requires_grad=True), 5),
    "max_pool1d padding above half": lambda m: m.nn.functional.max_pool1d(
        m.ones(2, 3, 4), 2, padding=2),
    "max_pool1d dilation 0": lambda m: m.nn.functional.max_pool1d(m.ones(2, 3, 4), 2,
                                                                  dilation=0),
    "max_pool1d indices too large": lambda m: m.nn.functional.max_pool1d(
        m.ones(2, 3, 4), 5, return_indices=True),
    "avg_pool2d stride 0": lambda m: m.nn.functional.avg_pool2d(m.ones(2, 3, 4, 4), 2,
                                                                stride=0),
    "AvgPool2d module stride 0": lambda m: m.nn.AvgPool2d(2, stride=0)(m.ones(2, 3, 4, 4)),
    "avg_pool2d kernel 0": lambda m: m.nn.functional.avg_pool2d(m.ones(2, 3, 4, 4), 0),
    "avg_pool2d kernel 0 stride 1": lambda m: m.nn.functional.avg_pool2d(
        m.ones(2, 3, 4, 4), 0, stride=1),
    "avg_pool2d kernel too large": lambda m: m.nn.functional.avg_pool2d(m.ones(3, 4, 4), 5),
    "avg_pool2d padding above half": lambda m: m.nn.functional.avg_pool2d(
        m.ones(2, 3, 4, 4), 2, padding=2),
    "avg_pool2d negative padding": lambda m: m.nn.functional.avg_pool2d(
        m.ones(2, 3, 4, 4), 2, padding=-1),
    "avg_pool2d divisor 0": lambda m: m.nn.functional.avg_pool2d(m.ones(2, 3, 4, 4), 2,
                                                                 divisor_override=0),
    "avg_pool1d stride 0": lambda m: m.nn.functional.avg_pool1d(m.ones(2, 3, 4), 2, stride=0),
    "avg_pool1d kernel 0": lambda m: m.nn.functional.avg_pool1d(m.ones(2, 3, 4), 0),
    "avg_pool1d kernel too large": lambda m: m.nn.functional.avg_pool1d(m.ones(2, 3, 4), 5),
    "adaptive_avg_pool2d negative size": lambda m: m.nn.functional.adaptive_avg_pool2d(
        m.ones(2, 3, 4, 4), (2, -1)),
    "adaptive_avg_pool1d negative size": lambda m: m.nn.functional.adaptive_avg_pool1d(
        m.ones(2, 3, 4), -1),
    "adaptive_max_pool2d negative size": lambda m: m.nn.functional.adaptive_max_pool2d(
        m.ones(2, 3, 4, 4), (-1, -3)),
    # ---------------------------------------------------------------- dtypes
    "softmax int64": lambda m: m.softmax(_t(m, [1, 2]), 0),
    "F.softmax int32": lambda m: m.nn.functional.softmax(_t(m, [1, 2], dtype=m.int32), 0),
    "softmax int not last dim": lambda m: _t(m, [[1, 2]]).softmax(0),
    "softmax bool": lambda m: m.softmax(_t(m, [True]), 0),
    "log_softmax int": lambda m: m.nn.functional.log_softmax(_t(m, [[1, 2]]), 1),
    "log_softmax int not last dim": lambda m: m.log_softmax(_t(m, [[[1, 2]]]), 1),
    "softmin int": lambda m: m.nn.functional.softmin(_t(m, [[1, 2]]), 0),
    "mse_loss int64": lambda m: m.nn.functional.mse_loss(_t(m, [1, 2]), _t(m, [1, 3])),
    "mse_loss int32 unreduced": lambda m: m.nn.functional.mse_loss(
        _t(m, [1, 2], dtype=m.int32), _t(m, [1, 3]), reduction="none"),
    "MSELoss bool": lambda m: m.nn.MSELoss()(_t(m, [True]), _t(m, [False])),
    "smooth_l1_loss int64": lambda m: m.nn.functional.smooth_l1_loss(_t(m, [1, 2]),
                                                                     _t(m, [1, 3])),
    "huber_loss int64": lambda m: m.nn.functional.huber_loss(_t(m, [1, 2]), _t(m, [1, 3])),
    "huber_loss int input float target": lambda m: m.nn.functional.huber_loss(
        _t(m, [1, 2]), _t(m, [1.0, 3.0])),
    "lerp double end": lambda m: m.lerp(_t(m, [1.0]), _t(m, [2.0], dtype=m.float64), 0.5),
    "lerp 0-d double end": lambda m: m.lerp(_t(m, [1.0]), _t(m, 2.0, dtype=m.float64), 0.5),
    "lerp half end": lambda m: m.lerp(_t(m, [1.0]), _t(m, [2.0], dtype=m.float16), 0.5),
    "lerp double weight": lambda m: m.lerp(_t(m, [1.0]), _t(m, [2.0]),
                                           _t(m, [0.5], dtype=m.float64)),
    "lerp int end": lambda m: m.lerp(_t(m, [1.0]), _t(m, [2]), 0.5),
    "lerp int input": lambda m: m.lerp(_t(m, [1]), _t(m, [2.0]), 0.5),
    "lerp int": lambda m: m.lerp(_t(m, [1]), _t(m, [2]), 0.5),
    "lerp int tensor weight": lambda m: m.lerp(_t(m, [1]), _t(m, [2]), _t(m, [1])),
    "lerp_ double end": lambda m: _t(m, [1.0]).lerp_(_t(m, [2.0], dtype=m.float64), 0.5),
    "lerp_ bool": lambda m: _t(m, [True]).lerp_(_t(m, [True]), 0.5),
    "nll_loss float target": lambda m: m.nn.functional.nll_loss(m.zeros(2, 3),
                                                                _t(m, [1.0, 0.0])),
    "nll_loss int32 target": lambda m: m.nn.functional.nll_loss(
        m.zeros(2, 3), _t(m, [1, 0], dtype=m.int32)),
    "nll_loss 2-d float target": lambda m: m.nn.functional.nll_loss(m.zeros(1, 3, 2, 2),
                                                                    m.zeros(1, 2, 2)),
    "nll_loss 3-d float target": lambda m: m.nn.functional.nll_loss(m.zeros(1, 3, 2),
                                                                    m.zeros(1, 2)),
    "nll_loss target negative": lambda m: m.nn.functional.nll_loss(m.zeros(2, 3),
                                                                   _t(m, [-1, 0])),
    "nll_loss target too large": lambda m: m.nn.functional.nll_loss(m.zeros(1, 3, 2, 2),
                                                                    _t(m, [[[3, 0], [0, 0]]])),
    "cross_entropy target too large": lambda m: m.nn.functional.cross_entropy(
        m.zeros(2, 3), _t(m, [3, 0]), label_smoothing=0.1),
    "cross_entropy float class target": lambda m: m.nn.functional.cross_entropy(
        m.zeros(2, 3), _t(m, [1.0, 0.0])),
    "cross_entropy 0-d float target": lambda m: m.nn.functional.cross_entropy(
        m.zeros(3), _t(m, 1.0)),
    "cross_entropy int32 target": lambda m: m.nn.functional.cross_entropy(
        m.zeros(2, 3), _t(m, [1, 0], dtype=m.int32)),
    "cross_entropy 2-d target of other shape": lambda m: m.nn.functional.cross_entropy(
        m.zeros(2, 3), m.zeros(2, 4)),
    # ---------------------------------------------------------------- optimizers
    "SGD string lr in a group": lambda m: _step(m, "SGD", lr="0.1"),
    "Adam string lr in a group": lambda m: _step(m, "Adam", lr="0.1"),
    "AdamW string lr in a group": lambda m: _step(m, "AdamW", lr="0.1"),
    "RMSprop string lr in a group": lambda m: _step(m, "RMSprop", lr="0.1"),
    "Adagrad string lr in a group": lambda m: _step(m, "Adagrad", lr="0.1"),
    "SGD string lr": lambda m: m.optim.SGD([m.nn.Parameter(m.ones(2))], lr="0.1"),
    "SGD negative lr": lambda m: m.optim.SGD([m.nn.Parameter(m.ones(2))], lr=-0.1),
    "SGD negative momentum": lambda m: m.optim.SGD([m.nn.Parameter(m.ones(2))], lr=0.1,
                                                   momentum=-1),
    "Adam string lr": lambda m: m.optim.Adam([m.nn.Parameter(m.ones(2))], lr="0.1"),
    "Adam negative lr": lambda m: m.optim.Adam([m.nn.Parameter(m.ones(2))], lr=-0.1),
    "Adam beta of 1": lambda m: m.optim.Adam([m.nn.Parameter(m.ones(2))], betas=(0.9, 1.0)),
    "Adam string beta": lambda m: m.optim.Adam([m.nn.Parameter(m.ones(2))],
                                               betas=("0.9", 0.9)),
    "RMSprop negative alpha": lambda m: m.optim.RMSprop([m.nn.Parameter(m.ones(2))],
                                                        alpha=-0.1),
    "Adagrad negative lr_decay": lambda m: m.optim.Adagrad([m.nn.Parameter(m.ones(2))],
                                                           lr_decay=-0.1),
    # ---------------------------------------------------------------- source dtypes
    "index_add long source": lambda m: m.zeros(3).index_add_(0, _t(m, [0]), _t(m, [1])),
    "index_add double source": lambda m: m.zeros(3).index_add(
        0, _t(m, [0]), _t(m, [1.0], dtype=m.float64)),
    "index_copy long source": lambda m: m.zeros(3).index_copy(0, _t(m, [0]), _t(m, [1])),
    "scatter long src": lambda m: m.zeros(3).scatter(0, _t(m, [0]), _t(m, [1])),
    "scatter_add long src": lambda m: m.zeros(3).scatter_add_(0, _t(m, [0]), _t(m, [1])),
    "scatter_reduce long src": lambda m: m.zeros(3).scatter_reduce(
        0, _t(m, [0]), _t(m, [1]), "sum"),
    "masked_scatter long source": lambda m: m.zeros(3).masked_scatter(
        _t(m, [True, False, False]), _t(m, [1])),
    "put long source": lambda m: m.zeros(3).put_(_t(m, [0]), _t(m, [1])),
    # ---------------------------------------------------------------- einsum equations
    "einsum ij,jk->ik": lambda m: m.einsum("ij,jk->ik", *[m.ones(s) for s in ((2, 3), (2, 3))]),
    "einsum ij,jk": lambda m: m.einsum("ij,jk", *[m.ones(s) for s in ((2, 3),)]),
    "einsum ij->k": lambda m: m.einsum("ij->k", *[m.ones(s) for s in ((2, 3),)]),
    "einsum i,i": lambda m: m.einsum("i,i", *[m.ones(s) for s in ((2,), (3,))]),
    "einsum ij": lambda m: m.einsum("ij", *[m.ones(s) for s in ((2, 3, 4),)]),
    "einsum ij->ii": lambda m: m.einsum("ij->ii", *[m.ones(s) for s in ((2, 3),)]),
    "einsum i1->i": lambda m: m.einsum("i1->i", *[m.ones(s) for s in ((2, 3),)]),
    "einsum i,j": lambda m: m.einsum("i,j", *[m.ones(s) for s in ((2,), (3,), (4,))]),
    "einsum i->i->i": lambda m: m.einsum("i->i->i", *[m.ones(s) for s in ((2,),)]),
    "einsum ...i,...i->...": lambda m: m.einsum("...i,...i->...", m.ones(2, 3), m.ones(4, 3)),
    "einsum i.j": lambda m: m.einsum("i.j", *[m.ones(s) for s in ((2, 2),)]),
    "einsum ii->i": lambda m: m.einsum("ii->i", *[m.ones(s) for s in ((3, 2),)]),
    "einsum i......": lambda m: m.einsum("i......", *[m.ones(s) for s in ((2,),)]),
    "einsum ab,ab->ab..": lambda m: m.einsum("ab,ab->ab..", *[m.ones(s) for s in ((2, 2), (2, 2))]),
    "einsum i->......": lambda m: m.einsum("i->......", *[m.ones(s) for s in ((2,),)]),
    "einsum ij,kl->": lambda m: m.einsum("ij,kl->", *[m.ones(s) for s in ((2,), (3,))]),
    "einsum ijk": lambda m: m.einsum("ijk", *[m.ones(s) for s in ((2, 3),)]),
    # ---------------------------------------------------------------- setitem values
    "setitem row too short": lambda m: m.zeros(2, 3).__setitem__(0, m.ones(2)),
    "setitem column too long": lambda m: m.zeros(2, 3).__setitem__((slice(None), 0), m.ones(3)),
    "setitem more dims": lambda m: m.zeros(3).__setitem__(slice(0, 2), m.ones(2, 2)),
    "setitem index value": lambda m: m.zeros(2, 3).__setitem__(_t(m, [0]), m.ones(2)),
    "setitem mask value": lambda m: m.zeros(3, 4).__setitem__(m.zeros(3, 4) > 0.5, m.ones(2)),
    "index_put accumulate value": lambda m: m.zeros(3, 4).index_put_(
        (_t(m, [0, 1]),), m.ones(3), accumulate=True),
    # ---------------------------------------------------------------- weights requiring grad
    "nll_loss weight requires grad": lambda m: m.nn.functional.nll_loss(
        m.zeros(2, 3), _t(m, [0, 1]), weight=m.ones(3, requires_grad=True)),
    "nll_loss2d weight requires grad": lambda m: m.nn.functional.nll_loss(
        m.zeros(2, 3, 4), m.zeros(2, 4, dtype=m.long), weight=m.ones(3, requires_grad=True)),
    "cross_entropy weight requires grad": lambda m: m.nn.functional.cross_entropy(
        m.zeros(2, 3, requires_grad=True), _t(m, [0, 1]), weight=m.ones(3, requires_grad=True)),
}

# Cases where torch words its message with details fusegrad does not reproduce: both
# messages must contain the key text.
KEYS: dict[str, str] = {}


# Checks that read values (index ranges, classes, targets) or need real data (module weight
# initialisation, optimizer steps): fake tensors, which have no data, skip them.
NEEDS_DATA = {
    "setitem index value", "setitem mask value", "index_put accumulate value",
    "embedding negative", "embedding too large", "embedding int32 negative",
    "index_select negative", "index_select too large", "index_select dim 1",
    "index_select 3-d last dim", "index_select empty dim", "index_select scalar self",
    "gather negative", "gather scalar negative", "scatter_ negative", "scatter_ value negative",
    "scatter_ scalar self", "scatter_add_ negative", "scatter_reduce negative",
    "scatter_reduce too large", "index_add_ negative", "index_add too large",
    "index_copy_ negative", "index_copy too large", "index_copy_ scalar self",
    "index_fill_ too large", "index_fill_ too negative", "take_along_dim flat negative",
    "embedding_bag negative", "embedding_bag too large", "one_hot class too large",
    "one_hot negative class", "one_hot negative class with count", "one_hot zero classes",
    "one_hot empty without count", "Conv2d module stride 0", "Conv1d module kernel size 0",
    "nll_loss target negative", "nll_loss target too large", "cross_entropy target too large",
    "SGD string lr in a group", "Adam string lr in a group", "AdamW string lr in a group",
    "RMSprop string lr in a group", "Adagrad string lr in a group",
}


def _outcome(m, fn):
    try:
        fn(m)
    except Exception as e:  # noqa: BLE001 (the exception is what is compared)
        return type(e), str(e)
    return None, None


@pytest.mark.parametrize("name", list(CASES))
def test_invalid_input_matches_torch(name):
    fn = CASES[name]
    t_type, t_msg = _outcome(torch, fn)
    assert t_type is not None, f"torch accepts {name}: the case is wrong"
    f_type, f_msg = _outcome(fusegrad, fn)
    assert f_type is t_type, f"{name}: fusegrad raised {f_type} ({f_msg}), torch {t_type}"
    key = KEYS.get(name)
    if key is None:
        assert f_msg == t_msg
    else:
        assert key in t_msg and key in f_msg, (t_msg, f_msg)


@pytest.mark.parametrize("stride,padding,output_padding,dilation", [
    (1, 0, 1, 2), (2, 1, 1, 1), (3, 0, 2, 1), (2, 1, 1, 3)])
def test_conv_transpose2d_output_padding_matches_torch(stride, padding, output_padding,
                                                        dilation):
    """Output padding beside padding or a dilation above the stride: values and gradients."""
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(s) for s in ((2, 2, 4, 5), (2, 3, 3, 3), (3,))]
    outs = []
    for m in (torch, fusegrad):
        x, w, b = [m.tensor(a, requires_grad=True) for a in arrays]
        y = m.nn.functional.conv_transpose2d(x, w, b, stride=stride, padding=padding,
                                             output_padding=output_padding, dilation=dilation)
        (y * m.tensor(np.arange(y.numel()).reshape(tuple(y.shape)) % 7)).sum().backward()
        outs.append([t.detach().numpy() for t in (y, x.grad, w.grad, b.grad)])
    for a, b in zip(*outs):
        np.testing.assert_allclose(b, a, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("reduction", ["mean", "none"])
def test_cross_entropy_uint8_target_gradient_matches_torch(reduction):
    """uint8 class targets (which PyTorch accepts) still differentiate with a class weight."""
    grads = []
    for m in (torch, fusegrad):
        x = m.tensor(np.linspace(-1, 1, 12).reshape(4, 3), requires_grad=True)
        w = m.tensor([0.5, 1.0, 2.0], dtype=m.float64)
        target = m.tensor([1, 0, 2, 2], dtype=m.uint8)
        m.nn.functional.cross_entropy(x, target, weight=w, reduction=reduction).sum().backward()
        grads.append(x.grad.numpy())
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-12)


def test_mse_loss_of_float_and_int_keeps_the_float_dtype():
    """PyTorch's promotion (float32 with int64 is float32), not NumPy's (float64)."""
    for dtype in (torch.float32, torch.float16):
        expected = torch.nn.functional.mse_loss(torch.tensor([1.0, 2.0], dtype=dtype),
                                                torch.tensor([1, 3]))
        got = fusegrad.nn.functional.mse_loss(
            fusegrad.tensor([1.0, 2.0], dtype=getattr(fusegrad, str(dtype).split(".")[1])),
            fusegrad.tensor([1, 3]))
        assert str(got.dtype) == str(expected.dtype)
        assert float(got) == float(expected)


@pytest.mark.parametrize("name", ["SGD", "Adam", "AdamW", "RMSprop", "Adagrad"])
def test_failed_step_leaves_parameters_and_state_unchanged(name):
    """A step refused for a bad hyperparameter changes nothing, so it can be fixed and rerun;
    the step that follows matches PyTorch's first step."""
    params = {}
    for m in (torch, fusegrad):
        p = m.nn.Parameter(m.tensor([1.0, -2.0]))
        opt = getattr(m.optim, name)([{"params": [p], "lr": 0.1}], weight_decay=0.01)
        p.grad = m.tensor([0.5, 0.25])
        if m is fusegrad:
            before = {k: (v.clone() if isinstance(v, m.Tensor) else v)
                      for k, v in opt.state[p].items()}
            opt.param_groups[0]["lr"] = "0.1"
            with pytest.raises(TypeError):
                opt.step()
            assert p.tolist() == [1.0, -2.0]
            assert set(opt.state[p]) == set(before)
            for k, v in before.items():
                assert opt.state[p][k].tolist() == v.tolist()
            opt.param_groups[0]["lr"] = 0.1
        opt.step()
        params[m] = p.detach().numpy()
    np.testing.assert_allclose(params[fusegrad], params[torch], rtol=1e-6, atol=1e-6)


def test_take_along_dim_counts_negative_indices_from_the_end():
    """Along a dim, take_along_dim accepts negative indices (gather itself does not)."""
    index = [[-1, 0], [-4, 2], [3, -2]]
    expected = torch.take_along_dim(torch.arange(12.0).reshape(3, 4), torch.tensor(index), 1)
    got = fusegrad.take_along_dim(fusegrad.arange(12.0).reshape(3, 4),
                                  fusegrad.tensor(index), 1)
    assert got.tolist() == expected.tolist()


@pytest.mark.parametrize("name", [n for n in CASES if n not in NEEDS_DATA])
def test_fake_tensors_raise_the_same_errors(name):
    """Argument and dtype checks live in the ops' metas too: fake tensors (capture) raise
    what eager raises."""
    expected = _outcome(fusegrad, CASES[name])
    with fusegrad._subclasses.FakeTensorMode():
        got = _outcome(fusegrad, CASES[name])
    assert expected[0] is not None and got == expected


def test_weights_requiring_grad_are_accepted_under_no_grad():
    def run(m):
        w = m.ones(3, requires_grad=True)
        with m.no_grad():
            return [m.nn.functional.nll_loss(m.zeros(2, 3), _t(m, [0, 1]), weight=w).item(),
                    m.nn.functional.multi_margin_loss(m.zeros(2, 3), _t(m, [0, 1]),
                                                      weight=w).item()]
    assert run(fusegrad) == run(torch)
