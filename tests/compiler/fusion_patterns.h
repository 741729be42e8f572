// The fusion patterns the compiler is checked on for every target: pointwise
// chains (broadcast, transposed, float16/bfloat16, integer division with its
// error flag), reductions of every layout (persistent and looped rows, inner
// and column reductions, rows of one thread and rows shared by a block, empty
// rows), softmax / log_softmax / layer_norm / rms_norm / var_mean, arg-
// reductions, scans, horizontal fusion, data movement (cat, pad, gather,
// embedding with its index check), causal attention, MLPs and a GPT-2 block.
//
// Device-free, tests/compiler/test_cuda_codegen.cpp generates each pattern's
// CUDA program and compiles it with NVRTC; on a GPU, tests/backend/
// test_cuda_compile.cpp runs each compiled on CUDA against CUDA eager and CPU
// eager. Each pattern builds its inputs (and model) on the CPU from a fixed
// seed and moves them to the device asked for, so every device sees the same
// values.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "nn/models.h"
#include "smelt/nn.h"
#include "smelt/ops.h"

namespace smelt_test {

using PatternFn = std::function<std::vector<smelt::Tensor>(const std::vector<smelt::Tensor>&)>;

/// One pattern on one device: its inputs and the function (it may hold a
/// model on that device).
struct PatternCase {
  std::vector<smelt::Tensor> inputs;
  PatternFn fn;
};

struct FusionPattern {
  std::string name;
  std::function<PatternCase(smelt::Device)> make;
  double tol = 1e-5;  // compiled vs eager (absolute + relative)
  /// Kernels (generated, extern and fallback steps) the compiled graph has on
  /// CUDA, or -1 where the test does not pin it.
  int cuda_steps = -1;
};

namespace patterns_detail {

using smelt::Device;
using smelt::DType;
using smelt::Tensor;

inline std::vector<Tensor> on(Device d, std::vector<Tensor> ts) {
  for (auto& t : ts) t = t.to(d);
  return ts;
}

/// A pattern of a plain function of its inputs (made on the CPU with seed 1234).
template <class Inputs, class F>
FusionPattern fn_pattern(std::string name, Inputs inputs, F f, double tol = 1e-5,
                         int cuda_steps = -1) {
  return {std::move(name),
          [inputs, f](Device d) {
            smelt::manual_seed(1234);
            return PatternCase{on(d, inputs()), PatternFn(f)};
          },
          tol, cuda_steps};
}

}  // namespace patterns_detail

inline const std::vector<FusionPattern>& fusion_patterns() {
  using namespace patterns_detail;
  using namespace smelt;
  using V = std::vector<Tensor>;
  static const std::vector<FusionPattern> p = {
      fn_pattern(
          "pointwise_chain",
          [] {
            return V{randn({64, 100}), randn({100}), randn({64, 100})};
          },
          [](const V& a) { return V{sigmoid(a[0] * a[1] + a[2])}; }, 1e-6, 1),
      fn_pattern(
          "pointwise_odd_length",
          [] {
            return V{randn({1001}), randn({1001})};
          },
          [](const V& a) { return V{tanh(a[0]) * a[1] - 3}; }, 1e-6, 1),
      fn_pattern(
          "bfloat16_transposed_gelu",
          [] {
            return V{randn({32, 48}).to(DType::BFloat16)};
          },
          [](const V& a) { return V{gelu(a[0].t() * 2)}; }, 2e-2, 1),
      fn_pattern(
          "float16_chain", [] { return V{randn({4096}).to(DType::Float16)}; },
          [](const V& a) { return V{exp(a[0] * 0.5) + a[0]}; }, 1e-2, 1),
      fn_pattern(
          "int_remainder",
          [] {
            return V{arange(0, 4000).reshape({40, 100}).to(DType::Int32),
                     arange(1, 101).to(DType::Int32)};
          },
          [](const V& a) { return V{remainder(a[0], a[1]) + a[0]}; }, 0, 1),
      fn_pattern(
          "manual_softmax",
          [] {
            return V{randn({64, 1000})};
          },
          [](const V& a) {
            Tensor e = exp(a[0] - amax(a[0], {-1}, true));
            return V{e / sum(e, {-1}, true)};
          },
          1e-5, 1),
      fn_pattern(
          "softmax_long_rows",
          [] {
            return V{randn({6, 20000})};
          },
          [](const V& a) { return V{softmax(a[0], 1)}; }, 1e-5, 1),
      fn_pattern(
          "log_softmax_odd",
          [] {
            return V{randn({33, 77})};
          },
          [](const V& a) { return V{log_softmax(a[0], -1)}; }, 1e-5, 1),
      fn_pattern(
          "softmax_bfloat16",
          [] {
            return V{randn({16, 2048}).to(DType::BFloat16)};
          },
          [](const V& a) { return V{softmax(a[0], -1)}; }, 2e-2, 1),
      fn_pattern(
          "layer_norm",
          [] {
            return V{randn({16, 768}), randn({768}), randn({768})};
          },
          [](const V& a) { return V{layer_norm(a[0], {768}, a[1], a[2], 1e-5)}; }, 1e-4, 1),
      fn_pattern(
          "layer_norm_bfloat16",
          [] {
            return V{randn({8, 4096}).to(DType::BFloat16), randn({4096}).to(DType::BFloat16),
                     randn({4096}).to(DType::BFloat16)};
          },
          [](const V& a) { return V{layer_norm(a[0], {4096}, a[1], a[2], 1e-5)}; }, 5e-2, 1),
      fn_pattern(
          "var_mean",
          [] {
            return V{randn({20, 300}) + 5};
          },
          [](const V& a) {
            auto [v, m] = var_mean(a[0], {1});
            return V{v, m};
          },
          1e-5, 1),
      fn_pattern(
          "rms_norm",
          [] {
            return V{randn({8, 40}), randn({40})};
          },
          [](const V& a) { return V{rms_norm(a[0], {40}, a[1], 1e-6)}; }, 1e-5, 1),
      fn_pattern(
          "column_sum",
          [] {
            return V{randn({1000, 64})};
          },
          [](const V& a) { return V{sum(a[0] * 2, {0})}; }, 1e-4, 1),
      fn_pattern(
          "column_sum_many_columns",
          [] {
            return V{randn({64, 10000})};
          },
          [](const V& a) { return V{sum(a[0], {0})}; }, 1e-4, 1),
      fn_pattern(
          "amax_all",
          [] {
            return V{randn({50, 60})};
          },
          [](const V& a) { return V{amax(exp(a[0]))}; }, 1e-6, 1),
      fn_pattern(
          "mean_two_dims",
          [] {
            return V{randn({6, 7, 8})};
          },
          [](const V& a) {
            return V{mean(a[0], {0, 1}, true)};
          },
          1e-5, 1),
      fn_pattern(
          "short_rows",
          [] {
            return V{randn({1000, 3})};
          },
          [](const V& a) { return V{sum(a[0], {1}) / 3}; }, 1e-5, 1),
      fn_pattern(
          "empty_rows",
          [] {
            return V{randn({5, 0})};
          },
          [](const V& a) { return V{sum(a[0], {1}) + 1}; }, 0, -1),
      fn_pattern(
          "argmax_and_max",
          [] {
            return V{randn({40, 300})};
          },
          [](const V& a) {
            auto [v, i] = max(a[0], 1);
            return V{v, i, argmax(a[0] * -1, 1)};
          },
          0, -1),
      fn_pattern(
          "any_all_prod",
          [] {
            return V{randn({30, 50}), randint(-3, 4, {30, 50})};
          },
          [](const V& a) {
            return V{any(a[0] > 1.5, {1}), all(a[0] > -3.0, {1}), prod(a[1] + 5, 1)};
          },
          0, -1),
      fn_pattern(
          "cumsum_exp",
          [] {
            return V{randn({64, 100})};
          },
          [](const V& a) { return V{cumsum(exp(a[0]), 1) * 2}; }, 1e-5, 1),
      fn_pattern(
          "horizontal_sin_cos", [] { return V{randn({1000})}; },
          [](const V& a) {
            return V{sin(a[0]), cos(a[0])};
          },
          1e-6, 1),
      fn_pattern(
          "cat_pad",
          [] {
            return V{randn({4, 10}), randn({3, 10})};
          },
          [](const V& a) {
            return V{pad(cat({a[0] * 2, a[1]}, 0) + 1, {1, 2})};
          },
          1e-6, -1),
      fn_pattern(
          "gather_embedding",
          [] {
            return V{randn({10, 16}), randint(0, 10, {4, 5}), randint(0, 16, {10, 3})};
          },
          [](const V& a) {
            return V{embedding(a[0], a[1]) * 2, gather(a[0] + 1, 1, a[2])};
          },
          1e-6, -1),
      fn_pattern(
          "causal_attention",
          [] {
            return V{randn({2, 4, 16, 8}), randn({2, 4, 16, 8})};
          },
          [](const V& a) {
            Tensor s = matmul(a[0], a[1].transpose(-2, -1)) * 0.35;
            Tensor keep = tril(ones({16, 16}, TensorOptions(DType::Bool).device(a[0].device())));
            Tensor w = softmax(masked_fill(s, logical_not(keep), -1e30), -1);
            return V{matmul(w, a[1])};
          },
          1e-5, -1),
      // A GEMM of bfloat16 values converted to float32: on CUDA one bfloat16
      // GEMM with a float32 result (the converts folded in), then the softmax.
      fn_pattern(
          "gemm_cast_prologue",
          [] {
            return V{randn({2, 3, 40, 16}).to(DType::BFloat16),
                     randn({2, 3, 40, 16}).to(DType::BFloat16)};
          },
          [](const V& a) {
            return V{softmax(
                matmul(a[0].to(DType::Float32), a[1].to(DType::Float32).transpose(-2, -1)), -1)};
          },
          1e-5, 2),
      // q, k and v as gpt2's attention takes them: head views of one packed
      // [B, T, 3C] tensor. On CUDA the op stays whole: one step running the
      // fused attention kernel (FlashAttention-2).
      fn_pattern(
          "sdpa_bfloat16_causal",
          [] {
            return V{randn({2, 80, 384}).to(DType::BFloat16)};
          },
          [](const V& a) {
            auto heads = [&](int64_t i) {  // 4 heads of 32
              return a[0].narrow(2, i * 128, 128).reshape({2, 80, 4, 32}).transpose(1, 2);
            };
            return V{scaled_dot_product_attention(heads(0), heads(1), heads(2), std::nullopt, 0.0,
                                                  /*is_causal=*/true)};
          },
          2e-2, 1),
      // BERT's attention: a bool key-padding mask [B, 1, 1, S]. On CUDA the
      // op stays whole: the fused kernel reads the mask.
      fn_pattern(
          "sdpa_bfloat16_padding_mask",
          [] {
            Tensor lengths = from_vector<int64_t>({50, 80}, {2, 1, 1, 1});
            return V{randn({2, 80, 384}).to(DType::BFloat16),
                     lt(arange(80).view({1, 1, 1, 80}), lengths)};
          },
          [](const V& a) {
            auto heads = [&](int64_t i) {  // 4 heads of 32
              return a[0].narrow(2, i * 128, 128).reshape({2, 80, 4, 32}).transpose(1, 2);
            };
            return V{scaled_dot_product_attention(heads(0), heads(1), heads(2), a[1], 0.0,
                                                  /*is_causal=*/false)};
          },
          2e-2, 1),
      {"mlp_float32",
       [](Device d) {
         manual_seed(1234);
         auto m = nn::Sequential(nn::Linear(64, 128), nn::GELU(), nn::Linear(128, 10));
         m->to(d);
         return PatternCase{on(d, {randn({32, 64})}), [m](const V& a) { return V{m(a[0])}; }};
       },
       1e-5, -1},
      {"mlp_bfloat16",
       [](Device d) {
         manual_seed(1234);
         auto m = nn::Sequential(nn::Linear(64, 128), nn::GELU(), nn::Linear(128, 10));
         m->to(DType::BFloat16);
         m->to(d);
         return PatternCase{on(d, {randn({32, 64}).to(DType::BFloat16)}),
                            [m](const V& a) { return V{m(a[0])}; }};
       },
       5e-2, 3},  // on CUDA: GEMM + bias, GELU, GEMM + bias
      {"gpt2_block",
       [](Device d) {
         manual_seed(1234);
         models::GPT2Block b(64, 4);
         b->to(d);
         return PatternCase{on(d, {randn({2, 16, 64})}), [b](const V& a) { return V{b(a[0])}; }};
       },
       1e-4, -1},
  };
  return p;
}

}  // namespace smelt_test
