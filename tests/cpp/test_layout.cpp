// The view algebra: each view's shape rule, strides and errors (messages as PyTorch's).
#include <boost/test/unit_test.hpp>

#include "runtime/error.h"
#include "runtime/layout.h"

using namespace loom;

namespace {

Dims D(std::initializer_list<int64_t> v) { return Dims(v); }

// Checks that `fn` throws a loom::Error of `kind` whose message contains `text`.
template <typename Fn>
void expect_error(Fn fn, ErrorKind kind, const std::string& text) {
  try {
    fn();
    BOOST_FAIL("expected an error containing: " << text);
  } catch (const Error& e) {
    BOOST_TEST((e.kind() == kind));
    BOOST_TEST(std::string(e.what()).find(text) != std::string::npos, "message: " << e.what());
  }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(layout)

BOOST_AUTO_TEST_CASE(contiguous_layouts) {
  Layout l = Layout::contiguous(D({2, 3, 4}));
  BOOST_TEST((l.strides == D({12, 4, 1})));
  BOOST_TEST(l.numel() == 24);
  BOOST_TEST(l.is_contiguous());
  BOOST_TEST(l.storage_end() == 24);
  BOOST_TEST((contiguous_strides(D({2, 0, 3})) == D({3, 3, 1})));
  BOOST_TEST(Layout::contiguous(D({})).numel() == 1);
  BOOST_TEST(Layout::contiguous(D({0, 5})).storage_end() == 0);
  // Size-1 dims do not break contiguity whatever their stride.
  BOOST_TEST((Layout{D({2, 1, 3}), D({3, 99, 1}), 0}.is_contiguous()));
  // Empty layouts are contiguous whatever their strides, even where a later dim's stride is off.
  BOOST_TEST((Layout{D({0, 2}), D({3, 2}), 0}.is_contiguous()));
  BOOST_TEST((Layout{D({0, 2}), D({1, 0}), 0}.is_contiguous()));
  BOOST_TEST((Layout{D({3, 0, 2}), D({1, 3, 3}), 0}.is_contiguous()));
}

BOOST_AUTO_TEST_CASE(non_overlapping_and_dense) {
  BOOST_TEST(Layout::contiguous(D({2, 3})).is_non_overlapping_and_dense());
  BOOST_TEST(permute(Layout::contiguous(D({2, 3, 4})), D({2, 0, 1})).is_non_overlapping_and_dense());
  BOOST_TEST((Layout{D({1, 4}), D({7, 1}), 0}.is_non_overlapping_and_dense()));  // size-1 strides are free
  BOOST_TEST((Layout{D({0, 2}), D({3, 2}), 0}.is_non_overlapping_and_dense()));  // empty
  BOOST_TEST(!slice(Layout::contiguous(D({6})), 0, std::nullopt, std::nullopt, 2).is_non_overlapping_and_dense());
  BOOST_TEST(!slice(Layout::contiguous(D({4, 5})), 1, 1, std::nullopt).is_non_overlapping_and_dense());
  BOOST_TEST(!expand(Layout::contiguous(D({3, 1})), D({3, 4})).is_non_overlapping_and_dense());
  BOOST_TEST(!(Layout{D({3, 3}), D({1, 1}), 0}.is_non_overlapping_and_dense()));  // overlapping
}

BOOST_AUTO_TEST_CASE(preserved_strides_follow_pytorch) {
  // Dense layouts keep their strides exactly, size-1 and empty ones included.
  BOOST_TEST((preserved_strides(transpose(Layout::contiguous(D({3, 4})), 0, 1)) == D({1, 4})));
  BOOST_TEST((preserved_strides(Layout{D({1, 4}), D({7, 1}), 0}) == D({7, 1})));
  BOOST_TEST((preserved_strides(Layout{D({0, 2}), D({3, 2}), 0}) == D({3, 2})));
  BOOST_TEST((preserved_strides(Layout::contiguous(D({}))) == D({})));
  // Others get dense strides in the order of theirs (PyTorch's infer_dense_strides): expected
  // values are torch 1.13's clone().stride() of the same layouts.
  auto dense = [](std::initializer_list<int64_t> sizes, std::initializer_list<int64_t> strides) {
    return preserved_strides(Layout{D(sizes), D(strides), 0});
  };
  BOOST_TEST((dense({3, 4}, {2, 6}) == D({1, 3})));
  BOOST_TEST((dense({4, 2, 2}, {1, 12, 8}) == D({1, 8, 4})));
  BOOST_TEST((dense({3, 3, 2}, {1, 4, 12}) == D({1, 3, 9})));
  BOOST_TEST((dense({3, 4}, {1, 0}) == D({4, 1})));      // broadcast dims keep a contiguous place
  BOOST_TEST((dense({2, 3, 2}, {0, 1, 0}) == D({6, 2, 1})));
  BOOST_TEST((dense({3, 2, 2}, {2, 0, 1}) == D({4, 2, 1})));
  BOOST_TEST((dense({3, 1}, {4, 1}) == D({1, 1})));
  BOOST_TEST((dense({3, 1}, {2, 7}) == D({1, 3})));
  BOOST_TEST((dense({3, 3}, {1, 1}) == D({3, 1})));      // equal strides: order kept
  BOOST_TEST((dense({3, 2}, {1, 10}) == D({1, 3})));
  BOOST_TEST((dense({2, 3, 2}, {1, 20, 3}) == D({1, 4, 2})));
  BOOST_TEST((dense({2, 3, 4, 3}, {60, 1, 15, 6}) == D({36, 1, 9, 3})));  // sliced channels-last
  BOOST_TEST((dense({6}, {2}) == D({1})));
}

BOOST_AUTO_TEST_CASE(same_dense_order_of_layouts) {
  Layout t = transpose(Layout::contiguous(D({3, 4})), 0, 1);
  BOOST_TEST(same_dense_order(t, t));
  BOOST_TEST(!same_dense_order(t, Layout::contiguous(D({4, 3}))));
  BOOST_TEST(same_dense_order(Layout{D({2, 1}), D({1, 5}), 0}, Layout::contiguous(D({2, 1}))));
  Layout gappy = slice(Layout::contiguous(D({4, 6})), 1, 0, 3);
  BOOST_TEST(!same_dense_order(gappy, gappy));
}

BOOST_AUTO_TEST_CASE(permute_and_transpose) {
  Layout l = Layout::contiguous(D({2, 3, 4}));
  Layout p = permute(l, D({2, 0, 1}));
  BOOST_TEST((p.sizes == D({4, 2, 3})));
  BOOST_TEST((p.strides == D({1, 12, 4})));
  BOOST_TEST(!p.is_contiguous());
  Layout t = transpose(l, 0, -1);
  BOOST_TEST((t.sizes == D({4, 3, 2})));
  BOOST_TEST((t.strides == D({1, 4, 12})));
  expect_error([&] { permute(l, D({0, 0, 1})); }, ErrorKind::Runtime, "duplicate dims are not allowed");
  expect_error([&] { permute(l, D({0, 1})); }, ErrorKind::Runtime, "number of dims don't match");
  expect_error([&] { transpose(l, 0, 3); }, ErrorKind::Index,
               "Dimension out of range (expected to be in range of [-3, 2], but got 3)");
}

BOOST_AUTO_TEST_CASE(expand_broadcasts_with_stride_zero) {
  Layout l = Layout::contiguous(D({3, 1}));
  Layout e = expand(l, D({2, 3, 4}));
  BOOST_TEST((e.sizes == D({2, 3, 4})));
  BOOST_TEST((e.strides == D({0, 1, 0})));
  Layout keep = expand(l, D({-1, 5}));
  BOOST_TEST((keep.sizes == D({3, 5})));
  expect_error([&] { expand(Layout::contiguous(D({3, 4})), D({2, 3})); }, ErrorKind::Runtime,
               "The expanded size of the tensor (3) must match the existing size (4) at non-singleton dimension 1.  "
               "Target sizes: [2, 3].  Tensor sizes: [3, 4]");
  expect_error([&] { expand(l, D({5})); }, ErrorKind::Runtime, "must be greater or equal");
  expect_error([&] { expand(l, D({-1, 3, 1})); }, ErrorKind::Runtime, "leading, non-existing dimension 0");
}

BOOST_AUTO_TEST_CASE(expand_new_unit_dims_take_contiguous_strides) {
  // PyTorch's inferExpandGeometry: a new size-1 dim's stride is size * stride of the dim after it.
  BOOST_TEST((expand(Layout::contiguous(D({2})), D({1, 2})).strides == D({2, 1})));
  BOOST_TEST((expand(Layout::contiguous(D({2})), D({3, 1, 2})).strides == D({0, 2, 1})));
  BOOST_TEST((expand(Layout::contiguous(D({2})), D({1, 1, 2})).strides == D({2, 2, 1})));
  BOOST_TEST((expand(slice(Layout::contiguous(D({4})), 0, std::nullopt, std::nullopt, 2), D({1, 2})).strides ==
              D({4, 2})));
  BOOST_TEST((expand(Layout::contiguous(D({2, 1})), D({1, 2, 3})).strides == D({2, 1, 0})));
  BOOST_TEST((expand(Layout::contiguous(D({1})), D({1, 5})).strides == D({0, 0})));  // after a broadcast dim
  BOOST_TEST((expand(Layout::contiguous(D({0})), D({1, 0})).strides == D({0, 1})));
  BOOST_TEST((expand(Layout::contiguous(D({})), D({1, 1})).strides == D({0, 0})));  // 0-d: all stride 0
}

BOOST_AUTO_TEST_CASE(squeeze_unsqueeze) {
  Layout l = Layout::contiguous(D({1, 3, 1, 2}));
  BOOST_TEST((squeeze(l).sizes == D({3, 2})));
  BOOST_TEST((squeeze(l, 2).sizes == D({1, 3, 2})));
  BOOST_TEST((squeeze(l, 1).sizes == D({1, 3, 1, 2})));  // not size 1: unchanged
  Layout u = unsqueeze(Layout::contiguous(D({3, 2})), 1);
  BOOST_TEST((u.sizes == D({3, 1, 2})));
  BOOST_TEST(u.is_contiguous());
  BOOST_TEST((unsqueeze(Layout::contiguous(D({3, 2})), -1).sizes == D({3, 2, 1})));
  BOOST_TEST((unsqueeze(Layout::contiguous(D({})), 0).sizes == D({1})));
  expect_error([&] { unsqueeze(Layout::contiguous(D({3})), 3); }, ErrorKind::Index, "[-2, 1], but got 3");
}

BOOST_AUTO_TEST_CASE(slice_select_narrow) {
  Layout l = Layout::contiguous(D({10, 4}));
  Layout s = slice(l, 0, 2, 9, 3);  // rows 2, 5, 8
  BOOST_TEST((s.sizes == D({3, 4})));
  BOOST_TEST((s.strides == D({12, 1})));
  BOOST_TEST(s.offset == 8);
  BOOST_TEST(slice(l, 0, -3, std::nullopt).sizes[0] == 3);    // last three
  BOOST_TEST(slice(l, 0, 20, 30).sizes[0] == 0);              // clamped, empty
  BOOST_TEST(slice(l, 0, 7, 2).sizes[0] == 0);                // stop before start: empty
  BOOST_TEST(slice(l, 1, std::nullopt, std::nullopt, 5).sizes[1] == 1);
  expect_error([&] { slice(l, 0, 0, 5, 0); }, ErrorKind::Value, "step must be greater than zero");
  expect_error([&] { slice(l, 0, 0, 5, -1); }, ErrorKind::Value, "step must be greater than zero");
  Layout row = select(l, 0, -1);
  BOOST_TEST((row.sizes == D({4})));
  BOOST_TEST(row.offset == 36);
  expect_error([&] { select(l, 0, 10); }, ErrorKind::Index, "index 10 is out of bounds for dimension 0 with size 10");
  expect_error([&] { select(Layout::contiguous(D({})), 0, 0); }, ErrorKind::Index, "0-dim");
  Layout n = narrow(l, 1, 1, 2);
  BOOST_TEST((n.sizes == D({10, 2})));
  BOOST_TEST(n.offset == 1);
  expect_error([&] { narrow(l, 1, 3, 2); }, ErrorKind::Runtime, "exceeds dimension size");
  expect_error([&] { narrow(l, 1, 1, INT64_MAX); }, ErrorKind::Runtime, "exceeds dimension size");  // no overflow
  BOOST_TEST(slice(l, 0, 1, std::nullopt, INT64_MAX).sizes[0] == 1);  // huge steps do not overflow
  BOOST_TEST(slice(l, 0, 1, std::nullopt, INT64_MAX).offset == 4);      // (nor does stride * step)
  BOOST_TEST(slice(l, 1, 1, std::nullopt, INT64_MAX).strides[1] == 1);  // byte strides must fit too
  BOOST_TEST(slice(l, 0, 0, std::nullopt, 20).strides[0] == 80);       // past the end, but PyTorch's
}

BOOST_AUTO_TEST_CASE(view_without_copy) {
  Layout l = Layout::contiguous(D({2, 3, 4}));
  auto v = view(l, D({6, 4}));
  BOOST_TEST_REQUIRE(v.has_value());
  BOOST_TEST((v->strides == D({4, 1})));
  // A transposed tensor cannot be flattened without a copy...
  Layout t = transpose(Layout::contiguous(D({3, 4})), 0, 1);
  BOOST_TEST(!view(t, D({12})).has_value());
  // ...but can be split or merged along dims that stay contiguous among themselves.
  auto split = view(t, D({2, 2, 3}));
  BOOST_TEST_REQUIRE(split.has_value());
  BOOST_TEST((split->strides == D({2, 1, 4})));
  // Sliced rows: a chunk of whole rows still views as rows.
  Layout rows = slice(Layout::contiguous(D({8, 4})), 0, 2, 6);
  auto flat = view(rows, D({16}));
  BOOST_TEST_REQUIRE(flat.has_value());
  BOOST_TEST(flat->offset == 8);
  // Sliced columns cannot be flattened.
  BOOST_TEST(!view(slice(Layout::contiguous(D({8, 4})), 1, 0, 2), D({16})).has_value());
  // Expanded dims (stride 0) view as long as they are not merged with others.
  Layout e = expand(Layout::contiguous(D({1, 4})), D({3, 4}));
  auto ev = view(e, D({3, 2, 2}));
  BOOST_TEST_REQUIRE(ev.has_value());
  BOOST_TEST((ev->strides == D({0, 2, 1})));
  BOOST_TEST(!view(e, D({12})).has_value());
  // 0-d and empty tensors.
  BOOST_TEST((view(Layout::contiguous(D({})), D({1, 1}))->sizes == D({1, 1})));
  BOOST_TEST((view(Layout::contiguous(D({1, 1})), D({}))->sizes == D({})));
  BOOST_TEST((view(Layout::contiguous(D({0, 3})), D({3, 0}))->strides == D({1, 1})));
  // An empty tensor viewed as its own shape keeps its strides, as in PyTorch.
  Layout empty_t = transpose(Layout::contiguous(D({0, 4})), 0, 1);
  BOOST_TEST((view(empty_t, D({4, 0}))->strides == D({1, 4})));
  BOOST_TEST((view(empty_t, D({0, 4}))->strides == D({4, 1})));
}

BOOST_AUTO_TEST_CASE(infer_size_rules) {
  BOOST_TEST((infer_size(D({-1, 4}), 12) == D({3, 4})));
  BOOST_TEST((infer_size(D({2, -1, 2}), 12) == D({2, 3, 2})));
  expect_error([&] { infer_size(D({2, 7}), 12); }, ErrorKind::Runtime, "shape '[2, 7]' is invalid for input of size 12");
  expect_error([&] { infer_size(D({-1, -1}), 12); }, ErrorKind::Runtime, "only one dimension can be inferred");
  expect_error([&] { infer_size(D({-1, 5}), 12); }, ErrorKind::Runtime, "invalid for input of size 12");
  expect_error([&] { infer_size(D({0, -1}), 0); }, ErrorKind::Runtime, "invalid for input of size 0");
  expect_error([&] { check_sizes(D({2, -1})); }, ErrorKind::Runtime,
               "Trying to create tensor with negative dimension -1: [2, -1]");
  expect_error([&] { check_sizes(D({int64_t{1} << 32, int64_t{1} << 32, 4})); }, ErrorKind::Runtime,
               "Storage size calculation overflowed");
  BOOST_TEST(wrap_dim(-1, 0) == 0);  // 0-d tensors accept dim -1 and 0
}

// region_within: every element of the view must be the base element at the region's index.
namespace {

int64_t position(const Layout& l, int64_t flat) {
  int64_t pos = l.offset;
  for (int64_t d = l.ndim() - 1; d >= 0; --d) {
    pos += flat % l.sizes[d] * l.strides[d];
    flat /= l.sizes[d];
  }
  return pos;
}

void expect_region(const Layout& base, const Layout& view) {
  std::optional<Layout> region = region_within(base, view);
  BOOST_TEST_REQUIRE(region.has_value());
  BOOST_TEST((region->sizes == view.sizes));
  for (int64_t i = 0; i < view.numel(); ++i)
    BOOST_TEST(position(view, i) == position(base, position(*region, i)), "element " << i);
  // place_within inverts it where strides can (not where a region dim spans two base dims).
  if (std::optional<Layout> placed = place_within(base, *region)) {
    BOOST_TEST((placed->sizes == view.sizes));
    for (int64_t i = 0; i < view.numel(); ++i) BOOST_TEST(position(*placed, i) == position(view, i), "element " << i);
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(region_of_a_view_in_its_base) {
  // A contiguous base: the view's strides, its offset from the base's.
  Layout base = Layout::contiguous(D({4, 6}), 5);
  for (const Layout& v : {slice(base, 1, 1, 5, 2), select(base, 0, 2), transpose(base, 0, 1),
                          expand(unsqueeze(select(base, 1, 3), 1), D({4, 3})), *view(base, D({2, 12}))})
    expect_region(base, v);
  BOOST_TEST((region_within(base, select(base, 0, 2))->offset == 12));
  // A base in another dim order (a preserve-format result of a transposed input), and views of it
  // that step along its dims, also several view dims along one base dim.
  Layout permuted = transpose(Layout::contiguous(D({6, 4})), 0, 1);  // sizes 4 x 6, strides 1, 4
  for (const Layout& v : {slice(permuted, 0, 1, 3), select(permuted, 1, 5), transpose(permuted, 0, 1),
                          slice(slice(permuted, 1, 0, 6, 2), 0, 2, 4), *view(select(permuted, 0, 1), D({2, 3}))})
    expect_region(permuted, v);
  Layout gaps = slice(Layout::contiguous(D({3, 8})), 1, 0, 4);  // rows with gaps between them
  expect_region(gaps, select(gaps, 1, 2));
  expect_region(gaps, transpose(gaps, 0, 1));
  // Dims that are neighbours both in storage and in the base's order merge (view(-1) of them).
  Layout inner_pair = Layout{D({2, 3, 4}), D({1, 8, 2}), 0};
  expect_region(inner_pair, *view(inner_pair, D({2, 12})));
  expect_region(inner_pair, *view(select(inner_pair, 0, 1), D({12})));
  // Not a strided region: dims merged in storage order that the base orders the other way
  // (base.t().view(-1) of a base stored transposed), elements outside the base, a base whose
  // elements overlap.
  BOOST_TEST(!region_within(permuted, *view(transpose(permuted, 0, 1), D({24}))).has_value());
  BOOST_TEST(!region_within(base, Layout::contiguous(D({3}), 2)).has_value());
  BOOST_TEST(!region_within(base, Layout::contiguous(D({30}), 5)).has_value());
  BOOST_TEST(!region_within(expand(Layout::contiguous(D({1, 4})), D({3, 4})), Layout::contiguous(D({4}))).has_value());
  // An empty view lies anywhere.
  BOOST_TEST(region_within(base, slice(base, 0, 2, 2)).has_value());
}

BOOST_AUTO_TEST_CASE(place_a_region_in_a_strided_base) {
  // Every view of a base stored in another dim order that steps along its dims is placed.
  Layout permuted = transpose(Layout::contiguous(D({6, 4})), 0, 1);  // sizes 4 x 6, strides 1, 4
  for (const Layout& v : {slice(permuted, 0, 1, 3), select(permuted, 1, 5), transpose(permuted, 0, 1),
                          slice(slice(permuted, 1, 0, 6, 2), 0, 2, 4), slice(permuted, 1, 1, 6, 3)}) {
    std::optional<Layout> placed = place_within(permuted, *region_within(permuted, v));
    BOOST_TEST_REQUIRE(placed.has_value());
    for (int64_t i = 0; i < v.numel(); ++i) BOOST_TEST(position(*placed, i) == position(v, i), "element " << i);
  }
  // A contiguous base places any region, merged dims included.
  Layout base = Layout::contiguous(D({4, 6}), 5);
  std::optional<Layout> flat = place_within(base, Layout::contiguous(D({24})));
  BOOST_TEST_REQUIRE(flat.has_value());
  BOOST_TEST(flat->offset == 5);
  // Relative elements outside the base are refused.
  BOOST_TEST(!place_within(permuted, Layout{D({5}), D({6}), 0}).has_value());
}

BOOST_AUTO_TEST_SUITE_END()
