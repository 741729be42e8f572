// `smelt bench ops` and `smelt bench op-shapes`: eager time of single ops, one
// row per op, for the per-op comparison with PyTorch eager
// (bench/torch_compare.py --workload ops|op-shapes runs the same list in
// PyTorch and calls this command for smelt's side). `ops` is issue 11's set
// of common ops at one shape (512x1024 float32); `op-shapes` the same kinds
// of kernel at the shapes that take other paths (narrow and wide rows,
// middle dims, 1-D, small tensors, integer and half dtypes).
//
// Inputs are the same numbers in both programs: element i of input `salt` is
// u * 8 - 4 (or u + 0.5 for positive inputs) with
// u = ((i * 2654435761 + salt * 40503) mod 2^32) / 2^32, computed exactly in
// double and rounded once to the dtype; indices are hashes modulo the size.
// The op lists (names, shapes, what each runs) must stay in step with
// op_cases and shape_cases in bench/torch_compare.py.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "commands.h"
#include "smelt/autograd.h"
#include "smelt/ops.h"

namespace smelt::cli {

namespace {

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

/// Median of `iters` timed calls after one warm-up (iters 0: enough for ~300 ms, 5 to 200).
double median_ms(const std::function<Tensor()>& f, int iters) {
  f();
  if (iters <= 0) {
    auto t0 = std::chrono::steady_clock::now();
    f();
    iters = static_cast<int>(std::clamp(300.0 / std::max(ms_since(t0), 1e-3), 5.0, 200.0));
  }
  std::vector<double> t;
  for (int i = 0; i < iters; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    Tensor r = f();
    t.push_back(ms_since(t0));
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

/// Hash of element i and input `salt` in [0, 1) (see the file comment).
double hash_unit(int64_t i, int64_t salt) {
  const uint64_t v =
      (static_cast<uint64_t>(i) * 2654435761ULL + static_cast<uint64_t>(salt) * 40503ULL) &
      0xffffffffULL;
  return static_cast<double>(v) / 4294967296.0;
}

/// Values in [-4, 4) (positive: [0.5, 1.5)) of `shape`, float32.
Tensor input(const Shape& shape, int64_t salt, bool positive = false) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const double u = hash_unit(i, salt);
    v[static_cast<size_t>(i)] = static_cast<float>(positive ? u + 0.5 : u * 8.0 - 4.0);
  }
  return from_vector(v, shape);
}

/// Indices in [0, bound) of `shape`, int64.
Tensor indices(const Shape& shape, int64_t salt, int64_t bound) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    v[static_cast<size_t>(i)] =
        static_cast<int64_t>(hash_unit(i, salt) * static_cast<double>(bound));
  return from_vector(v, shape);
}

struct OpCase {
  std::string name;
  std::string shape;  // for the table
  std::function<Tensor()> run;
};

/// The `ops` list (bench/torch_compare.py's op_cases has the same names, shapes and inputs).
std::vector<OpCase> op_cases() {
  constexpr int64_t R = 512, C = 1024;
  const std::string rc = fmt::format("{}x{}", R, C);
  Tensor x = input({R, C}, 1), y = input({R, C}, 2), xp = input({R, C}, 3, true);
  Tensor row = input({C}, 4), g = input({C}, 5), b = input({C}, 6);
  Tensor mask = input({R, C}, 7) > Scalar(0.0);
  Tensor a = input({R, C}, 8), bm = input({C, R}, 9);
  Tensor sel = indices({R}, 10, R), gidx = indices({R, C}, 11, C);
  Tensor emb = input({30522, 384}, 12), ids = indices({32, 128}, 13, 30522);
  Tensor x64 = to_dtype(x, DType::Float64);
  std::vector<OpCase> v;
  auto add = [&](std::string name, std::string shape, std::function<Tensor()> f) {
    v.push_back({std::move(name), std::move(shape), std::move(f)});
  };
  add("add", rc, [=] { return x + y; });
  add("sub", rc, [=] { return x - y; });
  add("mul", rc, [=] { return x * y; });
  add("div", rc, [=] { return x / y; });
  add("add_bias_row", rc + " + " + std::to_string(C), [=] { return x + row; });
  add("mul_scalar", rc, [=] { return x * Scalar(0.5); });
  add("maximum", rc, [=] { return maximum(x, y); });
  add("abs", rc, [=] { return abs(x); });
  add("neg", rc, [=] { return neg(x); });
  add("exp", rc, [=] { return exp(x); });
  add("log", rc, [=] { return log(xp); });
  add("sqrt", rc, [=] { return sqrt(xp); });
  add("rsqrt", rc, [=] { return rsqrt(xp); });
  add("sin", rc, [=] { return sin(x); });
  add("cos", rc, [=] { return cos(x); });
  add("tanh", rc, [=] { return tanh(x); });
  add("sigmoid", rc, [=] { return sigmoid(x); });
  add("erf", rc, [=] { return erf(x); });
  add("relu", rc, [=] { return relu(x); });
  add("gelu", rc, [=] { return gelu(x); });
  add("gelu_tanh", rc, [=] { return gelu(x, "tanh"); });
  add("silu", rc, [=] { return silu(x); });
  add("pow_scalar", rc, [=] { return pow(xp, Scalar(2.5)); });
  add("clamp", rc, [=] { return clamp(x, Scalar(-1.0), Scalar(1.0)); });
  add("gt", rc, [=] { return gt(x, y); });
  add("where", rc, [=] { return where(mask, x, y); });
  add("sum_last", rc, [=] { return sum(x, {-1}); });
  add("sum_first", rc, [=] { return sum(x, {0}); });
  add("mean_last", rc, [=] { return mean(x, {-1}); });
  add("mean_first", rc, [=] { return mean(x, {0}); });
  add("amax_last", rc, [=] { return amax(x, {-1}); });
  add("amax_first", rc, [=] { return amax(x, {0}); });
  add("sum_all", rc, [=] { return sum(x); });
  add("argmax_last", rc, [=] { return argmax(x, -1); });
  add("var_last", rc, [=] { return var(x, {-1}); });
  add("softmax", rc + " dim -1", [=] { return softmax(x, -1); });
  add("log_softmax", rc + " dim -1", [=] { return log_softmax(x, -1); });
  add("layer_norm", rc + " w,b", [=] { return layer_norm(x, {C}, g, b, 1e-5); });
  add("matmul", fmt::format("{}x{} @ {}x{}", R, C, C, R), [=] { return matmul(a, bm); });
  add("transpose_contig", rc + " .t()", [=] { return contiguous(x.t()); });
  add("cat_dim0", "2 x " + rc, [=] { return cat({x, y}, 0); });
  add("cat_dim1", "2 x " + rc, [=] { return cat({x, y}, 1); });
  add("index_select", rc + " dim 0", [=] { return index_select(x, 0, sel); });
  add("gather", rc + " dim 1", [=] { return gather(x, 1, gidx); });
  add("embedding", "30522x384 [32x128]", [=] { return embedding(emb, ids); });
  add("to_float16", rc, [=] { return to_dtype(x, DType::Float16); });
  add("to_float64", rc, [=] { return to_dtype(x, DType::Float64); });
  add("to_float32", rc + " float64", [=] { return to_dtype(x64, DType::Float32); });
  add("randn", rc, [] { return randn({R, C}); });
  return v;
}

/// The `op-shapes` list (bench/torch_compare.py's shape_cases has the same
/// names, shapes and inputs).
std::vector<OpCase> shape_cases() {
  Tensor s64 = input({64, 64}, 1), t64 = input({64, 64}, 2);
  Tensor s256 = input({256, 256}, 1), t256 = input({256, 256}, 2);
  Tensor tall = input({65536, 4}, 1), wide = input({4, 65536}, 2);
  Tensor x3 = input({32, 128, 64}, 3), y3 = input({128, 32, 64}, 4);
  Tensor g64 = input({64}, 5), b64 = input({64}, 6);
  Tensor big = input({2048, 1024}, 7), col = input({2048, 1}, 8);
  Tensor v = input({1 << 20}, 9),
         vi = to_dtype(input({1 << 20}, 10) * Scalar(1000.0), DType::Int64);
  Tensor vh = to_dtype(v, DType::BFloat16);
  Tensor sel1 = indices({65536}, 11, 1 << 20), sel_tall = indices({65536}, 12, 65536);
  Tensor gi1 = indices({1 << 20}, 13, 1 << 20);
  Tensor qa = input({16, 128, 64}, 14), qb = input({16, 64, 128}, 15);
  std::vector<OpCase> cases;
  auto add = [&](std::string name, std::string shape, std::function<Tensor()> f) {
    cases.push_back({std::move(name), std::move(shape), std::move(f)});
  };
  add("add_64", "64x64", [=] { return s64 + t64; });
  add("add_256", "256x256", [=] { return s256 + t256; });
  add("exp_256", "256x256", [=] { return exp(s256); });
  add("sum_last_64", "64x64", [=] { return sum(s64, {-1}); });
  add("softmax_256", "256x256 dim -1", [=] { return softmax(s256, -1); });
  add("add_column", "2048x1024 + 2048x1", [=] { return big + col; });
  add("add_transposed", "32x128x64 + .transpose(0,1)", [=] { return x3 + transpose(y3, 0, 1); });
  add("permute_102", "32x128x64", [=] { return contiguous(permute(x3, {1, 0, 2})); });
  add("permute_021", "32x128x64", [=] { return contiguous(permute(x3, {0, 2, 1})); });
  add("sum_dim0_tall", "65536x4 dim 0", [=] { return sum(tall, {0}); });
  add("sum_dim1_tall", "65536x4 dim 1", [=] { return sum(tall, {1}); });
  add("sum_dim0_wide", "4x65536 dim 0", [=] { return sum(wide, {0}); });
  add("sum_dim1_wide", "4x65536 dim 1", [=] { return sum(wide, {1}); });
  add("sum_mid", "32x128x64 dim 1", [=] { return sum(x3, {1}); });
  add("sum_outer", "32x128x64 dims 0,2", [=] { return sum(x3, {0, 2}); });
  add("amax_mid", "32x128x64 dim 1", [=] { return amax(x3, {1}); });
  add("mean_outer", "32x128x64 dims 0,2", [=] { return mean(x3, {0, 2}); });
  add("var_first", "2048x1024 dim 0", [=] { return var(big, {0}); });
  add("argmax_first", "2048x1024 dim 0", [=] { return argmax(big, 0); });
  add("softmax_first", "2048x1024 dim 0", [=] { return softmax(big, 0); });
  add("softmax_64", "32x128x64 dim -1", [=] { return softmax(x3, -1); });
  add("layer_norm_64", "32x128x64 w,b", [=] { return layer_norm(x3, {64}, g64, b64, 1e-5); });
  add("sum_1d", "2^20", [=] { return sum(v); });
  add("sum_int64", "2^20 int64", [=] { return sum(vi); });
  add("exp_1d", "2^20", [=] { return exp(v); });
  add("to_bfloat16", "2^20", [=] { return to_dtype(v, DType::BFloat16); });
  add("bfloat16_to_float", "2^20 bfloat16", [=] { return to_dtype(vh, DType::Float32); });
  add("add_bfloat16", "2^20 bfloat16", [=] { return vh + vh; });
  add("index_select_1d", "2^20 [65536]", [=] { return index_select(v, 0, sel1); });
  add("index_select_tall", "65536x4 dim 0", [=] { return index_select(tall, 0, sel_tall); });
  add("gather_1d", "2^20", [=] { return gather(v, 0, gi1); });
  add("cat_small", "4 x 64x64 dim 0", [=] { return cat({s64, t64, s64, t64}, 0); });
  add("stack", "4 x 256x256", [=] { return stack({s256, t256, s256, t256}, 0); });
  add("tril", "2048x1024", [=] { return tril(big); });
  add("pad", "2048x1024 (1,1,1,1)", [=] { return pad(big, {1, 1, 1, 1}); });
  add("cumsum_first", "2048x1024 dim 0", [=] { return cumsum(big, 0); });
  add("cumsum_last", "2048x1024 dim 1", [=] { return cumsum(big, 1); });
  add("bmm", "16x128x64 @ 16x64x128", [=] { return matmul(qa, qb); });
  add("where_scalar", "2048x1024", [=] { return where(big > Scalar(0.0), big, Scalar(0.0)); });
  return cases;
}

}  // namespace

int cmd_bench_ops(const BenchOptions& opts) {
  NoGradGuard no_grad;
  std::vector<OpCase> cases = opts.workload == "op-shapes" ? shape_cases() : op_cases();
  if (!opts.json)
    std::puts(fmt::format("{:<17} {:<22} {:>10}", "op", "shape (float32)", "eager_ms").c_str());
  for (auto& c : cases) {
    if (!opts.filter.empty() && c.name.find(opts.filter) == std::string::npos) continue;
    const double ms = median_ms(c.run, opts.iters);
    if (opts.json) {
      nlohmann::json j{{"op", c.name}, {"shape", c.shape}, {"eager_ms", ms}};
      std::puts(j.dump().c_str());
    } else {
      std::puts(fmt::format("{:<17} {:<22} {:>10.4f}", c.name, c.shape, ms).c_str());
    }
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace smelt::cli
