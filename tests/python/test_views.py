"""View ops share storage with their base, and have PyTorch's shapes, strides, offsets and values.

Each case applies the same op to a loom tensor and to a torch tensor holding the same values, then
compares shape, stride(), storage_offset() and values, checks that the loom result shares its
base's memory, and that writes through the view show up in the base."""

import numpy as np
import pytest

import loom
from conftest import assert_matches_torch, storage_base, to_numpy

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.filterwarnings("ignore:The use of `x.T`:UserWarning")


def pair(*shape, dtype="float32"):
    """A loom tensor and a torch tensor holding arange(numel) in the given shape."""
    n = int(np.prod(shape)) if shape else 1
    values = np.arange(n, dtype=dtype).reshape(shape)
    return loom.tensor(values), torch.tensor(values)


# (id, base shape, op). Every op here is a view in both libraries.
VIEW_CASES = [
    ("view_flat", (2, 3, 4), lambda x: x.view(-1)),
    ("view_2d", (2, 3, 4), lambda x: x.view(4, 6)),
    ("view_infer", (2, 3, 4), lambda x: x.view(2, -1, 3)),
    ("view_tuple", (2, 3, 4), lambda x: x.view((6, 4))),
    ("view_scalar_to_1", (), lambda x: x.view(1, 1)),
    ("view_to_scalar", (1,), lambda x: x.view(())),
    ("view_split_transposed_inner", (4, 6), lambda x: x.t().view(3, 2, 4)),
    ("view_merge_leading_of_permuted", (2, 3, 4), lambda x: x.permute(2, 0, 1).view(4, 6)),
    ("view_of_narrowed", (4, 6), lambda x: x[:, 2:].view(4, 2, 2)),
    ("view_of_empty", (0, 3), lambda x: x.view(3, 0)),
    ("view_size1_dims", (3, 1, 4), lambda x: x.view(1, 3, 4, 1)),
    ("reshape_contiguous", (2, 3, 4), lambda x: x.reshape(6, 4)),
    ("reshape_shape_kw", (2, 3, 4), lambda x: x.reshape(shape=(4, -1))),
    ("permute", (2, 3, 4), lambda x: x.permute(2, 0, 1)),
    ("permute_tuple", (2, 3, 4), lambda x: x.permute((1, 2, 0))),
    ("permute_list_negative", (2, 3, 4), lambda x: x.permute([-1, 0, -2])),
    ("permute_dims_kw", (2, 3, 4), lambda x: x.permute(dims=(0, 2, 1))),
    ("transpose", (2, 3, 4), lambda x: x.transpose(0, 2)),
    ("transpose_negative", (2, 3, 4), lambda x: x.transpose(-1, -2)),
    ("transpose_same", (2, 3), lambda x: x.transpose(1, 1)),
    ("transpose_0d", (), lambda x: x.transpose(0, -1)),
    ("t_2d", (3, 5), lambda x: x.t()),
    ("t_1d", (4,), lambda x: x.t()),
    ("t_0d", (), lambda x: x.t()),
    ("T_2d", (3, 5), lambda x: x.T),
    ("T_3d", (2, 3, 4), lambda x: x.T),
    ("mT", (2, 3, 4), lambda x: x.mT),
    ("expand", (3, 1), lambda x: x.expand(3, 4)),
    ("expand_keep", (3, 1), lambda x: x.expand(-1, 5)),
    ("expand_new_dims", (3, 1), lambda x: x.expand(2, 3, 4)),
    ("expand_tuple", (1, 4), lambda x: x.expand((3, 4))),
    ("expand_scalar", (), lambda x: x.expand(2, 3)),
    ("expand_same", (2, 3), lambda x: x.expand(2, 3)),
    ("squeeze_all", (1, 3, 1, 4, 1), lambda x: x.squeeze()),
    ("squeeze_dim", (1, 3, 1, 4), lambda x: x.squeeze(2)),
    ("squeeze_dim_negative", (3, 1), lambda x: x.squeeze(-1)),
    ("squeeze_dim_not_one", (1, 3, 1, 4), lambda x: x.squeeze(1)),
    ("squeeze_dim_kw", (1, 3), lambda x: x.squeeze(dim=0)),
    ("squeeze_0d", (), lambda x: x.squeeze()),
    ("unsqueeze_front", (3, 4), lambda x: x.unsqueeze(0)),
    ("unsqueeze_middle", (3, 4), lambda x: x.unsqueeze(1)),
    ("unsqueeze_back", (3, 4), lambda x: x.unsqueeze(-1)),
    ("unsqueeze_negative", (3, 4), lambda x: x.unsqueeze(-2)),
    ("unsqueeze_of_transposed", (3, 4), lambda x: x.t().unsqueeze(1)),
    ("unsqueeze_0d", (), lambda x: x.unsqueeze(0)),
    ("flatten", (2, 3, 4), lambda x: x.flatten()),
    ("flatten_start", (2, 3, 4), lambda x: x.flatten(1)),
    ("flatten_range", (2, 3, 4, 5), lambda x: x.flatten(1, 2)),
    ("flatten_kw", (2, 3, 4), lambda x: x.flatten(start_dim=0, end_dim=1)),
    ("flatten_negative", (2, 3, 4), lambda x: x.flatten(-2, -1)),
    ("unflatten", (2, 12), lambda x: x.unflatten(1, (3, 4))),
    ("unflatten_infer", (12, 2), lambda x: x.unflatten(0, (-1, 2))),
    ("unflatten_negative_dim", (2, 6), lambda x: x.unflatten(-1, (2, 3))),
    ("narrow", (4, 5), lambda x: x.narrow(1, 1, 3)),
    ("narrow_negative_start", (4, 5), lambda x: x.narrow(-1, -3, 2)),
    ("narrow_empty", (4, 5), lambda x: x.narrow(0, 4, 0)),
    ("narrow_dim0", (4, 5), lambda x: x.narrow(0, 1, 2)),
    ("select", (3, 4, 5), lambda x: x.select(1, 2)),
    ("select_negative", (3, 4, 5), lambda x: x.select(-1, -1)),
    ("select_to_0d", (5,), lambda x: x.select(0, 3)),
    ("detach", (2, 3), lambda x: x.detach()),
    ("contiguous_of_contiguous", (2, 3), lambda x: x.contiguous()),
    ("chain", (2, 3, 4, 5), lambda x: x.permute(3, 1, 0, 2).narrow(0, 1, 3).select(2, 1).unsqueeze(0).transpose(1, 3)),
    ("chain_expand", (3, 4), lambda x: x[:, 1].unsqueeze(0).expand(2, 3).t()),
]


@pytest.mark.parametrize("shape,op", [c[1:] for c in VIEW_CASES], ids=[c[0] for c in VIEW_CASES])
def test_view_matches_torch_and_shares_storage(shape, op):
    base, tbase = pair(*shape)
    v, tv = op(base), op(tbase)
    assert type(v.shape) is loom.Size
    assert_matches_torch(v, tv)
    assert v.storage_offset() == tv.storage_offset()
    assert v.is_contiguous() == tv.is_contiguous()
    assert v.dtype is base.dtype
    # The same memory: the view's storage starts where its base's does.
    assert storage_base(v) == storage_base(base)


WRITABLE_CASES = [c for c in VIEW_CASES if not c[0].startswith(("expand", "chain_expand"))]


@pytest.mark.parametrize("shape,op", [c[1:] for c in WRITABLE_CASES], ids=[c[0] for c in WRITABLE_CASES])
def test_writes_through_view_reach_base(shape, op):
    base, tbase = pair(*shape)
    v, tv = op(base), op(tbase)
    new = -1.0 - np.arange(tv.numel(), dtype=np.float32).reshape(tuple(tv.shape))
    # Through numpy, which shares the view's memory ...
    v.numpy()[...] = new
    tv[...] = torch.tensor(new)
    np.testing.assert_array_equal(base.numpy(), tbase.numpy())
    # ... and through __setitem__ on the view.
    v[...] = loom.tensor(new * 2)
    tv[...] = torch.tensor(new * 2)
    np.testing.assert_array_equal(base.numpy(), tbase.numpy())
    np.testing.assert_array_equal(to_numpy(v), tv.numpy())


def test_writes_through_base_reach_view():
    base = loom.zeros(3, 4)
    v = base.t()[1:]
    base.numpy()[2, 3] = 7.0
    assert v.tolist()[2][2] == 7.0
    base[0] = 1.0
    assert to_numpy(v)[:, 0].tolist() == [1.0, 1.0, 1.0]


def test_expand_shares_memory_with_zero_strides():
    base = loom.tensor([[1.0], [2.0], [3.0]])
    e = base.expand(2, 3, 4)
    assert e.stride() == (0, 1, 0)
    base.numpy()[1, 0] = 20.0
    assert to_numpy(e)[1, 1].tolist() == [20.0] * 4
    assert to_numpy(e)[0, 1].tolist() == [20.0] * 4


def test_expand_as_and_view_as_and_reshape_as():
    base, tbase = pair(3, 1)
    other, tother = pair(2, 3, 4)
    assert_matches_torch(base.expand_as(other), tbase.expand_as(tother))
    base, tbase = pair(4, 6)
    other, tother = pair(2, 12)
    assert_matches_torch(base.view_as(other), tbase.view_as(tother))
    assert_matches_torch(base.reshape_as(other), tbase.reshape_as(tother))
    assert storage_base(base.view_as(other)) == storage_base(base)
    # reshape_as of a transposed tensor must copy, as in torch.
    r, tr = base.t().reshape_as(other), tbase.t().reshape_as(tother)
    assert_matches_torch(r, tr)
    assert storage_base(r) != storage_base(base)


@pytest.mark.parametrize("shape,make,new_shape", [
    ((3, 4), lambda x: x.t(), (12,)),
    ((3, 4), lambda x: x.t(), (2, 6)),
    ((2, 3, 4), lambda x: x.permute(1, 0, 2), (6, 4)),
    ((4, 6), lambda x: x[:, :3], (12,)),
    ((3, 1), lambda x: x.expand(3, 4), (12,)),
    ((2, 3, 4), lambda x: x.transpose(0, 1), (-1,)),
], ids=["t_flat", "t_2x6", "permute", "strided", "expanded", "transposed_infer"])
def test_reshape_copies_when_view_impossible(shape, make, new_shape):
    base, tbase = pair(*shape)
    x, tx = make(base), make(tbase)
    with pytest.raises(RuntimeError):
        tx.view(*new_shape)
    with pytest.raises(RuntimeError, match="reshape"):
        x.view(*new_shape)
    r, tr = x.reshape(*new_shape), tx.reshape(*new_shape)
    assert_matches_torch(r, tr)
    assert r.is_contiguous()
    assert storage_base(r) != storage_base(base)
    # A copy: writing to it leaves the base alone.
    r.numpy()[...] = -5.0
    np.testing.assert_array_equal(base.numpy(), tbase.numpy())


@pytest.mark.parametrize("shape,make", [
    ((2, 3, 4), lambda x: x.reshape(4, 6)),
    ((3, 4), lambda x: x.t().reshape(4, 3)),  # same shape: reshape returns a view
    ((3, 4), lambda x: x.t().reshape(2, 2, 3)),  # splitting a dim of a transposed tensor is a view
    ((3, 1, 4), lambda x: x.transpose(0, 1).reshape(3, 4)),  # size-1 dims don't block a view
    ((4, 6), lambda x: x[1:3].reshape(12)),
    ((4, 6), lambda x: x[:, ::2].reshape(12)),  # strides (6, 2) still tile one chunk
], ids=["contiguous", "transposed_same_shape", "transposed_split", "size1_transpose", "row_slice", "step_slice"])
def test_reshape_is_a_view_when_possible(shape, make):
    base, tbase = pair(*shape)
    r, tr = make(base), make(tbase)
    assert_matches_torch(r, tr)
    assert r.storage_offset() == tr.storage_offset()
    assert storage_base(r) == storage_base(base)


def test_flatten_of_transposed_copies_like_torch():
    base, tbase = pair(3, 4)
    f, tf = base.t().flatten(), tbase.t().flatten()
    assert_matches_torch(f, tf)
    assert storage_base(f) != storage_base(base)
    z, tz = pair()
    assert_matches_torch(z.flatten(), tz.flatten())


def test_contiguous_returns_self_or_copy():
    base = loom.arange(6.0).view(2, 3)
    assert base.contiguous() is base
    t = base.t()
    c = t.contiguous()
    assert c is not t and c.is_contiguous() and not t.is_contiguous()
    assert c.stride() == (2, 1) and c.tolist() == t.tolist()
    assert storage_base(c) != storage_base(base)


def test_clone_is_a_copy():
    base, tbase = pair(2, 3)
    c = base.clone()
    assert_matches_torch(c, tbase.clone())
    assert c.data_ptr() != base.data_ptr()
    c[0, 0] = 100.0
    assert base.tolist()[0][0] == 0.0
    s = base[:, 1]
    sc = s.clone()
    assert sc.tolist() == s.tolist() and sc.storage_offset() == 0


def test_clone_preserves_strides_like_torch():
    base, tbase = pair(3, 4)
    assert base.t().clone().stride() == tbase.t().clone().stride()


# Layouts for PyTorch's preserve_format rule: dense ones (any dim order, size-1 and empty dims)
# keep their strides; others get dense strides in their dims' stride order (infer_dense_strides).
PRESERVE_CASES = [
    ("contiguous", (3, 4), lambda x: x),
    ("transposed", (3, 4), lambda x: x.t()),
    ("permuted", (2, 3, 4), lambda x: x.permute(2, 0, 1)),
    ("sliced_rows_of_transposed", (4, 6), lambda x: x.t()[::2]),
    ("sliced_cols_of_transposed", (4, 6), lambda x: x.t()[:, ::2]),
    ("sliced_permuted", (2, 3, 4), lambda x: x.permute(2, 0, 1)[:, :, ::2]),
    ("reversed_dims_sliced", (2, 3, 4), lambda x: x.permute(2, 1, 0)[1:]),
    ("offset", (4, 5), lambda x: x[1:, 1:]),
    ("offset_transposed", (5, 4), lambda x: x[1:].t()),
    ("step", (6,), lambda x: x[::2]),
    ("expanded", (3, 1), lambda x: x.expand(3, 4)),
    ("expanded_transposed", (3,), lambda x: x.expand(4, 3).t()),
    ("size1_column", (3, 4), lambda x: x[:, :1]),
    ("size1_row", (3, 4), lambda x: x[:1]),
    ("size1_transposed", (4, 1), lambda x: x.t()),
    ("empty_stepped", (0, 3), lambda x: x[:, ::2]),
    ("empty_transposed", (0, 3), lambda x: x.t()),
    ("empty_3d", (2, 0, 3), lambda x: x.transpose(0, 2)),
    ("channels_last", (2, 4, 5, 3), lambda x: x.permute(0, 3, 1, 2)),
    ("channels_last_sliced_w", (2, 4, 5, 3), lambda x: x.permute(0, 3, 1, 2)[..., ::2]),
    ("channels_last_sliced_c", (2, 4, 5, 3), lambda x: x.permute(0, 3, 1, 2)[:, ::2]),
    ("scalar", (), lambda x: x),
]


@pytest.mark.parametrize("shape,op", [c[1:] for c in PRESERVE_CASES], ids=[c[0] for c in PRESERVE_CASES])
def test_copies_preserve_format_like_torch(shape, op):
    base, tbase = pair(*shape)
    t, ref = op(base), op(tbase)
    assert_matches_torch(t.clone(), ref.clone())
    assert_matches_torch(t.double(), ref.double())
    assert_matches_torch(t.to(loom.float32, copy=True), ref.to(torch.float32, copy=True))
    for name in ("empty_like", "zeros_like", "ones_like", "rand_like", "randn_like"):
        assert getattr(loom, name)(t).stride() == getattr(torch, name)(ref).stride(), name
    assert loom.full_like(t, 2.0).stride() == torch.full_like(ref, 2.0).stride()
    assert loom.randint_like(t, 5).stride() == torch.randint_like(ref, 5).stride()


def test_random_like_values_follow_row_major_order_whatever_the_strides():
    # Element i (row-major) of a random result is the same whether the result is laid out
    # contiguously or in a permuted input's order.
    x = loom.zeros(2, 3, 4).permute(2, 0, 1)
    for like, plain in ((loom.rand_like, loom.rand), (loom.randn_like, loom.randn)):
        loom.manual_seed(7)
        permuted = like(x)
        loom.manual_seed(7)
        assert not permuted.is_contiguous()
        assert permuted.tolist() == plain(x.shape).tolist()
    loom.manual_seed(7)
    permuted = loom.randint_like(x, 100)
    loom.manual_seed(7)
    assert permuted.tolist() == loom.randint(100, x.shape).tolist()


def test_detach_shares_storage():
    base = loom.ones(3)
    d = base.detach()
    assert d is not base and d.data_ptr() == base.data_ptr()
    d[1] = 5.0
    assert base.tolist() == [1.0, 5.0, 1.0]


def test_iteration_yields_views():
    base, tbase = pair(3, 4)
    rows = list(base)
    assert len(rows) == 3
    for r, tr in zip(rows, tbase):
        assert_matches_torch(r, tr)
        assert storage_base(r) == storage_base(base)
    rows[1][2] = -1.0
    assert base.tolist()[1][2] == -1.0


@pytest.mark.parametrize("dtype", ["float64", "int32", "uint8", "bool", "float16"])
def test_views_of_other_dtypes(dtype):
    values = np.arange(24).reshape(2, 3, 4).astype(dtype)
    t, tt = loom.tensor(values), torch.tensor(values)
    for op in (lambda x: x.permute(2, 0, 1), lambda x: x[:, 1::2, None], lambda x: x.view(6, 4).t()):
        assert_matches_torch(op(t), op(tt))


def test_view_bfloat16():
    t = loom.arange(12, dtype=loom.bfloat16).view(3, 4)
    tt = torch.arange(12, dtype=torch.bfloat16).view(3, 4)
    assert_matches_torch(t.t()[1:], tt.t()[1:])


def test_squeeze_multiple_dims():
    base = loom.zeros(1, 3, 1, 4, 1)
    expected = np.zeros((1, 3, 1, 4, 1), np.float32)
    assert base.squeeze((0, 2)).shape == np.squeeze(expected, (0, 2)).shape == (3, 4, 1)
    assert base.squeeze((0, -1)).shape == np.squeeze(expected, (0, -1)).shape
    assert base.squeeze([4, 2, 0]).shape == np.squeeze(expected, (4, 2, 0)).shape == (3, 4)
    # PyTorch 2's documented rule: dims that are not size 1 are left alone.
    assert base.squeeze((0, 1)).shape == (3, 1, 4, 1)
    assert storage_base(base.squeeze((0, 2))) == storage_base(base)


def test_to_and_type_conversions_are_copies():
    base = loom.arange(6.0).view(2, 3)
    d = base.double()
    assert d.dtype is loom.float64 and storage_base(d) != storage_base(base)
    same = base.to(loom.float32)
    assert same is base


# ---------------------------------------------------------------------------------------------
# strides of degenerate dims (size 0 or 1), where loom and PyTorch diverge
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("make", [lambda m: m.zeros(0, 3)[:, ::2], lambda m: m.tensor(0.0).unsqueeze(0).expand(0, 2),
                                  lambda m: m.zeros(2, 0, 3).transpose(0, 2)],
                         ids=["step_slice", "expand", "transpose"])
def test_is_contiguous_of_empty_tensors(make):
    t, ref = make(loom), make(torch)
    assert ref.is_contiguous() and ref.contiguous() is ref
    assert t.is_contiguous()
    assert t.contiguous() is t


def test_size1_and_empty_strides_that_match():
    for make in (lambda m: m.zeros(3)[::2][:1].view(1), lambda m: m.zeros(1, 1)[::2], lambda m: m.zeros(3, 1).t(),
                 lambda m: m.zeros(4).unsqueeze(1), lambda m: m.zeros(2, 3)[:, :1].unsqueeze(0)):
        assert make(loom).stride() == make(torch).stride()


def test_size1_and_empty_strides_expand_new_unit_dim():
    assert loom.zeros(2).expand(1, 2).stride() == torch.zeros(2).expand(1, 2).stride() == (2, 1)
    for make in (lambda m: m.zeros(2).expand(3, 1, 2), lambda m: m.zeros(4)[::2].expand(1, 1, 2),
                 lambda m: m.zeros(2, 3).t().expand(1, 3, 2), lambda m: m.zeros(1).expand(1, 5),
                 lambda m: m.zeros(0).expand(1, 0), lambda m: m.tensor(1.0).expand(1, 1)):
        assert make(loom).stride() == make(torch).stride()


def test_size1_and_empty_strides_flatten_single_dim_is_self():
    t, ref = loom.zeros(2, 3), torch.zeros(2, 3)
    assert ref.flatten(1, 1) is ref
    assert t.flatten(1, 1) is t
    assert loom.zeros(0).unsqueeze(0).flatten(0, 0).stride() == torch.zeros(0).unsqueeze(0).flatten(0, 0).stride()


def test_size1_and_empty_strides_view_of_empty_same_shape():
    assert loom.zeros(0, 4).t().view(4, 0).stride() == torch.zeros(0, 4).t().view(4, 0).stride()
    for make in (lambda m: m.zeros(0, 3)[:, ::2].reshape(0, 2), lambda m: m.zeros(2, 0, 3).transpose(0, 2).view(3, 0, 2),
                 lambda m: m.zeros(0, 4).t().view(2, 2, 0)):
        assert make(loom).stride() == make(torch).stride()
