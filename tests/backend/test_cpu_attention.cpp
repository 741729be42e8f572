// The CPU's fused float32 attention (backend/cpu/attention.h) against the
// float64 decomposition: odd sizes around its tiles (8 query rows, 32 keys, 32
// value dims), q, k and v as head views of packed tensors, bool and float
// masks of every broadcast, the causal triangle, fully masked rows (zeros),
// NaN scores, one and two threads; every CPU capability giving the same
// bits (the AVX-512 tiles against the portable ones), also for outputs large
// enough to be streamed; the cases the kernel declines; and smelt::compile
// keeping float32 attention whole on the CPU.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/capability.h"
#include "smelt/compile.h"
#include "smelt/ops.h"
#include "test_util.h"

using namespace smelt;
using smelt_test::expect_close;
using smelt_test::kNaN;
using smelt_test::vals;

namespace {

struct Sizes {
  int64_t B, H, L, S, E, Ev;
};

/// q [B, H, L, E], k [B, H, S, E], v [B, H, S, Ev] as head views of packed
/// [B, T, H * D] float32 tensors (GPT-2's and BERT's layout: strided heads).
struct Heads {
  Tensor q, k, v;
};
Heads heads(const Sizes& s, uint64_t seed) {
  manual_seed(seed);
  auto view = [&](int64_t T, int64_t D) {
    return randn({s.B, T, s.H * D}).view({s.B, T, s.H, D}).transpose(1, 2);
  };
  Heads h;
  h.q = view(s.L, s.E);
  h.k = view(s.S, s.E);
  h.v = view(s.S, s.Ev);
  return h;
}

/// The fused kernel's result, called directly (it must take the case).
Tensor fused(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask, bool causal) {
  Tensor out = empty({q.size(0), q.size(1), q.size(2), v.size(3)});
  const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(3)));
  EXPECT_TRUE(backend::backend(Device()).fused_attention(q, k, v, mask, causal, scale, out));
  return out;
}

/// The float64 decomposition of the same attention (float masks in
/// float64). The op refuses a mask with is_causal, so the kernel's order
/// (the triangle, then the mask) is folded into one mask there.
Tensor reference(const Heads& h, const Tensor& mask, bool causal) {
  std::optional<Tensor> m;
  if (mask.defined()) {
    m = mask.dtype() == DType::Bool ? mask : mask.to(DType::Float64);
    if (causal) {
      Tensor tri = tril(ones({h.q.size(2), h.k.size(2)}, TensorOptions(DType::Bool)));
      m = mask.dtype() == DType::Bool
              ? logical_and(*m, tri)
              : where(tri, *m, Scalar(-std::numeric_limits<double>::infinity()));
      causal = false;
    }
  }
  return scaled_dot_product_attention(h.q.to(DType::Float64), h.k.to(DType::Float64),
                                      h.v.to(DType::Float64), m, 0.0, causal);
}

/// Masks for `s`: none; BERT's key padding [B, 1, 1, S]; a full random bool
/// mask; a transposed (strided) [L, S] bool mask; an additive float mask with
/// -inf entries over [1, H, L, S], contiguous and with its last two dims'
/// strides swapped (converted row by row).
std::vector<Tensor> masks(const Sizes& s) {
  Tensor lengths = from_vector<int64_t>(std::vector<int64_t>(s.B, (s.S + 1) / 2), {s.B, 1, 1, 1});
  Tensor padding = lt(arange(s.S).view({1, 1, 1, s.S}), lengths);
  Tensor full = rand({s.B, s.H, s.L, s.S}) > Scalar(0.3);
  Tensor strided = (rand({s.S, s.L}) > Scalar(0.2)).t();
  Tensor additive =
      where(rand({1, s.H, s.L, s.S}) > Scalar(0.25), randn({1, s.H, s.L, s.S}),
            full_like(zeros({1, s.H, s.L, s.S}), Scalar(-std::numeric_limits<double>::infinity())));
  Tensor additive_strided = additive.transpose(2, 3).contiguous().transpose(2, 3);
  return {Tensor(), padding, full, strided, additive, additive_strided};
}

}  // namespace

TEST(CpuAttention, MatchesTheFloat64DecompositionAroundTheTiles) {
  const Sizes cases[] = {{2, 3, 7, 37, 20, 45},
                         {1, 2, 130, 3, 64, 64},
                         {2, 1, 1, 1, 1, 1},
                         {1, 1, 5, 200, 32, 32},
                         {3, 2, 33, 64, 16, 8}};
  uint64_t seed = 1;
  for (const Sizes& s : cases) {
    const Heads h = heads(s, seed++);
    for (const Tensor& mask : masks(s)) {
      for (bool causal : {false, true}) {
        SCOPED_TRACE(::testing::Message()
                     << "B" << s.B << " H" << s.H << " L" << s.L << " S" << s.S << " E" << s.E
                     << " Ev" << s.Ev << " mask " << (mask.defined() ? mask.sizes().size() : 0)
                     << " causal " << causal);
        Tensor got = fused(h.q, h.k, h.v, mask, causal);
        expect_close(vals(got), vals(reference(h, mask, causal)), 2e-5);
        // The op itself takes the same kernel eagerly: the same bits.
        std::optional<Tensor> m;
        if (mask.defined()) m = mask;
        if (!(mask.defined() && causal)) {
          EXPECT_EQ(vals(scaled_dot_product_attention(h.q, h.k, h.v, m, 0.0, causal)), vals(got));
        }
      }
    }
  }
}

TEST(CpuAttention, FullyMaskedRowsGiveZerosAndNaNScoresNaN) {
  const Sizes s{1, 2, 6, 9, 8, 8};
  Heads h = heads(s, 11);
  // Row 2 of every head sees no key.
  Tensor keep = ones({s.L, s.S}, TensorOptions(DType::Bool));
  keep.select(0, 2).fill_(Scalar(false));
  std::vector<double> got = vals(fused(h.q, h.k, h.v, keep, false));
  for (int64_t hh = 0; hh < s.H; ++hh)
    for (int64_t e = 0; e < s.Ev; ++e) EXPECT_EQ(got[(hh * s.L + 2) * s.Ev + e], 0.0);
  expect_close(got, vals(reference(h, keep, false)), 2e-5);
  // A NaN key: NaN for every query that sees it; masked away, no effect
  // (where(false, NaN, -inf) is -inf), as in the decomposition.
  Tensor k = h.k.contiguous();
  k.select(1, 0).select(1, 4).fill_(Scalar(kNaN));
  Heads hn{h.q, k, h.v};
  std::vector<double> want = vals(reference(hn, Tensor(), false));
  std::vector<double> nan_got = vals(fused(hn.q, hn.k, hn.v, Tensor(), false));
  for (int64_t e = 0; e < s.Ev; ++e) EXPECT_TRUE(std::isnan(nan_got[e]));
  expect_close(nan_got, want, 2e-5);
  // Every score -inf without a mask (a -inf query against positive keys):
  // softmax's NaN, as the decomposition gives; under a mask, zeros.
  Tensor qi = h.q.contiguous(), kp = abs(h.k) + Scalar(0.5);
  qi.select(2, 1).select(2, 0).fill_(Scalar(-std::numeric_limits<double>::infinity()));
  Heads hi{qi, kp, h.v};
  std::vector<double> no_mask = vals(fused(hi.q, hi.k, hi.v, Tensor(), false));
  for (int64_t e = 0; e < s.Ev; ++e) EXPECT_TRUE(std::isnan(no_mask[s.Ev + e])) << e;
  expect_close(no_mask, vals(reference(hi, Tensor(), false)), 2e-5);
  Tensor all_keys = ones({s.S}, TensorOptions(DType::Bool));
  std::vector<double> masked = vals(fused(hi.q, hi.k, hi.v, all_keys, false));
  for (int64_t e = 0; e < s.Ev; ++e) EXPECT_EQ(masked[s.Ev + e], 0.0) << e;
  expect_close(masked, vals(reference(hi, all_keys, false)), 2e-5);
  Tensor hide = ones({s.S}, TensorOptions(DType::Bool));
  hide.select(0, 4).fill_(Scalar(false));
  expect_close(vals(fused(hn.q, hn.k, hn.v, hide, false)), vals(reference(hn, hide, false)), 2e-5);
}

TEST(CpuAttention, ThreadsAndRowBlocksDoNotChangeTheBits) {
  // One (batch, head) pair: with two threads its rows are split into blocks.
  const Sizes s{1, 1, 45, 70, 24, 40};
  const Heads h = heads(s, 21);
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  std::vector<double> one = vals(fused(h.q, h.k, h.v, Tensor(), true));
  omp_set_num_threads(2);
  std::vector<double> two = vals(fused(h.q, h.k, h.v, Tensor(), true));
  omp_set_num_threads(threads);
  EXPECT_EQ(one, two);
}

// The AVX-512 copy computes its tiles with intrinsics (the mask, the causal
// triangle and the row max applied as the scores are stored, the division as
// the outputs are): the same bits as the portable tiles of the other copies,
// around the row, key and value-dim tiles, with every kind of mask.
TEST(CpuAttention, EveryCapabilityGivesTheSameBits) {
  using cpu::CpuCapability;
  const CpuCapability saved = cpu::cpu_capability();
  const Sizes cases[] = {{2, 3, 7, 37, 20, 45},   {1, 2, 17, 70, 17, 33}, {2, 2, 9, 16, 3, 5},
                         {1, 2, 16, 128, 32, 32}, {2, 1, 1, 1, 1, 1},     {1, 2, 24, 31, 32, 8}};
  uint64_t seed = 51;
  for (const Sizes& s : cases) {
    const Heads h = heads(s, seed++);
    for (const Tensor& mask : masks(s)) {
      for (bool causal : {false, true}) {
        cpu::set_cpu_capability(CpuCapability::Default);
        const std::vector<double> want = vals(fused(h.q, h.k, h.v, mask, causal));
        for (int c = 1; c <= static_cast<int>(cpu::hardware_cpu_capability()); ++c) {
          cpu::set_cpu_capability(static_cast<CpuCapability>(c));
          EXPECT_EQ(vals(fused(h.q, h.k, h.v, mask, causal)), want)
              << "B" << s.B << " H" << s.H << " L" << s.L << " S" << s.S << " E" << s.E << " Ev"
              << s.Ev << " mask " << (mask.defined() ? mask.sizes().size() : 0) << " causal "
              << causal << " on " << cpu::cpu_capability_name(static_cast<CpuCapability>(c));
        }
      }
    }
  }
  cpu::set_cpu_capability(saved);
}

TEST(CpuAttention, DeclinesWhatItDoesNotRun) {
  backend::Backend& cpu = backend::backend(Device());
  EXPECT_TRUE(cpu.has_fused_attention(DType::Float32, 64, false));
  EXPECT_FALSE(cpu.has_fused_attention(DType::Float64, 64, false));
  EXPECT_FALSE(cpu.has_fused_attention(DType::BFloat16, 64, false));
  const Heads h = heads({2, 2, 4, 5, 8, 8}, 31);
  Tensor out = empty({2, 2, 4, 8});
  // float64, an int mask, a mask of a wrong size, k broadcast over the batch, no keys.
  EXPECT_FALSE(cpu.fused_attention(h.q.to(DType::Float64), h.k.to(DType::Float64),
                                   h.v.to(DType::Float64), Tensor(), false, 1.0,
                                   out.to(DType::Float64)));
  EXPECT_FALSE(
      cpu.fused_attention(h.q, h.k, h.v, ones({5}, TensorOptions(DType::Int64)), false, 1.0, out));
  EXPECT_FALSE(
      cpu.fused_attention(h.q, h.k, h.v, ones({3}, TensorOptions(DType::Bool)), false, 1.0, out));
  EXPECT_FALSE(cpu.fused_attention(h.q, h.k.narrow(0, 0, 1), h.v.narrow(0, 0, 1), Tensor(), false,
                                   1.0, out));
  EXPECT_FALSE(cpu.fused_attention(h.q, h.k.narrow(2, 0, 0), h.v.narrow(2, 0, 0), Tensor(), false,
                                   1.0, out));
  // Keys whose packed k^T and v would take more than 64 MiB per thread (the
  // decomposition's scores are smaller there: one query).
  Tensor q1 = zeros({1, 1, 1, 512}), k1 = zeros({1, 1, 20000, 512}), v1 = zeros({1, 1, 20000, 512});
  EXPECT_FALSE(cpu.fused_attention(q1, k1, v1, Tensor(), false, 1.0, empty({1, 1, 1, 512})));
  EXPECT_EQ(scaled_dot_product_attention(q1, k1, v1).sizes(), (Shape{1, 1, 1, 512}));
}

TEST(CpuAttention, CompiledFloat32AttentionStaysOneKernel) {
  // BERT's attention under a key-padding mask: one fallback step running
  // the fused kernel, bit-identical to eager.
  const Sizes s{2, 4, 40, 40, 32, 32};
  const Heads h = heads(s, 41);
  Tensor keep =
      lt(arange(s.S).view({1, 1, 1, s.S}), from_vector<int64_t>({40, 23}, {s.B, 1, 1, 1}));
  auto fn = [](const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& m) {
    return scaled_dot_product_attention(q, k, v, m, 0.0, false);
  };
  auto f = compile(fn);
  Tensor y = f(h.q, h.k, h.v, keep);
  EXPECT_EQ(vals(y), vals(fn(h.q, h.k, h.v, keep)));
  ASSERT_EQ(f.stats().kernels, 1);
  EXPECT_EQ(f.stats().kernel_names.at(0), "fallback_scaled_dot_product_attention");
}

// Every tile remainder of the 8 query rows (L 1..17) against key counts around
// the 32-key tiles and odd head dims, with and without masks and the causal
// triangle, on one and three threads: the float64 decomposition, and the op's
// eager result the same bits.
TEST(CpuAttention, EveryRowRemainderAroundTheTiles) {
  const int threads = omp_get_max_threads();
  for (int t : {1, 3}) {
    omp_set_num_threads(t);
    for (int64_t L = 1; L <= 17; ++L)
      for (int64_t S : {1, 7, 16, 31, 33, 64, 70})
        for (auto [E, Ev] : {std::pair<int64_t, int64_t>{3, 5}, {17, 33}}) {
          const Sizes s{2, 2, L, S, E, Ev};
          const Heads h = heads(s, static_cast<uint64_t>(L * 1000 + S * 10 + E));
          Tensor full = rand({s.B, s.H, L, S}) > Scalar(0.3);
          Tensor strided = (rand({S, L}) > Scalar(0.2)).t();
          Tensor additive = where(
              rand({1, s.H, L, S}) > Scalar(0.25), randn({1, s.H, L, S}),
              full_like(zeros({1, s.H, L, S}), Scalar(-std::numeric_limits<double>::infinity())));
          for (const Tensor& mask : {Tensor(), full, strided, additive}) {
            for (bool causal : {false, true}) {
              SCOPED_TRACE(::testing::Message() << "L" << L << " S" << S << " E" << E << " Ev" << Ev
                                                << " causal " << causal << " threads " << t);
              Tensor got = fused(h.q, h.k, h.v, mask, causal);
              expect_close(vals(got), vals(reference(h, mask, causal)), 3e-5);
              std::optional<Tensor> m;
              if (mask.defined()) m = mask;
              if (!(mask.defined() && causal)) {
                EXPECT_EQ(vals(scaled_dot_product_attention(h.q, h.k, h.v, m, 0.0, causal)),
                          vals(got));
              }
            }
          }
        }
  }
  omp_set_num_threads(threads);
}

// A row that sees no key has zero probabilities (_safe_softmax), and their
// product with v is what the decomposition (and PyTorch, math and flash
// alike) returns: zeros where v is finite, NaN in the value dims where some
// key's v is inf or NaN (0 * inf), masked or not; every capability the same.
TEST(CpuAttention, FullyMaskedRowsTimesNonFiniteValuesAreNaN) {
  using cpu::CpuCapability;
  const CpuCapability saved = cpu::cpu_capability();
  for (const Sizes& s : {Sizes{1, 2, 9, 5, 3, 40}, Sizes{2, 1, 17, 37, 17, 33}}) {
    Heads h = heads(s, 61);
    Tensor v = h.v.contiguous();
    // Head 0 of batch 0: v's key 1 dim 2 inf, key 3 dim 34 (or the last) NaN.
    const int64_t nan_dim = std::min<int64_t>(34, s.Ev - 1);
    v.select(0, 0).select(0, 0).select(0, 1).select(0, 2).fill_(
        Scalar(std::numeric_limits<double>::infinity()));
    v.select(0, 0).select(0, 0).select(0, 3).select(0, nan_dim).fill_(Scalar(kNaN));
    h.v = v;
    Tensor keep = ones({s.L, s.S}, TensorOptions(DType::Bool));
    keep.select(0, 2).fill_(Scalar(false));
    // Query row 0 with a -inf score everywhere under the causal triangle
    // (it sees key 0 only): the triangle's fully masked row.
    Tensor qc = h.q.contiguous(), kc = h.k.contiguous();
    kc.select(0, 0).select(0, 0).select(0, 0).fill_(Scalar(1.0));
    qc.select(0, 0).select(0, 0).select(0, 0).fill_(Scalar(1.0));
    qc.select(0, 0).select(0, 0).select(0, 0).select(0, 0).fill_(
        Scalar(-std::numeric_limits<double>::infinity()));
    const Heads hc{qc, kc, h.v};
    for (int c = 0; c <= static_cast<int>(cpu::hardware_cpu_capability()); ++c) {
      cpu::set_cpu_capability(static_cast<CpuCapability>(c));
      SCOPED_TRACE(cpu::cpu_capability_name(static_cast<CpuCapability>(c)));
      const std::vector<double> got = vals(fused(h.q, h.k, h.v, keep, false));
      for (int64_t e = 0; e < s.Ev; ++e) {
        const double x = got[2 * s.Ev + e];  // batch 0, head 0, row 2
        if (e == 2 || e == nan_dim) {
          EXPECT_TRUE(std::isnan(x)) << e;
        } else {
          EXPECT_EQ(x, 0.0) << e;
        }
      }
      if (s.B * s.H > 1) {  // the other pair's v is finite: zeros
        const int64_t other = s.L * s.Ev + 2 * s.Ev;
        for (int64_t e = 0; e < s.Ev; ++e) EXPECT_EQ(got[other + e], 0.0) << e;
      }
      expect_close(got, vals(reference(h, keep, false)), 2e-5);
      const std::vector<double> tri = vals(fused(hc.q, hc.k, hc.v, Tensor(), true));
      EXPECT_TRUE(std::isnan(tri[2])) << "causal row 0, dim 2";
      EXPECT_EQ(tri[0], 0.0) << "causal row 0, dim 0";
      expect_close(tri, vals(reference(hc, Tensor(), true)), 2e-5);
    }
  }
  cpu::set_cpu_capability(saved);
}

// Randomized eager sdpa (the fused kernel, asserted taken) against the
// explicit float64 decomposition written out here, softmax(q k^T * scale +
// mask) v with _safe_softmax's zero rows, and across the CPU capabilities
// (the same bits; NaN where the first one has NaN): q, k and v contiguous,
// as transposed [B, L, H, E] views or as head views of one packed tensor;
// head dims and sequence lengths around the tiles; bool and float masks of
// several broadcasts, some with every key of a row masked; the causal
// triangle with L != S; large scores, inf and NaN in k or v; explicit
// scales; 1, 2 and 16 threads.
TEST(CpuAttention, RandomCasesMatchAnExplicitDecompositionOnEveryCapability) {
  using cpu::CpuCapability;
  const CpuCapability saved = cpu::cpu_capability();
  const int threads = omp_get_max_threads();
  std::mt19937 rng(2026);
  auto pick = [&](std::initializer_list<int64_t> v) {
    return *(v.begin() + static_cast<int64_t>(rng() % v.size()));
  };
  const double inf = std::numeric_limits<double>::infinity();
  for (int it = 0; it < 40; ++it) {
    const int64_t B = pick({1, 2}), H = pick({1, 3}), L = pick({1, 7, 8, 9, 17, 33, 70});
    const int64_t S = pick({1, 2, 15, 16, 17, 31, 32, 33, 65, 129}), E = pick({1, 3, 17, 33, 65});
    const int64_t layout = static_cast<int64_t>(rng() % 3);
    const int64_t Ev = layout == 2 ? E : pick({1, 5, 32, 33, 65});
    const int64_t Sx = layout == 2 ? L : S;  // packed heads: as many keys as queries
    manual_seed(static_cast<uint64_t>(it) + 100);
    const int64_t special = static_cast<int64_t>(rng() % 5);  // inf / NaN into k or v
    // Large scores, but not beside inf or NaN: a probability that float32
    // flushes to 0 (float64 not) turns an inf of v into NaN there.
    const double spread = special >= 3 ? 1 : pick({1, 1, 30});
    Tensor q, k, v;
    if (layout == 0) {
      q = randn({B, H, L, E}) * spread, k = randn({B, H, Sx, E}) * spread,
      v = randn({B, H, Sx, Ev});
    } else if (layout == 1) {  // [B, L, H, E] transposed
      q = (randn({B, L, H, E}) * spread).transpose(1, 2);
      k = (randn({B, Sx, H, E}) * spread).transpose(1, 2);
      v = randn({B, Sx, H, Ev}).transpose(1, 2);
    } else {  // GPT-2's packed [B, T, 3 * H * E]
      Tensor qkv = randn({B, L, 3 * H * E}) * spread;
      auto part = [&](int64_t i) {
        return qkv.narrow(2, i * H * E, H * E).view({B, L, H, E}).transpose(1, 2);
      };
      q = part(0), k = part(1), v = part(2);
    }
    if (special >= 3) {
      Tensor& t = special == 3 ? k : v;
      t = t.contiguous();
      t.select(0, 0)
          .select(0, 0)
          .select(0, static_cast<int64_t>(rng() % Sx))
          .select(0, 0)
          .fill_(Scalar(rng() % 2 ? inf : std::numeric_limits<double>::quiet_NaN()));
    }
    // Masks: none, [Sx] keys, [B, 1, L, 1] rows (some rows see no key), [H, L, Sx]
    // bool, additive [L, Sx] with -inf, additive [B, H, 1, Sx].
    Tensor mask;
    const int64_t mk = static_cast<int64_t>(rng() % 6);
    const bool causal = mk == 0 && rng() % 2;
    if (mk == 1) mask = rand({Sx}) > Scalar(0.3);
    if (mk == 2) mask = rand({B, 1, L, 1}) > Scalar(0.3);
    if (mk == 3) mask = rand({H, L, Sx}) > Scalar(0.5);
    if (mk == 4) mask = where(rand({L, Sx}) > Scalar(0.3), randn({L, Sx}) * 2, Scalar(-inf));
    if (mk == 5) mask = randn({B, H, 1, Sx});
    const std::optional<double> scale =
        rng() % 2 ? std::nullopt : std::optional<double>(pick({1, 2, 3}) * 0.25);
    const std::string what = ::testing::PrintToString(std::vector<int64_t>{
        it, B, H, L, Sx, E, Ev, layout, special, mk, causal, scale.has_value()});
    // The decomposition in float64, written out.
    Tensor qd = q.to(DType::Float64), kd = k.to(DType::Float64), vd = v.to(DType::Float64);
    Tensor s = matmul(qd, kd.transpose(-2, -1)) *
               Scalar(scale.value_or(1.0 / std::sqrt(static_cast<double>(E))));
    if (causal) s = where(tril(ones({L, Sx}, TensorOptions(DType::Bool))), s, Scalar(-inf));
    if (mask.defined())
      s = mask.dtype() == DType::Bool ? where(mask, s, Scalar(-inf)) : s + mask.to(DType::Float64);
    Tensor p = softmax(s, -1);
    if (mask.defined() || causal)
      p = where(eq(amax(s, {-1}, true), full({1}, Scalar(-inf), TensorOptions(DType::Float64))),
                Scalar(0.0), p);
    const std::vector<double> want = vals(matmul(p, vd));
    std::optional<Tensor> m;
    if (mask.defined()) m = mask;
    // Scores of 30 x 30 x E / sqrt(E): exp amplifies their float32 rounding.
    const double tol = spread > 1 ? 2e-3 * std::sqrt(static_cast<double>(E)) : 3e-5;
    std::vector<double> first;
    for (int c = 0; c <= static_cast<int>(cpu::hardware_cpu_capability()); ++c) {
      cpu::set_cpu_capability(static_cast<CpuCapability>(c));
      omp_set_num_threads(c == 0 ? 1 : c == 1 ? 2 : 16);
      Tensor out = empty({B, H, L, Ev});
      ASSERT_TRUE(backend::backend(Device()).fused_attention(
          q, k, v, m ? *m : Tensor(), causal,
          scale.value_or(1.0 / std::sqrt(static_cast<double>(E))), out))
          << what;
      const std::vector<double> got =
          vals(scaled_dot_product_attention(q, k, v, m, 0.0, causal, scale));
      const std::vector<double> direct = vals(out);
      ASSERT_EQ(got.size(), want.size()) << what;
      int bad = 0;
      for (size_t i = 0; i < got.size() && bad < 3; ++i) {
        const bool same = std::isnan(got[i]) ? std::isnan(direct[i]) : got[i] == direct[i];
        const bool close = std::isnan(want[i]) ? std::isnan(got[i])
                           : std::isinf(want[i])
                               ? got[i] == want[i]
                               : std::fabs(got[i] - want[i]) <= tol * (1 + std::fabs(want[i]));
        const bool as_first =
            first.empty() || (std::isnan(first[i]) ? std::isnan(got[i]) : got[i] == first[i]);
        if (!same || !close || !as_first) {
          ADD_FAILURE() << what << " at " << i << ": got " << got[i] << " (kernel " << direct[i]
                        << "), want " << want[i] << ", first capability "
                        << (first.empty() ? want[i] : first[i]) << " on "
                        << cpu::cpu_capability_name(static_cast<CpuCapability>(c));
          ++bad;
        }
      }
      if (first.empty()) first = got;
    }
  }
  omp_set_num_threads(threads);
  cpu::set_cpu_capability(saved);
}

// A bool mask whose rows keep every key (BERT's padding mask of a batch
// without padding) is read as no mask: the same bits as no mask at all, on
// every capability, for a key-padding [B, 1, 1, S] mask and a full one, also
// where only some rows keep every key.
TEST(CpuAttention, AllTrueBoolMaskRowsGiveTheBitsOfNoMask) {
  using cpu::CpuCapability;
  const CpuCapability saved = cpu::cpu_capability();
  const Sizes s{2, 3, 19, 37, 20, 45};
  const Heads h = heads(s, 77);
  const Tensor keep_keys = ones({s.B, 1, 1, s.S}, TensorOptions(DType::Bool));
  Tensor keep_some = ones({s.B, s.H, s.L, s.S}, TensorOptions(DType::Bool));
  keep_some.select(2, 3).select(2, 5).fill_(false);  // row 3 of every pair drops key 5
  for (int c = 0; c <= static_cast<int>(cpu::hardware_cpu_capability()); ++c) {
    cpu::set_cpu_capability(static_cast<CpuCapability>(c));
    for (bool causal : {false, true}) {
      const std::vector<double> none = vals(fused(h.q, h.k, h.v, Tensor(), causal));
      EXPECT_EQ(vals(fused(h.q, h.k, h.v, keep_keys, causal)), none)
          << cpu::cpu_capability_name(static_cast<CpuCapability>(c)) << " causal " << causal;
      const std::vector<double> some = vals(fused(h.q, h.k, h.v, keep_some, causal));
      ASSERT_EQ(some.size(), none.size());
      const int64_t row = s.Ev;  // elements of one output row
      for (size_t i = 0; i < some.size(); ++i) {
        if ((static_cast<int64_t>(i) / row) % s.L != 3) {
          EXPECT_EQ(some[i], none[i]) << "at " << i;
        }
      }
      if (!causal) {  // the row that drops a key, against the eager op
        const std::vector<double> want =
            vals(scaled_dot_product_attention(h.q, h.k, h.v, keep_some));
        for (size_t i = 0; i < some.size(); ++i) EXPECT_NEAR(some[i], want[i], 1e-5) << "at " << i;
      }
    }
  }
  cpu::set_cpu_capability(saved);
}

// Outputs of 4 MiB and more (MiniLM's attention at 24 sentences: q, k and v
// heads of packed [B, T, H * D] tensors, the batch prefetched a span at a
// time) are written with non-temporal stores on AVX-512, whole lines where a
// row's start allows (Ev 40: rows at every 32-byte offset, the last 8 dims
// stored as before): the bits of the portable copy, and the float64
// decomposition's values.
TEST(CpuAttention, LargeOutputsAreStreamedWithTheSameBits) {
  using cpu::CpuCapability;
  const CpuCapability saved = cpu::cpu_capability();
  const Sizes cases[] = {{24, 12, 128, 128, 32, 32}, {22, 12, 128, 128, 32, 40}};
  uint64_t seed = 91;
  for (const Sizes& s : cases) {
    const Heads h = heads(s, seed++);
    Tensor lengths = from_vector<int64_t>(std::vector<int64_t>(s.B, s.S - 37), {s.B, 1, 1, 1});
    const Tensor padding = lt(arange(s.S).view({1, 1, 1, s.S}), lengths);
    const Tensor keep_all = ones({s.B, 1, 1, s.S}, TensorOptions(DType::Bool));
    const Tensor masks_of_case[] = {Tensor(), padding, keep_all};
    for (int m = 0; m < 3; ++m) {
      const Tensor& mask = masks_of_case[m];
      cpu::set_cpu_capability(CpuCapability::Default);
      const std::vector<double> want = vals(fused(h.q, h.k, h.v, mask, false));
      for (int c = 1; c <= static_cast<int>(cpu::hardware_cpu_capability()); ++c) {
        cpu::set_cpu_capability(static_cast<CpuCapability>(c));
        EXPECT_EQ(vals(fused(h.q, h.k, h.v, mask, false)), want)
            << "Ev " << s.Ev << " mask " << mask.defined() << " on "
            << cpu::cpu_capability_name(static_cast<CpuCapability>(c));
      }
      if (m == 1) {  // against float64, with the padding
        cpu::set_cpu_capability(saved);
        expect_close(vals(fused(h.q, h.k, h.v, mask, false)), vals(reference(h, mask, false)),
                     2e-5);
      }
    }
  }
  cpu::set_cpu_capability(saved);
}
