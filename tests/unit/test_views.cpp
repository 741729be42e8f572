#include <gtest/gtest.h>

#include <numeric>
#include <string>

#include "core/tensor_impl.h"
#include "smelt/ops.h"
#include "test_util.h"

using namespace smelt;
using smelt_test::error_of;
using smelt_test::iota;
using smelt_test::vals;

namespace {
bool same_storage(const Tensor& a, const Tensor& b) { return a.storage() == b.storage(); }
}  // namespace

TEST(Views, ViewAndReshape) {
  Tensor x = iota({2, 3, 4});
  Tensor v = x.view({4, -1});
  EXPECT_EQ(v.sizes(), (Shape{4, 6}));
  EXPECT_TRUE(same_storage(v, x));
  EXPECT_EQ(vals(v), vals(x));
  Tensor r = x.reshape({24});
  EXPECT_TRUE(same_storage(r, x));
  // PyTorch's message for a bad size.
  std::string msg = error_of([&] { x.reshape({5, -1}); });
  EXPECT_NE(msg.find("shape '[5, -1]' is invalid for input of size 24"), std::string::npos);
  EXPECT_THROW(x.view({-1, -1}), Error);
  EXPECT_THROW(x.view({7}), Error);
  // view of a transposed tensor is refused; reshape copies.
  Tensor t = iota({3, 4}).t();
  msg = error_of([&] { t.view({12}); });
  EXPECT_NE(msg.find("view size is not compatible"), std::string::npos);
  EXPECT_NE(msg.find("reshape"), std::string::npos);
  Tensor rc = t.reshape({12});
  EXPECT_FALSE(same_storage(rc, t));
  EXPECT_EQ(vals(rc), (std::vector<double>{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11}));
  // A view that keeps the transposed dims apart is allowed (computeStride).
  Tensor t3 = iota({2, 3, 4}).permute({1, 0, 2});  // [3, 2, 4]
  EXPECT_THROW(t3.view({3, 8}), Error);            // dims 1 and 2 are not adjacent in memory
  Tensor split4 = t3.view({3, 2, 2, 2});
  EXPECT_TRUE(same_storage(split4, t3));
  EXPECT_EQ(vals(split4), vals(t3));
  Tensor sl = iota({2, 3, 4}).slice(2, 0, 2);  // [2, 3, 2] strides [12, 4, 1]
  Tensor merged = sl.view({6, 2});
  EXPECT_EQ(merged.strides(), (Shape{4, 1}));
  EXPECT_EQ(vals(merged), vals(sl));
  Tensor split = iota({6, 4}).t().view({2, 2, 6});  // splitting a dim is always a view
  EXPECT_EQ(split.strides(), (Shape{2, 1, 4}));
  // 0-dim and empty.
  Tensor s = scalar_tensor(3.0);
  EXPECT_EQ(s.view({1, 1}).sizes(), (Shape{1, 1}));
  EXPECT_EQ(s.reshape({}).dim(), 0);
  EXPECT_EQ(zeros({0, 3}).view({3, 0}).sizes(), (Shape{3, 0}));
  EXPECT_THROW(zeros({0, 3}).view({-1, 0}), Error);
  EXPECT_EQ(zeros({0, 3}).reshape({-1}).sizes(), (Shape{0}));
}

TEST(Views, AliasingBothWays) {
  Tensor x = zeros({3, 4});
  Tensor v = x.view({12});
  static_cast<float*>(v.data_ptr())[5] = 7;  // write via view
  EXPECT_EQ(vals(x)[5], 7.0);
  Tensor row = x.select(0, 2);
  static_cast<float*>(x.data_ptr())[9] = 3;  // write via base: row 2, col 1
  EXPECT_EQ(vals(row)[1], 3.0);
  // copy_ into a narrow view writes the base.
  Tensor y = full({1, 4}, 2.0);
  x.narrow(0, 1, 1).copy_(y);
  EXPECT_EQ(vals(x), (std::vector<double>{0, 0, 0, 0, 2, 2, 2, 2, 0, 3, 0, 0}));
  // copy_ into a strided column.
  x.slice(1, 0, std::nullopt, 2).copy_(full({3, 2}, -1.0));
  EXPECT_EQ(vals(x.select(1, 0)), (std::vector<double>{-1, -1, -1}));
  EXPECT_EQ(vals(x.select(1, 3)), (std::vector<double>{0, 2, 0}));
}

TEST(Views, PermuteTransposeT) {
  Tensor x = iota({2, 3, 4});
  Tensor p = x.permute({2, 0, 1});
  EXPECT_EQ(p.sizes(), (Shape{4, 2, 3}));
  EXPECT_EQ(p.strides(), (Shape{1, 12, 4}));
  EXPECT_EQ(vals(p.select(0, 1).select(0, 1)), (std::vector<double>{13, 17, 21}));
  EXPECT_EQ(x.permute({-1, 0, 1}).sizes(), p.sizes());
  EXPECT_THROW(x.permute({0, 1}), Error);
  EXPECT_NE(error_of([&] { x.permute({0, 0, 1}); }).find("permute"), std::string::npos);
  Tensor tr = x.transpose(0, 2);
  EXPECT_EQ(tr.sizes(), (Shape{4, 3, 2}));
  EXPECT_EQ(vals(tr.select(0, 3).select(0, 2)), (std::vector<double>{11, 23}));
  EXPECT_THROW(x.transpose(0, 3), Error);
  Tensor m = iota({2, 3});
  EXPECT_EQ(vals(m.t()), (std::vector<double>{0, 3, 1, 4, 2, 5}));
  EXPECT_EQ(iota({3}).t().sizes(), (Shape{3}));
  EXPECT_EQ(scalar_tensor(1.0).t().dim(), 0);
  EXPECT_NE(error_of([&] { x.t(); }).find("t: "), std::string::npos);
  EXPECT_EQ(scalar_tensor(1.0).transpose(0, -1).dim(), 0);
}

TEST(Views, SqueezeUnsqueeze) {
  Tensor x = iota({3, 1, 4, 1});
  EXPECT_EQ(x.squeeze().sizes(), (Shape{3, 4}));
  EXPECT_EQ(x.squeeze(1).sizes(), (Shape{3, 4, 1}));
  EXPECT_EQ(x.squeeze(0).sizes(), (Shape{3, 1, 4, 1}));  // not size 1: no-op
  EXPECT_EQ(squeeze(x, std::vector<int64_t>{1, -1}).sizes(), (Shape{3, 4}));
  EXPECT_THROW(x.squeeze(4), Error);
  EXPECT_EQ(scalar_tensor(1.0).squeeze(0).dim(), 0);
  Tensor y = iota({2, 3, 4});
  EXPECT_EQ(y.unsqueeze(-1).sizes(), (Shape{2, 3, 4, 1}));
  EXPECT_EQ(y.unsqueeze(0).sizes(), (Shape{1, 2, 3, 4}));
  EXPECT_EQ(y.unsqueeze(1).strides(), (Shape{12, 12, 4, 1}));
  EXPECT_EQ(y.unsqueeze(3).strides(), (Shape{12, 4, 1, 1}));
  EXPECT_THROW(y.unsqueeze(4), Error);
  EXPECT_EQ(scalar_tensor(2.0).unsqueeze(0).sizes(), (Shape{1}));
}

TEST(Views, ExpandBroadcastTo) {
  Tensor x = iota({3, 1});
  Tensor e = x.expand({2, 3, 4});
  EXPECT_EQ(e.sizes(), (Shape{2, 3, 4}));
  EXPECT_EQ(e.strides(), (Shape{0, 1, 0}));
  EXPECT_EQ(vals(e.select(0, 1).select(0, 2)), (std::vector<double>{2, 2, 2, 2}));
  EXPECT_EQ(x.expand({-1, 5}).sizes(), (Shape{3, 5}));
  EXPECT_EQ(broadcast_to(x, {3, 2}).sizes(), (Shape{3, 2}));
  std::string msg = error_of([] { iota({3, 2}).expand({3, 4}); });
  EXPECT_NE(msg.find("The expanded size of the tensor (4) must match the existing size (2) at "
                     "non-singleton dimension 1"),
            std::string::npos);
  EXPECT_THROW(x.expand({3}), Error);
  EXPECT_THROW(x.expand({-1, 3, 1}), Error);
  EXPECT_EQ(scalar_tensor(1.0).expand({2, 2}).strides(), (Shape{0, 0}));
  EXPECT_EQ(iota({1}).expand({0}).numel(), 0);
}

TEST(Views, FlattenUnflatten) {
  Tensor x = iota({2, 3, 4});
  EXPECT_EQ(x.flatten().sizes(), (Shape{24}));
  EXPECT_EQ(x.flatten(1).sizes(), (Shape{2, 12}));
  EXPECT_EQ(x.flatten(0, 1).sizes(), (Shape{6, 4}));
  EXPECT_TRUE(same_storage(x.flatten(1), x));
  EXPECT_THROW(x.flatten(2, 1), Error);
  EXPECT_EQ(scalar_tensor(1.0).flatten().sizes(), (Shape{1}));
  Tensor tf = x.transpose(0, 1).flatten();  // needs a copy
  EXPECT_EQ(vals(tf)[4], 12.0);
  Tensor u = x.unflatten(2, {2, 2});
  EXPECT_EQ(u.sizes(), (Shape{2, 3, 2, 2}));
  EXPECT_EQ(x.unflatten(-1, {-1, 2}).sizes(), (Shape{2, 3, 2, 2}));
  EXPECT_NE(error_of([&] { x.unflatten(1, {2, 2}); }).find("unflatten"), std::string::npos);
}

TEST(Views, NarrowSliceSelect) {
  Tensor x = iota({2, 3, 4});
  Tensor n = x.narrow(2, 1, 2);
  EXPECT_EQ(n.sizes(), (Shape{2, 3, 2}));
  EXPECT_EQ(vals(n.select(0, 0).select(0, 0)), (std::vector<double>{1, 2}));
  EXPECT_EQ(x.narrow(0, -1, 1).storage_offset(), 12);
  EXPECT_THROW(x.narrow(2, 3, 2), Error);
  EXPECT_THROW(x.narrow(2, 5, 0), Error);
  EXPECT_EQ(x.narrow(2, 4, 0).numel(), 0);
  Tensor y = iota({10, 3});
  Tensor s = y.slice(0, 1, 9, 3);  // rows 1, 4, 7
  EXPECT_EQ(s.sizes(), (Shape{3, 3}));
  EXPECT_EQ(vals(s.select(1, 0)), (std::vector<double>{3, 12, 21}));
  EXPECT_EQ(y.slice(0, -3, std::nullopt).sizes()[0], 3);
  EXPECT_EQ(y.slice(0, 5, 100).sizes()[0], 5);   // end clamps
  EXPECT_EQ(y.slice(0, -100, 2).sizes()[0], 2);  // start clamps
  EXPECT_EQ(y.slice(0, 8, 2).sizes()[0], 0);     // empty
  EXPECT_EQ(y.slice(0, 20, 30).sizes()[0], 0);
  EXPECT_EQ(y.slice(0, std::nullopt, std::nullopt, 4).sizes()[0], 3);  // 0, 4, 8
  EXPECT_NE(error_of([&] { y.slice(0, 0, 5, 0); }).find("slice"), std::string::npos);
  EXPECT_THROW(y.slice(0, 0, 5, -1), Error);
  EXPECT_THROW(scalar_tensor(1.0).slice(0, 0, 1), Error);
  Tensor sel = x.select(1, -1);
  EXPECT_EQ(sel.sizes(), (Shape{2, 4}));
  EXPECT_EQ(vals(sel.select(0, 1)), (std::vector<double>{20, 21, 22, 23}));
  EXPECT_EQ(x[1].sizes(), (Shape{3, 4}));
  std::string msg = error_of([&] { x.select(0, 2); });
  EXPECT_NE(msg.find("select"), std::string::npos);
  EXPECT_NE(msg.find("out of range"), std::string::npos);
  EXPECT_THROW(x.select(0, -3), Error);
  EXPECT_THROW(scalar_tensor(1.0).select(0, 0), Error);
}

TEST(Views, SplitChunk) {
  Tensor x = iota({7, 2});
  auto s = split(x, 3);
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[2].sizes(), (Shape{1, 2}));
  EXPECT_EQ(vals(s[1]), (std::vector<double>{6, 7, 8, 9, 10, 11}));
  auto s2 = split(x, std::vector<int64_t>{2, 0, 5});
  ASSERT_EQ(s2.size(), 3u);
  EXPECT_EQ(s2[1].sizes(), (Shape{0, 2}));
  EXPECT_EQ(s2[2].sizes(), (Shape{5, 2}));
  EXPECT_NE(error_of([&] {
              split(x, std::vector<int64_t>{1, 1});
            }).find("sum exactly to 7"),
            std::string::npos);
  EXPECT_THROW(split(x, 0), Error);
  EXPECT_EQ(split(x, 10).size(), 1u);
  EXPECT_EQ(split(x, 1, 1).size(), 2u);
  auto c = chunk(x, 3);
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c[0].sizes(), (Shape{3, 2}));
  EXPECT_EQ(c[2].sizes(), (Shape{1, 2}));
  EXPECT_EQ(chunk(iota({6}), 4).size(), 3u);  // ceil(6/4)=2 per chunk -> 3 chunks
  EXPECT_EQ(chunk(zeros({0, 2}), 3).size(), 3u);
  EXPECT_THROW(chunk(x, 0), Error);
  EXPECT_TRUE(same_storage(c[1], x));
}

TEST(Views, WorkOnTracers) {
  // A data-less (traced) tensor: views only touch metadata.
  auto impl = std::make_shared<TensorImpl>();
  impl->sizes = {2, 3};
  impl->strides = {3, 1};
  impl->storage = Storage::tracer(24, Device(), std::make_shared<detail::TraceValue>());
  Tensor t(impl);
  ASSERT_TRUE(t.is_tracer());
  Tensor v = t.t().unsqueeze(0).expand({4, 3, 2}).select(0, 1).slice(0, 1, 3).narrow(1, 0, 1);
  EXPECT_TRUE(v.is_tracer());
  EXPECT_EQ(v.sizes(), (Shape{2, 1}));
  EXPECT_EQ(t.view({6}).storage(), t.storage());
  EXPECT_EQ(chunk(t, 2, 1).size(), 2u);
  EXPECT_THROW(t.str(), GraphBreak);
}

// As in PyTorch, a tensor with no elements is contiguous whatever its strides
// (a device copy or a view of it may carry any): autograd's in-place writes
// into its views and kernels that need contiguity accept it.
TEST(Views, EmptyTensorsAreContiguous) {
  Tensor e = zeros({2, 1, 2, 0});
  EXPECT_TRUE(e.is_contiguous());
  EXPECT_TRUE(e.permute({3, 2, 1, 0}).is_contiguous());
  EXPECT_TRUE(e.transpose(0, 2).is_contiguous());
  EXPECT_FALSE(zeros({2, 3}).t().is_contiguous());
  Tensor leaf = zeros({2, 0, 3}).permute({2, 1, 0}).clone().requires_grad_();
  Tensor y = leaf * 1.0;
  y.narrow(0, 0, 1).add_(1.0);
  y.sum().backward();
  EXPECT_EQ(leaf.grad().sizes(), (Shape{3, 0, 2}));
}
