// The three reference models of ../shared/data, made by PyTorch 2.11 on CPU,
// rebuilt with smelt::nn and compared with PyTorch's outputs.
//
// Tolerance: models::compare gives max|smelt - torch| / max|torch| over the
// whole output (a norm-wise relative error, robust to outputs near zero).
// float32 models must agree to 1e-5: both sides round every op to float32, and
// only the summation order of the matrix products differs (a few ulps per
// product of length <= 1024). float64 runs must agree to 1e-12.
#include <gtest/gtest.h>

#include <cmath>

#include "nn/models.h"
#include "smelt/smelt.h"
#include "test_util.h"

using namespace smelt;

namespace {
const std::string kShared = SMELT_SHARED_DIR;
constexpr double kRelTolF32 = 1e-5;
constexpr double kRelTolF64 = 1e-12;

std::vector<int64_t> argmax_rows(const Tensor& logits) {
  return argmax(logits, 1).to_vector<int64_t>();
}
}  // namespace

TEST(SharedModels, SeedMlpMatchesPyTorch) {
  auto data = models::SharedData::load(kShared, "seed_mlp");
  auto model = models::load_seed_mlp(data);
  EXPECT_EQ(model->parameters().size(), 6u);
  Tensor y = model(data.at("input"));
  ASSERT_EQ(y.sizes(), (Shape{256, 10}));
  ASSERT_EQ(y.dtype(), DType::Float32);
  auto a = models::compare(y, data.at("output"));
  EXPECT_LT(a.rel_err(), kRelTolF32) << "max abs err " << a.max_abs_err;
  // Same weights in float64.
  model->to(DType::Float64);
  Tensor y64 = model(data.at("input").to(DType::Float64));
  ASSERT_EQ(y64.dtype(), DType::Float64);
  auto a64 = models::compare(y64, data.at("output_f64"));
  EXPECT_LT(a64.rel_err(), kRelTolF64) << "max abs err " << a64.max_abs_err;
}

TEST(SharedModels, DigitsMlpPredictionsAndAccuracy) {
  auto data = models::SharedData::load(kShared, "digits_mlp");
  auto model = models::load_digits_mlp(data);
  model->eval();
  Tensor logits = model(data.at("x_test"));
  ASSERT_EQ(logits.sizes(), (Shape{360, 10}));
  auto a = models::compare(logits, data.at("logits_test"));
  EXPECT_LT(a.rel_err(), kRelTolF32) << "max abs err " << a.max_abs_err;
  auto ours = argmax_rows(logits);
  auto theirs = argmax_rows(data.at("logits_test"));
  auto labels = data.at("y_test").to_vector<int64_t>();
  ASSERT_EQ(ours.size(), 360u);
  int agree = 0, correct = 0;
  for (size_t i = 0; i < ours.size(); ++i) {
    agree += ours[i] == theirs[i];
    correct += ours[i] == labels[i];
  }
  EXPECT_EQ(agree, 360);
  const double acc = correct / 360.0;
  const double torch_acc = models::digits_test_accuracy(kShared);
  EXPECT_NEAR(torch_acc, 348.0 / 360.0, 1e-7);
  EXPECT_NEAR(acc, torch_acc, 1e-7);  // PyTorch stored it as a float32
}

TEST(SharedModels, Gpt2BlockMatchesPyTorch) {
  auto data = models::SharedData::load(kShared, "gpt2_block");
  auto block = models::load_gpt2_block(data);
  EXPECT_EQ(block->named_parameters().size(), 12u);
  block->eval();
  Tensor y = block(data.at("input"));
  ASSERT_EQ(y.sizes(), (Shape{2, 16, 64}));
  auto a = models::compare(y, data.at("output"));
  EXPECT_LT(a.rel_err(), kRelTolF32) << "max abs err " << a.max_abs_err;
  block->to(DType::Float64);
  Tensor y64 = block(data.at("input").to(DType::Float64));
  auto a64 = models::compare(y64, data.at("output_f64"));
  EXPECT_LT(a64.rel_err(), kRelTolF64) << "max abs err " << a64.max_abs_err;
}

TEST(SharedModels, LoadErrorsNameTheProblem) {
  EXPECT_THROW(models::SharedData::load(kShared, "no_such_model"), Error);
  auto data = models::SharedData::load(kShared, "digits_mlp");
  try {
    data.at("nope");
    ADD_FAILURE() << "expected Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("nope"), std::string::npos);
  }
  // The digits weights do not fit the seed model.
  auto seed = models::make_seed_mlp();
  try {
    seed->load_state_dict(data.weights_for(*seed));
    ADD_FAILURE() << "expected Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("size mismatch"), std::string::npos) << e.what();
  }
}

// ---- the same models on a GPU (eager) -----------------------------------------
// Same tolerances: cuBLAS computes float32 products in float32 by default.

TEST(SharedModelsCuda, SeedMlpMatchesPyTorch) {
  SMELT_SKIP_WITHOUT_CUDA();
  auto data = models::SharedData::load(kShared, "seed_mlp");
  auto model = models::load_seed_mlp(data);
  model->to(Device("cuda"));
  Tensor y = model(data.at("input").cuda());
  ASSERT_TRUE(y.is_cuda());
  auto a = models::compare(y, data.at("output"));
  EXPECT_LT(a.rel_err(), kRelTolF32) << "max abs err " << a.max_abs_err;
  model->to(DType::Float64);
  auto a64 =
      models::compare(model(data.at("input").to(DType::Float64).cuda()), data.at("output_f64"));
  EXPECT_LT(a64.rel_err(), kRelTolF64) << "max abs err " << a64.max_abs_err;
}

TEST(SharedModelsCuda, DigitsMlpKeepsItsAccuracy) {
  SMELT_SKIP_WITHOUT_CUDA();
  auto data = models::SharedData::load(kShared, "digits_mlp");
  auto model = models::load_digits_mlp(data);
  model->eval();
  model->to(Device("cuda"));
  Tensor logits = model(data.at("x_test").cuda());
  auto a = models::compare(logits, data.at("logits_test"));
  EXPECT_LT(a.rel_err(), kRelTolF32) << "max abs err " << a.max_abs_err;
  auto ours = argmax_rows(logits), theirs = argmax_rows(data.at("logits_test"));
  auto labels = data.at("y_test").to_vector<int64_t>();
  int agree = 0, correct = 0;
  for (size_t i = 0; i < ours.size(); ++i) {
    agree += ours[i] == theirs[i];
    correct += ours[i] == labels[i];
  }
  EXPECT_EQ(agree, 360);
  EXPECT_EQ(correct, 348);  // 96.67%, PyTorch's test accuracy
}

TEST(SharedModelsCuda, Gpt2BlockMatchesPyTorch) {
  SMELT_SKIP_WITHOUT_CUDA();
  auto data = models::SharedData::load(kShared, "gpt2_block");
  auto block = models::load_gpt2_block(data);
  block->eval();
  block->to(Device("cuda"));
  auto a = models::compare(block(data.at("input").cuda()), data.at("output"));
  EXPECT_LT(a.rel_err(), kRelTolF32) << "max abs err " << a.max_abs_err;
  block->to(DType::Float64);
  auto a64 =
      models::compare(block(data.at("input").to(DType::Float64).cuda()), data.at("output_f64"));
  EXPECT_LT(a64.rel_err(), kRelTolF64) << "max abs err " << a64.max_abs_err;
}

// ---- the same models through smelt::compile ----------------------------------

TEST(SharedModelsCompiled, SeedMlpMatchesPyTorch) {
  NoGradGuard no_grad;  // compiled inference (module parameters require grad)
  auto data = models::SharedData::load(kShared, "seed_mlp");
  auto model = models::load_seed_mlp(data);
  auto compiled = smelt::compile(model);
  auto a = models::compare(compiled(data.at("input")), data.at("output"));
  EXPECT_LT(a.rel_err(), kRelTolF32) << "max abs err " << a.max_abs_err;
  // Linear + GELU become GEMMs with their epilogue: three library calls, no other kernel.
  EXPECT_EQ(compiled.stats().kernels, 3);
  for (auto& k : compiled.stats().kernel_names)
    EXPECT_EQ(k.rfind("cpp_tem_fused_addmm", 0), 0u) << k;
}

TEST(SharedModelsCompiled, DigitsMlpSamePredictions) {
  NoGradGuard no_grad;  // compiled inference (module parameters require grad)
  auto data = models::SharedData::load(kShared, "digits_mlp");
  auto model = models::load_digits_mlp(data);
  model->eval();
  auto compiled = smelt::compile(model);
  Tensor logits = compiled(data.at("x_test"));
  auto a = models::compare(logits, data.at("logits_test"));
  EXPECT_LT(a.rel_err(), kRelTolF32) << "max abs err " << a.max_abs_err;
  auto ours = argmax_rows(logits), theirs = argmax_rows(data.at("logits_test"));
  auto labels = data.at("y_test").to_vector<int64_t>();
  int agree = 0, correct = 0;
  for (size_t i = 0; i < ours.size(); ++i) {
    agree += ours[i] == theirs[i];
    correct += ours[i] == labels[i];
  }
  EXPECT_EQ(agree, 360);
  EXPECT_EQ(correct, 348);  // 96.67%, PyTorch's test accuracy
}

TEST(SharedModelsCompiled, Gpt2BlockMatchesPyTorch) {
  NoGradGuard no_grad;  // compiled inference (module parameters require grad)
  auto data = models::SharedData::load(kShared, "gpt2_block");
  auto block = models::load_gpt2_block(data);
  block->eval();
  auto compiled = smelt::compile(block);
  auto a = models::compare(compiled(data.at("input")), data.at("output"));
  EXPECT_LT(a.rel_err(), kRelTolF32) << "max abs err " << a.max_abs_err;
  EXPECT_EQ(compiled.stats().graph_breaks, 0);
  // Attention is one step running the CPU's fused float32 kernel (writing
  // the [B, T, H, D] copy through a permuted view), every other op is
  // lowered; the residual adds ride on the projections' GEMMs.
  int residual_gemms = 0, attention = 0;
  for (auto& k : compiled.stats().kernel_names) {
    residual_gemms += k.rfind("cpp_tem_fused_addmm_add_", 0) == 0;
    attention += k == "fallback_scaled_dot_product_attention";
    if (k != "fallback_scaled_dot_product_attention") {
      EXPECT_EQ(k.rfind("fallback_", 0), std::string::npos) << k;
    }
  }
  EXPECT_EQ(residual_gemms, 2);
  EXPECT_EQ(attention, 1);
  EXPECT_EQ(compiled.stats().kernels, 7);
  block->to(DType::Float64);
  auto compiled64 = smelt::compile(block);
  auto a64 =
      models::compare(compiled64(data.at("input").to(DType::Float64)), data.at("output_f64"));
  EXPECT_LT(a64.rel_err(), kRelTolF64) << "max abs err " << a64.max_abs_err;
}
