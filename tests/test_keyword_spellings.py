"""Arguments passed by the keywords PyTorch's C-level parser takes: the parameter's own name
where the Python signature spreads it (`x.view(size=...)`, `x.reshape(shape=...)`), and
NumPy's names for `dim`, `keepdim`, `input` and `other` (`torch.sum(x, axis=0)`), which the
functions PyTorch writes in Python refuse. Each case runs on both libraries."""

import pytest
import torch

import fusegrad

CASES = {
    "view_size": lambda t, x: x.view(size=(12,)),
    "view_size_list": lambda t, x: x.view(size=[2, 6]),
    "view_dtype_kw": lambda t, x: x.view(dtype=t.int32),
    "view_both": lambda t, x: x.view(size=(12,), dtype=t.int32),
    "view_twice": lambda t, x: x.view(12, size=(12,)),
    "reshape_shape": lambda t, x: x.reshape(shape=(4, 3)),
    "reshape_twice": lambda t, x: x.reshape(12, shape=(12,)),
    "torch_reshape": lambda t, x: t.reshape(x, shape=(2, 6)),
    "permute_dims": lambda t, x: x.permute(dims=(1, 0)),
    "torch_permute": lambda t, x: t.permute(x, dims=[1, 0]),
    "permute_twice": lambda t, x: x.permute(1, 0, dims=(1, 0)),
    "expand_size": lambda t, x: x[:1].expand(size=(2, 4)),
    "repeat_repeats": lambda t, x: x.repeat(repeats=(1, 2)),
    "new_zeros_size": lambda t, x: x.new_zeros(size=(2,)),
    "new_ones_size": lambda t, x: x.new_ones(size=[2, 1]),
    "new_empty_size": lambda t, x: x.new_empty(size=(2,)).shape,
    "resize_size": lambda t, x: x.clone().resize_(size=(12,)),
    "torch_sum_axis": lambda t, x: t.sum(x, axis=0),
    "torch_sum_keepdims": lambda t, x: t.sum(x, 1, keepdims=True),
    "torch_sum_input_a": lambda t, x: t.sum(a=x, axis=1),
    "torch_mean_keepdims": lambda t, x: t.mean(x, dim=0, keepdims=True),
    "torch_max_axis": lambda t, x: t.max(x, axis=1),
    "torch_cat_axis": lambda t, x: t.cat([x, x], axis=1),
    "torch_stack_axis": lambda t, x: t.stack([x, x], axis=0),
    "torch_add_x_x2": lambda t, x: t.add(x=x, x2=x),
    "torch_std_mean_axis": lambda t, x: t.std_mean(x, axis=0),
    "torch_softmax_axis": lambda t, x: t.softmax(x, axis=1),
    "gelu_x": lambda t, x: t.nn.functional.gelu(x=x).round(decimals=3),
    "tensor_split_sections": lambda t, x: x.tensor_split(sections=3, dim=1),
    "tensor_split_indices": lambda t, x: x.tensor_split(indices=[1], dim=0),
    "tensor_split_tensor": lambda t, x: x.tensor_split(tensor_indices_or_sections=t.tensor(2)),
    "tensor_split_tensor_indices": lambda t, x: t.tensor_split(x, t.tensor([1, 3]), 1),
    "tensor_split_twice": lambda t, x: x.tensor_split(2, sections=2),
    "tensor_split_bad_type": lambda t, x: x.tensor_split(indices=2),
    "tensor_split_bad_list": lambda t, x: x.tensor_split(sections=[1]),
    "split_method_split_size": lambda t, x: x.split(split_size=2, dim=1),
    "split_method_other_name": lambda t, x: x.split(split_size_or_sections=2),
    "torch_split_sections": lambda t, x: t.split(x, split_size_or_sections=[1, 2]),
    # Refused as in PyTorch: both spellings, or a function PyTorch writes in Python.
    "both_spellings": lambda t, x: t.sum(x, 0, axis=0),
    "python_level_softmax": lambda t, x: t.nn.functional.softmax(x, axis=0),
    "python_level_relu": lambda t, x: t.nn.functional.relu(x=x),
    "python_level_norm": lambda t, x: t.norm(x, axis=0),
}


def _outcome(lib, case):
    x = lib.arange(12.0).reshape(3, 4)
    try:
        out = case(lib, x)
    except TypeError as e:
        return "TypeError", str(e)
    return "ok", repr(out).replace("fusegrad", "torch")


@pytest.mark.parametrize("name", CASES)
def test_keyword_spellings_match_torch(name):
    assert _outcome(fusegrad, CASES[name]) == _outcome(torch, CASES[name])


def test_renamed_call_records_the_same_graph():
    xt = torch.arange(6.0).reshape(2, 3).requires_grad_()
    xf = fusegrad.arange(6.0).reshape(2, 3).requires_grad_()
    yt, yf = torch.sum(xt * xt, axis=1, keepdims=True), fusegrad.sum(xf * xf, axis=1,
                                                                      keepdims=True)
    assert yf.grad_fn.name() == yt.grad_fn.name()
    yt.sum().backward()
    yf.sum().backward()
    assert xf.grad.tolist() == xt.grad.tolist()
