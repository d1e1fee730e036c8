"""Op errors have PyTorch's exception types and name the problem PyTorch's messages name.

Each case runs on loom (per device) and the same call on torch. loom must raise the exception
type torch raises, with a message that shares a distinguishing word with torch's
(assert_same_error) and matches the case's pattern (loom's wording, mostly PyTorch's): the
expectations are PyTorch's. Cases: shape mismatches,
matmul inner-size mismatches, dims out of range, integer tensors given to float-only ops, in-place
results that cannot be cast back to self's dtype, bool negation / subtraction, integer division
by zero, bad arguments of data ops, and mixing lazy with eager tensors."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch.nn.functional as F

import loom
from _ops_helpers import assert_same_error, device, materialize, torch  # noqa: F401

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def _maker(m, device):
    """T(values, dtype=None): a tensor of module m (on `device` for loom)."""
    def T(values, dtype=None):
        a = np.asarray(values, dtype=dtype)
        if m is torch:
            return torch.from_numpy(a.copy())
        return loom.tensor(a, device=device)
    return T


def F_(m, name):
    """torch.nn.functional.<name> for torch, loom.<name> for loom."""
    return getattr(F, name) if m is torch else getattr(m, name)


f32 = np.float32
i64 = np.int64

# (id, call(m, T), exception type, message regex for loom)
CASES = [
    # -- shapes that do not broadcast --
    ("add_shapes", lambda m, T: T(np.ones((2, 3))) + T(np.ones(2)), RuntimeError, "must match the size"),
    ("mul_shapes", lambda m, T: m.mul(T(np.ones((4, 1))), T(np.ones((3, 2)))), RuntimeError, "must match"),
    ("maximum_shapes", lambda m, T: m.maximum(T(np.ones(3)), T(np.ones(4))), RuntimeError, "must match"),
    ("eq_shapes", lambda m, T: T(np.ones((2, 3))) == T(np.ones((3, 2))), RuntimeError, "must match"),
    ("where_shapes", lambda m, T: m.where(T([True, False, True]), T(np.ones(2)), 0.0), RuntimeError, "must match"),
    ("lerp_shapes", lambda m, T: m.lerp(T(np.ones(3)), T(np.ones(2)), 0.5), RuntimeError, ""),
    ("addcmul_shapes", lambda m, T: m.addcmul(T(np.ones(3)), T(np.ones(2)), T(np.ones(2))), RuntimeError, ""),
    ("add_inplace_grows", lambda m, T: T(np.ones(3)).add_(T(np.ones((2, 3)))), RuntimeError, ""),
    ("iadd_grows", lambda m, T: T(np.ones(1)).__iadd__(T(np.ones(3))), RuntimeError, ""),
    ("copy_shapes", lambda m, T: T(np.ones((2, 3))).copy_(T(np.ones(2))), RuntimeError, ""),
    ("masked_fill_mask_shape", lambda m, T: T(np.ones((2, 3))).masked_fill(T(np.ones(2, bool)), 1.0),
     RuntimeError, ""),
    ("clamp_tensor_bound_shape", lambda m, T: m.clamp(T(np.ones(3)), T(np.ones(2))), RuntimeError, ""),
    # -- matrix products --
    ("mm_inner", lambda m, T: m.mm(T(np.ones((2, 3))), T(np.ones((2, 2)))), RuntimeError, "cannot be multiplied"),
    ("matmul_inner", lambda m, T: T(np.ones((2, 3))) @ T(np.ones((4, 2))), RuntimeError, "cannot be multiplied"),
    ("matmul_vec_mat", lambda m, T: T(np.ones(3)) @ T(np.ones((2, 2))), RuntimeError, ""),
    ("matmul_mat_vec", lambda m, T: T(np.ones((2, 3))) @ T(np.ones(2)), RuntimeError, ""),
    ("matmul_dot", lambda m, T: m.matmul(T(np.ones(3)), T(np.ones(2))), RuntimeError, "inconsistent tensor size"),
    ("matmul_batched_inner", lambda m, T: T(np.ones((2, 2, 3))) @ T(np.ones((2, 4, 2))), RuntimeError, ""),
    ("matmul_batch_broadcast", lambda m, T: T(np.ones((2, 2, 3))) @ T(np.ones((3, 3, 2))), RuntimeError,
     "must match"),
    ("matmul_0d", lambda m, T: m.matmul(T(1.0), T(np.ones(3))), RuntimeError, "at least 1D"),
    ("matmul_dtypes", lambda m, T: T(np.ones((2, 2), i64)) @ T(np.ones((2, 2), f32)), RuntimeError, ""),
    ("mm_1d", lambda m, T: m.mm(T(np.ones(3)), T(np.ones((3, 2)))), RuntimeError, "matrix"),
    ("mm_3d", lambda m, T: m.mm(T(np.ones((1, 2, 3))), T(np.ones((3, 2)))), RuntimeError, "matrix"),
    ("bmm_2d", lambda m, T: m.bmm(T(np.ones((2, 3))), T(np.ones((3, 2)))), RuntimeError, "3D"),
    ("bmm_batch", lambda m, T: m.bmm(T(np.ones((2, 2, 3))), T(np.ones((3, 3, 2)))), RuntimeError, ""),
    ("bmm_inner", lambda m, T: m.bmm(T(np.ones((2, 2, 3))), T(np.ones((2, 2, 2)))), RuntimeError, ""),
    ("addmm_inner", lambda m, T: m.addmm(T(np.ones((2, 2))), T(np.ones((2, 3))), T(np.ones((2, 2)))),
     RuntimeError, "cannot be multiplied"),
    ("addmm_input_shape", lambda m, T: m.addmm(T(np.ones((3, 3))), T(np.ones((2, 3))), T(np.ones((3, 2)))),
     RuntimeError, ""),
    ("linear_inner", lambda m, T: F_(m, "linear")(T(np.ones((2, 3))), T(np.ones((4, 2)))), RuntimeError,
     "cannot be multiplied"),
    ("matmul_bool", lambda m, T: T(np.ones((2, 2), bool)) @ T(np.ones((2, 2), bool)), RuntimeError, ""),
    # -- dims out of range --
    *[(f"dim_{name}", call, IndexError, "Dimension out of range") for name, call in [
        ("sum", lambda m, T: T(np.ones((2, 3))).sum(2)),
        ("sum_neg", lambda m, T: m.sum(T(np.ones((2, 3))), -3)),
        ("sum_tuple", lambda m, T: T(np.ones((2, 3))).sum((0, 5))),
        ("mean", lambda m, T: T(np.ones((2, 3))).mean(2)),
        ("prod", lambda m, T: T(np.ones((2, 3))).prod(2)),
        ("amax", lambda m, T: m.amax(T(np.ones((2, 3))), 2)),
        ("amin", lambda m, T: m.amin(T(np.ones((2, 3))), -3)),
        ("argmax", lambda m, T: T(np.ones((2, 3))).argmax(2)),
        ("argmin", lambda m, T: m.argmin(T(np.ones((2, 3))), -3)),
        ("max_dim", lambda m, T: T(np.ones((2, 3))).max(2)),
        ("min_dim", lambda m, T: m.min(T(np.ones((2, 3))), -3)),
        ("var", lambda m, T: T(np.ones((2, 3))).var(2)),
        ("std", lambda m, T: m.std(T(np.ones((2, 3))), (0, 2))),
        ("logsumexp", lambda m, T: m.logsumexp(T(np.ones((2, 3))), 2)),
        ("all", lambda m, T: T(np.ones((2, 3))).all(2)),
        ("any", lambda m, T: T(np.ones((2, 3))).any(-3)),
        ("norm", lambda m, T: T(np.ones((2, 3))).norm(dim=2)),
        ("softmax", lambda m, T: T(np.ones((2, 3))).softmax(2)),
        ("log_softmax", lambda m, T: m.log_softmax(T(np.ones((2, 3))), -3)),
        ("cumsum", lambda m, T: T(np.ones((2, 3))).cumsum(2)),
        ("cumsum_0d", lambda m, T: T(1.0).cumsum(1)),
        ("sum_0d", lambda m, T: T(1.0).sum(1)),
        ("softmax_0d", lambda m, T: T(1.0).softmax(-2)),
        ("cat", lambda m, T: m.cat([T(np.ones((2, 3))), T(np.ones((2, 3)))], 2)),
        ("stack", lambda m, T: m.stack([T(np.ones((2, 3)))], 3)),
        ("split", lambda m, T: T(np.ones((2, 3))).split(1, 2)),
        ("chunk", lambda m, T: T(np.ones((2, 3))).chunk(2, -3)),
        ("unbind", lambda m, T: T(np.ones((2, 3))).unbind(2)),
        ("index_select", lambda m, T: T(np.ones((2, 3))).index_select(2, T([0]))),
        ("gather", lambda m, T: T(np.ones((2, 3))).gather(2, T(np.zeros((2, 3), i64)))),
        ("scatter_add", lambda m, T: T(np.ones((2, 3))).scatter_add(2, T(np.zeros((2, 3), i64)),
                                                                    T(np.ones((2, 3))))),
        ("take_along_dim", lambda m, T: m.take_along_dim(T(np.ones((2, 3))), T(np.zeros((2, 3), i64)), 2)),
    ]],
    ("sum_duplicate_dims", lambda m, T: T(np.ones((2, 3))).sum((0, -2)), RuntimeError, "multiple times"),
    # -- integer tensors given to float-only ops --
    ("mean_int", lambda m, T: T([1, 2]).mean(), RuntimeError, "floating point"),
    ("mean_int_dim", lambda m, T: m.mean(T([[1, 2]]), 1), RuntimeError, "floating point"),
    ("mean_dtype_int", lambda m, T: T([1.0, 2.0]).mean(dtype=m.int64), RuntimeError, ""),
    ("var_int", lambda m, T: T([1, 2]).var(), RuntimeError, "floating point"),
    ("std_int", lambda m, T: m.std(T([1, 2])), RuntimeError, "floating point"),
    ("var_bool", lambda m, T: T([True, False]).var(), RuntimeError, ""),
    ("softmax_int", lambda m, T: T([1, 2]).softmax(0), RuntimeError, ""),
    ("log_softmax_int", lambda m, T: m.log_softmax(T([1, 2]), 0), RuntimeError, ""),
    ("norm_int", lambda m, T: T([1, 2]).norm(), RuntimeError, "floating point"),
    ("addcdiv_int", lambda m, T: m.addcdiv(T([1.0]), T([1]), T([2])), RuntimeError, "Integer division"),
    # -- in-place results that cannot be cast back to self's dtype --
    ("int_add_float_scalar", lambda m, T: T([1, 2]).add_(1.5), RuntimeError, "can't be cast"),
    ("int_iadd_float_scalar", lambda m, T: T([1, 2]).__iadd__(1.5), RuntimeError, "can't be cast"),
    ("int_add_float_tensor", lambda m, T: T([1, 2]).add_(T([1.0, 2.0])), RuntimeError, "can't be cast"),
    ("int_mul_0d_float", lambda m, T: T([1, 2]).mul_(T(2.0)), RuntimeError, "can't be cast"),
    ("int_imul_float", lambda m, T: T([1, 2], np.int32).__imul__(0.5), RuntimeError, "can't be cast"),
    ("int_div_", lambda m, T: T([1, 2]).div_(2), RuntimeError, "can't be cast"),
    ("int_itruediv", lambda m, T: T([1, 2]).__itruediv__(T([2, 2])), RuntimeError, "can't be cast"),
    ("int_sub_float", lambda m, T: T([1, 2], np.uint8).sub_(0.5), RuntimeError, "can't be cast"),
    ("int_ipow_float", lambda m, T: T([4, 9]).__ipow__(0.5), RuntimeError, ""),
    ("int_clamp_float", lambda m, T: T([1, 2]).clamp_(0.5), RuntimeError, "can't be cast"),
    ("int_addcmul_float", lambda m, T: T([1, 2]).addcmul_(T([1.0, 1.0]), T([1.0, 1.0])), RuntimeError,
     "can't be cast"),
    ("bool_add_int", lambda m, T: T([True]).add_(1), RuntimeError, "can't be cast"),
    ("bool_iadd_int_tensor", lambda m, T: T([True]).__iadd__(T([1])), RuntimeError, "can't be cast"),
    ("bool_mul_float", lambda m, T: T([True]).mul_(1.5), RuntimeError, "can't be cast"),
    # -- bool negation and subtraction --
    ("neg_bool_operator", lambda m, T: -T([True, False]), RuntimeError, ""),
    ("neg_bool", lambda m, T: m.neg(T([True])), RuntimeError, ""),
    ("negative_bool", lambda m, T: T([True]).negative(), RuntimeError, ""),
    ("neg_bool_inplace", lambda m, T: T([True]).neg_(), RuntimeError, ""),
    ("sub_bool_bool", lambda m, T: T([True]) - T([False]), RuntimeError, ""),
    ("sub_bool_bool_fn", lambda m, T: m.sub(T([True]), T([True])), RuntimeError, ""),
    ("sub_bool_bool_inplace", lambda m, T: T([True]).sub_(T([False])), RuntimeError, ""),
    ("sub_bool_scalar_bool", lambda m, T: T([True]) - True, RuntimeError, ""),
    # -- integer arithmetic errors --
    ("int_pow_negative_scalar", lambda m, T: T([2, 3]) ** -1, RuntimeError, "negative integer powers"),
    ("int_pow_negative_fn", lambda m, T: m.pow(T([2, 3], np.int32), -2), RuntimeError, "negative integer powers"),
    ("int_floordiv_zero", lambda m, T: T([4, 5]) // 0, RuntimeError, "ZeroDivisionError"),
    ("int_mod_zero", lambda m, T: T([4, 5]) % 0, RuntimeError, "ZeroDivisionError"),
    ("int_floordiv_zero_tensor", lambda m, T: m.floor_divide(T([4, 5]), T([1, 0])), RuntimeError,
     "ZeroDivisionError"),
    ("int_remainder_zero_tensor", lambda m, T: m.remainder(T([4, 5], np.int32), T([0, 1], np.int32)),
     RuntimeError, "ZeroDivisionError"),
    ("bool_floordiv", lambda m, T: T([True]) // T([True]), RuntimeError, ""),
    ("bool_pow_bool", lambda m, T: T([True]) ** T([True]), RuntimeError, ""),
    # -- unary ops PyTorch rejects on bool --
    ("abs_bool", lambda m, T: m.abs(T([True])), RuntimeError, ""),
    ("relu_bool", lambda m, T: m.relu(T([True])), RuntimeError, ""),
    ("floor_bool", lambda m, T: m.floor(T([True])), RuntimeError, ""),
    ("round_bool", lambda m, T: T([True]).round(), RuntimeError, ""),
    # -- bad arguments of data ops --
    ("where_cond_float", lambda m, T: m.where(T([1.0, 0.0]), T([1.0, 2.0]), T([3.0, 4.0])), RuntimeError,
     "boolean"),
    ("where_cond_int", lambda m, T: m.where(T([1, 0]), 1.0, 0.0), RuntimeError, "boolean"),
    ("clamp_no_bounds", lambda m, T: m.clamp(T([1.0])), RuntimeError, "At least one of 'min' or 'max'"),
    ("clamp_none_none", lambda m, T: T([1.0]).clamp(None, None), RuntimeError, "At least one"),
    ("cat_empty_list", lambda m, T: m.cat([]), RuntimeError, "non-empty"),
    ("cat_0d", lambda m, T: m.cat([T(1.0), T(2.0)]), RuntimeError, "zero-dimensional"),
    ("cat_rank", lambda m, T: m.cat([T(np.ones((2, 3))), T(np.ones((2, 3, 1)))]), RuntimeError, ""),
    ("cat_sizes", lambda m, T: m.cat([T(np.ones((2, 3))), T(np.ones((2, 4)))], 0), RuntimeError, "Sizes of tensors"),
    ("stack_empty_list", lambda m, T: m.stack([]), RuntimeError, ""),
    ("stack_sizes", lambda m, T: m.stack([T(np.ones(2)), T(np.ones(3))]), RuntimeError, "equal size"),
    ("split_sizes_sum", lambda m, T: T(np.ones(5)).split([1, 2]), RuntimeError, "sum exactly"),
    ("split_negative", lambda m, T: T(np.ones(5)).split(-1), RuntimeError, "non-negative"),
    ("split_zero_size", lambda m, T: T(np.ones(5)).split(0), RuntimeError, ""),
    ("split_0d", lambda m, T: m.split(T(1.0), 1), RuntimeError, ""),
    ("chunk_zero", lambda m, T: T(np.ones(5)).chunk(0), RuntimeError, "greater than 0"),
    ("chunk_0d", lambda m, T: T(1.0).chunk(2), RuntimeError, ""),
    ("unbind_0d", lambda m, T: T(1.0).unbind(0), IndexError, ""),
    ("index_select_2d_index", lambda m, T: T(np.ones((3, 3))).index_select(0, T([[0]])), IndexError, "vector"),
    ("index_select_oob", lambda m, T: T(np.ones((3, 3))).index_select(0, T([3])), IndexError, ""),
    ("gather_rank", lambda m, T: T(np.ones((3, 3))).gather(1, T([0])), RuntimeError, "same number of dimensions"),
    ("gather_index_too_big", lambda m, T: T(np.ones((3, 3))).gather(1, T(np.zeros((4, 1), i64))), RuntimeError,
     ""),
    ("take_along_dim_rank", lambda m, T: m.take_along_dim(T(np.ones((3, 3))), T([0]), 1), RuntimeError, ""),
    ("scatter_add_dtype", lambda m, T: T(np.zeros(3)).scatter_add(0, T([0]), T([1], np.int64)), RuntimeError,
     "dtype"),
    ("scatter_add_rank", lambda m, T: T(np.zeros((3, 3))).scatter_add(0, T([0]), T([1.0])), RuntimeError, ""),
    ("masked_fill_value_1d", lambda m, T: T(np.zeros(2)).masked_fill(T([True, False]), T([1.0])), RuntimeError,
     "0-dimensional"),
    ("fill_value_1d", lambda m, T: T(np.zeros(2)).fill_(T([1.0])), RuntimeError, "0-dimension"),
    ("one_hot_float", lambda m, T: F_(m, "one_hot")(T([1.0, 2.0])), RuntimeError, "index tensor"),
    ("one_hot_empty_infer", lambda m, T: F_(m, "one_hot")(T(np.zeros(0, i64))), RuntimeError, ""),
    ("pad_odd", lambda m, T: F_(m, "pad")(T(np.ones(3)), (1,)), RuntimeError, "divisible by 2"),
    ("pad_too_long", lambda m, T: F_(m, "pad")(T(np.ones(3)), (1, 1, 1, 1)), RuntimeError, ""),
    # PyTorch 1.13: IndexError "Dimension specified as -2 but tensor has no dimensions"; later
    # versions (and loom): RuntimeError "triu: input tensor must have at least 2 dimensions".
    ("tril_triu_0d", lambda m, T: m.triu(T(1.0)), (RuntimeError, IndexError), "at least 2 dimensions"),
    ("logsumexp_no_dim", lambda m, T: m.logsumexp(T(np.ones(3))), TypeError, ""),
    ("cumsum_no_dim", lambda m, T: m.cumsum(T(np.ones(3))), TypeError, ""),
    ("gelu_bad_approximate", lambda m, T: F_(m, "gelu")(T(np.ones(3)), approximate="fast"), RuntimeError, ""),
    ("int64_scalar_overflow", lambda m, T: T([1]) + 2**70, RuntimeError, ""),
    # -- numbers out of the range of the tensor's dtype --
    ("fill_out_of_range", lambda m, T: T([1, 2], np.uint8).fill_(300), RuntimeError, "without overflow"),
    ("fill_int32_out_of_range", lambda m, T: T([1, 2], np.int32).fill_(2**40), RuntimeError, "without overflow"),
    ("pad_value_out_of_range", lambda m, T: F_(m, "pad")(T([1, 2], np.uint8), (1, 0), value=300), RuntimeError,
     "without overflow"),
    ("pow_three_args", lambda m, T: pow(T(np.ones(3)), 2, 3), TypeError, ""),
    ("matmul_with_scalar", lambda m, T: T(np.ones((2, 2))) @ 2, TypeError, ""),
    ("add_string", lambda m, T: T(np.ones(2)) + "a", TypeError, ""),
    ("radd_list", lambda m, T: [1] + T(np.ones(2)), TypeError, ""),
    # -- subtraction with any bool operand --
    ("sub_bool_int_tensor", lambda m, T: T([True]) - T([1]), RuntimeError, "with a bool tensor is not supported"),
    ("sub_int_tensor_bool", lambda m, T: T([1]) - T([True]), RuntimeError, "with a bool tensor"),
    ("rsub_int_bool", lambda m, T: 1 - T([True]), RuntimeError, "with a bool tensor"),
    ("sub_bool_int_scalar", lambda m, T: T([True, False]) - 1, RuntimeError, "with a bool tensor"),
    ("sub_int_bool_scalar", lambda m, T: T([1]) - True, RuntimeError, "with a bool tensor"),
    ("sub_bool_float_tensor", lambda m, T: T([True]) - T([1.5]), RuntimeError, "with a bool tensor"),
    ("sub_bool_alpha", lambda m, T: m.sub(T([2]), T([True]), alpha=2), RuntimeError, "with a bool tensor"),
    ("isub_int_bool", lambda m, T: T([2]).__isub__(T([True])), RuntimeError, "with a bool tensor"),
    ("sub_two_bools_message", lambda m, T: T([True]) - True, RuntimeError, "with two bool tensors"),
    # -- float-only kernels --
    ("gelu_int", lambda m, T: F_(m, "gelu")(T([1, 2])), RuntimeError, "not implemented for 'Long'"),
    ("silu_int", lambda m, T: F_(m, "silu")(T([1, 2])), RuntimeError, "not implemented for 'Long'"),
    ("softplus_int", lambda m, T: F_(m, "softplus")(T([1, 2])), RuntimeError, "not implemented for 'Long'"),
    ("softplus_uint8", lambda m, T: F_(m, "softplus")(T([1, 2], np.uint8)), RuntimeError, "'Byte'"),
    ("gelu_bool", lambda m, T: F_(m, "gelu")(T([True])), RuntimeError, "not implemented for 'Bool'"),
    ("gelu_tanh_int", lambda m, T: F_(m, "gelu")(T([1]), approximate="tanh"), RuntimeError, "not implemented"),
    ("lerp_int", lambda m, T: m.lerp(T([1, 2]), T([3, 4]), 0.5), RuntimeError, "not implemented for 'Long'"),
    ("lerp_int_tensor_weight", lambda m, T: m.lerp(T([1, 2]), T([3, 4]), T([1, 1])), RuntimeError, ""),
    ("lerp_end_dtype", lambda m, T: m.lerp(T([1.0, 2.0], f32), T([3.0, 4.0]), 0.5), RuntimeError, "for `end`"),
    ("lerp_weight_dtype", lambda m, T: m.lerp(T([1.0], f32), T([3.0], f32), T([0.5])), RuntimeError, "`weight`"),
    ("round_decimals_int", lambda m, T: T([1, 2]).round(decimals=1), RuntimeError, "not implemented for 'Long'"),
    ("round_decimals_zero_int", lambda m, T: T([1, 2]).round(decimals=0), RuntimeError, "not implemented"),
    ("addcmul_bool", lambda m, T: m.addcmul(T([True]), T([True]), T([False])), RuntimeError, "'Bool'"),
    ("cumsum_bool_dtype", lambda m, T: m.cumsum(T([1, 2]), 0, dtype=m.bool), RuntimeError, "'Bool'"),
    ("bitwise_float", lambda m, T: T([1.0]) & T([2.0]), RuntimeError, "not implemented for 'Double'"),
    ("bitwise_or_float_scalar", lambda m, T: T([1, 2]) | 1.5, RuntimeError, "not implemented for 'Float'"),
    ("bitwise_not_float", lambda m, T: m.bitwise_not(T([1.0])), RuntimeError, "not implemented for 'Double'"),
    ("invert_float", lambda m, T: ~T([1.0]), TypeError, "only implemented on integer and Boolean"),
    ("iand_bool_int", lambda m, T: T([True]).__iand__(T([1])), RuntimeError, "can't be cast"),
    # -- alpha --
    ("add_int_float_alpha", lambda m, T: m.add(T([1, 2]), T([1, 2]), alpha=0.5), RuntimeError,
     "alpha must not be a floating point number"),
    ("add_int_scalar_float_alpha", lambda m, T: m.add(T([1, 2]), 2, alpha=1.0), RuntimeError, "alpha"),
    ("add_bool_alpha_int", lambda m, T: m.add(T([1, 2]), T([1, 2]), alpha=True), RuntimeError,
     "Boolean alpha only supported for Boolean results"),
    ("add_alpha_out_of_range", lambda m, T: m.add(T([1], np.int32), T([1], np.int32), alpha=2**40), RuntimeError,
     "without overflow"),
    # -- in-place writes into a tensor whose elements share memory --
    ("inplace_on_expanded", lambda m, T: T(np.ones(1)).expand(3).add_(1), RuntimeError,
     "more than one element of the written-to tensor refers to a single memory location"),
    ("mul_on_expanded", lambda m, T: T(np.zeros((1, 3))).expand(2, 3).mul_(2), RuntimeError, "single memory location"),
    ("iadd_on_expanded", lambda m, T: T(np.ones(1)).expand(3).__iadd__(1), RuntimeError, "single memory location"),
    ("copy_on_expanded", lambda m, T: T(np.ones(1)).expand(3).copy_(T(np.ones(3))), RuntimeError,
     "single memory location"),
    ("unary_on_expanded", lambda m, T: T(np.zeros((1, 3))).expand(3, 3).exp_(), RuntimeError,
     "single memory location"),
    ("clamp_on_expanded", lambda m, T: T(np.zeros((1, 3))).expand(3, 3).clamp_(min=0), RuntimeError,
     "single memory location"),
    ("on_transposed_expanded", lambda m, T: T(np.zeros((3, 1))).expand(3, 3).t().add_(1), RuntimeError,
     "single memory location"),
    # -- one_hot classes out of range (checked on the data) --
    ("one_hot_class_too_large", lambda m, T: F_(m, "one_hot")(T([0, 3]), 3), RuntimeError,
     "Class values must be smaller than num_classes"),
    ("one_hot_negative_class", lambda m, T: F_(m, "one_hot")(T([-1]), 3), RuntimeError,
     "Class values must be non-negative"),
    ("one_hot_negative_class_inferred", lambda m, T: F_(m, "one_hot")(T([-1, 2])), RuntimeError, "non-negative"),
    ("one_hot_zero_classes", lambda m, T: F_(m, "one_hot")(T([0]), 0), RuntimeError, "smaller than num_classes"),
    # -- indices of gather / scatter_add / index_select --
    ("gather_index_oob_type", lambda m, T: T(np.ones((2, 3))).gather(1, T([[3]])), RuntimeError,
     "index 3 is out of bounds for dimension 1 with size 3"),
    ("scatter_add_index_oob_type", lambda m, T: T(np.zeros(3)).scatter_add(0, T([3]), T([1.0])), RuntimeError,
     "index 3 is out of bounds"),
    ("gather_negative_index", lambda m, T: T(np.ones((2, 3))).gather(1, T([[-1]])), RuntimeError,
     "index -1 is out of bounds for dimension 1 with size 3"),
    ("scatter_add_negative_index", lambda m, T: T(np.zeros(3)).scatter_add(0, T([-1]), T([1.0])), RuntimeError,
     "index -1 is out of bounds for dimension 0 with size 3"),
    ("take_along_dim_negative_index", lambda m, T: m.take_along_dim(T(np.ones(3)), T([-1])), RuntimeError,
     "index -1 is out of bounds"),
    ("gather_float_index_type", lambda m, T: T(np.ones(3)).gather(0, T([0.0])), RuntimeError,
     "Expected dtype int64 for index"),
    ("gather_int32_index", lambda m, T: T(np.ones(3)).gather(0, T([0], np.int32)), RuntimeError, "int64"),
    ("scatter_add_int32_index", lambda m, T: T(np.zeros(3)).scatter_add(0, T([0], np.int32), T([1.0])),
     RuntimeError, "int64"),
    ("index_select_float_index_type", lambda m, T: T(np.ones(3)).index_select(0, T([0.0])), RuntimeError,
     "Expected dtype int32 or int64"),
    ("index_select_negative_index", lambda m, T: T(np.ones(3)).index_select(0, T([-1])), IndexError,
     "index out of range in self"),
    ("index_select_index_oob", lambda m, T: T(np.ones(3)).index_select(0, T([3])), IndexError, "out of range"),
    # -- other exception types --
    ("div_bad_rounding_mode_type", lambda m, T: m.div(T([1.0]), 2, rounding_mode="round"), RuntimeError,
     "expected rounding_mode to be one of None, 'trunc', or 'floor'"),
    ("max_of_empty_type", lambda m, T: T(np.zeros(0)).max(), RuntimeError,
     r"max\(\): Expected reduction dim to be specified for input.numel\(\) == 0"),
    ("min_of_empty", lambda m, T: T(np.zeros(0)).min(), RuntimeError, "Expected reduction dim to be specified"),
    ("amax_of_empty", lambda m, T: T(np.zeros(0)).amax(), RuntimeError, "Expected reduction dim to be specified"),
    ("amax_of_empty_dim", lambda m, T: T(np.zeros((0, 3))).amax(0), IndexError, "non-zero size"),
    ("max_other_with_dim", lambda m, T: T(np.ones(2)).max(dim=0, other=T(np.ones(2))), TypeError, ""),
    # -- numbers that do not fit the dtype they are converted to --
    ("clamp_max_out_of_range", lambda m, T: T([1, 200], np.int32).clamp(max=2**40), RuntimeError,
     "without overflow"),
    ("clamp_min_out_of_range_uint8", lambda m, T: T([1, 2], np.uint8).clamp(min=300), RuntimeError, "overflow"),
    ("clamp_float_out_of_range", lambda m, T: T([1.0], f32).clamp(max=1e300), RuntimeError, "overflow"),
    ("clamp_bool_number_bound", lambda m, T: T([True, False]).clamp(max=True), RuntimeError,
     "not implemented for 'Bool'"),
    ("masked_fill_out_of_range", lambda m, T: T([1, 2], np.uint8).masked_fill(T([True, False]), 300), RuntimeError,
     "without overflow"),
    ("masked_fill_float_into_int", lambda m, T: T([1, 2], np.int32).masked_fill(T([True, False]), 1e20),
     RuntimeError, "without overflow"),
    ("where_scalar_out_of_range", lambda m, T: m.where(T([True, False]), T([1, 2], np.int32), 2**40), RuntimeError,
     "without overflow"),
    ("where_scalar_first_out_of_range", lambda m, T: m.where(T([True, False]), 300, T([1, 2], np.uint8)),
     RuntimeError, "without overflow"),
    ("pow_exponent_out_of_range", lambda m, T: T([1, 2], np.uint8) ** 300, RuntimeError, "without overflow"),
    ("pow_base_out_of_range", lambda m, T: 300 ** T([1, 2], np.uint8), RuntimeError, "without overflow"),
    ("lerp_weight_out_of_range", lambda m, T: m.lerp(T([1.0], f32), T([2.0], f32), 1e300), RuntimeError,
     "without overflow"),
    ("setitem_advanced_out_of_range", lambda m, T: T([1, 2], np.uint8).__setitem__(T([0]), 300), RuntimeError,
     "without overflow"),
    ("setitem_mask_out_of_range", lambda m, T: T([1, 2], np.uint8).__setitem__(T([True, False]), 300),
     RuntimeError, "without overflow"),
    ("floordiv_by_wrapped_zero", lambda m, T: T([1, 2], np.uint8) // 256, RuntimeError, "ZeroDivisionError"),
    ("div_trunc_by_zero", lambda m, T: m.div(T([1, 2]), 0, rounding_mode="trunc"), RuntimeError,
     "ZeroDivisionError"),
    # -- arguments of the wrong type --
    ("softplus_beta_not_a_number", lambda m, T: F_(m, "softplus")(T([1.0, 2.0]), beta="a"), TypeError,
     "argument 'beta' must be Number, not str"),
    ("softplus_threshold_not_a_number", lambda m, T: F_(m, "softplus")(T([1.0, 2.0]), threshold="a"), TypeError,
     "argument 'threshold' must be Number"),
    ("softplus_beta_none", lambda m, T: F_(m, "softplus")(T([1.0, 2.0]), beta=None), TypeError, "must be Number"),
    ("gelu_approximate_not_a_string", lambda m, T: F_(m, "gelu")(T([1.0, 2.0]), approximate=3), TypeError,
     "argument 'approximate' must be str, not int"),
]


def run_isolated(code):
    """Runs `code` (with numpy as np and loom imported) in a fresh interpreter; returns its stdout.

    For cases about what a failure leaves behind in the process (the lazy device must stay usable):
    a regression there must not spread to the other tests."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    prog = "import numpy as np\nimport loom\n" + textwrap.dedent(code)
    done = subprocess.run([sys.executable, "-c", prog], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout



@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_error(device, case):
    name, call, exc, match = case
    with pytest.raises(exc) as torch_error:
        materialize(call(torch, _maker(torch, device)))
    with pytest.raises(exc, match=match or None) as loom_error:
        materialize(call(loom, _maker(loom, device)))
    if not isinstance(exc, tuple):  # several types: PyTorch versions differ, `match` says what loom says
        assert_same_error(loom_error.value, torch_error.value)


def test_same_error_means_same_type_and_a_shared_distinguishing_word():
    """The comparison every case above relies on (assert_same_error) accepts PyTorch's wording in
    loom's spelling and rejects another exception type or a message about another problem."""
    assert_same_error(RuntimeError('"abs" not implemented for \'Bool\''),
                      RuntimeError('"abs_cpu" not implemented for \'Bool\''))
    assert_same_error(RuntimeError("result type float32 can't be cast to the desired output type int64"),
                      RuntimeError("result type Float can't be cast to the desired output type long int"))
    with pytest.raises(AssertionError, match="another problem"):
        assert_same_error(RuntimeError("The size of tensor a (3) must match the size of tensor b (2) at "
                                       "non-singleton dimension 1"),
                          RuntimeError("expected scalar type Long but found Float"))
    with pytest.raises(AssertionError, match="PyTorch raised IndexError"):
        assert_same_error(RuntimeError("Dimension out of range"), IndexError("Dimension out of range"))


def test_failed_inplace_leaves_self_unchanged(device):
    """An in-place op that raises (shape or dtype) leaves self's values as they were."""
    T = _maker(loom, device)
    x = T([1, 2, 3])
    with pytest.raises(RuntimeError):
        x.add_(1.5)
    with pytest.raises(RuntimeError):
        x.mul_(T(np.ones((2, 3), i64)))
    with pytest.raises(RuntimeError):
        x.div_(2)
    assert x.tolist() == [1, 2, 3] and x.dtype is loom.int64


# ---- mixing lazy and eager tensors ----

MIXES = [
    ("add", lambda x, y: x + y),
    ("radd", lambda x, y: y + x),
    ("mul_fn", lambda x, y: loom.mul(y, x)),
    ("matmul", lambda x, y: x.view(1, 3) @ y.view(3, 1)),
    ("where_cond", lambda x, y: loom.where(y > 0, x, x)),
    ("where_other", lambda x, y: loom.where(x > 0, x, y)),
    ("cat", lambda x, y: loom.cat([x, y])),
    ("add_inplace", lambda x, y: x.add_(y)),
    ("iadd", lambda x, y: x.__iadd__(y)),
    ("masked_fill_mask", lambda x, y: x.masked_fill(y > 0, 1.0)),
    ("clamp_tensor_bound", lambda x, y: loom.clamp(x, min=y)),
    ("index_select_index", lambda x, y: x.index_select(0, y.long())),
]


@pytest.mark.parametrize("case", MIXES, ids=[c[0] for c in MIXES])
def test_mixing_lazy_and_eager_raises(device, case):
    """A tensor on `device` and one in the other mode (lazy / eager) in one op raise, like cpu and
    cuda tensors in PyTorch (copy_ and .to() move values between them)."""
    x = loom.ones(3, device=device)
    y = loom.ones(3, device="cpu" if device == "lazy" else "lazy")
    with pytest.raises(RuntimeError, match="same device"):
        materialize(case[1](x, y))


CPU_SCALAR_MIXES = [
    ("add", lambda s, x: x + s, [3.5, 3.5, 3.5]),
    ("radd", lambda s, x: s + x, [3.5, 3.5, 3.5]),
    ("lt", lambda s, x: x < s, [True, True, True]),
    ("where", lambda s, x: loom.where(x > 0, s, x), [2.5, 2.5, 2.5]),
    ("add_inplace", lambda s, x: x.add_(s), [3.5, 3.5, 3.5]),
    ("clamp_tensor_bound", lambda s, x: loom.clamp(x, max=s), [1.0, 1.0, 1.0]),
]


@pytest.mark.parametrize("case", CPU_SCALAR_MIXES, ids=[c[0] for c in CPU_SCALAR_MIXES])
def test_cpu_scalar_joins_lazy_op(case):
    """A zero-dim eager CPU tensor joins a lazy op as PyTorch's CPU scalars join CUDA ops (nanoGPT
    compares a loss resumed with map_location="lazy" against a fresh CPU one); the result is lazy."""
    x = loom.ones(3, device="lazy")
    out = case[1](loom.tensor(2.5), x)
    assert out.device.type == "lazy" and out.tolist() == case[2]


def test_cpu_scalar_is_lazy_scalars_peer():
    """Both zero-dim: the lazy one decides (PyTorch: a cuda and a CPU scalar give cuda)."""
    out = loom.tensor(2.0) * loom.tensor(3.0, device="lazy")
    assert out.device.type == "lazy" and out.item() == 6.0
    assert (loom.tensor(1.0, device="lazy") < loom.tensor(2.0)).item()


def test_cpu_scalar_gradient_reaches_it():
    """The CPU scalar's gradient is a CPU tensor, as PyTorch's for a CPU scalar in a CUDA op: its
    autograd engine moves a zero-dim gradient to the device of the input it belongs to (any other
    device mismatch is an error there). So a CPU leaf's .grad, a CPU intermediate's chain back to
    its leaf, and autograd.grad's answer all stay on the CPU; the lazy operand's stays lazy."""
    s = loom.tensor(2.0, requires_grad=True)
    x = loom.arange(3.0, device="lazy", requires_grad=True)
    (x * s).sum().backward()
    assert s.grad.device.type == "cpu" and s.grad.item() == 3.0
    assert x.grad.device.type == "lazy" and x.grad.tolist() == [2.0, 2.0, 2.0]
    leaf = loom.tensor(3.0, requires_grad=True)
    scaled = leaf * 2  # a CPU intermediate joins the lazy op
    (x * scaled + scaled).sum().backward()
    assert leaf.grad.device.type == "cpu" and leaf.grad.item() == 2.0 * (3.0 + 3.0)
    (g,) = loom.autograd.grad((x * s).sum(), s)
    assert g.device.type == "cpu" and g.item() == 3.0


def test_lazy_scalar_does_not_join_eager_op():
    """Only eager CPU scalars move (PyTorch: a cuda scalar never joins a CPU op), and a CPU tensor
    of one or more dims never does."""
    with pytest.raises(RuntimeError, match="same device"):
        loom.ones(3) + loom.tensor(2.0, device="lazy")
    with pytest.raises(RuntimeError, match="same device"):
        loom.ones(3, device="lazy") + loom.ones(1)
    with pytest.raises(RuntimeError, match="same device"):
        loom.tensor(2.0).add_(loom.tensor(1.0, device="lazy"))


def test_copy_between_lazy_and_eager_is_allowed(device):
    lz = loom.zeros(3, device="lazy")
    assert str(lz.device).startswith("lazy"), lz.device
    ea = loom.tensor([1.0, 2.0, 3.0], device=device)
    lz.copy_(ea)
    assert lz.tolist() == [1.0, 2.0, 3.0]
    ea2 = loom.zeros(3)
    ea2.copy_(lz * 2)
    assert ea2.tolist() == [2.0, 4.0, 6.0]


# ---- a failed lazy computation must not break later, unrelated ones ----

@pytest.mark.parametrize("device", ["cpu", "lazy"])
@pytest.mark.parametrize("failing", ["t.floor_divide_(0)", "t.fill_(300)", "t[loom.tensor([5], device=DEV)] = 1",
                                     "t.add_(t.gather(0, loom.tensor([7, 0], device=DEV)))",
                                     "t.floor_divide_(loom.tensor(np.array([1, 0], np.uint8), device=DEV))"])
def test_failed_inplace_does_not_poison_later_syncs(device, failing):
    """Eager raises at the op; lazy at the op when the check needs no data, else when t is read
    after the sync that ran it; either way, once the failing tensor is gone, new computations
    work."""
    out = run_isolated(f"""
        import gc
        DEV = {device!r}
        def attempt():
            t = loom.tensor(np.array([1, 2], np.uint8), device=DEV)
            {failing}
            t.tolist()
        try:
            attempt()
            print("no error")
        except (RuntimeError, IndexError) as e:
            print("raised:", e)
        gc.collect()
        print((loom.tensor([1.0, 2.0], device=DEV) + 1).tolist())
        """)
    assert out.splitlines()[0].startswith("raised"), out
    assert out.splitlines()[-1] == "[2.0, 3.0]", out


@pytest.mark.parametrize("device", ["cpu", "lazy"])
def test_pending_error_does_not_leak_into_unrelated_reads(device):
    out = run_isolated(f"""
        DEV = {device!r}
        try:
            x = loom.tensor([4, 5], device=DEV) // loom.tensor([0, 1], device=DEV)
        except RuntimeError:
            x = None  # eager raises at once
        y = loom.tensor([1.0, 2.0], device=DEV) + 1
        try:
            y.tolist()  # lazy: the sync that finds x's failure raises it (eager raised at x)
        except RuntimeError:
            pass
        print(y.tolist())  # y itself is not failed
        """)
    assert out.strip() == "[2.0, 3.0]", out
