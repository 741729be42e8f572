// Differential fuzzer: random programs run eagerly and through smelt::compile.
// See fuzz.h for the design, the tolerances and what is never generated.
#include "compiler/fuzz/fuzz.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <numeric>
#include <random>
#include <set>

#include "core/tensor_impl.h"
#include "smelt/compile.h"
#include "smelt/ops.h"

namespace smelt::fuzz {

// Ops left out of generation because of a known, reported mismatch class.
// Each entry names the op (Step::op) and why; remove it once fixed.
static const std::set<std::string> kKnownIssues = {};

namespace {

constexpr int64_t kMaxNumel = 1 << 15;
constexpr double kMaxInt = 1 << 24;

// ---- small helpers -----------------------------------------------------------

double base_tol(DType t) {
  switch (t) {
    case DType::Float64:
      return 1e-10;
    case DType::Float32:
      return 1e-5;
    case DType::Float16:
      return 1e-2;
    case DType::BFloat16:
      return 5e-2;
    default:
      return 0;
  }
}

bool is_half(DType t) { return t == DType::Float16 || t == DType::BFloat16; }

std::string scalar_str(const Scalar& s) {
  if (s.is_bool()) return s.to_int() ? "true" : "false";
  if (s.is_integral()) return std::to_string(s.to_int());
  double d = s.to_double();
  if (std::isnan(d)) return "NAN";
  if (std::isinf(d)) return d > 0 ? "INFINITY" : "-INFINITY";
  std::string r = fmt::format("{}", d);
  if (r.find_first_of(".e") == std::string::npos) r += ".0";
  return r;
}

std::string ints_str(const std::vector<int64_t>& v) {
  return fmt::format("{{{}}}", fmt::join(v, ", "));
}

std::string dtype_str(DType t) { return fmt::format("smelt::{}", dtype_name(t)); }

std::string vname(int id) { return fmt::format("v{}", id); }

std::vector<double> as_doubles(const Tensor& t) {
  return t.to(DType::Float64).contiguous().to_vector<double>();
}
std::vector<int64_t> as_ints(const Tensor& t) {
  return t.to(DType::Int64).contiguous().to_vector<int64_t>();
}

using U = std::function<Tensor(const Tensor&)>;
using B = std::function<Tensor(const Tensor&, const Tensor&)>;

struct UnaryDef {
  const char* name;
  U fn;
  bool discontinuous;
};
struct BinaryDef {
  const char* name;
  B fn;
  bool discontinuous;
};

#define SMELT_FUZZ_U(n, disc)                             \
  UnaryDef {                                              \
#n, [](const Tensor& x) { return smelt::n(x); }, disc \
  }
#define SMELT_FUZZ_B(n, disc)                                                 \
  BinaryDef {                                                                 \
#n, [](const Tensor& a, const Tensor& b) { return smelt::n(a, b); }, disc \
  }

const std::vector<UnaryDef>& unary_ops() {
  static const std::vector<UnaryDef> v = {
      SMELT_FUZZ_U(neg, false),        SMELT_FUZZ_U(abs, false),
      SMELT_FUZZ_U(sign, true),        SMELT_FUZZ_U(exp, false),
      SMELT_FUZZ_U(exp2, false),       SMELT_FUZZ_U(expm1, false),
      SMELT_FUZZ_U(log, false),        SMELT_FUZZ_U(log2, false),
      SMELT_FUZZ_U(log1p, false),      SMELT_FUZZ_U(sqrt, false),
      SMELT_FUZZ_U(rsqrt, false),      SMELT_FUZZ_U(reciprocal, false),
      SMELT_FUZZ_U(sin, false),        SMELT_FUZZ_U(cos, false),
      SMELT_FUZZ_U(tan, false),        SMELT_FUZZ_U(tanh, false),
      SMELT_FUZZ_U(sigmoid, false),    SMELT_FUZZ_U(relu, false),
      SMELT_FUZZ_U(silu, false),       SMELT_FUZZ_U(erf, false),
      SMELT_FUZZ_U(floor, true),       SMELT_FUZZ_U(ceil, true),
      SMELT_FUZZ_U(round, true),       SMELT_FUZZ_U(trunc, true),
      SMELT_FUZZ_U(logical_not, true), SMELT_FUZZ_U(bitwise_not, true),
      SMELT_FUZZ_U(isnan, true),       SMELT_FUZZ_U(isinf, true),
      SMELT_FUZZ_U(nan_to_num, true),
  };
  return v;
}

const std::vector<BinaryDef>& binary_ops() {
  static const std::vector<BinaryDef> v = {
      SMELT_FUZZ_B(mul, false),        SMELT_FUZZ_B(floor_divide, true),
      SMELT_FUZZ_B(remainder, true),   SMELT_FUZZ_B(fmod, true),
      SMELT_FUZZ_B(pow, false),        SMELT_FUZZ_B(maximum, false),
      SMELT_FUZZ_B(minimum, false),    SMELT_FUZZ_B(fmax, false),
      SMELT_FUZZ_B(fmin, false),       SMELT_FUZZ_B(atan2, false),
      SMELT_FUZZ_B(eq, true),          SMELT_FUZZ_B(ne, true),
      SMELT_FUZZ_B(lt, true),          SMELT_FUZZ_B(le, true),
      SMELT_FUZZ_B(gt, true),          SMELT_FUZZ_B(ge, true),
      SMELT_FUZZ_B(logical_and, true), SMELT_FUZZ_B(logical_or, true),
      SMELT_FUZZ_B(logical_xor, true), SMELT_FUZZ_B(bitwise_and, true),
      SMELT_FUZZ_B(bitwise_or, true),  SMELT_FUZZ_B(bitwise_xor, true),
  };
  return v;
}
#undef SMELT_FUZZ_U
#undef SMELT_FUZZ_B

const UnaryDef* find_unary(const std::string& n) {
  for (auto& d : unary_ops())
    if (n == d.name) return &d;
  return nullptr;
}
const BinaryDef* find_binary(const std::string& n) {
  for (auto& d : binary_ops())
    if (n == d.name) return &d;
  return nullptr;
}

std::optional<std::string> opt_str(const std::string& s) {
  if (s.empty()) return std::nullopt;
  return s;
}

// ---- executing and printing one step -------------------------------------------

Tensor exec(const Step& s, const std::vector<Tensor>& v) {
  auto in = [&](size_t i) -> const Tensor& { return v.at(s.in.at(i)); };
  const std::string& op = s.op;
  if (auto* u = find_unary(op)) return u->fn(in(0));
  if (op == "gelu") return gelu(in(0), s.str);
  if (auto* b = find_binary(op)) return b->fn(in(0), in(1));
  if (op == "add") return add(in(0), in(1), *s.s0);
  if (op == "sub") return sub(in(0), in(1), *s.s0);
  if (op == "div") return div(in(0), in(1), opt_str(s.str));
  if (op == "add.Scalar") return add(in(0), *s.s0, *s.s1);
  if (op == "sub.Scalar") return sub(in(0), *s.s0, *s.s1);
  if (op == "mul.Scalar") return mul(in(0), *s.s0);
  if (op == "div.Scalar") return div(in(0), *s.s0, opt_str(s.str));
  if (op == "pow.Scalar") return pow(in(0), *s.s0);
  if (op == "rsub.Scalar") return *s.s0 - in(0);
  if (op == "rdiv.Scalar") return *s.s0 / in(0);
  if (op == "where") return where(in(0), in(1), in(2));
  if (op == "where.Scalar") return where(in(0), in(1), *s.s0);
  if (op == "clamp") return clamp(in(0), s.s0, s.s1);
  if (op == "lerp") return lerp(in(0), in(1), *s.s0);
  if (op == "masked_fill") return masked_fill(in(0), in(1), *s.s0);
  if (op == "to") return in(0).to(*s.dtype);
  if (op == "sum") return sum(in(0), s.ints, s.flag, s.dtype);
  if (op == "mean") return mean(in(0), s.ints, s.flag, s.dtype);
  if (op == "prod")
    return prod(in(0), s.b ? std::optional<int64_t>(s.a) : std::nullopt, s.flag, s.dtype);
  if (op == "amax") return amax(in(0), s.ints, s.flag);
  if (op == "amin") return amin(in(0), s.ints, s.flag);
  if (op == "argmax")
    return argmax(in(0), s.b ? std::optional<int64_t>(s.a) : std::nullopt, s.flag);
  if (op == "argmin")
    return argmin(in(0), s.b ? std::optional<int64_t>(s.a) : std::nullopt, s.flag);
  if (op == "var") return var(in(0), s.ints, static_cast<double>(s.c), s.flag);
  if (op == "std") return smelt::std(in(0), s.ints, static_cast<double>(s.c), s.flag);
  if (op == "logsumexp") return logsumexp(in(0), s.ints, s.flag);
  if (op == "any") return any(in(0), s.ints, s.flag);
  if (op == "all") return all(in(0), s.ints, s.flag);
  if (op == "cumsum") return cumsum(in(0), s.a, s.dtype);
  if (op == "permute") return permute(in(0), s.ints);
  if (op == "transpose") return transpose(in(0), s.a, s.b);
  if (op == "reshape") return reshape(in(0), s.ints);
  if (op == "unsqueeze") return unsqueeze(in(0), s.a);
  if (op == "squeeze")
    return squeeze(in(0), s.flag ? std::optional<std::vector<int64_t>>(s.ints) : std::nullopt);
  if (op == "slice") return slice(in(0), s.a, s.ints.at(0), s.ints.at(1), s.c);
  if (op == "narrow") return narrow(in(0), s.a, s.b, s.c);
  if (op == "select") return select(in(0), s.a, s.b);
  if (op == "expand") return expand(in(0), s.ints);
  if (op == "flatten") return flatten(in(0), s.a, s.b);
  if (op == "t") return t(in(0));
  if (op == "cat") {
    std::vector<Tensor> ts;
    for (size_t i = 0; i < s.in.size(); ++i) ts.push_back(in(i));
    return cat(ts, s.a);
  }
  if (op == "pad") return pad(in(0), s.ints, s.s0->to_double());
  if (op == "tril") return tril(in(0), s.a);
  if (op == "triu") return triu(in(0), s.a);
  if (op == "contiguous") return contiguous(in(0));
  if (op == "clone") return clone(in(0));
  if (op == "softmax") return softmax(in(0), s.a, s.dtype);
  if (op == "log_softmax") return log_softmax(in(0), s.a, s.dtype);
  if (op == "layer_norm") return layer_norm(in(0), s.ints, std::nullopt, std::nullopt, 1e-5);
  if (op == "matmul") return matmul(in(0), in(1));
  if (op == "matmul.t_right") return matmul(in(0), t(in(1)));
  SMELT_INTERNAL_ASSERT(false, "fuzz: unknown step op '{}'", op);
}

std::string opt_dtype_str(const std::optional<DType>& d) {
  return d ? dtype_str(*d) : std::string("std::nullopt");
}
std::string opt_int_str(const Step& s) { return s.b ? std::to_string(s.a) : "std::nullopt"; }

std::string step_str(const Step& s) {
  std::vector<std::string> a;
  for (int i : s.in) a.push_back(vname(i));
  auto A = [&](size_t i) { return a.at(i); };
  const std::string& op = s.op;
  auto kd = [&] { return s.flag ? "true" : "false"; };
  if (find_unary(op)) return fmt::format("smelt::{}({})", op, A(0));
  if (op == "gelu") return fmt::format("smelt::gelu({}, \"{}\")", A(0), s.str);
  if (find_binary(op)) return fmt::format("smelt::{}({}, {})", op, A(0), A(1));
  if (op == "add" || op == "sub")
    return fmt::format("smelt::{}({}, {}, /*alpha=*/{})", op, A(0), A(1), scalar_str(*s.s0));
  if (op == "div")
    return s.str.empty() ? fmt::format("smelt::div({}, {})", A(0), A(1))
                         : fmt::format("smelt::div({}, {}, \"{}\")", A(0), A(1), s.str);
  if (op == "add.Scalar" || op == "sub.Scalar")
    return fmt::format("smelt::{}({}, Scalar({}), /*alpha=*/{})", op.substr(0, 3), A(0),
                       scalar_str(*s.s0), scalar_str(*s.s1));
  if (op == "mul.Scalar") return fmt::format("smelt::mul({}, Scalar({}))", A(0), scalar_str(*s.s0));
  if (op == "div.Scalar")
    return s.str.empty()
               ? fmt::format("smelt::div({}, Scalar({}))", A(0), scalar_str(*s.s0))
               : fmt::format("smelt::div({}, Scalar({}), \"{}\")", A(0), scalar_str(*s.s0), s.str);
  if (op == "pow.Scalar") return fmt::format("smelt::pow({}, Scalar({}))", A(0), scalar_str(*s.s0));
  if (op == "rsub.Scalar") return fmt::format("Scalar({}) - {}", scalar_str(*s.s0), A(0));
  if (op == "rdiv.Scalar") return fmt::format("Scalar({}) / {}", scalar_str(*s.s0), A(0));
  if (op == "where") return fmt::format("smelt::where({}, {}, {})", A(0), A(1), A(2));
  if (op == "where.Scalar")
    return fmt::format("smelt::where({}, {}, Scalar({}))", A(0), A(1), scalar_str(*s.s0));
  if (op == "clamp")
    return fmt::format("smelt::clamp({}, {}, {})", A(0),
                       s.s0 ? "Scalar(" + scalar_str(*s.s0) + ")" : "std::nullopt",
                       s.s1 ? "Scalar(" + scalar_str(*s.s1) + ")" : "std::nullopt");
  if (op == "lerp")
    return fmt::format("smelt::lerp({}, {}, Scalar({}))", A(0), A(1), scalar_str(*s.s0));
  if (op == "masked_fill")
    return fmt::format("smelt::masked_fill({}, {}, Scalar({}))", A(0), A(1), scalar_str(*s.s0));
  if (op == "to") return fmt::format("{}.to({})", A(0), dtype_str(*s.dtype));
  if (op == "sum" || op == "mean")
    return fmt::format("smelt::{}({}, {}, {}, {})", op, A(0), ints_str(s.ints), kd(),
                       opt_dtype_str(s.dtype));
  if (op == "prod")
    return fmt::format("smelt::prod({}, {}, {}, {})", A(0), opt_int_str(s), kd(),
                       opt_dtype_str(s.dtype));
  if (op == "amax" || op == "amin" || op == "logsumexp" || op == "any" || op == "all")
    return fmt::format("smelt::{}({}, {}, {})", op, A(0), ints_str(s.ints), kd());
  if (op == "argmax" || op == "argmin")
    return fmt::format("smelt::{}({}, {}, {})", op, A(0), opt_int_str(s), kd());
  if (op == "var" || op == "std")
    return fmt::format("smelt::{}({}, {}, /*correction=*/{}, {})", op, A(0), ints_str(s.ints), s.c,
                       kd());
  if (op == "cumsum")
    return fmt::format("smelt::cumsum({}, {}, {})", A(0), s.a, opt_dtype_str(s.dtype));
  if (op == "permute" || op == "reshape" || op == "expand")
    return fmt::format("smelt::{}({}, {})", op, A(0), ints_str(s.ints));
  if (op == "transpose" || op == "flatten" || op == "select")
    return fmt::format("smelt::{}({}, {}, {})", op, A(0), s.a, s.b);
  if (op == "unsqueeze" || op == "tril" || op == "triu")
    return fmt::format("smelt::{}({}, {})", op, A(0), s.a);
  if (op == "squeeze")
    return s.flag ? fmt::format("smelt::squeeze({}, {})", A(0), ints_str(s.ints))
                  : fmt::format("smelt::squeeze({})", A(0));
  if (op == "slice")
    return fmt::format("smelt::slice({}, {}, {}, {}, {})", A(0), s.a, s.ints.at(0), s.ints.at(1),
                       s.c);
  if (op == "narrow") return fmt::format("smelt::narrow({}, {}, {}, {})", A(0), s.a, s.b, s.c);
  if (op == "t" || op == "contiguous" || op == "clone")
    return fmt::format("smelt::{}({})", op, A(0));
  if (op == "cat") return fmt::format("smelt::cat({{{}}}, {})", fmt::join(a, ", "), s.a);
  if (op == "pad")
    return fmt::format("smelt::pad({}, {}, {})", A(0), ints_str(s.ints), scalar_str(*s.s0));
  if (op == "softmax" || op == "log_softmax")
    return fmt::format("smelt::{}({}, {}, {})", op, A(0), s.a, opt_dtype_str(s.dtype));
  if (op == "layer_norm") return fmt::format("smelt::layer_norm({}, {})", A(0), ints_str(s.ints));
  if (op == "matmul") return fmt::format("smelt::matmul({}, {})", A(0), A(1));
  if (op == "matmul.t_right") return fmt::format("smelt::matmul({}, smelt::t({}))", A(0), A(1));
  return fmt::format("<{}>", op);
}

// ---- input data ------------------------------------------------------------------

Tensor make_input(const InputSpec& spec) {
  std::mt19937_64 rng(spec.data_seed);
  std::uniform_real_distribution<double> u01(0, 1);
  std::normal_distribution<double> normal(0, 1);
  std::vector<double> data(static_cast<size_t>(spec.base_numel));
  for (auto& x : data) {
    switch (spec.dtype) {
      case DType::Bool:
        x = u01(rng) < 0.5;
        break;
      case DType::UInt8:
        x = std::floor(u01(rng) * 10);
        break;
      case DType::Int8:
      case DType::Int16:
      case DType::Int32:
      case DType::Int64:
        x = std::floor(u01(rng) * 17) - 8;
        break;
      default: {
        x = normal(rng) * 2;
        if (spec.specials && u01(rng) < 0.15) {
          static const double sp[] = {NAN, INFINITY, -INFINITY, -0.0, 0.0, 1.0, -1.0, 0.5};
          x = sp[rng() % 8];
        }
      }
    }
  }
  Tensor base = from_vector<double>(data, {spec.base_numel}).to(spec.dtype);
  return detail::make_view(base, spec.sizes, spec.strides, spec.offset);
}

std::string input_str(const InputSpec& s, int id) {
  return fmt::format("{}[{}] strides {} offset {} ({}{}; data seed {:#x})", dtype_name(s.dtype),
                     fmt::join(s.sizes, ", "), detail::shape_str(s.strides), s.offset, s.layout,
                     s.specials ? ", with NaN/inf/-0" : "", s.data_seed);
}

// ---- comparison --------------------------------------------------------------------

std::string index_str(int64_t flat, const Shape& sizes) {
  std::vector<int64_t> idx(sizes.size());
  for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
    if (sizes[d] > 0) {
      idx[d] = flat % sizes[d];
      flat /= sizes[d];
    }
  }
  return fmt::format("[{}]", fmt::join(idx, ", "));
}

/// "" when `got` matches `want` within `tol`, else what differs.
std::string compare(const Tensor& want, const Tensor& got, double tol) {
  if (want.sizes() != got.sizes() || want.dtype() != got.dtype())
    return fmt::format("eager {}{} vs compiled {}{}", dtype_name(want.dtype()),
                       detail::shape_str(want.sizes()), dtype_name(got.dtype()),
                       detail::shape_str(got.sizes()));
  if (want.numel() == 0) return "";
  int64_t bad = 0, first = -1;
  std::string first_msg;
  if (!is_floating(want.dtype())) {
    auto a = as_ints(want), b = as_ints(got);
    for (size_t i = 0; i < a.size(); ++i)
      if (a[i] != b[i]) {
        if (first < 0) {
          first = static_cast<int64_t>(i);
          first_msg = fmt::format("eager {} compiled {}", a[i], b[i]);
        }
        ++bad;
      }
  } else {
    auto a = as_doubles(want), b = as_doubles(got);
    for (size_t i = 0; i < a.size(); ++i) {
      bool ok;
      if (std::isnan(a[i]) || std::isnan(b[i]))
        ok = std::isnan(a[i]) && std::isnan(b[i]);
      else if (std::isinf(a[i]) || std::isinf(b[i]))
        ok = a[i] == b[i];
      else
        ok = std::abs(a[i] - b[i]) <= tol + tol * std::abs(a[i]);
      if (!ok) {
        if (first < 0) {
          first = static_cast<int64_t>(i);
          first_msg = fmt::format("eager {:.9g} compiled {:.9g} (|diff| {:.3g}, tol {:.3g})", a[i],
                                  b[i], std::abs(a[i] - b[i]), tol + tol * std::abs(a[i]));
        }
        ++bad;
      }
    }
  }
  if (bad == 0) return "";
  return fmt::format("{} of {} elements differ ({}{}); first at {}: {}", bad, want.numel(),
                     dtype_name(want.dtype()), detail::shape_str(want.sizes()),
                     index_str(first, want.sizes()), first_msg);
}

bool same_bits(const Tensor& a, const Tensor& b) {
  auto x = as_doubles(a), y = as_doubles(b);
  for (size_t i = 0; i < x.size(); ++i)
    if (!(x[i] == y[i] || (std::isnan(x[i]) && std::isnan(y[i])))) return false;
  return true;
}

// ---- running compiled ------------------------------------------------------------

struct CompiledRun {
  std::vector<std::vector<Tensor>> outs;  // one per call
  CompileStats stats;
};

template <class F, class... T>
CompiledRun call_compiled(F&& f, int calls, const T&... args) {
  CompiledRun r;
  for (int i = 0; i < calls; ++i) r.outs.push_back(f(args...));
  r.stats = f.stats();
  return r;
}

CompiledRun run_compiled(const Program& p, const std::vector<Tensor>& in) {
  CompileOptions o;
  o.mode = p.mode;
  for (auto& st : p.off) {
    if (st == "fuse") o.fuse = false;
    if (st == "cse") o.cse = false;
    if (st == "dce") o.dce = false;
    if (st == "fold_constants") o.fold_constants = false;
    if (st == "gemm_epilogue") o.gemm_epilogue = false;
  }
  int calls = p.mode == "reduce-overhead" ? 2 : 1;
  auto body = [&p](std::vector<Tensor> v) { return interpret(p, v); };
  switch (in.size()) {
    case 1:
      return call_compiled(compile([&](const Tensor& a) { return body({a}); }, o), calls, in[0]);
    case 2:
      return call_compiled(compile(
                               [&](const Tensor& a, const Tensor& b) {
                                 return body({a, b});
                               },
                               o),
                           calls, in[0], in[1]);
    default:
      return call_compiled(compile(
                               [&](const Tensor& a, const Tensor& b, const Tensor& c) {
                                 return body({a, b, c});
                               },
                               o),
                           calls, in[0], in[1], in[2]);
  }
}

// ---- the generator ---------------------------------------------------------------

struct Gen {
  std::mt19937_64 rng;
  Program p;
  std::vector<Tensor> vals;
  std::vector<bool> exact;          // eager and compiled agree bit for bit
  std::vector<bool> computed_half;  // float16/bfloat16 result of arithmetic (rounded eagerly only)
  std::vector<bool> usable;         // may feed later steps
  std::vector<int> uses;            // steps reading each value

  explicit Gen(uint64_t seed) : rng(seed) {}

  int64_t uni(int64_t lo, int64_t hi) {  // inclusive
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  }
  bool coin(double prob) { return std::uniform_real_distribution<double>(0, 1)(rng) < prob; }
  template <class T>
  const T& pick(const std::vector<T>& v) {
    return v[static_cast<size_t>(uni(0, static_cast<int64_t>(v.size()) - 1))];
  }
  template <class T>
  size_t weighted(const std::vector<T>& w) {
    double tot = std::accumulate(w.begin(), w.end(), 0.0);
    double r = std::uniform_real_distribution<double>(0, tot)(rng);
    for (size_t i = 0; i < w.size(); ++i) {
      if (r < w[i]) return i;
      r -= w[i];
    }
    return w.size() - 1;
  }

  bool fragile(int i) const { return !exact[i] || computed_half[i]; }

  // -- inputs --
  int64_t rand_size(bool allow_zero) {
    if (allow_zero && coin(0.08)) return 0;
    static const std::vector<int64_t> sz = {1, 2, 3, 4, 5, 6, 7, 8, 16, 33};
    static const std::vector<double> w = {4, 4, 4, 3, 2, 2, 2, 2, 1, 1};
    return sz[weighted(w)];
  }
  Shape rand_shape(bool allow_zero) {
    int64_t rank = static_cast<int64_t>(weighted(std::vector<double>{1, 2.5, 3, 2, 1.5}));
    Shape s;
    for (int64_t i = 0; i < rank; ++i) s.push_back(rand_size(allow_zero));
    while (detail::shape_numel(s) > 2048) s[static_cast<size_t>(uni(0, rank - 1))] = 2;
    return s;
  }
  DType rand_dtype() {
    static const std::vector<DType> t = {DType::Float32,  DType::Float64, DType::Float16,
                                         DType::BFloat16, DType::Int32,   DType::Int64,
                                         DType::Bool};
    static const std::vector<double> w = {50, 10, 8, 7, 8, 10, 7};
    return t[weighted(w)];
  }
  InputSpec make_spec(Shape sizes, DType dt) {
    InputSpec s;
    s.sizes = std::move(sizes);
    s.dtype = dt;
    s.data_seed = rng();
    s.specials = is_floating(dt) && coin(0.15);
    int64_t rank = static_cast<int64_t>(s.sizes.size());
    std::vector<int64_t> order(static_cast<size_t>(rank));
    std::iota(order.begin(), order.end(), 0);
    std::vector<int64_t> step(static_cast<size_t>(rank), 1);
    size_t layout = weighted(std::vector<double>{55, 15, 15, 8, 7});
    s.layout = "contiguous";
    if (layout == 1 && rank >= 2) {
      std::shuffle(order.begin(), order.end(), rng);
      s.layout = "permuted " + ints_str(order);
    } else if (layout == 2 && rank >= 1) {
      int64_t d = uni(0, rank - 1);
      step[d] = uni(2, 3);
      s.layout = fmt::format("sliced: step {} along dim {}", step[d], d);
    } else if (layout == 4) {
      s.offset = uni(1, 5);
      s.layout = "storage offset";
    }
    s.strides.assign(static_cast<size_t>(rank), 0);
    int64_t running = 1;
    for (int64_t k = rank - 1; k >= 0; --k) {
      int64_t d = order[k];
      s.strides[d] = running * step[d];
      running *= std::max<int64_t>(s.sizes[d], 1) * step[d];
    }
    if (layout == 3 && rank >= 1) {
      int64_t d = uni(0, rank - 1);
      if (s.sizes[d] > 1) {
        s.strides[d] = 0;
        s.layout = fmt::format("expanded (stride 0) along dim {}", d);
      }
    }
    s.base_numel = s.offset + running + uni(0, 2);
    return s;
  }
  void make_inputs_() {
    int n = static_cast<int>(uni(1, 3));
    bool zero_ok = coin(0.15);
    Shape s0 = rand_shape(zero_ok);
    if (coin(0.06)) {  // rows longer than a persistent reduction holds (looped reductions)
      s0 = {uni(8200, 9000)};
      if (coin(0.4)) s0.insert(s0.begin(), uni(1, 3));
    }
    for (int i = 0; i < n; ++i) {
      Shape s;
      if (i == 0) {
        s = s0;
      } else if (coin(0.65)) {  // broadcastable to s0
        int64_t keep = uni(0, static_cast<int64_t>(s0.size()));
        s.assign(s0.end() - keep, s0.end());
        for (auto& x : s)
          if (coin(0.3)) x = 1;
        if (coin(0.15)) s.insert(s.begin(), 1);
      } else if (coin(0.5)) {
        s = s0;
      } else {
        s = rand_shape(zero_ok);
      }
      DType dt = (i > 0 && coin(0.4)) ? p.inputs[0].dtype : rand_dtype();
      p.inputs.push_back(make_spec(s, dt));
    }
    vals = make_inputs(p);
    for (int i = 0; i < n; ++i) {
      exact.push_back(true);
      computed_half.push_back(false);
      usable.push_back(true);
      uses.push_back(0);
      p.scale.push_back(0);
    }
  }

  // -- choosing arguments --
  int pick_value() {
    std::vector<int> ok;
    for (int i = 0; i < static_cast<int>(vals.size()); ++i)
      if (usable[i]) ok.push_back(i);
    if (coin(0.45)) return ok.back();  // favour chains: they are what fusion works on
    std::vector<int> unused;           // and values nothing reads yet, so that most steps stay live
    for (int i : ok)
      if (uses[i] == 0 && i >= static_cast<int>(p.inputs.size())) unused.push_back(i);
    if (!unused.empty() && coin(0.5)) return pick(unused);
    return pick(ok);
  }
  int pick_value_where(const std::function<bool(const Tensor&)>& pred) {
    std::vector<int> ok;
    for (int i = 0; i < static_cast<int>(vals.size()); ++i)
      if (usable[i] && pred(vals[i])) ok.push_back(i);
    if (ok.empty()) return -1;
    if (coin(0.4) && ok.back() == static_cast<int>(vals.size()) - 1) return ok.back();
    return pick(ok);
  }
  Scalar rand_scalar() {
    switch (uni(0, 9)) {
      case 0:
        return Scalar(0);
      case 1:
        return Scalar(1);
      case 2:
        return Scalar(-1);
      case 3:
        return Scalar(2);
      case 4:
        return Scalar(3);
      case 5:
        return Scalar(0.5);
      case 6:
        return Scalar(-2.5);
      case 7:
        return Scalar(1e-3);
      case 8:
        return Scalar(true);
      default:
        return Scalar(1.75);
    }
  }
  std::vector<int64_t> rand_dims(int64_t rank) {
    std::vector<int64_t> d;
    if (coin(0.25)) return d;  // all dims
    for (int64_t i = 0; i < rank; ++i)
      if (coin(0.5)) d.push_back(coin(0.2) ? i - rank : i);
    return d;
  }
  int64_t rand_dim(int64_t rank) {  // rank > 0
    int64_t d = uni(0, rank - 1);
    return coin(0.2) ? d - rank : d;
  }
  Shape rand_reshape(const Shape& s) {
    int64_t n = detail::shape_numel(s);
    Shape out;
    if (n == 0) {
      out = {0};
      if (coin(0.5)) out.insert(out.begin() + uni(0, 1), uni(1, 3));
      return out;
    }
    std::vector<int64_t> f;  // prime factors
    for (int64_t x = n, q = 2; x > 1;) {
      if (x % q == 0) {
        f.push_back(q);
        x /= q;
      } else {
        ++q;
      }
    }
    int64_t rank = uni(1, 4);
    out.assign(static_cast<size_t>(rank), 1);
    for (int64_t x : f) out[static_cast<size_t>(uni(0, rank - 1))] *= x;
    if (coin(0.3)) out[static_cast<size_t>(uni(0, rank - 1))] = -1;
    if (coin(0.1) && n == 1) out.clear();
    return out;
  }

  // -- one candidate step; false if it does not apply --
  bool candidate(Step& s, bool& discontinuous, bool& reduction, int64_t& red_len) {
    size_t cat = weighted(std::vector<double>{25, 20, 8, 6, 6, 14, 14, 4, 5, 3});
    discontinuous = false;
    reduction = false;
    red_len = 1;
    int x = pick_value();
    const Tensor& X = vals[x];
    int64_t rank = X.dim();
    s.in = {x};
    switch (cat) {
      case 0: {  // unary
        if (coin(0.08)) {
          s.op = "gelu";
          s.str = coin(0.5) ? "none" : "tanh";
        } else {
          auto& d = pick(unary_ops());
          s.op = d.name;
          discontinuous = d.discontinuous;
        }
        return true;
      }
      case 1: {  // binary tensor-tensor
        int y = coin(0.2) ? x : pick_value();
        if (coin(0.5)) std::swap(x, y);
        s.in = {x, y};
        size_t k = uni(0, 3);
        if (k == 0) {
          s.op = coin(0.5) ? "add" : "sub";
          s.s0 = coin(0.7) ? Scalar(1) : rand_scalar();
        } else if (k == 1) {
          s.op = "div";
          static const std::vector<std::string> modes = {"", "", "trunc", "floor"};
          s.str = pick(modes);
          discontinuous = !s.str.empty();
        } else {
          auto& d = pick(binary_ops());
          s.op = d.name;
          discontinuous = d.discontinuous;
        }
        return true;
      }
      case 2: {  // binary with a scalar
        static const std::vector<std::string> ops = {"add.Scalar", "sub.Scalar", "mul.Scalar",
                                                     "div.Scalar", "pow.Scalar", "rsub.Scalar",
                                                     "rdiv.Scalar"};
        s.op = pick(ops);
        s.s0 = rand_scalar();
        if (s.op == "add.Scalar" || s.op == "sub.Scalar")
          s.s1 = coin(0.8) ? Scalar(1) : rand_scalar();
        if (s.op == "div.Scalar" && coin(0.3)) {
          s.str = coin(0.5) ? "trunc" : "floor";
          discontinuous = true;
        }
        return true;
      }
      case 3: {  // where / clamp / lerp / masked_fill
        size_t k = uni(0, 3);
        int c = pick_value_where([](const Tensor& t) { return t.dtype() == DType::Bool; });
        if (k == 0) {
          if (c < 0) return false;
          int y = pick_value();
          if (coin(0.3)) {
            s.op = "where.Scalar";
            s.in = {c, x};
            s.s0 = rand_scalar();
          } else {
            s.op = "where";
            s.in = {c, x, y};
          }
        } else if (k == 1) {
          s.op = "clamp";
          if (coin(0.8)) s.s0 = Scalar(coin(0.5) ? -1.0 : -0.5);
          if (coin(0.8) || !s.s0) s.s1 = Scalar(coin(0.5) ? 1 : 2);
        } else if (k == 2) {
          s.op = "lerp";
          s.in = {x, pick_value()};
          s.s0 = Scalar(coin(0.5) ? 0.25 : 0.75);
        } else {
          if (c < 0) return false;
          s.op = "masked_fill";
          s.in = {x, c};
          s.s0 = rand_scalar();
        }
        return true;
      }
      case 4: {  // cast
        s.op = "to";
        s.dtype = rand_dtype();
        if (is_floating(X.dtype()) && !is_floating(*s.dtype)) discontinuous = true;
        return true;
      }
      case 5: {  // reductions
        static const std::vector<std::string> ops = {
            "sum", "mean", "prod",      "amax", "amin", "argmax", "argmin",
            "var", "std",  "logsumexp", "any",  "all",  "cumsum"};
        s.op = pick(ops);
        s.flag = coin(0.4);
        bool single = s.op == "prod" || s.op == "argmax" || s.op == "argmin" || s.op == "cumsum";
        if (single) {
          s.b = (rank > 0 && (s.op == "cumsum" || coin(0.7))) ? 1 : 0;
          if (s.op == "cumsum" && rank == 0) return false;
          if (s.b) s.a = rand_dim(rank);
          red_len = s.b ? X.size(s.a) : X.numel();
        } else {
          s.ints = rand_dims(rank);
          if (s.ints.empty()) {
            red_len = X.numel();
          } else {
            for (int64_t d : s.ints) red_len *= (d >= -rank && d < rank) ? X.size(d) : 1;
          }
        }
        if (s.op == "argmax" || s.op == "argmin") discontinuous = true;
        if ((s.op == "sum" || s.op == "mean" || s.op == "prod" || s.op == "cumsum") && coin(0.15))
          s.dtype = coin(0.5) ? DType::Float64 : DType::Float32;
        if (s.op == "var" || s.op == "std") s.c = uni(0, 1);
        reduction = s.op != "amax" && s.op != "amin" && s.op != "any" && s.op != "all" &&
                    s.op != "argmax" && s.op != "argmin";
        return true;
      }
      case 6: {  // views
        static const std::vector<std::string> ops = {"permute", "transpose", "reshape", "unsqueeze",
                                                     "squeeze", "slice",     "narrow",  "select",
                                                     "expand",  "flatten",   "t"};
        s.op = pick(ops);
        if (s.op == "permute") {
          s.ints.resize(static_cast<size_t>(rank));
          std::iota(s.ints.begin(), s.ints.end(), 0);
          std::shuffle(s.ints.begin(), s.ints.end(), rng);
        } else if (s.op == "transpose") {
          if (rank == 0) return false;
          s.a = rand_dim(rank);
          s.b = rand_dim(rank);
        } else if (s.op == "reshape") {
          s.ints = rand_reshape(X.sizes());
        } else if (s.op == "unsqueeze") {
          s.a = uni(-rank - 1, rank);
        } else if (s.op == "squeeze") {
          s.flag = coin(0.6);
          if (s.flag) {
            std::vector<int64_t> ones;
            for (int64_t d = 0; d < rank; ++d)
              if (X.size(d) == 1) ones.push_back(d);
            if (ones.empty()) return false;
            s.ints = {pick(ones)};
          }
        } else if (s.op == "slice" || s.op == "narrow" || s.op == "select") {
          if (rank == 0) return false;
          s.a = rand_dim(rank);
          int64_t n = X.size(s.a);
          if (s.op == "slice") {
            s.ints = {uni(-n - 1, n), uni(-n - 1, n + 1)};
            s.c = uni(1, 3);
          } else if (s.op == "narrow") {
            s.b = uni(0, n);
            s.c = uni(0, n - s.b);
          } else {
            if (n == 0) return false;
            s.b = uni(-n, n - 1);
          }
        } else if (s.op == "expand") {
          Shape sz = X.sizes();
          for (auto& d : sz)
            if (d == 1 && coin(0.7))
              d = uni(2, 5);
            else if (coin(0.3))
              d = -1;
          if (coin(0.3)) sz.insert(sz.begin(), uni(1, 3));
          s.ints = sz;
        } else if (s.op == "flatten") {
          if (rank == 0) return false;
          s.a = uni(0, rank - 1);
          s.b = uni(s.a, rank - 1);
        } else if (s.op == "t") {
          if (rank > 2) return false;
        }
        return true;
      }
      case 7: {  // movement
        static const std::vector<std::string> ops = {"cat",  "cat",        "pad",  "tril",
                                                     "triu", "contiguous", "clone"};
        s.op = pick(ops);
        if (s.op == "cat") {
          if (rank == 0) return false;
          s.a = rand_dim(rank);
          int64_t d = s.a < 0 ? s.a + rank : s.a;
          auto compatible = [&](const Tensor& t) {
            if (t.dim() != rank) return false;
            for (int64_t i = 0; i < rank; ++i)
              if (i != d && t.size(i) != X.size(i)) return false;
            return true;
          };
          int y = pick_value_where(compatible);
          s.in = {x, y < 0 ? x : y};
          if (coin(0.3)) s.in.push_back(x);
          if (coin(0.5)) std::swap(s.in[0], s.in[1]);
        } else if (s.op == "pad") {
          int64_t k = std::min<int64_t>(rank, uni(1, 2));
          if (k == 0) return false;
          for (int64_t i = 0; i < 2 * k; ++i) s.ints.push_back(uni(0, 2));
          s.s0 = Scalar(coin(0.5) ? 0.0 : 1.5);
        } else if (s.op == "tril" || s.op == "triu") {
          if (rank < 2) return false;
          s.a = uni(-2, 2);
        }
        return true;
      }
      case 8: {  // nn
        static const std::vector<std::string> ops = {"softmax", "log_softmax", "layer_norm"};
        s.op = pick(ops);
        if (rank == 0) return false;
        reduction = true;
        if (s.op == "layer_norm") {
          int64_t k = uni(1, std::min<int64_t>(rank, 2));
          s.ints.assign(X.sizes().end() - k, X.sizes().end());
          red_len = detail::shape_numel(s.ints);
        } else {
          s.a = rand_dim(rank);
          red_len = X.size(s.a);
          if (coin(0.15)) s.dtype = DType::Float32;
        }
        return true;
      }
      default: {  // matmul
        if (rank != 2 || !is_floating(X.dtype())) return false;
        int y = pick_value_where([&](const Tensor& t) {
          return t.dim() == 2 && t.dtype() == X.dtype() && t.size(0) == X.size(1);
        });
        reduction = true;
        red_len = X.size(1);
        if (y >= 0 && coin(0.7)) {
          s.op = "matmul";
          s.in = {x, y};
        } else {
          s.op = "matmul.t_right";
          int z = pick_value_where([&](const Tensor& t) {
            return t.dim() == 2 && t.dtype() == X.dtype() && t.size(1) == X.size(1);
          });
          s.in = {x, z < 0 ? x : z};
        }
        return true;
      }
    }
  }

  bool has_zero(const Tensor& t) {
    if (t.numel() == 0) return false;
    auto v = as_doubles(t);
    return std::any_of(v.begin(), v.end(), [](double d) { return d == 0; });
  }

  /// Tries to append one step; false when the candidate was rejected.
  bool try_step() {
    Step s;
    bool disc, red;
    int64_t red_len;
    if (!candidate(s, disc, red, red_len)) return false;
    if (kKnownIssues.count(s.op)) return false;
    bool any_fragile = false, any_half_in = false;
    double scale = 0;
    for (int i : s.in) {
      any_fragile = any_fragile || fragile(i);
      any_half_in = any_half_in || computed_half[i];
      scale = std::max(scale, p.scale[i]);
    }
    if (disc && any_fragile) return false;
    // Integer division by zero (and float->int casts of inf/NaN/huge values) are
    // undefined in C++: never generate them.
    static const std::set<std::string> divs = {"floor_divide", "remainder",  "fmod",
                                               "div",          "div.Scalar", "rdiv.Scalar"};
    if (divs.count(s.op)) {
      Tensor den = s.op == "div.Scalar"    ? scalar_tensor(*s.s0)
                   : s.op == "rdiv.Scalar" ? vals[s.in[0]]
                                           : vals[s.in[1]];
      Tensor num = s.op == "rdiv.Scalar" ? scalar_tensor(*s.s0) : vals[s.in[0]];
      DType rt = promote_types(num.dtype(), den.dtype());
      if (!is_floating(rt) && has_zero(den)) return false;
    }
    Tensor out;
    try {
      if (s.op == "to" && is_floating(vals[s.in[0]].dtype()) && !is_floating(*s.dtype) &&
          *s.dtype != DType::Bool) {
        auto v = as_doubles(vals[s.in[0]]);
        for (double d : v)
          if (!std::isfinite(d) || std::abs(d) >= 2147483647.0) return false;
      }
      out = exec(s, vals);
    } catch (const Error&) {
      return false;
    }
    if (out.numel() > kMaxNumel) return false;
    bool is_view = out.storage() == vals[s.in[0]].storage();
    DType dt = out.dtype();
    if (!is_floating(dt) && dt != DType::Bool && out.numel() > 0) {
      auto v = as_doubles(out);
      for (double d : v)
        if (std::abs(d) > kMaxInt) return false;
    }
    // Tolerance bookkeeping (see fuzz.h).
    bool cast_or_move = is_view || s.op == "to" || s.op == "cat" || s.op == "pad" ||
                        s.op == "contiguous" || s.op == "clone" || s.op == "tril" || s.op == "triu";
    bool ex = !any_fragile;
    bool chalf = false;
    if (any_half_in) {
      for (int i : s.in)
        if (computed_half[i]) scale = std::max(scale, base_tol(vals[i].dtype()));
      if (!cast_or_move) scale *= 1.5;
    }
    if (red && (is_floating(dt) || is_floating(vals[s.in[0]].dtype()))) {
      ex = false;
      scale = std::max(scale, base_tol(dt)) * static_cast<double>(std::max<int64_t>(red_len, 1));
      if (s.op == "cumsum" || s.op == "prod") scale *= 2;
    }
    if (is_view || s.op == "cat" || s.op == "pad" || s.op == "contiguous" || s.op == "clone" ||
        s.op == "tril" || s.op == "triu")
      for (int i : s.in) chalf = chalf || computed_half[i];
    else if (s.op != "to" && is_half(dt))
      chalf = true;
    bool use = true;
    if (chalf && dt == DType::Float16 && out.numel() > 0) {
      // A float16 overflow eager rounds to inf stays finite in compiled float
      // intermediates: such values are only kept as outputs.
      auto v = as_doubles(out);
      for (double d : v)
        if (!std::isfinite(d) || std::abs(d) > 30000) use = false;
    }
    p.steps.push_back(s);
    vals.push_back(out);
    exact.push_back(ex);
    computed_half.push_back(chalf);
    usable.push_back(use);
    uses.push_back(0);
    for (int i : s.in) ++uses[i];
    p.scale.push_back(scale);
    return true;
  }

  Program run(int index) {
    make_inputs_();
    int n_steps = static_cast<int>(uni(2, 10));
    for (int k = 0; k < n_steps; ++k)
      for (int attempt = 0; attempt < 30; ++attempt)
        if (try_step()) break;
    int last = static_cast<int>(vals.size()) - 1;
    p.outputs = {last};
    // Also return most values nothing reads (else dead code) and, at times, any value.
    for (int o = static_cast<int>(p.inputs.size()); o < last && p.outputs.size() < 4; ++o)
      if (uses[o] == 0 && coin(0.7)) p.outputs.push_back(o);
    if (coin(0.3)) {
      int o = static_cast<int>(uni(0, last));
      if (std::find(p.outputs.begin(), p.outputs.end(), o) == p.outputs.end())
        p.outputs.push_back(o);
    }
    p.mode = coin(0.2) ? "reduce-overhead" : "default";
    for (const char* st : {"fuse", "cse", "dce", "fold_constants", "gemm_epilogue"})
      if (coin(0.06)) p.off.push_back(st);
    (void)index;
    return p;
  }
};

/// Keeps only `keep_steps` (indices into p.steps) and `outputs`, renumbering values.
Program restrict_program(const Program& p, const std::vector<int>& outputs) {
  int n_in = static_cast<int>(p.inputs.size());
  int n_val = n_in + static_cast<int>(p.steps.size());
  std::vector<bool> need(static_cast<size_t>(n_val), false);
  for (int o : outputs) need[o] = true;
  for (int v = n_val - 1; v >= n_in; --v)
    if (need[v])
      for (int i : p.steps[v - n_in].in) need[i] = true;
  Program q;
  q.mode = p.mode;
  q.off = p.off;
  std::vector<int> remap(static_cast<size_t>(n_val), -1);
  for (int v = 0; v < n_val; ++v) {
    if (!need[v]) continue;
    remap[v] = static_cast<int>(q.scale.size());
    q.scale.push_back(p.scale[v]);
    if (v < n_in) {
      q.inputs.push_back(p.inputs[v]);
    } else {
      Step s = p.steps[v - n_in];
      for (int& i : s.in) i = remap[i];
      q.steps.push_back(s);
    }
  }
  // Inputs come first in value order: they were kept in order, and so were steps.
  for (int o : outputs) q.outputs.push_back(remap[o]);
  return q;
}

/// Program p with value `from` (a step result) replaced by value `to` everywhere.
Program substitute(const Program& p, int from, int to) {
  Program q = p;
  int n_in = static_cast<int>(p.inputs.size());
  for (size_t k = static_cast<size_t>(from - n_in + 1); k < q.steps.size(); ++k)
    for (int& i : q.steps[k].in)
      if (i == from) i = to;
  for (int& o : q.outputs)
    if (o == from) o = to;
  return restrict_program(q, q.outputs);
}

int g_bad_output = -1;  // set by check_program: the first mismatching output

}  // namespace

// ---- public entry points -------------------------------------------------------------

std::vector<Tensor> make_inputs(const Program& p) {
  std::vector<Tensor> v;
  for (auto& s : p.inputs) v.push_back(make_input(s));
  return v;
}

std::vector<Tensor> interpret(const Program& p, const std::vector<Tensor>& inputs) {
  std::vector<Tensor> v = inputs;
  for (auto& s : p.steps) v.push_back(exec(s, v));
  std::vector<Tensor> out;
  for (int o : p.outputs) out.push_back(v.at(o));
  return out;
}

std::string program_str(const Program& p) {
  std::string r;
  std::vector<std::string> args;
  for (size_t i = 0; i < p.inputs.size(); ++i)
    args.push_back("const Tensor& " + vname(static_cast<int>(i)));
  std::string opts = fmt::format("mode \"{}\"", p.mode);
  for (auto& st : p.off) opts += fmt::format(", {}=false", st);
  r += fmt::format("  auto f = smelt::compile([]({}) {{   // options: {}\n", fmt::join(args, ", "),
                   opts);
  int id = static_cast<int>(p.inputs.size());
  for (auto& s : p.steps) {
    r += fmt::format("    Tensor {} = {};\n", vname(id), step_str(s));
    ++id;
  }
  std::vector<std::string> outs;
  for (int o : p.outputs) outs.push_back(vname(o));
  r += fmt::format("    return std::vector<Tensor>{{{}}};\n  }});\n", fmt::join(outs, ", "));
  for (size_t i = 0; i < p.inputs.size(); ++i)
    r += fmt::format("  // {}: {}\n", vname(static_cast<int>(i)),
                     input_str(p.inputs[i], static_cast<int>(i)));
  return r;
}

Program generate(uint64_t seed, int index) {
  // One independent stream per case: case i reproduces alone from (seed, i).
  std::seed_seq seq{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32),
                    static_cast<uint32_t>(index), 0x5eedu};
  std::mt19937_64 mix(seq);
  Gen g(mix());
  return g.run(index);
}

CaseResult check_program(const Program& p, uint64_t seed, int index) {
  CaseResult r;
  g_bad_output = -1;
  auto fail = [&](const std::string& what) {
    r.ok = false;
    r.summary = fmt::format("case {} (seed {}): {}", index, seed, what);
    r.report = fmt::format("--- reproducer: smelt fuzz --seed {} (case {}) ---\n{}{}\n", seed,
                           index, program_str(p), what);
  };
  std::vector<Tensor> in = make_inputs(p);
  std::vector<Tensor> want;
  try {
    want = interpret(p, in);
  } catch (const Error& e) {
    fail(fmt::format("eager raised (the generator should not keep such programs): {}", e.what()));
    return r;
  }
  std::vector<Tensor> before;
  for (auto& t : in) before.push_back(t.clone());
  CompiledRun got;
  try {
    got = run_compiled(p, in);
  } catch (const std::exception& e) {
    fail(fmt::format("compiled raised, eager did not: {}", e.what()));
    return r;
  }
  r.graph_break = got.stats.graph_breaks > 0 || got.stats.eager_calls > 0;
  r.kernels = fmt::format("{}", fmt::join(got.stats.kernel_names, ", "));
  for (size_t c = 0; c < got.outs.size(); ++c) {
    const auto& outs = got.outs[c];
    std::string call = got.outs.size() > 1 ? fmt::format(" (call {})", c + 1) : "";
    if (outs.size() != want.size()) {
      fail(fmt::format("compiled returned {} outputs, eager {}{}", outs.size(), want.size(), call));
      return r;
    }
    for (size_t k = 0; k < want.size(); ++k) {
      int v = p.outputs[k];
      double tol = std::max(base_tol(want[k].dtype()), p.scale[v]);
      std::string d = compare(want[k], outs[k], tol);
      if (!d.empty()) {
        g_bad_output = static_cast<int>(k);
        fail(fmt::format("output {} ({}){}: {}", k, vname(v), call, d));
        return r;
      }
    }
  }
  for (size_t i = 0; i < in.size(); ++i)
    if (!same_bits(before[i], in[i])) {
      fail(fmt::format("compiled code modified input {}", vname(static_cast<int>(i))));
      return r;
    }
  return r;
}

Program minimize(const Program& p, uint64_t seed, int index) {
  CaseResult r = check_program(p, seed, index);
  if (r.ok) return p;
  Program best = p;
  if (g_bad_output >= 0) {
    Program q = restrict_program(p, {p.outputs[g_bad_output]});
    if (!check_program(q, seed, index).ok) best = q;
  }
  // Greedily bypass steps: use an earlier value of the same shape and dtype instead.
  bool progress = true;
  while (progress) {
    progress = false;
    std::vector<Tensor> v = make_inputs(best);
    for (auto& s : best.steps) v.push_back(exec(s, v));
    int n_in = static_cast<int>(best.inputs.size());
    for (int from = static_cast<int>(v.size()) - 1; from >= n_in && !progress; --from) {
      const Step& s = best.steps[from - n_in];
      std::vector<int> cands = s.in;
      for (int to : cands) {
        if (v[to].sizes() != v[from].sizes() || v[to].dtype() != v[from].dtype()) continue;
        Program q = substitute(best, from, to);
        if (q.steps.size() < best.steps.size() && !check_program(q, seed, index).ok) {
          best = q;
          progress = true;
          break;
        }
      }
    }
  }
  return best;
}

void use_private_cache_dir() {
  if (std::getenv("SMELT_CACHE_DIR")) return;
  std::string dir = fmt::format("/tmp/smelt-fuzz-cache-{}", static_cast<long>(getuid()));
  setenv("SMELT_CACHE_DIR", dir.c_str(), 0);
}

FuzzSummary run(const FuzzOptions& opts, std::FILE* log) {
  if (!log) log = stdout;
  use_private_cache_dir();
  FuzzSummary sum;
  for (int i = 0; i < opts.cases; ++i) {
    Program p = generate(opts.seed, i);
    CaseResult r = check_program(p, opts.seed, i);
    ++sum.cases;
    if (r.graph_break) ++sum.graph_breaks;
    if (r.ok) {
      if (opts.verbose)
        std::fprintf(log, "case %d ok%s: %zu inputs, %zu steps; compiled: %s\n%s", i,
                     r.graph_break ? " (ran eagerly: graph break)" : "", p.inputs.size(),
                     p.steps.size(), r.kernels.c_str(), program_str(p).c_str());
      continue;
    }
    ++sum.mismatches;
    sum.failures.push_back(r.summary);
    std::fprintf(log, "FAIL %s\n", r.summary.c_str());
    if (opts.verbose) std::fprintf(log, "%s", r.report.c_str());
    if (opts.minimize) {
      Program m = minimize(p, opts.seed, i);
      CaseResult mr = check_program(m, opts.seed, i);
      std::fprintf(log, "%s", (mr.ok ? r.report : mr.report).c_str());
    }
    std::fflush(log);
  }
  return sum;
}

}  // namespace smelt::fuzz
