// gradcheck: every differentiable op of the op table against central finite
// differences in float64 (PyTorch's torch.autograd.gradcheck): for random
// upstream gradients v, d/dx sum(v * f(x)) from autograd equals
// (sum(v * f(x + eps e_k)) - sum(v * f(x - eps e_k))) / (2 eps) for every element
// k of every differentiable input. Inputs keep clear of the points where an op
// jumps (floor, remainder, ties of max). A few ops also pass the same check
// one order up (gradgradcheck: create_graph=true). A test fails when an op of
// the table has no case here.
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <set>

#include "ops/op_table.h"
#include "smelt/autograd.h"
#include "smelt/ops.h"
#include "test_util.h"

namespace {

using namespace smelt;

using Fn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

struct Case {
  std::string op;    // the op-table entry it checks
  std::string name;  // unique, for messages
  std::vector<Tensor> inputs;
  Fn fn;
  std::vector<bool> diff = {};  // inputs to differentiate (default: the floating ones)
  double eps = 1e-6;
};

/// Deterministic values in [lo, hi) (a small LCG: the same on every machine).
Tensor rnd(const Shape& shape, double lo, double hi, uint64_t seed) {
  int64_t n = 1;
  for (auto d : shape) n *= d;
  std::vector<double> v(static_cast<size_t>(n));
  uint64_t s = seed * 6364136223846793005ULL + 1442695040888963407ULL;
  for (auto& x : v) {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    x = lo + (hi - lo) * static_cast<double>(s >> 11) / 9007199254740992.0;
  }
  return from_vector<double>(v, shape);
}
Tensor rn(const Shape& shape, uint64_t seed) { return rnd(shape, -2, 2, seed); }
Tensor pos(const Shape& shape, uint64_t seed) { return rnd(shape, 0.5, 2.5, seed); }
Tensor idx(const std::vector<int64_t>& v, const Shape& s) { return from_vector<int64_t>(v, s); }
Tensor mask(const std::vector<bool>& v, const Shape& s) { return from_vector<bool>(v, s); }

/// self with rows `indices` set to `values`, through Tensor::index_put_ on a non-leaf
/// copy (the recorded ops: index_put, then copy_).
Tensor call_index_put(const Tensor& self, const Tensor& indices, const Tensor& values) {
  Tensor y = self * 1.0;
  y.index_put_(indices, values);
  return y;
}

Fn one(std::function<Tensor(const std::vector<Tensor>&)> f) {
  return [f](const std::vector<Tensor>& x) { return std::vector<Tensor>{f(x)}; };
}

std::vector<bool> diff_of(const Case& c) {
  if (!c.diff.empty()) return c.diff;
  std::vector<bool> d;
  for (const auto& t : c.inputs) d.push_back(is_floating(t.dtype()));
  return d;
}

/// sum over the chosen outputs of sum(v_j * out_j).
double weighted(const std::vector<Tensor>& outs, const std::vector<size_t>& which,
                const std::vector<Tensor>& v) {
  double s = 0;
  for (size_t k = 0; k < which.size(); ++k)
    s += sum(mul(to_dtype(outs[which[k]], float64), v[k])).item<double>();
  return s;
}

/// Compares autograd's gradients of `value(x)` (a scalar function of the inputs
/// given as leaves) with central differences of it.
void compare_with_differences(const Case& c,
                              const std::function<Tensor(const std::vector<Tensor>&)>& value,
                              const std::function<double(const std::vector<Tensor>&)>& numeric,
                              const char* order) {
  const std::vector<bool> diff = diff_of(c);
  std::vector<Tensor> in, leaves;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    Tensor t = c.inputs[i].clone();
    if (diff[i]) {
      t.requires_grad_();
      leaves.push_back(t);
    }
    in.push_back(t);
  }
  ASSERT_FALSE(leaves.empty()) << c.name;
  Tensor y = value(in);
  // A value that does not depend on the inputs (the gradient of a linear op) has
  // no graph: its derivative is 0.
  std::vector<Tensor> analytic(leaves.size());
  if (y.requires_grad())
    analytic = autograd::grad({y}, leaves, {}, std::nullopt, false, /*allow_unused=*/true);
  size_t li = 0;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    if (!diff[i]) continue;
    const Tensor& a = analytic[li++];
    const int64_t n = c.inputs[i].numel();
    std::vector<double> got = a.defined() ? a.to_vector<double>() : std::vector<double>(n, 0.0);
    ASSERT_EQ(static_cast<int64_t>(got.size()), n) << c.name;
    for (int64_t k = 0; k < n; ++k) {
      auto at = [&](double delta) {
        std::vector<Tensor> x;
        for (size_t j = 0; j < c.inputs.size(); ++j) {
          Tensor t = c.inputs[j].clone();
          if (j == i) t.view({-1})[k].add_(delta);
          x.push_back(t);
        }
        return numeric(x);
      };
      const double num = (at(c.eps) - at(-c.eps)) / (2 * c.eps);
      EXPECT_NEAR(got[k], num, 1e-5 + 1e-4 * std::abs(num))
          << c.name << " (" << order << "): input " << i << ", element " << k;
    }
  }
}

void gradcheck(const Case& c) {
  // Upstream gradients for the floating outputs.
  std::vector<size_t> which;
  std::vector<Tensor> v;
  {
    NoGradGuard no_grad;
    std::vector<Tensor> outs = c.fn(c.inputs);
    for (size_t j = 0; j < outs.size(); ++j)
      if (is_floating(outs[j].dtype())) {
        which.push_back(j);
        v.push_back(rn(outs[j].sizes(), 1000 + j));
      }
  }
  auto value = [&](const std::vector<Tensor>& x) {
    std::vector<Tensor> outs = c.fn(x);
    Tensor s = zeros({}, float64);
    for (size_t k = 0; k < which.size(); ++k)
      s = add(s, sum(mul(to_dtype(outs[which[k]], float64), v[k])));
    return s;
  };
  auto numeric = [&](const std::vector<Tensor>& x) {
    NoGradGuard no_grad;
    return weighted(c.fn(x), which, v);
  };
  compare_with_differences(c, value, numeric, "first order");
}

/// The same check for the gradient itself: d/dx sum(w * grad_x(sum(v * f(x)))).
void gradgradcheck(const Case& c) {
  const std::vector<bool> diff = diff_of(c);
  std::vector<Tensor> v, w;
  {
    NoGradGuard no_grad;
    std::vector<Tensor> outs = c.fn(c.inputs);
    for (size_t j = 0; j < outs.size(); ++j) v.push_back(rn(outs[j].sizes(), 2000 + j));
    for (size_t i = 0; i < c.inputs.size(); ++i)
      if (diff[i]) w.push_back(rn(c.inputs[i].sizes(), 3000 + i));
  }
  // sum(w * first-order gradients), recorded when create_graph.
  auto first = [&](const std::vector<Tensor>& x, bool create_graph) {
    std::vector<Tensor> leaves;
    for (size_t i = 0; i < x.size(); ++i)
      if (diff[i]) leaves.push_back(x[i]);
    std::vector<Tensor> outs = c.fn(x);
    std::vector<Tensor> g =
        autograd::grad(outs, leaves, v, std::nullopt, create_graph, /*allow_unused=*/true);
    Tensor s = zeros({}, float64);
    for (size_t k = 0; k < g.size(); ++k)
      if (g[k].defined()) s = add(s, sum(mul(g[k], w[k])));
    return s;
  };
  auto value = [&](const std::vector<Tensor>& x) { return first(x, true); };
  auto numeric = [&](const std::vector<Tensor>& x) {
    std::vector<Tensor> leaves;
    for (size_t i = 0; i < x.size(); ++i)
      leaves.push_back(diff[i] ? x[i].clone().requires_grad_() : x[i]);
    return first(leaves, false).item<double>();
  };
  compare_with_differences(c, value, numeric, "second order");
}

std::vector<Case> cases() {
  std::vector<Case> cs;
  auto unary = [&](const std::string& op, std::function<Tensor(const Tensor&)> f, Tensor x) {
    cs.push_back({op, op, {x}, one([f](const std::vector<Tensor>& in) { return f(in[0]); })});
  };
  auto binary = [&](const std::string& op, std::function<Tensor(const Tensor&, const Tensor&)> f,
                    Tensor a, Tensor b, std::string name = "") {
    cs.push_back({op, name.empty() ? op : name, {a, b}, one([f](const std::vector<Tensor>& in) {
                    return f(in[0], in[1]);
                  })});
  };
  const Shape S{3, 4};
  // ---- pointwise, unary ----
  unary(
      "neg", [](const Tensor& x) { return neg(x); }, rn(S, 1));
  unary(
      "abs", [](const Tensor& x) { return abs(x); }, rn(S, 2));
  unary(
      "sign", [](const Tensor& x) { return sign(x); }, rn(S, 3));
  unary(
      "exp", [](const Tensor& x) { return exp(x); }, rn(S, 4));
  unary(
      "exp2", [](const Tensor& x) { return exp2(x); }, rn(S, 5));
  unary(
      "expm1", [](const Tensor& x) { return expm1(x); }, rn(S, 6));
  unary(
      "log", [](const Tensor& x) { return log(x); }, pos(S, 7));
  unary(
      "log2", [](const Tensor& x) { return log2(x); }, pos(S, 8));
  unary(
      "log1p", [](const Tensor& x) { return log1p(x); }, rnd(S, -0.5, 2, 9));
  unary(
      "sqrt", [](const Tensor& x) { return sqrt(x); }, pos(S, 10));
  unary(
      "rsqrt", [](const Tensor& x) { return rsqrt(x); }, pos(S, 11));
  unary(
      "reciprocal", [](const Tensor& x) { return reciprocal(x); }, pos(S, 12));
  unary(
      "sin", [](const Tensor& x) { return sin(x); }, rn(S, 13));
  unary(
      "cos", [](const Tensor& x) { return cos(x); }, rn(S, 14));
  unary(
      "tan", [](const Tensor& x) { return tan(x); }, rnd(S, -1, 1, 15));
  unary(
      "tanh", [](const Tensor& x) { return tanh(x); }, rn(S, 16));
  unary(
      "sigmoid", [](const Tensor& x) { return sigmoid(x); }, rn(S, 17));
  unary(
      "relu", [](const Tensor& x) { return relu(x); }, rn(S, 18));
  unary(
      "gelu", [](const Tensor& x) { return gelu(x); }, rn(S, 19));
  cs.push_back({"gelu", "gelu_tanh", {rn(S, 20)}, one([](const std::vector<Tensor>& in) {
                  return gelu(in[0], "tanh");
                })});
  unary(
      "silu", [](const Tensor& x) { return silu(x); }, rn(S, 21));
  unary(
      "erf", [](const Tensor& x) { return erf(x); }, rn(S, 22));
  unary(
      "floor", [](const Tensor& x) { return floor(x); }, rn(S, 23));
  unary(
      "ceil", [](const Tensor& x) { return ceil(x); }, rn(S, 24));
  unary(
      "round", [](const Tensor& x) { return round(x); }, rn(S, 25));
  unary(
      "trunc", [](const Tensor& x) { return trunc(x); }, rn(S, 26));
  unary(
      "nan_to_num", [](const Tensor& x) { return nan_to_num(x); }, rn(S, 27));
  // through float32 and back: rounding needs a larger step
  cs.push_back({"to_dtype",
                "to_dtype",
                {rn(S, 28)},
                one([](const std::vector<Tensor>& in) {
                  return to_dtype(to_dtype(in[0], float32), float64);
                }),
                {},
                1e-2});
  unary(
      "clone", [](const Tensor& x) { return clone(x); }, rn(S, 29));
  // ---- pointwise, binary and ternary (with broadcasting) ----
  const Shape A{3, 1, 4}, B{2, 1};
  binary(
      "add", [](const Tensor& a, const Tensor& b) { return add(a, b, 2.5); }, rn(A, 30), rn(B, 31));
  binary(
      "sub", [](const Tensor& a, const Tensor& b) { return sub(a, b, 0.5); }, rn(A, 32), rn(B, 33));
  binary(
      "mul", [](const Tensor& a, const Tensor& b) { return mul(a, b); }, rn(A, 34), rn(B, 35));
  cs.push_back({"mul", "mul_number", {rn(S, 36)}, one([](const std::vector<Tensor>& in) {
                  return in[0] * 1.5;
                })});
  binary(
      "div", [](const Tensor& a, const Tensor& b) { return div(a, b); }, rn(A, 37), pos(B, 38));
  binary(
      "div", [](const Tensor& a, const Tensor& b) { return div(a, b, "floor"); }, rn(A, 39),
      pos(B, 40), "div_floor");
  binary(
      "remainder", [](const Tensor& a, const Tensor& b) { return remainder(a, b); }, rn(A, 41),
      pos(B, 42));
  binary(
      "fmod", [](const Tensor& a, const Tensor& b) { return fmod(a, b); }, rn(A, 43), pos(B, 44));
  binary(
      "pow", [](const Tensor& a, const Tensor& b) { return pow(a, b); }, pos(A, 45), rn(B, 46));
  cs.push_back({"pow", "pow_number", {rn(S, 47)}, one([](const std::vector<Tensor>& in) {
                  return pow(in[0], 3.0);
                })});
  cs.push_back({"pow", "pow_fraction", {pos(S, 171)}, one([](const std::vector<Tensor>& in) {
                  return pow(in[0], 0.3);
                })});
  binary(
      "maximum", [](const Tensor& a, const Tensor& b) { return maximum(a, b); }, rn(A, 48),
      rn(B, 49));
  binary(
      "minimum", [](const Tensor& a, const Tensor& b) { return minimum(a, b); }, rn(A, 50),
      rn(B, 51));
  binary(
      "fmax", [](const Tensor& a, const Tensor& b) { return fmax(a, b); }, rn(A, 52), rn(B, 53));
  binary(
      "fmin", [](const Tensor& a, const Tensor& b) { return fmin(a, b); }, rn(A, 54), rn(B, 55));
  binary(
      "atan2", [](const Tensor& a, const Tensor& b) { return atan2(a, b); }, rn(A, 56), rn(B, 57));
  cs.push_back({"where",
                "where",
                {mask({1, 0, 0, 1, 1, 0, 1, 0, 0, 1, 1, 1}, S), rn(S, 58), rn({1, 4}, 59)},
                one([](const std::vector<Tensor>& in) { return where(in[0], in[1], in[2]); })});
  cs.push_back({"clamp",
                "clamp_tensors",
                {rn(S, 60), rnd(S, -2, -0.1, 61), rnd({4}, 0.1, 2, 62)},
                one([](const std::vector<Tensor>& in) { return clamp(in[0], in[1], in[2]); })});
  cs.push_back({"clamp", "clamp_numbers", {rn(S, 63)}, one([](const std::vector<Tensor>& in) {
                  return clamp(in[0], Scalar(-0.5), Scalar(0.7));
                })});
  cs.push_back(
      {"clamp_min", "clamp_min", {rn(S, 64), rn(S, 65)}, one([](const std::vector<Tensor>& in) {
         return clamp(in[0], std::optional<Tensor>(in[1]), std::nullopt);
       })});
  cs.push_back(
      {"clamp_max", "clamp_max", {rn(S, 66), rn(S, 67)}, one([](const std::vector<Tensor>& in) {
         return clamp(in[0], std::nullopt, std::optional<Tensor>(in[1]));
       })});
  cs.push_back({"lerp",
                "lerp",
                {rn(S, 68), rn(S, 69), rnd({4}, 0, 1, 70)},
                one([](const std::vector<Tensor>& in) { return lerp(in[0], in[1], in[2]); })});
  cs.push_back(
      {"lerp", "lerp_number", {rn(S, 172), rn(S, 173)}, one([](const std::vector<Tensor>& in) {
         return lerp(in[0], in[1], 0.3);
       })});
  // ---- reductions ----
  const Shape R{3, 4, 5};
  unary(
      "sum",
      [](const Tensor& x) {
        return sum(x, {0, 2});
      },
      rn(R, 71));
  unary(
      "mean", [](const Tensor& x) { return mean(x, {1}, true); }, rn(R, 72));
  unary(
      "prod", [](const Tensor& x) { return prod(x, 1); }, rn(S, 73));
  // one zero in a row (the product of the others), two zeros in another (all 0)
  cs.push_back({"prod",
                "prod_zeros",
                {smelt_test::make({1.5, 0, -2, 0.5, 0, 0, 3, 1, 2, -1, 1.5, 0.5}, S)},
                one([](const std::vector<Tensor>& in) { return prod(in[0], 1); })});
  unary(
      "amax",
      [](const Tensor& x) {
        return amax(x, {0, 2});
      },
      rn(R, 74));
  unary(
      "amin", [](const Tensor& x) { return amin(x, {1}, true); }, rn(R, 75));
  cs.push_back({"max", "max_dim", {rn(S, 76)}, [](const std::vector<Tensor>& in) {
                  auto [v, i] = max(in[0], 1);
                  return std::vector<Tensor>{v, i};
                }});
  cs.push_back({"min", "min_dim", {rn(S, 77)}, [](const std::vector<Tensor>& in) {
                  auto [v, i] = min(in[0], 0, true);
                  return std::vector<Tensor>{v, i};
                }});
  unary(
      "var", [](const Tensor& x) { return var(x, {1}); }, rn(R, 78));
  unary(
      "std",
      [](const Tensor& x) {
        return smelt::std(x, {0, 2}, 0.0, true);
      },
      rn(R, 79));
  cs.push_back({"var_mean", "var_mean", {rn(R, 80)}, [](const std::vector<Tensor>& in) {
                  auto [v, m] = var_mean(in[0], {2});
                  return std::vector<Tensor>{v, m};
                }});
  unary(
      "logsumexp", [](const Tensor& x) { return logsumexp(x, {1}); }, rn(R, 81));
  unary(
      "cumsum", [](const Tensor& x) { return cumsum(x, 1); }, rn(S, 82));
  // ---- views ----
  unary(
      "view",
      [](const Tensor& x) {
        return x.view({4, 3});
      },
      rn(S, 83));
  unary(
      "reshape", [](const Tensor& x) { return x.t().reshape({12}); }, rn(S, 84));
  unary(
      "permute",
      [](const Tensor& x) {
        return x.permute({2, 0, 1});
      },
      rn(R, 85));
  unary(
      "transpose", [](const Tensor& x) { return x.transpose(0, 2); }, rn(R, 86));
  unary(
      "t", [](const Tensor& x) { return x.t(); }, rn(S, 87));
  cs.push_back(
      {"t", "t_1d", {rn({4}, 88)}, one([](const std::vector<Tensor>& in) { return in[0].t(); })});
  unary(
      "squeeze", [](const Tensor& x) { return x.squeeze(); }, rn({3, 1, 4}, 89));
  unary(
      "unsqueeze", [](const Tensor& x) { return x.unsqueeze(1); }, rn(S, 90));
  unary(
      "expand",
      [](const Tensor& x) {
        return x.expand({2, 3, 4});
      },
      rn({3, 1}, 91));
  unary(
      "broadcast_to",
      [](const Tensor& x) {
        return x.broadcast_to({2, 3, 4});
      },
      rn({1, 4}, 92));
  unary(
      "flatten", [](const Tensor& x) { return x.flatten(1); }, rn(R, 93));
  unary(
      "unflatten",
      [](const Tensor& x) {
        return x.unflatten(1, {2, 2});
      },
      rn(S, 94));
  unary(
      "narrow", [](const Tensor& x) { return x.narrow(1, 1, 2); }, rn(S, 95));
  unary(
      "slice", [](const Tensor& x) { return x.slice(0, 1, 8, 3); }, rn({9, 2}, 96));
  unary(
      "select", [](const Tensor& x) { return x.select(1, -1); }, rn(S, 97));
  cs.push_back({"split", "split", {rn({5, 2}, 98)}, [](const std::vector<Tensor>& in) {
                  return split(in[0], 2, 0);
                }});
  cs.push_back({"chunk", "chunk", {rn({2, 5}, 99)}, [](const std::vector<Tensor>& in) {
                  return chunk(in[0], 2, 1);
                }});
  unary(
      "contiguous", [](const Tensor& x) { return x.t().contiguous(); }, rn(S, 100));
  // ---- data movement ----
  cs.push_back({"index_select",
                "index_select",
                {rn({5, 3}, 101), idx({4, 0, 4, 2}, {4})},
                one([](const std::vector<Tensor>& in) { return index_select(in[0], 0, in[1]); })});
  cs.push_back({"gather",
                "gather",
                {rn(S, 102), idx({0, 3, 3, 1, 2, 0}, {3, 2})},
                one([](const std::vector<Tensor>& in) { return gather(in[0], 1, in[1]); })});
  cs.push_back(
      {"scatter_add",
       "scatter_add",
       {rn(S, 103), idx({1, 1, 0, 2, 2, 2}, {2, 3}), rn({2, 3}, 104)},
       one([](const std::vector<Tensor>& in) { return scatter_add(in[0], 0, in[1], in[2]); })});
  cs.push_back({"cat",
                "cat",
                {rn({2, 3}, 105), rn({1, 3}, 106), rn({3, 3}, 107)},
                one([](const std::vector<Tensor>& in) { return cat(in, 0); })});
  cs.push_back({"stack", "stack", {rn(S, 108), rn(S, 109)}, one([](const std::vector<Tensor>& in) {
                  return stack(in, 1);
                })});
  unary(
      "pad",
      [](const Tensor& x) {
        return pad(x, {1, -1, 2, 0}, 0.5);
      },
      rn(S, 110));
  unary(
      "tril", [](const Tensor& x) { return tril(x, 1); }, rn({4, 4}, 111));
  unary(
      "triu", [](const Tensor& x) { return triu(x, -1); }, rn({4, 4}, 112));
  cs.push_back(
      {"masked_fill",
       "masked_fill",
       {rn(S, 113), mask({1, 0, 1, 0}, {4})},
       one([](const std::vector<Tensor>& in) { return masked_fill(in[0], in[1], Scalar(-1.0)); })});
  cs.push_back({"embedding",
                "embedding",
                {rn({6, 3}, 114), idx({1, 4, 1, 0, 5, 1}, {2, 3})},
                one([](const std::vector<Tensor>& in) { return embedding(in[0], in[1]); })});
  cs.push_back(
      {"index_put",
       "index_put",
       {rn({5, 3}, 115), idx({3, 0}, {2}), rn({2, 3}, 116)},
       one([](const std::vector<Tensor>& in) { return call_index_put(in[0], in[1], in[2]); })});
  cs.push_back(
      {"index_put",
       "index_put_mask",
       {rn({4, 3}, 117), mask({0, 1, 1, 0}, {4}), rn({3}, 118)},
       one([](const std::vector<Tensor>& in) { return call_index_put(in[0], in[1], in[2]); })});
  // ---- matmul and nn ----
  binary(
      "matmul", [](const Tensor& a, const Tensor& b) { return matmul(a, b); }, rn({3, 4}, 119),
      rn({4, 2}, 120));
  binary(
      "matmul", [](const Tensor& a, const Tensor& b) { return matmul(a, b); },
      rn({2, 1, 3, 4}, 121), rn({3, 4, 2}, 122), "matmul_batched");
  binary(
      "matmul", [](const Tensor& a, const Tensor& b) { return matmul(a, b); }, rn({4}, 123),
      rn({2, 4, 3}, 124), "matmul_vec_mat");
  binary(
      "matmul", [](const Tensor& a, const Tensor& b) { return matmul(a, b); }, rn({2, 3, 4}, 125),
      rn({4}, 126), "matmul_mat_vec");
  binary(
      "matmul", [](const Tensor& a, const Tensor& b) { return matmul(a, b); }, rn({4}, 127),
      rn({4}, 128), "matmul_dot");
  cs.push_back({"linear",
                "linear",
                {rn({2, 3, 4}, 129), rn({5, 4}, 130), rn({5}, 131)},
                one([](const std::vector<Tensor>& in) { return linear(in[0], in[1], in[2]); })});
  binary(
      "linear", [](const Tensor& x, const Tensor& w) { return linear(x, w); }, rn({3, 4}, 132),
      rn({4}, 133), "linear_vector_weight");
  unary(
      "softmax", [](const Tensor& x) { return softmax(x, 1); }, rn(R, 134));
  unary(
      "log_softmax", [](const Tensor& x) { return log_softmax(x, -1); }, rn(R, 135));
  cs.push_back({"layer_norm",
                "layer_norm",
                {rn(R, 136), rn({4, 5}, 137), rn({4, 5}, 138)},
                one([](const std::vector<Tensor>& in) {
                  return layer_norm(in[0], {4, 5}, in[1], in[2]);
                })});
  cs.push_back(
      {"layer_norm", "layer_norm_plain", {rn(R, 139)}, one([](const std::vector<Tensor>& in) {
         return layer_norm(in[0], {5});
       })});
  cs.push_back(
      {"rms_norm", "rms_norm", {rn(S, 140), rn({4}, 141)}, one([](const std::vector<Tensor>& in) {
         return rms_norm(in[0], {4}, in[1]);
       })});
  cs.push_back(
      {"batch_norm",
       "batch_norm_train",
       {rn({4, 3, 2}, 142), zeros({3}, float64), ones({3}, float64), rn({3}, 143), rn({3}, 144)},
       one([](const std::vector<Tensor>& in) {
         return batch_norm(in[0], in[1], in[2], in[3], in[4], true);
       }),
       {true, false, false, true, true}});
  cs.push_back({"batch_norm",
                "batch_norm_eval",
                {rn({4, 3}, 145), rn({3}, 146), pos({3}, 147), rn({3}, 148), rn({3}, 149)},
                one([](const std::vector<Tensor>& in) {
                  return batch_norm(in[0], in[1], in[2], in[3], in[4], false);
                })});
  cs.push_back({"cross_entropy",
                "cross_entropy",
                {rn({4, 5}, 150), idx({1, -100, 4, 0}, {4})},
                one([](const std::vector<Tensor>& in) {
                  return cross_entropy(in[0], in[1], -100, "mean", 0.1);
                })});
  cs.push_back({"cross_entropy",
                "cross_entropy_probs",
                {rn({4, 5}, 151), softmax(rn({4, 5}, 152), 1)},
                one([](const std::vector<Tensor>& in) {
                  return cross_entropy(in[0], in[1], -100, "sum");
                })});
  cs.push_back({"nll_loss",
                "nll_loss",
                {rn({4, 5}, 174), idx({1, -100, 4, 0}, {4}), pos({5}, 175)},
                one([](const std::vector<Tensor>& in) {
                  return nll_loss(in[0], in[1], in[2], -100, "mean");
                }),
                {true, false, false}});
  cs.push_back({"binary_cross_entropy_with_logits",
                "bce_with_logits",
                {rn(S, 176), rnd(S, 0, 1, 177), pos({4}, 178), pos({4}, 179)},
                one([](const std::vector<Tensor>& in) {
                  return binary_cross_entropy_with_logits(in[0], in[1], in[2], "mean", in[3]);
                })});
  binary(
      "mse_loss", [](const Tensor& a, const Tensor& b) { return mse_loss(a, b); }, rn(S, 153),
      rn(S, 154));
  binary(
      "mse_loss", [](const Tensor& a, const Tensor& b) { return mse_loss(a, b, "none"); },
      rn(S, 155), rn({4}, 156), "mse_loss_none_broadcast");
  cs.push_back({"scaled_dot_product_attention",
                "sdpa",
                {rn({1, 2, 3, 4}, 157), rn({1, 2, 5, 4}, 158), rn({1, 2, 5, 3}, 159),
                 mask({1, 1, 0, 1, 0, 1, 1, 1, 1, 0, 0, 1, 1, 1, 1}, {3, 5})},
                one([](const std::vector<Tensor>& in) {
                  return scaled_dot_product_attention(in[0], in[1], in[2], in[3]);
                })});
  cs.push_back({"scaled_dot_product_attention",
                "sdpa_causal",
                {rn({2, 3, 4}, 160), rn({2, 3, 4}, 161), rn({2, 3, 4}, 162)},
                one([](const std::vector<Tensor>& in) {
                  return scaled_dot_product_attention(in[0], in[1], in[2], std::nullopt, 0.0, true);
                })});
  cs.push_back({"dropout", "dropout", {rn(S, 163)}, one([](const std::vector<Tensor>& in) {
                  manual_seed(7);  // the same mask for every evaluation
                  return dropout(in[0], 0.4, true);
                })});
  // ---- in place (on a non-leaf copy of the input) ----
  cs.push_back(
      {"copy_", "copy_", {rn(S, 164), rn({4}, 165)}, one([](const std::vector<Tensor>& in) {
         Tensor y = in[0] * 1.0;
         y.copy_(in[1]);
         return y;
       })});
  cs.push_back({"copy_",
                "copy_into_view",
                {rn(S, 166), rn({2}, 167)},
                one([](const std::vector<Tensor>& in) {
                  Tensor y = in[0] * 2.0;
                  y.select(0, 1).narrow(0, 1, 2).copy_(in[1]);
                  return y * y;
                })});
  cs.push_back({"masked_fill_",
                "masked_fill_",
                {rn(S, 168), mask({1, 0, 0, 1}, {4})},
                one([](const std::vector<Tensor>& in) {
                  Tensor y = in[0] * 1.0;
                  y.masked_fill_(in[1], Scalar(3.0));
                  return y;
                })});
  cs.push_back({"index_put_",
                "index_put_",
                {rn({4, 3}, 169), idx({2}, {1}), rn({3}, 170)},
                one([](const std::vector<Tensor>& in) {
                  Tensor y = in[0] * 1.0;
                  y.index_put_(in[1], in[2]);
                  return y;
                })});
  cs.push_back(
      {"mul", "inplace_mul_exp", {rn(S, 171), rn(S, 172)}, one([](const std::vector<Tensor>& in) {
         Tensor y = in[0] * 1.0;
         y.mul_(in[1]);
         y.exp_();
         return y;
       })});
  return cs;
}

TEST(Gradcheck, EveryDifferentiableOpMatchesFiniteDifferences) {
  std::set<std::string> checked;
  for (const Case& c : cases()) {
    gradcheck(c);
    checked.insert(c.op);
  }
  int differentiable = 0;
  for (const auto& op : detail::op_table()) {
    if (!op.differentiable) continue;
    ++differentiable;
    EXPECT_TRUE(checked.count(std::string(op.name))) << "no gradcheck case for " << op.name;
    EXPECT_TRUE(op.derivative || !op.derivative_via.empty())
        << op.name << " is differentiable but has no derivative";
  }
  EXPECT_GE(differentiable, 90);
}

TEST(Gradcheck, SecondOrderGradientsMatchFiniteDifferences) {
  const std::set<std::string> ops = {"mul",         "div",         "exp", "tanh",   "sigmoid",
                                     "gelu",        "gelu_tanh",   "pow", "matmul", "softmax",
                                     "log_softmax", "layer_norm",  "sum", "expand", "select",
                                     "logsumexp",   "linear",      "var", "sqrt",   "cross_entropy",
                                     "mse_loss",    "index_select"};
  int n = 0;
  for (const Case& c : cases())
    if (ops.count(c.name)) {
      gradgradcheck(c);
      ++n;
    }
  EXPECT_EQ(n, static_cast<int>(ops.size()));
}

}  // namespace
