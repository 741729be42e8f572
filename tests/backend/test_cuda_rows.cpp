// The CUDA row kernels against the CPU, over the row shapes that pick their
// different configurations (and batch_norm's per-channel normalization, a
// block per plane): softmax, log_softmax and layer_norm held in
// registers (one thread, a part of a warp, a warp or several warps per row;
// 16-byte loads or, for rows that are not 16-byte aligned, one element at a
// time; a last block with fewer rows than it holds) or read three times (rows
// too long for registers); and the last-dim reductions with their unrolled
// loads, one-vector loop and scalar tail. Each test skips itself where there
// is no GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "backend/backend.h"
#ifdef SMELT_TEST_CUDA_BACKEND
#include "backend/cuda/cudnn_attention.h"
#endif
#include "smelt/cuda.h"
#include "smelt/ops.h"
#include "test_util.h"

using namespace smelt;
using smelt_test::expect_close;
using smelt_test::vals;

namespace {

const Device kGpu("cuda:0");

/// Relative tolerance of a row op's result in `dt` against the CPU's (which
/// sums in another order; float16 / bfloat16 results may round the other way).
double tol_of(DType dt) {
  return dt == float64 ? 1e-12 : dt == float32 ? 2e-6 : dt == float16 ? 2e-3 : 1.6e-2;
}

/// Row lengths: short rows (several per warp), rows of a warp, of several
/// warps, of the most the registers hold, unaligned ones and longer ones.
const int64_t kLengths[] = {1,    3,    8,    16,   100,  256,  768,  1000,
                            1024, 4095, 4096, 4097, 6000, 8192, 8200, 20000};

}  // namespace

TEST(CudaRows, SoftmaxAndLogSoftmaxMatchTheCpu) {
  SMELT_SKIP_WITHOUT_CUDA();
  for (DType dt : {float32, float64, bfloat16, float16}) {
    for (int64_t n : kLengths) {
      for (int64_t rows : {1, 3, 131}) {
        if (rows * n > 3000000) continue;
        manual_seed(n + rows);
        Tensor x = (randn({rows, n}) * 3).to(dt);
        for (bool log : {false, true}) {
          SCOPED_TRACE(::testing::Message() << dtype_name(dt) << " rows " << rows << " n " << n
                                            << (log ? " log_softmax" : " softmax"));
          Tensor want = log ? log_softmax(x, -1) : softmax(x, -1);
          Tensor got = log ? log_softmax(x.to(kGpu), -1) : softmax(x.to(kGpu), -1);
          expect_close(vals(got), vals(want), tol_of(dt));
        }
      }
    }
  }
}

TEST(CudaRows, SoftmaxOfRowsWithNaNAndInfinities) {
  SMELT_SKIP_WITHOUT_CUDA();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  for (int64_t n : {4, 1024, 20000}) {
    std::vector<double> v(static_cast<size_t>(4 * n), 0.5);
    v[static_cast<size_t>(n / 2)] = nan;                                       // row 0: a NaN
    v[static_cast<size_t>(n + n - 1)] = inf;                                   // row 1: +inf
    for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(2 * n + i)] = -inf;  // row 2: all -inf
    v[static_cast<size_t>(3 * n)] = -inf;                                      // row 3: one -inf
    Tensor x = from_vector<double>(v, {4, n}, TensorOptions(float32));
    for (bool log : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "n " << n << (log ? " log_softmax" : " softmax"));
      expect_close(vals(log ? log_softmax(x.to(kGpu), -1) : softmax(x.to(kGpu), -1)),
                   vals(log ? log_softmax(x, -1) : softmax(x, -1)), 2e-6);
    }
  }
}

TEST(CudaRows, LayerNormMatchesTheCpu) {
  SMELT_SKIP_WITHOUT_CUDA();
  for (DType dt : {float32, float64, bfloat16, float16}) {
    for (int64_t n : kLengths) {
      for (int64_t rows : {1, 3, 131}) {
        if (rows * n > 3000000) continue;
        manual_seed(n * 7 + rows);
        Tensor x = (randn({rows, n}) * 2 + 1).to(dt);
        Tensor w = randn({n}).to(dt), b = randn({n}).to(dt);
        for (int affine = 0; affine < 3; ++affine) {  // none, weight, weight and bias
          SCOPED_TRACE(::testing::Message()
                       << dtype_name(dt) << " rows " << rows << " n " << n << " affine " << affine);
          std::optional<Tensor> wc, bc, wg, bg;
          if (affine >= 1) wc = w, wg = w.to(kGpu);
          if (affine >= 2) bc = b, bg = b.to(kGpu);
          Tensor want = layer_norm(x, {n}, wc, bc, 1e-5);
          Tensor got = layer_norm(x.to(kGpu), {n}, wg, bg, 1e-5);
          expect_close(vals(got), vals(want), dt == float32 ? 1e-5 : tol_of(dt));
        }
      }
    }
  }
}

// Rows whose mean is large against their spread (the sums must not cancel),
// and rows holding inf or NaN (NaN everywhere, as the CPU gives).
TEST(CudaRows, LayerNormOfOffsetRowsAndSpecialValues) {
  SMELT_SKIP_WITHOUT_CUDA();
  manual_seed(11);
  for (DType dt : {float32, float64, bfloat16}) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor x = (randn({64, 768}) + (dt == bfloat16 ? 300.0 : 1e4)).to(dt);
    expect_close(vals(layer_norm(x.to(kGpu), {768}, std::nullopt, std::nullopt, 1e-5)),
                 vals(layer_norm(x, {768}, std::nullopt, std::nullopt, 1e-5)),
                 dt == bfloat16 ? tol_of(dt) : 1e-4);
  }
  Tensor s = randn({3, 256});
  s.select(0, 0).narrow(0, 7, 1).fill_(INFINITY);
  s.select(0, 1).narrow(0, 0, 1).fill_(-INFINITY);
  s.select(0, 2).narrow(0, 100, 1).fill_(NAN);
  const std::vector<double> got =
      vals(layer_norm(s.to(kGpu), {256}, std::nullopt, std::nullopt, 1e-5));
  const std::vector<double> want = vals(layer_norm(s, {256}, std::nullopt, std::nullopt, 1e-5));
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_EQ(std::isnan(got[i]), std::isnan(want[i])) << i << ": " << got[i] << " vs " << want[i];
}

TEST(CudaRows, UnalignedRowsAndParameters) {
  SMELT_SKIP_WITHOUT_CUDA();
  // Contiguous views one element into their storage: rows and weight that are
  // not 16-byte aligned take the one-element-at-a-time loads.
  const int64_t rows = 5, n = 512;
  manual_seed(3);
  Tensor flat = randn({rows * n + 1});
  Tensor x = flat.slice(0, 1, rows * n + 1).view({rows, n});
  Tensor wflat = randn({n + 1}), w = wflat.slice(0, 1, n + 1);
  Tensor xg = flat.to(kGpu).slice(0, 1, rows * n + 1).view({rows, n});
  Tensor wg = wflat.to(kGpu).slice(0, 1, n + 1);
  ASSERT_TRUE(xg.is_contiguous());
  expect_close(vals(softmax(xg, -1)), vals(softmax(x, -1)), 2e-6);
  expect_close(vals(log_softmax(xg, -1)), vals(log_softmax(x, -1)), 2e-6);
  expect_close(vals(layer_norm(xg, {n}, wg, std::nullopt, 1e-5)),
               vals(layer_norm(x, {n}, w, std::nullopt, 1e-5)), 1e-5);
  // An aligned input with an unaligned weight.
  Tensor xa = randn({rows, n});
  expect_close(vals(layer_norm(xa.to(kGpu), {n}, wg, std::nullopt, 1e-5)),
               vals(layer_norm(xa, {n}, w, std::nullopt, 1e-5)), 1e-5);
}

TEST(CudaRows, LastDimReductionsMatchTheCpu) {
  SMELT_SKIP_WITHOUT_CUDA();
  // 5000 = 4096 (one unrolled round of 256 threads x 4 loads x 4 floats) +
  // 880 (one-vector loop) + ... ; 5003 leaves a scalar tail.
  for (int64_t n : {4096, 5000, 5003, 8192, 20000}) {
    for (DType dt : {float32, bfloat16}) {
      SCOPED_TRACE(::testing::Message() << dtype_name(dt) << " n " << n);
      manual_seed(n);
      Tensor x = randn({7, n}).to(dt);
      Tensor xg = x.to(kGpu);
      expect_close(vals(sum(xg, {-1})), vals(sum(x, {-1})), dt == float32 ? 1e-5 : 2e-2);
      expect_close(vals(mean(xg, {-1})), vals(mean(x, {-1})), dt == float32 ? 1e-5 : 2e-2);
      EXPECT_EQ(vals(amax(xg, {-1})), vals(amax(x, {-1})));
      EXPECT_EQ(vals(argmax(xg, -1)), vals(argmax(x, -1)));
    }
    // A NaN in each part of a row: the unrolled loads, the one-vector loop, the tail.
    Tensor y = zeros({3, n});
    for (int64_t r = 0; r < 3; ++r) {
      const int64_t at = r == 0 ? 17 : r == 1 ? std::min<int64_t>(n - 1, 4100) : n - 1;
      y.select(0, r).select(0, at).fill_(std::numeric_limits<double>::quiet_NaN());
    }
    for (double v : vals(amax(y.to(kGpu), {-1}))) EXPECT_TRUE(std::isnan(v));
    EXPECT_EQ(vals(argmax(y.to(kGpu), -1)), vals(argmax(y, -1)));
  }
}

// Reductions over a leading and a trailing dim around a kept one (batch_norm's
// N, H and W of NCHW): 16-byte loads within the contiguous runs of H * W when
// every run is aligned (runs of 240; of 10, element by element), rows split
// across blocks when there are few channels; var_mean accumulates each
// thread's elements as shifted sums.
TEST(CudaRows, ReductionsOverRunsMatchTheCpu) {
  SMELT_SKIP_WITHOUT_CUDA();
  for (DType dt : {float32, bfloat16}) {
    for (const Shape& s : {Shape{8, 6, 20, 12}, Shape{8, 6, 2, 5}, Shape{64, 16, 56, 56}}) {
      SCOPED_TRACE(::testing::Message()
                   << dtype_name(dt) << " " << s[0] << "x" << s[1] << "x" << s[2] << "x" << s[3]);
      manual_seed(s[3]);
      Tensor x = (randn(s) * 3 + 2).to(dt);
      Tensor xg = x.to(kGpu);
      const std::vector<int64_t> dims{0, 2, 3};
      const double tol = dt == float32 ? 1e-5 : 2e-2;
      auto [vg, mg] = var_mean(xg, dims, /*correction=*/0, /*keepdim=*/false);
      auto [vc, mc] = var_mean(x, dims, /*correction=*/0, /*keepdim=*/false);
      expect_close(vals(mg), vals(mc), tol);
      expect_close(vals(vg), vals(vc), tol);
      expect_close(vals(sum(xg, dims)), vals(sum(x, dims)), tol);
      EXPECT_EQ(vals(amax(xg, dims)), vals(amax(x, dims)));
    }
  }
}

// batch_norm on CUDA against the CPU, training (running statistics updated)
// and eval, with and without weight and bias: planes of 240 and 3136 elements
// (the fused normalization, 16-byte accesses; 250: element by element) and of
// 10 (op by op).
TEST(CudaRows, BatchNormMatchesTheCpu) {
  SMELT_SKIP_WITHOUT_CUDA();
  for (DType dt : {float32, bfloat16}) {
    for (const Shape& s :
         {Shape{4, 6, 20, 12}, Shape{2, 3, 250}, Shape{4, 6, 2, 5}, Shape{8, 16, 56, 56}}) {
      for (bool affine : {false, true}) {
        for (bool training : {true, false}) {
          SCOPED_TRACE(::testing::Message()
                       << dtype_name(dt) << " " << s.size() << "-D C " << s[1] << " last "
                       << s.back() << " affine " << affine << " training " << training);
          manual_seed(s.back() + s[1]);
          Tensor x = (randn(s) * 2 + 1).to(dt);
          Tensor rm = randn({s[1]}), rv = rand({s[1]}) + 0.5;
          Tensor w = randn({s[1]}).to(dt), b = randn({s[1]}).to(dt);
          Tensor rm_g = rm.to(kGpu), rv_g = rv.to(kGpu);
          std::optional<Tensor> wc, bc, wg, bg;
          if (affine) wc = w, bc = b, wg = w.to(kGpu), bg = b.to(kGpu);
          Tensor want = batch_norm(x, rm, rv, wc, bc, training, 0.1, 1e-5);
          Tensor got = batch_norm(x.to(kGpu), rm_g, rv_g, wg, bg, training, 0.1, 1e-5);
          expect_close(vals(got), vals(want), dt == float32 ? 1e-4 : 2e-2);
          expect_close(vals(rm_g), vals(rm), 1e-5);
          expect_close(vals(rv_g), vals(rv), 1e-5);
        }
      }
    }
  }
}

#ifdef SMELT_TEST_CUDA_BACKEND  // (the cuDNN switch is the backend's internal)
// The cuDNN versions whose attention the backend uses (no GPU needed): not
// before 9.10, nor 9.10.0 / 9.10.1 (their float16 / bfloat16 forward pass
// has known bugs), from 9.10.2 on.
TEST(CudaRows, CudnnAttentionSkipsVersionsWithKnownBugs) {
  for (int64_t version : {90900, 91000, 91001})
    EXPECT_FALSE(cuda::impl::cudnn_version_usable(version)) << version;
  for (int64_t version : {91002, 91100, 91900})
    EXPECT_TRUE(cuda::impl::cudnn_version_usable(version)) << version;
}

// The fused attention kernels against the CPU's decomposition, which rounds
// its probabilities to the dtype the same way: smelt's own
// (FlashAttention-2, attention.cu) and, where libcudnn.so.9 is found, cuDNN's
// (cudnn_attention.cpp), which the backend tries first for unmasked problems
// of kCudnnAttentionMinKeys keys or more and for head dims its own lacks
// (from kCudnnAttentionMinQueries queries on).
// Sequence lengths that are not multiples of the kernels' 64-row tiles,
// L != S, the causal mask, head dims 32 and 64 (and 128, cuDNN's alone), and
// q, k, v as head views of one packed [B, T, 3 * H * E] tensor (strided rows,
// as GPT-2 makes them). The backend is called directly so that a case it
// declined would fail here.
TEST(CudaRows, FusedAttentionMatchesTheCpu) {
  SMELT_SKIP_WITHOUT_CUDA();
  std::vector<bool> engines = {false};
  if (cuda::impl::cudnn_attention_available())
    engines.push_back(true);
  else
    std::cout << "[ note ] cuDNN not found (libcudnn.so.9): smelt's own attention kernel only\n";
  for (bool use_cudnn : engines) {
    cuda::impl::set_cudnn_attention_enabled(use_cudnn);
    const int64_t launches = cuda::impl::cudnn_attention_launches();
    for (DType dt : {bfloat16, float16}) {
      for (int64_t E : {32, 64, 128}) {
        if (E == 128 && !use_cudnn) continue;  // smelt's own kernel: head dims 32 and 64
        for (bool causal : {false, true}) {
          for (const auto& lengths :
               {std::pair<int64_t, int64_t>{100, 100}, {64, 64}, {70, 130}, {1, 300}, {257, 257}}) {
            const int64_t L = lengths.first, S = lengths.second;  // (a lambda below reads L)
            if (causal && L != S) continue;
            for (bool packed : {false, true}) {
              SCOPED_TRACE(::testing::Message()
                           << dtype_name(dt) << " E " << E << " causal " << causal << " L " << L
                           << " S " << S << " packed " << packed << " cuDNN " << use_cudnn);
              manual_seed(E + L + S);
              const int64_t B = 2, H = 3;
              Tensor q, k, v;
              if (packed && L == S) {
                Tensor qkv = randn({B, L, 3 * H * E}).to(dt);
                auto heads = [&](int64_t i) {
                  return qkv.narrow(2, i * H * E, H * E).reshape({B, L, H, E}).transpose(1, 2);
                };
                q = heads(0), k = heads(1), v = heads(2);
              } else {
                q = randn({B, H, L, E}).to(dt), k = randn({B, H, S, E}).to(dt),
                v = randn({B, H, S, E}).to(dt);
              }
              const double scale = 1.0 / std::sqrt(static_cast<double>(E));
              Tensor want = scaled_dot_product_attention(q, k, v, std::nullopt, 0.0, causal);
              Tensor got = empty({B, H, L, E}, TensorOptions(dt).device(kGpu));
              const bool fused = backend::backend(kGpu).fused_attention(
                  q.to(kGpu), k.to(kGpu), v.to(kGpu), Tensor(), causal, scale, got);
              if (E == 128 && L < cuda::impl::kCudnnAttentionMinQueries) {
                // Too few queries to ask cuDNN, and smelt's kernel lacks the head dim.
                EXPECT_FALSE(fused);
                continue;
              }
              ASSERT_TRUE(fused) << "declined; cuDNN's last decline: "
                                 << cuda::impl::cudnn_attention_last_decline();
              expect_close(vals(got), vals(want), dt == bfloat16 ? 2e-2 : 4e-3);
              // The eager op takes the same kernel.
              Tensor op = scaled_dot_product_attention(q.to(kGpu), k.to(kGpu), v.to(kGpu),
                                                       std::nullopt, 0.0, causal);
              expect_close(vals(op), vals(got), 0.0);
            }
          }
        }
      }
    }
    // cuDNN ran the long and the head-dim-128 problems when it was on, none when off.
    const int64_t ran = cuda::impl::cudnn_attention_launches() - launches;
    if (use_cudnn)
      EXPECT_GT(ran, 0) << "cuDNN declined: " << cuda::impl::cudnn_attention_last_decline();
    else
      EXPECT_EQ(ran, 0);
  }
  cuda::impl::set_cudnn_attention_enabled(true);
}

// A zero or negative scale (sdpa takes any). smelt's own kernel's unmasked
// path scales the running max instead of each score, which only a positive
// scale keeps the scaled scores' max (and the masked keys' -inf times 0 would
// be NaN); cuDNN's engine gives NaN there too. So the backend declines, with
// or without cuDNN, and the decomposition runs, as on the CPU.
TEST(CudaRows, FusedAttentionDeclinesScalesThatAreNotPositive) {
  SMELT_SKIP_WITHOUT_CUDA();
  const int64_t B = 1, H = 2, L = 70, S = 300, E = 64;  // S: cuDNN's side of the threshold
  manual_seed(3);
  Tensor q = (randn({B, H, L, E}) * 3).to(bfloat16), k = (randn({B, H, S, E}) * 3).to(bfloat16),
         v = randn({B, H, S, E}).to(bfloat16);
  for (bool use_cudnn : {false, true}) {
    cuda::impl::set_cudnn_attention_enabled(use_cudnn);
    for (double scale : {-0.125, 0.0}) {
      for (bool causal : {false, true}) {
        SCOPED_TRACE(::testing::Message()
                     << "scale " << scale << " causal " << causal << " cuDNN " << use_cudnn);
        Tensor got = empty({B, H, L, E}, TensorOptions(bfloat16).device(kGpu));
        EXPECT_FALSE(backend::backend(kGpu).fused_attention(q.to(kGpu), k.to(kGpu), v.to(kGpu),
                                                            Tensor(), causal, scale, got));
        Tensor want = scaled_dot_product_attention(q, k, v, std::nullopt, 0.0, causal, scale);
        Tensor op = scaled_dot_product_attention(q.to(kGpu), k.to(kGpu), v.to(kGpu), std::nullopt,
                                                 0.0, causal, scale);
        EXPECT_EQ(isnan(op).sum().item<int64_t>(), 0);
        expect_close(vals(op), vals(want), 2e-2);
      }
    }
  }
  cuda::impl::set_cudnn_attention_enabled(true);
}

// k and v of one head broadcast over the batch and the heads (stride 0 in
// those dims), as the eager op makes them from 3-D k and v: where the backend
// takes them (cuDNN's path for head dim 128 and 300 keys), the same values as
// the CPU's decomposition; where it declines, the eager op decomposes.
TEST(CudaRows, FusedAttentionOfBroadcastKeysAndValues) {
  SMELT_SKIP_WITHOUT_CUDA();
  const int64_t B = 2, H = 3, L = 70, S = 300;
  for (int64_t E : {64, 128}) {
    for (bool causal : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "E " << E << " causal " << causal);
      manual_seed(E + 11);
      Tensor q = randn({B, H, L, E}).to(bfloat16), k = randn({1, 1, S, E}).to(bfloat16),
             v = randn({1, 1, S, E}).to(bfloat16);
      const Shape kv{B, H, S, E};
      Tensor want = scaled_dot_product_attention(
          q, k.expand(kv).contiguous(), v.expand(kv).contiguous(), std::nullopt, 0.0, causal);
      Tensor kg = k.to(kGpu).expand(kv), vg = v.to(kGpu).expand(kv);
      ASSERT_EQ(kg.stride(0), 0);
      Tensor got = empty({B, H, L, E}, TensorOptions(bfloat16).device(kGpu));
      if (backend::backend(kGpu).fused_attention(q.to(kGpu), kg, vg, Tensor(), causal,
                                                 1.0 / std::sqrt(static_cast<double>(E)), got))
        expect_close(vals(got), vals(want), 2e-2);
      Tensor op = scaled_dot_product_attention(q.to(kGpu), kg, vg, std::nullopt, 0.0, causal);
      expect_close(vals(op), vals(want), 2e-2);
    }
  }
}

// The causal mask with fewer or more queries than keys (top-left aligned, as
// PyTorch's is_causal: query i sees keys 0..i), which FusedAttentionMatchesTheCpu
// runs only with L == S: head dim 128 on cuDNN's engine (where it loads), 64
// on whichever the backend picks.
TEST(CudaRows, FusedAttentionCausalWithFewerOrMoreQueriesThanKeys) {
  SMELT_SKIP_WITHOUT_CUDA();
  const int64_t B = 2, H = 3;
  for (int64_t E : {64, 128}) {
    for (const auto& lengths : {std::pair<int64_t, int64_t>{1, 300}, {70, 300}, {300, 260}}) {
      const int64_t L = lengths.first, S = lengths.second;
      SCOPED_TRACE(::testing::Message() << "E " << E << " L " << L << " S " << S);
      manual_seed(E + L + S);
      Tensor q = randn({B, H, L, E}).to(bfloat16), k = randn({B, H, S, E}).to(bfloat16),
             v = randn({B, H, S, E}).to(bfloat16);
      Tensor want = scaled_dot_product_attention(q, k, v, std::nullopt, 0.0, true);
      Tensor got = empty({B, H, L, E}, TensorOptions(bfloat16).device(kGpu));
      const bool fused =
          backend::backend(kGpu).fused_attention(q.to(kGpu), k.to(kGpu), v.to(kGpu), Tensor(), true,
                                                 1.0 / std::sqrt(static_cast<double>(E)), got);
      // Head dim 128 is cuDNN's alone, asked from kCudnnAttentionMinQueries queries on.
      if (E == 128 && cuda::impl::cudnn_attention_available()) {
        EXPECT_EQ(fused, L >= cuda::impl::kCudnnAttentionMinQueries)
            << cuda::impl::cudnn_attention_last_decline();
      }
      if (fused) expect_close(vals(got), vals(want), 2e-2);
      Tensor op =
          scaled_dot_product_attention(q.to(kGpu), k.to(kGpu), v.to(kGpu), std::nullopt, 0.0, true);
      expect_close(vals(op), vals(want), 2e-2);
    }
  }
}

// A mask with a head dim only cuDNN's engine has (128): cuDNN takes no mask,
// so the backend declines and the eager op decomposes, with the CPU's values.
TEST(CudaRows, FusedAttentionWithAMaskDeclinesHeadDimsOnlyCudnnHas) {
  SMELT_SKIP_WITHOUT_CUDA();
  const int64_t B = 2, H = 3, L = 70, S = 300, E = 128;
  manual_seed(5);
  Tensor q = randn({B, H, L, E}).to(bfloat16), k = randn({B, H, S, E}).to(bfloat16),
         v = randn({B, H, S, E}).to(bfloat16);
  Tensor lengths = from_vector<int64_t>({200, 300}, {B, 1, 1, 1});
  Tensor padding = lt(arange(S).view({1, 1, 1, S}), lengths);  // [B, 1, 1, S] bool
  Tensor got = empty({B, H, L, E}, TensorOptions(bfloat16).device(kGpu));
  EXPECT_FALSE(backend::backend(kGpu).fused_attention(
      q.to(kGpu), k.to(kGpu), v.to(kGpu), padding.to(kGpu), false, 1.0 / std::sqrt(128.0), got));
  Tensor want = scaled_dot_product_attention(q, k, v, padding);
  Tensor op = scaled_dot_product_attention(q.to(kGpu), k.to(kGpu), v.to(kGpu), padding.to(kGpu));
  expect_close(vals(op), vals(want), 2e-2);
}

#endif  // SMELT_TEST_CUDA_BACKEND

// float32 attention (attention_f32.cu, on the CUDA cores) against the CPU:
// head dims 32 and 64 (others decompose), lengths off the 128-row and 64-key
// tiles, L != S with the causal mask top-left (more and fewer queries than
// keys), one query, packed head views, any scale (zero and negative too:
// each score is scaled before the max), bool and additive masks of several
// ranks, and a query row that sees no key (zeros).
TEST(CudaRows, FusedAttentionFloat32MatchesTheCpu) {
  SMELT_SKIP_WITHOUT_CUDA();
  backend::Backend& gpu = backend::backend(kGpu);
  EXPECT_TRUE(gpu.has_fused_attention(float32, 32, true));
  EXPECT_TRUE(gpu.has_fused_attention(float32, 64, false));
  EXPECT_FALSE(gpu.has_fused_attention(float32, 128, false));
  EXPECT_FALSE(gpu.has_fused_attention(float64, 64, false));
  const int64_t B = 2, H = 3;
  struct Case {
    int64_t L, S;
    bool causal, packed;
    double scale;  // 0 < scale: 1 / sqrt(E) times it
  };
  const Case cases[] = {
      {100, 100, false, false, 1}, {100, 100, true, true, 1}, {70, 130, false, false, 1},
      {130, 70, true, false, 1},   {70, 300, true, false, 1}, {1, 300, false, false, 1},
      {1, 300, true, false, 1},    {257, 257, true, true, 1}, {64, 64, false, false, 0.0},
      {64, 96, true, false, -2.5}, {200, 129, false, true, 1}};
  for (int64_t E : {32, 64}) {
    for (const Case& c : cases) {
      if (c.packed && c.L != c.S) continue;
      SCOPED_TRACE(::testing::Message()
                   << "E " << E << " L " << c.L << " S " << c.S << " causal " << c.causal
                   << " packed " << c.packed << " scale " << c.scale);
      manual_seed(E + c.L + c.S);
      // The GPU operands: head views of one packed [B, L, 3 * H * E] tensor
      // on the device (rows 3 * H * E apart, heads E apart), or contiguous.
      Tensor qg, kg, vg;
      if (c.packed) {
        Tensor qkv = randn({B, c.L, 3 * H * E}).to(kGpu);
        auto heads = [&](int64_t i) {
          return qkv.narrow(2, i * H * E, H * E).view({B, c.L, H, E}).transpose(1, 2);
        };
        qg = heads(0), kg = heads(1), vg = heads(2);
        ASSERT_EQ(qg.stride(2), 3 * H * E);
      } else {
        qg = (randn({B, H, c.L, E}) * 2).to(kGpu), kg = randn({B, H, c.S, E}).to(kGpu),
        vg = randn({B, H, c.S, E}).to(kGpu);
      }
      Tensor q = qg.cpu(), k = kg.cpu(), v = vg.cpu();
      const double scale = c.scale * (1.0 / std::sqrt(static_cast<double>(E)));
      Tensor want = scaled_dot_product_attention(q, k, v, std::nullopt, 0.0, c.causal, scale);
      Tensor got = empty({B, H, c.L, E}, TensorOptions(float32).device(kGpu));
      ASSERT_TRUE(gpu.fused_attention(qg, kg, vg, Tensor(), c.causal, scale, got));
      expect_close(vals(got), vals(want), 2e-5);
      Tensor op = scaled_dot_product_attention(qg, kg, vg, std::nullopt, 0.0, c.causal, scale);
      expect_close(vals(op), vals(got), 0.0);
    }
    // Masks: bool padding [B, 1, 1, S], additive [L, S] and [B, H, L, S].
    const int64_t L = 70, S = 150;
    manual_seed(E + 7);
    Tensor q = randn({B, H, L, E}), k = randn({B, H, S, E}), v = randn({B, H, S, E});
    Tensor lengths = from_vector<int64_t>({45, 150}, {B, 1, 1, 1});
    Tensor padding = lt(arange(S).view({1, 1, 1, S}), lengths);
    Tensor additive = randn({L, S}) * 2, full = randn({B, H, L, S}) * 2;
    Tensor none = ones({B, 1, L, S}, TensorOptions(DType::Bool));
    none.select(0, 1).select(0, 0).select(0, 5).fill_(false);  // batch 1, row 5: no key
    for (const Tensor& mask : {padding, additive, full, none}) {
      SCOPED_TRACE(::testing::Message() << "E " << E << " mask " << dtype_name(mask.dtype()) << " "
                                        << mask.dim() << "-D");
      Tensor want = scaled_dot_product_attention(q, k, v, mask);
      Tensor got = empty({B, H, L, E}, TensorOptions(float32).device(kGpu));
      ASSERT_TRUE(gpu.fused_attention(q.to(kGpu), k.to(kGpu), v.to(kGpu), mask.to(kGpu), false,
                                      1.0 / std::sqrt(static_cast<double>(E)), got));
      expect_close(vals(got), vals(want), 2e-5);
      EXPECT_EQ(isnan(got).sum().item<int64_t>(), 0);
    }
    Tensor got =
        scaled_dot_product_attention(q.to(kGpu), k.to(kGpu), v.to(kGpu), none.to(kGpu)).cpu();
    EXPECT_TRUE(got.select(0, 1).select(1, 5).eq(0.0).all().item<bool>());
    // Special values, as the CPU's kernel and the decomposition: a NaN score
    // at a key a bool mask drops stays out of the row (where, not add); a row
    // whose every score is -inf is zeros under a mask, NaN without one.
    Tensor ki = k.clone(), qi = q.clone();
    ki.select(0, 0).select(1, 149).fill_(std::numeric_limits<double>::quiet_NaN());
    ki.select(0, 1).select(0, 2).fill_(1.0);  // batch 1, head 2: keys of ones
    qi.select(0, 1).select(0, 2).select(0, 3).fill_(-std::numeric_limits<double>::infinity());
    for (bool masked : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "E " << E << " special values, masked " << masked);
      Tensor want = masked ? scaled_dot_product_attention(qi, ki, v, padding)
                           : scaled_dot_product_attention(qi, ki, v);
      Tensor g = empty({B, H, L, E}, TensorOptions(float32).device(kGpu));
      ASSERT_TRUE(gpu.fused_attention(qi.to(kGpu), ki.to(kGpu), v.to(kGpu),
                                      masked ? padding.to(kGpu) : Tensor(), false,
                                      1.0 / std::sqrt(static_cast<double>(E)), g));
      expect_close(vals(g), vals(want), 2e-5);
      Tensor gc = g.cpu(), row = gc.select(0, 1).select(0, 2).select(0, 3);
      if (masked) {
        EXPECT_TRUE(row.eq(0.0).all().item<bool>());
        EXPECT_EQ(isnan(gc.select(0, 0)).sum().item<int64_t>(), 0);  // key 149 is dropped
      } else {
        EXPECT_TRUE(isnan(row).all().item<bool>());
      }
    }
  }
}

// The fused attention kernel with an attn_mask, against the CPU's
// decomposition: a bool key-padding mask [B, 1, 1, S] as BERT makes it, an
// additive [L, S] mask, an additive mask over every
// dim; a row whose every key is masked is zeros, as the decomposition's
// (PyTorch's _safe_softmax).
TEST(CudaRows, FusedAttentionWithMasksMatchesTheCpu) {
  SMELT_SKIP_WITHOUT_CUDA();
  for (DType dt : {bfloat16, float16}) {
    for (int64_t E : {32, 64}) {
      const int64_t B = 2, H = 3, L = 70, S = 70;
      manual_seed(E + 7);
      Tensor q = randn({B, H, L, E}).to(dt), k = randn({B, H, S, E}).to(dt),
             v = randn({B, H, S, E}).to(dt);
      Tensor lengths = from_vector<int64_t>({45, 70}, {B, 1, 1, 1});
      Tensor padding = lt(arange(S).view({1, 1, 1, S}), lengths);  // [B, 1, 1, S] bool
      Tensor additive = (randn({L, S}) * 2).to(dt);                // added, q's dtype
      Tensor full = (randn({B, H, L, S}) * 2).to(dt);
      for (const Tensor& mask : {padding, additive, full}) {
        const bool causal = false;  // PyTorch takes a mask or is_causal, not both
        SCOPED_TRACE(::testing::Message()
                     << dtype_name(dt) << " E " << E << " mask " << dtype_name(mask.dtype()) << " "
                     << mask.dim() << "-D causal " << causal);
        const double scale = 1.0 / std::sqrt(static_cast<double>(E));
        Tensor want = scaled_dot_product_attention(q, k, v, mask, 0.0, causal);
        Tensor got = empty({B, H, L, E}, TensorOptions(dt).device(kGpu));
        ASSERT_TRUE(backend::backend(kGpu).fused_attention(q.to(kGpu), k.to(kGpu), v.to(kGpu),
                                                           mask.to(kGpu), causal, scale, got));
        expect_close(vals(got), vals(want), dt == bfloat16 ? 2e-2 : 4e-3);
        Tensor op = scaled_dot_product_attention(q.to(kGpu), k.to(kGpu), v.to(kGpu), mask.to(kGpu),
                                                 0.0, causal);
        expect_close(vals(op), vals(got), 0.0);
      }
      // Query row 5 of batch 1 sees no key: zeros on both sides, nothing NaN.
      Tensor none = ones({B, 1, L, S}, TensorOptions(DType::Bool));
      none.select(0, 1).select(0, 0).select(0, 5).fill_(false);
      Tensor want = scaled_dot_product_attention(q, k, v, none, 0.0, false);
      Tensor got = scaled_dot_product_attention(q.to(kGpu), k.to(kGpu), v.to(kGpu), none.to(kGpu),
                                                0.0, false)
                       .cpu();
      EXPECT_TRUE(want.select(0, 1).select(1, 5).eq(0.0).all().item<bool>());
      EXPECT_TRUE(got.select(0, 1).select(1, 5).eq(0.0).all().item<bool>());
      EXPECT_EQ(isnan(got).sum().item<int64_t>(), 0);
      expect_close(vals(got), vals(want), dt == bfloat16 ? 2e-2 : 4e-3);
    }
  }
}
