"""Errors have PyTorch's exception types and the key words of its messages.

Where torch is installed, each case also runs the same call on torch and checks that it raises the
same exception type, so the expectations below are PyTorch's, not loom's."""

import numpy as np
import pytest

import loom


def _torch_or_none():
    try:
        import torch
    except ImportError:
        return None
    return torch


# (id, call taking the module (loom or torch), exception type, message regex, also check torch)
CASES = [
    ("zeros_negative", lambda m: m.zeros(2, -1), RuntimeError, "negative dimension", True),
    ("ones_negative_tuple", lambda m: m.ones((-3,)), RuntimeError, "negative dimension", True),
    ("empty_negative", lambda m: m.empty(-2), RuntimeError, "negative dimension", True),
    ("full_negative", lambda m: m.full((-1, 2), 1.0), RuntimeError, "negative dimension", True),
    ("rand_negative", lambda m: m.rand(3, -4), RuntimeError, "negative dimension", True),
    ("ragged_lengths", lambda m: m.tensor([[1, 2], [3]]), ValueError, "expected sequence of length 2 at dim 1", True),
    ("ragged_deep", lambda m: m.tensor([[[1], [2]], [[3], [4, 5]]]), ValueError, "expected sequence of length", True),
    ("ragged_number_then_list", lambda m: m.tensor([[1], 2]), (ValueError, TypeError), "", True),
    ("string_data", lambda m: m.tensor("abc"), (TypeError, ValueError), "", True),
    ("string_leaf", lambda m: m.tensor([1, "a"]), (TypeError, ValueError), "", True),
    ("bad_device_string", lambda m: m.zeros(2, device="gpu"), RuntimeError, "device", True),
    ("bad_device_index", lambda m: m.zeros(2, device="cuda:x"), RuntimeError, "device", True),
    ("bad_device_object", lambda m: m.device("tpu"), RuntimeError, "device", True),
    ("item_multi", lambda m: m.ones(2).item(), ValueError, "one element", True),
    ("item_empty", lambda m: m.ones(0).item(), ValueError, "one element", True),
    ("float_multi", lambda m: float(m.ones(2)), ValueError, "one element", True),
    ("int_multi", lambda m: int(m.ones(3)), ValueError, "one element", True),
    ("bool_multi", lambda m: bool(m.ones(2)), RuntimeError, "ambiguous", True),
    ("bool_empty", lambda m: bool(m.ones(0)), RuntimeError, "ambiguous", True),
    ("index_float_tensor", lambda m: [1, 2][m.tensor(1.0)], TypeError, "", True),
    ("index_multi", lambda m: [1, 2][m.tensor([0, 1])], TypeError, "", True),
    ("len_0d", lambda m: len(m.tensor(1.0)), TypeError, "len\\(\\) of a 0-d tensor", True),
    ("iter_0d", lambda m: iter(m.tensor(1.0)), TypeError, "iteration over a 0-d tensor", True),
    ("view_incompatible", lambda m: m.zeros(3, 4).t().view(12), RuntimeError, "reshape", True),
    ("view_wrong_numel", lambda m: m.zeros(3, 4).view(5, 2), RuntimeError, "invalid for input of size 12", True),
    ("view_two_infer", lambda m: m.zeros(3, 4).view(-1, -1), RuntimeError, "only one dimension can be inferred", True),
    ("reshape_wrong_numel", lambda m: m.zeros(6).reshape(4, 2), RuntimeError, "invalid for input of size 6", True),
    ("view_bad_infer", lambda m: m.zeros(7).view(2, -1), RuntimeError, "invalid for input of size 7", True),
    ("view_as_mismatch", lambda m: m.zeros(6).view_as(m.zeros(5)), RuntimeError, "", True),
    ("expand_mismatch", lambda m: m.zeros(3, 2).expand(3, 4), RuntimeError, "must match the existing size", True),
    ("expand_too_few", lambda m: m.zeros(2, 3).expand(3), RuntimeError, "number of sizes", True),
    ("expand_leading_minus1", lambda m: m.zeros(3).expand(-1, 3), RuntimeError, "", True),
    ("expand_as_mismatch", lambda m: m.zeros(2).expand_as(m.zeros(3)), RuntimeError, "", True),
    ("dim_out_of_range_select", lambda m: m.zeros(2, 3).select(2, 0), IndexError, "Dimension out of range", True),
    ("dim_out_of_range_transpose", lambda m: m.zeros(2, 3).transpose(0, 5), IndexError, "Dimension out of range", True),
    ("dim_out_of_range_unsqueeze", lambda m: m.zeros(2, 3).unsqueeze(4), IndexError, "Dimension out of range", True),
    ("dim_out_of_range_squeeze", lambda m: m.zeros(2, 3).squeeze(-3), IndexError, "Dimension out of range", True),
    ("dim_out_of_range_size", lambda m: m.zeros(2, 3).size(2), IndexError, "Dimension out of range", True),
    ("dim_out_of_range_stride", lambda m: m.zeros(2, 3).stride(-3), IndexError, "Dimension out of range", True),
    ("dim_out_of_range_flatten", lambda m: m.zeros(2, 3).flatten(0, 3), IndexError, "Dimension out of range", True),
    ("dim_out_of_range_narrow", lambda m: m.zeros(2, 3).narrow(2, 0, 1), IndexError, "Dimension out of range", True),
    ("dim_out_of_range_permute", lambda m: m.zeros(2, 3).permute(0, 2), IndexError, "Dimension out of range", True),
    ("permute_duplicate", lambda m: m.zeros(2, 3).permute(1, 1), RuntimeError, "duplicate dims", True),
    ("permute_duplicate_negative", lambda m: m.zeros(2, 3).permute(0, -2), RuntimeError, "duplicate dims", True),
    ("permute_wrong_count", lambda m: m.zeros(2, 3).permute(0), RuntimeError, "number of dims", True),
    ("select_index_oob", lambda m: m.zeros(2, 3).select(1, 3), IndexError, "index 3", True),
    ("select_0d", lambda m: m.tensor(1.0).select(0, 0), IndexError, "", True),
    ("narrow_too_long", lambda m: m.zeros(5).narrow(0, 3, 3), RuntimeError, "exceeds dimension size", True),
    ("narrow_start_oob", lambda m: m.zeros(5).narrow(0, 6, 0), IndexError, "out of range", True),
    ("narrow_0d", lambda m: m.tensor(1.0).narrow(0, 0, 1), RuntimeError, "0-dim", True),
    ("t_3d", lambda m: m.zeros(2, 3, 4).t(), RuntimeError, "<= 2 dimensions", True),
    ("mT_1d", lambda m: m.zeros(3).mT, RuntimeError, "matrices", True),
    ("flatten_start_after_end", lambda m: m.zeros(2, 3, 4).flatten(2, 1), RuntimeError, "start_dim cannot come after end_dim", True),
    ("unflatten_bad_sizes", lambda m: m.zeros(2, 6).unflatten(1, (4, 2)), RuntimeError, "", True),
    ("arange_zero_step", lambda m: m.arange(0, 3, 0), RuntimeError, "step must be nonzero", True),
    ("arange_wrong_sign", lambda m: m.arange(3, 0, 1), RuntimeError, "bound inconsistent with step sign", True),
    ("linspace_negative_steps", lambda m: m.linspace(0, 1, -2), RuntimeError, "number of steps must be non-negative", True),
    ("randint_empty_range", lambda m: m.randint(5, 5, (2,)), RuntimeError, "from.*to", True),
    ("randint_reversed_range", lambda m: m.randint(5, 2, (2,)), RuntimeError, "", True),
    ("set_default_dtype_int", lambda m: m.set_default_dtype(m.int64), TypeError, "floating", True),
    ("to_bad_device", lambda m: m.zeros(2).to("npu"), RuntimeError, "device", True),
    ("zeros_float_size", lambda m: m.zeros(2.5), TypeError, "", True),
    ("zeros_str_size", lambda m: m.zeros("3"), TypeError, "", True),
    ("tensor_unexpected_kwarg", lambda m: m.tensor([1], foo=1), TypeError, "unexpected keyword argument", True),
    ("zeros_unexpected_kwarg", lambda m: m.zeros(2, foo=1), TypeError, "unexpected keyword argument", True),
    ("full_missing_value", lambda m: m.full((2,)), TypeError, "", True),
    ("mixed_size_args", lambda m: m.zeros((2, 3), 4), TypeError, "", True),
    ("view_float_size", lambda m: m.zeros(4).view(2.0, 2), TypeError, "", True),
    ("transpose_missing", lambda m: m.zeros(2, 2).transpose(0), TypeError, "", True),
    ("cuda_bad_device", lambda m: m.zeros(2).cuda("cpu"), RuntimeError, "", False),
    # loom-only: loom rejects what torch has no equivalent for
    ("unknown_dtype_string", lambda m: m.zeros(2, dtype="float128"), TypeError, "float128", False),
    ("dtype_wrong_type", lambda m: m.zeros(2, dtype=3), TypeError, "dtype", False),
    ("numpy_dtype_without_loom_equivalent", lambda m: m.zeros(2, dtype=np.uint16), TypeError, "uint16", False),
    ("rand_int_dtype", lambda m: m.rand(2, dtype=m.int64), TypeError, "floating", False),
    ("randn_int_dtype", lambda m: m.randn(2, dtype=m.int32), TypeError, "floating", False),
    ("rand_like_bool", lambda m: m.rand_like(m.zeros(2, dtype=m.bool)), TypeError, "floating", False),
    ("tensor_legacy_str", lambda m: m.Tensor("a"), TypeError, "invalid data type 'str'", True),
    ("size_from_floats", lambda m: m.Size([1.5]), TypeError, "", True),
    ("bfloat16_numpy", lambda m: m.ones(2, dtype=m.bfloat16).numpy(), TypeError, "", True),
    ("like_of_non_tensor", lambda m: m.zeros_like([1, 2]), TypeError, "", True),
]


@pytest.mark.parametrize("call,exc,match,check_torch", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_error(call, exc, match, check_torch):
    with pytest.raises(exc, match=match or None):
        call(loom)
    torch = _torch_or_none()
    if check_torch and torch is not None:
        with pytest.raises(exc):
            call(torch)


# ---------------------------------------------------------------------------------------------
# CUDA without a GPU
# ---------------------------------------------------------------------------------------------

no_gpu = pytest.mark.skipif(loom.cuda.is_available(), reason="a GPU is available here")


@no_gpu
@pytest.mark.parametrize("call", [
    lambda: loom.zeros(2, device="cuda"),
    lambda: loom.ones(2, 3, device="cuda:0"),
    lambda: loom.empty(4, device=loom.device("cuda")),
    lambda: loom.tensor([1.0, 2.0], device="cuda"),
    lambda: loom.full((2,), 1.0, device="cuda"),
    lambda: loom.arange(3, device="cuda"),
    lambda: loom.rand(2, device="cuda"),
    lambda: loom.zeros_like(loom.zeros(2), device="cuda"),
    lambda: loom.ones(2).cuda(),
    lambda: loom.ones(2).to("cuda"),
    lambda: loom.ones(2).to(device="cuda:0", dtype=loom.float64),
    lambda: loom.as_tensor(np.zeros(2), device="cuda"),
    lambda: loom.zeros(2, device=0),
], ids=["zeros", "ones", "empty", "tensor", "full", "arange", "rand", "zeros_like", "cuda()", "to", "to_kw",
        "as_tensor", "int_device"])
def test_cuda_tensor_without_gpu(call):
    with pytest.raises(RuntimeError, match="CUDA is not available"):
        call()


@no_gpu
def test_cuda_module_without_gpu():
    assert loom.cuda.is_available() is False
    assert loom.cuda.device_count() == 0
    assert isinstance(loom.cuda.is_compiled(), bool)
    assert loom.cuda.unavailable_reason() != ""
    loom.cuda.empty_cache()  # a no-op without a GPU, as in torch
    with pytest.raises(RuntimeError, match="CUDA is not available"):
        loom.cuda.memory_allocated()


def test_failed_calls_leave_no_allocations():
    import gc

    gc.collect()
    before = loom.memory_stats()["allocated_bytes"]
    for call in (lambda: loom.tensor([[1, 2], [3]]), lambda: loom.zeros(3, 4).t().view(12),
                 lambda: loom.zeros(3).expand(2, 4), lambda: loom.tensor([1, "a"])):
        with pytest.raises((RuntimeError, ValueError, TypeError)):
            call()
    gc.collect()
    assert loom.memory_stats()["allocated_bytes"] == before


def test_setitem_error_leaves_tensor_unchanged():
    t = loom.arange(6.0).view(2, 3)
    with pytest.raises(RuntimeError):
        t[0] = loom.ones(2)
    with pytest.raises(IndexError):
        t[5] = 1.0
    assert t.tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]


@pytest.mark.parametrize("name", ["zeros", "ones", "empty", "rand", "randn"])
def test_unexpected_keyword_names_the_function(name):
    with pytest.raises(TypeError, match=rf"^{name}\(\) got an unexpected keyword argument 'foo'"):
        getattr(loom, name)(2, foo=1)
