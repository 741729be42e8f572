// Gradients of the shared reference models against PyTorch autograd's
// (../shared/data/training.safetensors, described by training.json): the seed
// MLP's cross-entropy loss and every gradient for its stored input, and the
// GPT-2 block's gradients for a stored upstream gradient, in float32 and in
// float64.
//
// Tolerance: max|smelt - torch| / max|torch| per tensor (models::compare). Float32
// gradients are sums of many products rounded differently on each side (matrix
// products of length up to 1024, reductions over the batch): 1e-5 (observed:
// below 8e-7). The seed MLP's float64 gradients are stored rounded to float32:
// 1e-6 (observed 6e-8); the GPT-2 block's are float64: 1e-12 (observed 8e-16).
#include <gtest/gtest.h>

#include "nn/models.h"
#include "smelt/smelt.h"

using namespace smelt;

namespace {
const std::string kShared = SMELT_SHARED_DIR;
constexpr double kRelTolF32 = 1e-5;
constexpr double kRelTolStoredF32 = 1e-6;  // float64 results vs PyTorch's rounded to float32
constexpr double kRelTolF64 = 1e-12;

/// Every parameter's .grad() and the input's against PyTorch's under
/// "<prefix>/<tag>/" ("f32" or "f64"), within `tol`.
void expect_grads(const models::SharedData& refs, const std::string& prefix, const std::string& tag,
                  nn::Module& model, const Tensor& input, double tol) {
  for (const auto& [name, p] : model.named_parameters()) {
    ASSERT_TRUE(p.grad().defined()) << name;
    auto a = models::compare(p.grad(), refs.at(prefix + "/" + tag + "/grad/" + name));
    EXPECT_LT(a.rel_err(), tol) << tag << " " << name << ": max abs err " << a.max_abs_err;
  }
  auto a = models::compare(input.grad(), refs.at(prefix + "/" + tag + "/grad_input"));
  EXPECT_LT(a.rel_err(), tol) << tag << " grad_input: max abs err " << a.max_abs_err;
}

TEST(TrainingGrads, SeedMlpCrossEntropyMatchesPyTorch) {
  auto data = models::SharedData::load(kShared, "seed_mlp");
  auto refs = models::SharedData::load(kShared, "training");
  auto model = models::load_seed_mlp(data);
  const int64_t n = data.at("input").size(0);
  std::vector<int64_t> t(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) t[i] = (7 * i) % 10;
  Tensor target = from_vector(t, {n});
  for (const std::string tag : {"f32", "f64"}) {
    if (tag == "f64") model->to(DType::Float64);
    const DType dt = tag == "f32" ? DType::Float32 : DType::Float64;
    Tensor x = data.at("input").to(dt).clone().requires_grad_();
    Tensor loss = cross_entropy(model(x), target);
    loss.backward();
    const double want = refs.at("seed_mlp/" + tag + "/loss").item<double>();
    EXPECT_NEAR(loss.item<double>(), want, (tag == "f32" ? 1e-6 : 1e-12) * std::abs(want)) << tag;
    expect_grads(refs, "seed_mlp", tag, *model, x, tag == "f32" ? kRelTolF32 : kRelTolStoredF32);
    for (auto& p : model->parameters()) p.mutable_grad() = Tensor();
  }
}

TEST(TrainingGrads, Gpt2BlockMatchesPyTorch) {
  auto data = models::SharedData::load(kShared, "gpt2_block");
  auto refs = models::SharedData::load(kShared, "training");
  auto block = models::load_gpt2_block(data);
  block->eval();
  for (const std::string tag : {"f32", "f64"}) {
    if (tag == "f64") block->to(DType::Float64);
    const DType dt = tag == "f32" ? DType::Float32 : DType::Float64;
    Tensor x = data.at("input").to(dt).clone().requires_grad_();
    block(x).backward(refs.at("gpt2_block/grad_output").to(dt));
    expect_grads(refs, "gpt2_block", tag, *block, x, tag == "f32" ? kRelTolF32 : kRelTolF64);
    for (auto& p : block->parameters()) p.mutable_grad() = Tensor();
  }
}

}  // namespace
