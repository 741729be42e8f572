// Differential fuzzer: random programs run eagerly and through smelt::compile.
// See fuzz.h for the design, the tolerances and what is never generated.
#include "fuzz/fuzz.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <limits>
#include <map>
#include <numeric>
#include <optional>
#include <random>
#include <set>
#include <tuple>

#include "core/tensor_impl.h"
#include "ops/op_call.h"
#include "ops/op_table.h"
#include "smelt/autograd.h"
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

/// How far library math (Precision::Transcendental) may round from eager's.
/// Generated and eager code call the same functions with the same bits
/// (kernels/vector_math.h), so this is a margin only, kept for the steps whose
/// inputs already deviate; float16/bfloat16 results may round to the
/// neighbouring half value.
double lib_math_tol(DType t) {
  switch (t) {
    case DType::Float64:
      return 1e-15;  // 4 ulp
    case DType::Float32:
      return 5e-7;  // 4 ulp
    case DType::Float16:
      return 2e-3;  // 2 ulp
    case DType::BFloat16:
      return 1.6e-2;  // 2 ulp
    default:
      return 0;
  }
}

/// Largest relative spread a result may take from its inputs' deviations (see
/// Gen::propagated_error); above it the step is not kept.
constexpr double kMaxSpread = 1e-2;

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

std::string vname(int id) { return fmt::format("v{}", id); }

std::vector<double> as_doubles(const Tensor& t) {
  return t.to(DType::Float64).contiguous().to_vector<double>();
}
std::vector<int64_t> as_ints(const Tensor& t) {
  return t.to(DType::Int64).contiguous().to_vector<int64_t>();
}

// ---- the ops drawn -------------------------------------------------------------

/// The pointwise ops by arity (index 1..3) and the reductions, from the op table.
/// to_dtype (dtype rule None) is drawn by the cast builder instead.
struct OpSets {
  std::vector<const detail::OpDef*> pointwise[4];
  std::vector<const detail::OpDef*> reductions;
};

const OpSets& op_sets() {
  static const OpSets sets = [] {
    OpSets r;
    for (const auto& op : detail::op_table()) {
      if (op.kind == detail::OpKind::Pointwise && op.rule != detail::DTypeRule::None &&
          op.arity >= 1 && op.arity <= 3)
        r.pointwise[op.arity].push_back(&op);
      else if (op.kind == detail::OpKind::Reduction)
        r.reductions.push_back(&op);
    }
    return r;
  }();
  return sets;
}

/// Ops with an op-specific argument builder below (shapes, dims, permutations...).
const std::vector<std::string>& built_ops() {
  static const std::vector<std::string> ops = [] {
    std::vector<std::string> v = {"to_dtype",
                                  "permute",
                                  "transpose",
                                  "reshape",
                                  "unsqueeze",
                                  "squeeze",
                                  "slice",
                                  "narrow",
                                  "select",
                                  "expand",
                                  "flatten",
                                  "t",
                                  "cat",
                                  "pad",
                                  "tril",
                                  "triu",
                                  "contiguous",
                                  "masked_fill",
                                  "softmax",
                                  "log_softmax",
                                  "layer_norm",
                                  "matmul",
                                  "scaled_dot_product_attention"};
    for (const auto& op : v)
      SMELT_INTERNAL_ASSERT(detail::find_op(op) != nullptr, "fuzz: '{}' is not in the op table",
                            op);
    return v;
  }();
  return ops;
}

/// True when call_op takes keyword `attr` for `op`.
bool accepts(const std::string& op, const char* attr) {
  static std::map<std::string, std::vector<std::string>> cache;
  auto it = cache.find(op);
  if (it == cache.end()) it = cache.emplace(op, detail::call_op_attrs(op)).first;
  return std::find(it->second.begin(), it->second.end(), attr) != it->second.end();
}

/// Data movement without arithmetic: views, movement ops and clone (functor identity).
bool moves_data(const detail::OpDef* def) {
  return def && (def->kind == detail::OpKind::View || def->kind == detail::OpKind::Movement ||
                 def->functor == "identity");
}

// ---- executing and printing one step -------------------------------------------

/// The step's positional arguments: its values with the wrapped numbers inserted.
std::vector<Tensor> step_args(const Step& s, const std::vector<Tensor>& v) {
  std::vector<Tensor> args;
  size_t w = 0, i = 0;
  for (size_t pos = 0; pos < s.in.size() + s.wrapped.size(); ++pos) {
    if (w < s.wrapped.size() && s.wrapped[w].first == pos)
      args.push_back(detail::wrapped_scalar(s.wrapped[w++].second));
    else
      args.push_back(v.at(s.in.at(i++)));
  }
  return args;
}

Tensor exec(const Step& s, const std::vector<Tensor>& v) {
  std::vector<Tensor> outs = detail::call_op(s.op, step_args(s, v), s.attrs);
  SMELT_INTERNAL_ASSERT(s.output >= 0 && static_cast<size_t>(s.output) < outs.size(),
                        "fuzz: {} has no output {}", s.op, s.output);
  return outs[s.output];
}

/// `op(v0, 2.5, dim=[1], keepdim=true)[1]`: the call_op call of the step.
std::string step_str(const Step& s) {
  std::vector<std::string> args;
  size_t w = 0, i = 0;
  for (size_t pos = 0; pos < s.in.size() + s.wrapped.size(); ++pos) {
    if (w < s.wrapped.size() && s.wrapped[w].first == pos)
      args.push_back(scalar_str(s.wrapped[w++].second));
    else
      args.push_back(vname(s.in.at(i++)));
  }
  if (!s.attrs.items.empty()) args.push_back(s.attrs.str());
  std::string out = s.output ? fmt::format("[{}]", s.output) : "";
  return fmt::format("{}({}){}", s.op, fmt::join(args, ", "), out);
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
  Tensor t = detail::make_view(base, spec.sizes, spec.strides, spec.offset);
  if (spec.requires_grad) t.requires_grad_();
  return t;
}

/// A gradient program's coefficients for output `k` (see fuzz.h): values in
/// [0.5, 1.5) of its shape, dtype and device, fixed by k and the shape.
Tensor coefficients(const Tensor& out, size_t k) {
  std::mt19937_64 rng(0xc0ffeeull + k * 7919 + static_cast<uint64_t>(out.numel()));
  std::uniform_real_distribution<double> u(0.5, 1.5);
  std::vector<double> c(static_cast<size_t>(out.numel()));
  for (auto& x : c) x = u(rng);
  return from_vector<double>(c, out.sizes()).to(out.dtype()).to(out.device());
}

/// A gradient program's backward pass over its outputs (see fuzz.h).
void backward_from(const std::vector<Tensor>& outs) {
  Tensor loss;
  for (size_t k = 0; k < outs.size(); ++k) {
    if (!outs[k].requires_grad()) continue;
    Tensor term = sum(outs[k] * coefficients(outs[k], k)).to(DType::Float64);
    loss = loss.defined() ? loss + term : term;
  }
  if (loss.defined()) loss.backward();
}

std::string input_str(const InputSpec& s, int id) {
  return fmt::format("{}[{}] strides {} offset {} ({}{}; data seed {:#x}){}", dtype_name(s.dtype),
                     fmt::join(s.sizes, ", "), detail::shape_str(s.strides), s.offset, s.layout,
                     s.specials ? ", with NaN/inf/-0" : "", s.data_seed,
                     s.requires_grad ? ", requires grad" : "");
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
  std::vector<std::vector<Tensor>> outs;   // one per call
  std::vector<std::vector<Tensor>> grads;  // per call: each input's .grad (gradient programs)
  CompileStats stats;
};

/// Each input's .grad (undefined where it has none), which it then loses.
std::vector<Tensor> take_grads(const std::vector<Tensor>& in) {
  std::vector<Tensor> g;
  for (const auto& t : in) {
    g.push_back(t.grad());
    if (t.requires_grad()) t.mutable_grad() = Tensor();
  }
  return g;
}

template <class F, class... T>
CompiledRun call_compiled(const Program& p, F&& f, int calls, const T&... args) {
  CompiledRun r;
  for (int i = 0; i < calls; ++i) {
    r.outs.push_back(f(args...));
    if (p.grad && p.backward_outside) backward_from(r.outs.back());
    r.grads.push_back(take_grads({args...}));
  }
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
  // reduce-overhead on CUDA: a warm-up, a call recorded into a CUDA graph and
  // replayed, then (its results still held) a second recording, replayed.
  int calls = p.mode == "reduce-overhead" ? 3 : 1;
  auto body = [&p](std::vector<Tensor> v) { return interpret(p, v); };
  switch (in.size()) {
    case 1:
      return call_compiled(p, compile([&](const Tensor& a) { return body({a}); }, o), calls, in[0]);
    case 2:
      return call_compiled(p,
                           compile(
                               [&](const Tensor& a, const Tensor& b) {
                                 return body({a, b});
                               },
                               o),
                           calls, in[0], in[1]);
    default:
      return call_compiled(p,
                           compile(
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
  bool half_program = false;        // draws mostly float16 / bfloat16 (a third of the programs)
  bool grad_program = false;        // float32 / float64 inputs that require grad
  bool replaying = false;           // replay(): steps come whole, outputs included

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
    // A half program draws mostly float16 / bfloat16 (inputs and casts).
    static const std::vector<double> half_w = {12, 4, 32, 32, 6, 6, 8};
    // A gradient program differentiates float32 and float64 values.
    static const std::vector<double> grad_w = {60, 25, 0, 0, 5, 5, 5};
    return t[weighted(grad_program ? grad_w : half_program ? half_w : w)];
  }
  /// A floating dtype for a reduction's or softmax's dtype= argument.
  DType rand_float_dtype() {
    static const std::vector<DType> t = {DType::Float32, DType::Float64, DType::Float16,
                                         DType::BFloat16};
    return t[weighted(half_program ? std::vector<double>{2, 1, 2, 2}
                                   : std::vector<double>{4, 4, 1, 1})];
  }
  InputSpec make_spec(Shape sizes, DType dt) {
    InputSpec s;
    s.sizes = std::move(sizes);
    s.dtype = dt;
    s.data_seed = rng();
    s.specials = is_floating(dt) && coin(grad_program ? 0.05 : 0.15);
    s.requires_grad = grad_program && is_floating(dt) && coin(0.85);
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
      // A gradient program's first input is a floating leaf that requires grad.
      if (grad_program && i == 0 && !is_floating(dt)) dt = DType::Float32;
      p.inputs.push_back(make_spec(s, dt));
      if (grad_program && i == 0) p.inputs.back().requires_grad = true;
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

  /// A pointwise op's keyword arguments: one of its attribute variants half of the
  /// time (gelu approximate, div rounding_mode), and alpha where it takes one.
  void pointwise_attrs(Step& s, const detail::OpDef& def) {
    if (!def.variants.empty() && coin(0.5)) {
      const detail::OpVariant& v = pick(def.variants);
      s.attrs.set(std::string(v.attr), std::string(v.value));
    }
    if (accepts(s.op, "alpha")) s.attrs.set("alpha", coin(0.7) ? Scalar(1) : rand_scalar());
  }

  /// Fills `s` (its op, values, numbers and attrs); `red_len` is the reduced length
  /// of softmax / layer_norm / matmul (reductions get theirs from their result).
  bool candidate(Step& s, int64_t& red_len) {
    size_t cat = weighted(std::vector<double>{25, 20, 8, 6, 6, 14, 14, 4, 5, 3, 3});
    red_len = 1;
    int x = pick_value();
    const Tensor& X = vals[x];
    int64_t rank = X.dim();
    s.in = {x};
    switch (cat) {
      case 0: {  // unary pointwise
        const detail::OpDef& def = *pick(op_sets().pointwise[1]);
        s.op = def.name;
        pointwise_attrs(s, def);
        return true;
      }
      case 1: {  // binary pointwise, tensor-tensor
        int y = coin(0.2) ? x : pick_value();
        if (coin(0.5)) std::swap(x, y);
        s.in = {x, y};
        const detail::OpDef& def = *pick(op_sets().pointwise[2]);
        s.op = def.name;
        pointwise_attrs(s, def);
        return true;
      }
      case 2: {  // binary pointwise with a Python number (on the left a quarter of the time)
        const detail::OpDef& def = *pick(op_sets().pointwise[2]);
        s.op = def.name;
        s.wrapped = {{coin(0.25) ? 0 : 1, rand_scalar()}};
        pointwise_attrs(s, def);
        return true;
      }
      case 3: {  // ternary pointwise (where, clamp, lerp); the last argument may be a number
        const detail::OpDef& def = *pick(op_sets().pointwise[3]);
        s.op = def.name;
        int c = coin(0.5)
                    ? pick_value_where([](const Tensor& t) { return t.dtype() == DType::Bool; })
                    : -1;  // a condition / mask first, at times
        s.in = {c >= 0 ? c : x, pick_value()};
        if (coin(0.4))
          s.wrapped = {{2, rand_scalar()}};
        else
          s.in.push_back(pick_value());
        pointwise_attrs(s, def);
        return true;
      }
      case 4: {  // cast
        s.op = "to_dtype";
        s.attrs.set("dtype", rand_dtype());
        return true;
      }
      case 5: {  // reductions, with the arguments each takes
        const detail::OpDef& def = *pick(op_sets().reductions);
        s.op = def.name;
        if (accepts(s.op, "dim")) {
          if (rank > 0 && coin(0.5))
            s.attrs.set("dim", rand_dim(rank));
          else
            s.attrs.set("dim", rand_dims(rank));
        }
        if (accepts(s.op, "keepdim")) s.attrs.set("keepdim", coin(0.4));
        if (accepts(s.op, "correction")) s.attrs.set("correction", uni(0, 1));
        if (accepts(s.op, "dtype") && coin(0.15)) s.attrs.set("dtype", rand_float_dtype());
        return true;
      }
      case 6: {  // views
        static const std::vector<std::string> ops = {"permute", "transpose", "reshape", "unsqueeze",
                                                     "squeeze", "slice",     "narrow",  "select",
                                                     "expand",  "flatten",   "t"};
        s.op = pick(ops);
        if (s.op == "permute") {
          std::vector<int64_t> dims(static_cast<size_t>(rank));
          std::iota(dims.begin(), dims.end(), 0);
          std::shuffle(dims.begin(), dims.end(), rng);
          s.attrs.set("dims", dims);
        } else if (s.op == "transpose") {
          if (rank == 0) return false;
          s.attrs.set("dim0", rand_dim(rank));
          s.attrs.set("dim1", rand_dim(rank));
        } else if (s.op == "reshape") {
          s.attrs.set("shape", rand_reshape(X.sizes()));
        } else if (s.op == "unsqueeze") {
          s.attrs.set("dim", uni(-rank - 1, rank));
        } else if (s.op == "squeeze") {
          if (coin(0.6)) {
            std::vector<int64_t> ones;
            for (int64_t d = 0; d < rank; ++d)
              if (X.size(d) == 1) ones.push_back(d);
            if (ones.empty()) return false;
            s.attrs.set("dim", std::vector<int64_t>{pick(ones)});
          }
        } else if (s.op == "slice" || s.op == "narrow" || s.op == "select") {
          if (rank == 0) return false;
          int64_t dim = rand_dim(rank);
          int64_t n = X.size(dim);
          s.attrs.set("dim", dim);
          if (s.op == "slice") {
            s.attrs.set("start", uni(-n - 1, n));
            s.attrs.set("end", uni(-n - 1, n + 1));
            s.attrs.set("step", uni(1, 3));
          } else if (s.op == "narrow") {
            int64_t start = uni(0, n);
            s.attrs.set("start", start);
            s.attrs.set("length", uni(0, n - start));
          } else {
            if (n == 0) return false;
            s.attrs.set("index", uni(-n, n - 1));
          }
        } else if (s.op == "expand") {
          Shape sz = X.sizes();
          for (auto& d : sz)
            if (d == 1 && coin(0.7))
              d = uni(2, 5);
            else if (coin(0.3))
              d = -1;
          if (coin(0.3)) sz.insert(sz.begin(), uni(1, 3));
          s.attrs.set("size", sz);
        } else if (s.op == "flatten") {
          if (rank == 0) return false;
          int64_t start = uni(0, rank - 1);
          s.attrs.set("start_dim", start);
          s.attrs.set("end_dim", uni(start, rank - 1));
        } else if (s.op == "t") {
          if (rank > 2) return false;
        }
        return true;
      }
      case 7: {  // data movement
        static const std::vector<std::string> ops = {"cat",  "cat",        "pad",        "tril",
                                                     "triu", "contiguous", "masked_fill"};
        s.op = pick(ops);
        if (s.op == "cat") {
          if (rank == 0) return false;
          int64_t dim = rand_dim(rank);
          s.attrs.set("dim", dim);
          int64_t d = dim < 0 ? dim + rank : dim;
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
          std::vector<int64_t> pad;
          for (int64_t i = 0; i < 2 * k; ++i) pad.push_back(uni(0, 2));
          s.attrs.set("pad", pad);
          s.attrs.set("value", coin(0.5) ? 0.0 : 1.5);
        } else if (s.op == "tril" || s.op == "triu") {
          if (rank < 2) return false;
          s.attrs.set("diagonal", uni(-2, 2));
        } else if (s.op == "masked_fill") {
          int c = pick_value_where([](const Tensor& t) { return t.dtype() == DType::Bool; });
          if (c < 0) return false;
          s.in = {x, c};
          s.attrs.set("value", rand_scalar());
        }
        return true;
      }
      case 8: {  // nn
        static const std::vector<std::string> ops = {"softmax", "log_softmax", "layer_norm"};
        s.op = pick(ops);
        if (rank == 0) return false;
        if (s.op == "layer_norm") {
          int64_t k = uni(1, std::min<int64_t>(rank, 2));
          Shape normalized(X.sizes().end() - k, X.sizes().end());
          red_len = detail::shape_numel(normalized);
          s.attrs.set("normalized_shape", normalized);
        } else {
          int64_t dim = rand_dim(rank);
          red_len = X.size(dim);
          s.attrs.set("dim", dim);
          if (coin(0.15)) s.attrs.set("dtype", rand_float_dtype());
        }
        return true;
      }
      case 9: {  // attention over a value [..., L, E] (4-D: [B, H, L, E], the fused
                 // kernels' case): self-attention, or keys and values of another
                 // [..., S, E] value; causal or not, the default scale or a drawn one
        if (rank < 2 || !is_floating(X.dtype()) || X.numel() == 0) return false;
        const DType dt = X.dtype();
        int kv = pick_value_where([&](const Tensor& t) {
          if (t.dim() != rank || t.dtype() != dt || t.size(-2) == 0) return false;
          for (int64_t d = 0; d < rank; ++d)
            if (d != rank - 2 && t.size(d) != X.size(d)) return false;
          return true;
        });
        if (kv < 0 || coin(0.4)) kv = x;
        s.op = "scaled_dot_product_attention";
        s.in = {x, kv, kv};
        s.attrs.set("is_causal", coin(0.4));
        if (coin(0.3)) s.attrs.set("scale", coin(0.5) ? 0.25 : 1.5);
        red_len = std::max(vals[static_cast<size_t>(kv)].size(-2), X.size(-1));
        return true;
      }
      default: {  // matmul: A @ B, or A @ t(W) as linear layers have it
        if (rank != 2 || !is_floating(X.dtype())) return false;
        const int64_t k = X.size(1);
        const DType dt = X.dtype();
        int y = pick_value_where(
            [&](const Tensor& t) { return t.dim() == 2 && t.dtype() == dt && t.size(0) == k; });
        red_len = k;
        s.op = "matmul";
        if (y >= 0 && coin(0.7)) {
          s.in = {x, y};
          return true;
        }
        int z = pick_value_where(
            [&](const Tensor& t) { return t.dim() == 2 && t.dtype() == dt && t.size(1) == k; });
        Step ts;
        ts.op = "t";
        ts.in = {z < 0 ? x : z};
        if (!add_step(ts, 1)) return false;  // X is dangling from here on
        s.in = {x, static_cast<int>(vals.size()) - 1};
        return true;
      }
    }
  }

  bool has_inf(const Tensor& t) {
    if (t.numel() == 0) return false;
    auto v = as_doubles(t);
    return std::any_of(v.begin(), v.end(), [](double d) { return std::isinf(d); });
  }

  bool has_zero(const Tensor& t) {
    if (t.numel() == 0) return false;
    auto v = as_doubles(t);
    return std::any_of(v.begin(), v.end(), [](double d) { return d == 0; });
  }

  /// True when `t` has two or more elements, all equal (NaN never equal).
  bool all_equal(const Tensor& t) {
    if (t.numel() < 2) return false;
    auto v = as_doubles(t);
    return std::all_of(v.begin(), v.end(), [&](double d) { return d == v[0]; });
  }

  /// True when some group a normalization of `t` centres on its own mean holds
  /// one value `group` times over: layer_norm's rows of `group` trailing
  /// elements (group = numel(normalized_shape)), or batch_norm's channels
  /// (dim 1; group = 0 selects it).
  bool any_group_constant(const Tensor& t, int64_t group) {
    if (t.numel() < 2) return false;
    const std::vector<double> v = as_doubles(t);
    if (group > 0) {
      if (group < 2) return false;
      for (size_t r = 0; r + static_cast<size_t>(group) <= v.size();
           r += static_cast<size_t>(group))
        if (std::all_of(v.begin() + static_cast<std::ptrdiff_t>(r),
                        v.begin() + static_cast<std::ptrdiff_t>(r + static_cast<size_t>(group)),
                        [&](double d) { return d == v[r]; }))
          return true;
      return false;
    }
    if (t.dim() < 2) return all_equal(t);
    const int64_t c = t.size(1), inner = t.numel() / (t.size(0) * c);
    for (int64_t ch = 0; ch < c; ++ch) {
      const double first = v[static_cast<size_t>(ch * inner)];
      bool same = t.size(0) * inner >= 2;
      for (int64_t n = 0; n < t.size(0) && same; ++n)
        for (int64_t k = 0; k < inner && same; ++k)
          same = v[static_cast<size_t>((n * c + ch) * inner + k)] == first;
      if (same) return true;
    }
    return false;
  }

  /// True when a floating product over `t` (its result `dt`) depends on the
  /// order its elements are combined in: a zero or a non-finite value beside
  /// elements whose running product can overflow the accumulator (float32 for
  /// float16 / bfloat16 / float32 results, float64 for float64): 0 * inf is NaN,
  /// so a loop that meets the zero first gives 0, a combine tree whose other
  /// branch overflowed gives NaN (PyTorch's own prod of 8873 values in
  /// [-8, 8] with dtype=float16 is NaN where a sequential loop gives 0).
  /// Judged over the whole tensor (any reduced row is a part of it).
  bool product_order_dependent(const Tensor& t, DType dt) {
    if (!is_floating(dt) || t.numel() == 0) return false;
    auto v = as_doubles(t);
    bool special = false;
    double log2_max = 0;  // the largest running product's magnitude, as a power of two
    for (double d : v) {
      if (d == 0 || !std::isfinite(d))
        special = true;
      else if (std::abs(d) > 1)
        log2_max += std::log2(std::abs(d));
    }
    return special && log2_max >= (dt == DType::Float64 ? 1000 : 120);
  }

  /// The spread step `s` may legitimately take from its inputs' deviations:
  /// every floating input with a scale (one that compiled code may compute
  /// differently) is multiplied by 1 +- its scale, element by element with
  /// random signs (sums that cancel show it), and the step is run again in
  /// float64 against its unperturbed float64 run. Returns the largest
  /// |y' - y| / (1 + |y|), the form of the comparison's tolerance; nullopt when
  /// the step is ill-conditioned on this data: a non-finite value appears or
  /// vanishes, the spread passes kMaxSpread, or the result of a discontinuous
  /// step changes (checked with every input scaled up and every input down).
  std::optional<double> propagated_error(const Step& s, bool discontinuous) {
    std::mt19937_64 noise(0x9e3779b97f4a7c15ull ^ vals.size());
    auto runs = [&](int sign) {  // sign 0: random signs
      std::vector<Tensor> base, pert;
      size_t w = 0, i = 0;
      bool any = false;
      for (size_t pos = 0; pos < s.in.size() + s.wrapped.size(); ++pos) {
        if (w < s.wrapped.size() && s.wrapped[w].first == pos) {
          Tensor t = detail::wrapped_scalar(s.wrapped[w++].second);
          base.push_back(t);
          pert.push_back(t);
          continue;
        }
        const int v = s.in.at(i++);
        const Tensor& x = vals[v];
        if (!is_floating(x.dtype()) || p.scale[v] <= 0 || x.numel() == 0) {
          base.push_back(x);
          pert.push_back(x);
          continue;
        }
        any = true;
        Tensor x64 = x.to(DType::Float64).contiguous();
        const std::vector<double> xv = as_doubles(x64);
        // An inexact zero may be a tiny value of either sign elsewhere (a
        // library tanh that rounds 1 + tanh(x) to 0 on one device and not on
        // the other): zeros move by the dtype's smallest subnormal.
        const double tiny = x.dtype() == DType::Float16    ? std::ldexp(1.0, -24)
                            : x.dtype() == DType::BFloat16 ? std::ldexp(1.0, -133)
                            : x.dtype() == DType::Float32
                                ? double{std::numeric_limits<float>::denorm_min()}
                                : std::numeric_limits<double>::denorm_min();
        std::vector<double> f(static_cast<size_t>(x.numel())), z(f.size(), 0.0);
        for (size_t e = 0; e < f.size(); ++e) {
          const int sg = sign != 0 ? sign : ((noise() & 1) ? 1 : -1);
          f[e] = 1 + sg * p.scale[v];
          if (xv[e] == 0) z[e] = sg * tiny;
        }
        base.push_back(x64);
        pert.push_back(x64 * from_vector<double>(f, x64.sizes()) +
                       from_vector<double>(z, x64.sizes()));
      }
      return std::make_tuple(any, base, pert);
    };
    double spread = 0;
    for (int sign : discontinuous ? std::vector<int>{1, -1} : std::vector<int>{0}) {
      auto [any, base, pert] = runs(sign);
      if (!any) return 0.0;
      Tensor y0, y1;
      try {
        y0 = detail::call_op(s.op, base, s.attrs).at(static_cast<size_t>(s.output));
        y1 = detail::call_op(s.op, pert, s.attrs).at(static_cast<size_t>(s.output));
      } catch (const Error&) {
        return 0.0;  // the op takes no float64: nothing to measure
      }
      if (y0.sizes() != y1.sizes() || y0.numel() == 0) return 0.0;
      const bool exact = discontinuous || !is_floating(y0.dtype());
      auto a = as_doubles(y0), b = as_doubles(y1);
      for (size_t k = 0; k < a.size(); ++k) {
        const bool fa = std::isfinite(a[k]), fb = std::isfinite(b[k]);
        if (fa != fb || std::isnan(a[k]) != std::isnan(b[k])) return std::nullopt;
        if (!fa) {
          if (!std::isnan(a[k]) && a[k] != b[k]) return std::nullopt;
          continue;
        }
        if (exact) {
          if (a[k] != b[k]) return std::nullopt;
          continue;
        }
        spread = std::max(spread, std::abs(b[k] - a[k]) / (1 + std::abs(a[k])));
      }
    }
    if (spread > kMaxSpread) return std::nullopt;
    return spread;
  }

  /// Tries to append one step; false when the candidate was rejected.
  bool try_step() {
    Step s;
    int64_t red_len;
    if (!candidate(s, red_len)) return false;
    return add_step(s, red_len);
  }

  /// Runs `s` eagerly and appends it with its tolerance bookkeeping (see fuzz.h);
  /// false when it is rejected.
  bool add_step(Step& s, int64_t red_len) {
    if (kKnownIssues.count(s.op)) return false;
    const detail::OpDef* def = detail::find_op(s.op);
    SMELT_INTERNAL_ASSERT(def != nullptr, "fuzz: '{}' is not in the op table", s.op);
    const Tensor& first = vals[s.in[0]];
    const bool cast = s.op == "to_dtype";
    // The op table marks casts discontinuous as a whole; only float -> integer casts jump.
    const bool disc = cast ? is_floating(first.dtype()) && !is_floating(s.attrs.as<DType>("dtype"))
                           : detail::is_discontinuous(s.op, s.attrs);
    bool any_fragile = false, any_half_in = false;
    double scale = 0;
    for (int i : s.in) {
      any_fragile = any_fragile || fragile(i);
      any_half_in = any_half_in || computed_half[i];
      scale = std::max(scale, p.scale[i]);
    }
    if (disc && any_fragile) return false;
    if (grad_program && any_fragile && kinked_ops().count(s.op)) return false;
    std::vector<Tensor> args = step_args(s, vals);
    // Integer division by zero (and float->int casts of inf/NaN/huge values) are
    // undefined in C++: never generate them.
    if (detail::runtime_check(s.op, s.attrs) == detail::RuntimeCheck::IntegerDivisionByZero &&
        args.size() >= 2 && !is_floating(promote_types(args[0].dtype(), args[1].dtype())) &&
        has_zero(args[1]))
      return false;
    // Welford's mean and variance of values that include +-inf are NaN or
    // +-inf depending on the order the elements are combined in (PyTorch's
    // var_mean of [1, 2, inf] is (nan, inf), of [inf, 1, 2] (nan, nan)): no
    // one answer for a GPU's combine tree and a CPU's loop to agree on.
    if (def->accumulator == detail::Accumulator::Welford && is_floating(first.dtype()) &&
        has_inf(first))
      return false;
    // Normalizing a constant (every element equal, as a softmax of an expanded
    // value gives): x - mean is rounding noise whose sign depends on how the
    // mean was summed, so a log or sqrt after it is NaN on one device and
    // finite on the other (found on the H200: smelt fuzz --device cuda --grad
    // --seed 19001, case 224, layer_norm then log2). layer_norm and
    // batch_norm centre each row or channel on its own mean: one constant
    // group is enough (--device cuda --seed 40008, case 158: trunc, then
    // layer_norm over [4, 7], then sqrt).
    if (is_floating(first.dtype())) {
      if (def->accumulator == detail::Accumulator::Welford && all_equal(first)) return false;
      if (s.op == "layer_norm" &&
          any_group_constant(
              first, std::max<int64_t>(1, detail::shape_numel(s.attrs.as<std::vector<int64_t>>(
                                              "normalized_shape")))))
        return false;
      if (s.op == "batch_norm" && any_group_constant(first, 0)) return false;
    }
    if (cast && is_floating(first.dtype()) && !is_floating(s.attrs.as<DType>("dtype")) &&
        s.attrs.as<DType>("dtype") != DType::Bool) {
      auto v = as_doubles(first);
      for (double d : v)
        if (!std::isfinite(d) || std::abs(d) >= 2147483647.0) return false;
    }
    Tensor out;
    try {
      std::vector<Tensor> outs = detail::call_op(s.op, args, s.attrs);
      if (!replaying) s.output = static_cast<int>(uni(0, static_cast<int64_t>(outs.size()) - 1));
      out = outs[s.output];
    } catch (const Error&) {
      return false;
    }
    if (out.numel() > kMaxNumel) return false;
    bool is_view = out.storage() == first.storage();
    DType dt = out.dtype();
    if (def->accumulator == detail::Accumulator::Prod && product_order_dependent(first, dt))
      return false;
    if (!is_floating(dt) && dt != DType::Bool && out.numel() > 0) {
      auto v = as_doubles(out);
      for (double d : v)
        if (std::abs(d) > kMaxInt) return false;
    }
    if (def->kind == detail::OpKind::Reduction) {
      // Reduced length: from the result's size, or the dims named (cumsum keeps the size).
      red_len = out.numel() > 0 && out.numel() < first.numel() ? first.numel() / out.numel() : 1;
      if (s.attrs.has("dim") && first.dim() > 0) {
        int64_t named = 1;
        const auto& dim = s.attrs.get("dim");
        std::vector<int64_t> dims = std::holds_alternative<int64_t>(dim)
                                        ? std::vector<int64_t>{std::get<int64_t>(dim)}
                                        : std::get<std::vector<int64_t>>(dim);
        for (int64_t d : dims)
          if (d >= -first.dim() && d < first.dim()) named *= first.size(d);
        red_len = std::max(red_len, named);
      }
    }
    const bool red = def->precision == detail::Precision::Accumulated;
    const bool moves = is_view || moves_data(def);
    bool ex = !any_fragile;
    bool chalf = false;
    if (any_half_in) {
      for (int i : s.in)
        if (computed_half[i]) scale = std::max(scale, base_tol(vals[i].dtype()));
      if (!moves && !cast) scale *= 1.5;
    }
    if (red && (is_floating(dt) || is_floating(first.dtype()))) {
      ex = false;
      scale = std::max(scale, base_tol(dt)) * static_cast<double>(std::max<int64_t>(red_len, 1));
      // products compound relative error; logsumexp runs outside the loop IR
      if (def->accumulator == detail::Accumulator::Prod ||
          (def->kind == detail::OpKind::Reduction && def->accumulator == detail::Accumulator::None))
        scale *= 2;
    }
    // Library math (exp, sin, pow, ...) may round differently compiled and
    // eager: a tolerance of the dtype it is computed in, which stays with the
    // value when it is cast to a wider dtype.
    if (def->precision == detail::Precision::Transcendental && is_floating(dt))
      scale = std::max(scale, lib_math_tol(dt));
    // What the inputs' own deviations can do to the result (tan near a pole,
    // the reciprocal of a sum that cancels, exp of a large value).
    if (!moves) {
      std::optional<double> spread = propagated_error(s, disc);
      if (!spread) return false;
      scale = std::max(scale, *spread);
    }
    if (moves)
      for (int i : s.in) chalf = chalf || computed_half[i];
    else if (!cast && is_half(dt))
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

  /// The program of `steps` over `inputs`, with the generator's bookkeeping
  /// (tolerance scales); raises when a step would not be generated.
  Program replay(const std::vector<InputSpec>& inputs, const std::vector<Step>& steps,
                 const std::vector<int>& outputs) {
    replaying = true;
    p.inputs = inputs;
    vals = make_inputs(p);
    for (size_t i = 0; i < inputs.size(); ++i) {
      exact.push_back(true);
      computed_half.push_back(false);
      usable.push_back(true);
      uses.push_back(0);
      p.scale.push_back(0);
    }
    for (const Step& st : steps) {
      Step s = st;
      const Tensor& x = vals.at(s.in.at(0));
      int64_t red_len = 1;  // as candidate() sets it for the ops that are not reductions
      if ((s.op == "softmax" || s.op == "log_softmax") && x.dim() > 0)
        red_len = x.size(s.attrs.as<int64_t>("dim"));
      else if (s.op == "layer_norm")
        red_len = detail::shape_numel(s.attrs.as<std::vector<int64_t>>("normalized_shape"));
      else if (s.op == "matmul")
        red_len = x.size(-1);
      else if (s.op == "scaled_dot_product_attention")
        red_len = std::max(vals.at(s.in.at(1)).size(-2), x.size(-1));
      SMELT_CHECK(add_step(s, red_len), "fuzz::replay: step {} is not one the generator keeps",
                  step_str(s));
    }
    p.outputs = outputs;
    return p;
  }

  Program run(int index, bool grad) {
    grad_program = grad;
    p.grad = grad;
    half_program = !grad && coin(0.35);
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
  q.grad = p.grad;
  q.backward_outside = p.backward_outside;
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
  if (p.grad && !p.backward_outside) backward_from(out);
  return out;
}

std::vector<Tensor> call_program(const Program& p, const std::vector<Tensor>& inputs) {
  std::vector<Tensor> out = interpret(p, inputs);
  if (p.grad && p.backward_outside) backward_from(out);
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
  r += "    // each step: detail::call_op(op, {tensors and numbers}, {keyword=value})[output]\n";
  int id = static_cast<int>(p.inputs.size());
  for (auto& s : p.steps) {
    r += fmt::format("    Tensor {} = {};\n", vname(id), step_str(s));
    ++id;
  }
  std::vector<std::string> outs;
  for (int o : p.outputs) outs.push_back(vname(o));
  const char* backward =
      "// sum over the outputs k that require grad of sum(out_k * c_k), c_k fixed\n";
  if (p.grad && !p.backward_outside)
    r += fmt::format("    {}    fuzz::backward_from({{{}}});\n", backward, fmt::join(outs, ", "));
  r += fmt::format("    return std::vector<Tensor>{{{}}};\n  }});\n", fmt::join(outs, ", "));
  if (p.grad && p.backward_outside) {
    std::vector<std::string> names;
    for (size_t i = 0; i < p.inputs.size(); ++i) names.push_back(vname(static_cast<int>(i)));
    r += fmt::format("  {}  fuzz::backward_from(f({}));  // the caller's: the compiled backward\n",
                     backward, fmt::join(names, ", "));
  }
  for (size_t i = 0; i < p.inputs.size(); ++i)
    r += fmt::format("  // {}: {}\n", vname(static_cast<int>(i)),
                     input_str(p.inputs[i], static_cast<int>(i)));
  return r;
}

Program generate(uint64_t seed, int index, bool grad) {
  // One independent stream per case: case i reproduces alone from (seed, i).
  std::seed_seq seq{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32),
                    static_cast<uint32_t>(index), grad ? 0x67adu : 0x5eedu};
  std::mt19937_64 mix(seq);
  for (int attempt = 0;; ++attempt) {
    Gen g(mix());
    Program p = g.run(index, grad);
    p.backward_outside = grad && index % 2 == 1;
    if (!grad || attempt == 8) return p;
    // The generator runs each step forward only: keep a gradient program
    // whose backward pass runs eagerly (PyTorch's derivatives raise for some
    // valid forward programs too: pow with a bool exponent).
    try {
      call_program(p, make_inputs(p));
      return p;
    } catch (const Error&) {
    }
  }
}

Program replay(const std::vector<InputSpec>& inputs, const std::vector<Step>& steps,
               const std::vector<int>& outputs) {
  Gen g(0);
  return g.replay(inputs, steps, outputs);
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
  std::vector<Tensor> want, want_grads;
  try {
    want = call_program(p, in);
    want_grads = take_grads(in);
  } catch (const Error& e) {
    fail(fmt::format("eager raised (the generator should not keep such programs): {}", e.what()));
    return r;
  }
  in = make_inputs(p);  // fresh leaves for the compiled run
  std::vector<Tensor> before;
  for (auto& t : in) before.push_back(t.detach().clone());
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
    if (!p.grad) continue;
    // A gradient mixes every value of the program: the largest scale, widened.
    const double widest = *std::max_element(p.scale.begin(), p.scale.end());
    for (size_t i = 0; i < in.size(); ++i) {
      const Tensor& w = want_grads[i];
      const Tensor& g = got.grads[c][i];
      if (w.defined() != g.defined()) {
        fail(fmt::format("the .grad of input {}{} is {} eagerly and {} compiled",
                         vname(static_cast<int>(i)), call, w.defined() ? "defined" : "undefined",
                         g.defined() ? "defined" : "undefined"));
        return r;
      }
      if (!w.defined()) continue;
      ++r.grads;
      const double tol = std::max(base_tol(w.dtype()), widest * kGradTolFactor);
      std::string d = compare(w, g, tol);
      if (!d.empty()) {
        fail(fmt::format("the .grad of input {}{}: {}", vname(static_cast<int>(i)), call, d));
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

CaseResult check_program_on_device(const Program& p, Device device, uint64_t seed, int index) {
  CaseResult r;
  g_bad_output = -1;
  auto fail = [&](const std::string& what) {
    r.ok = false;
    r.summary = fmt::format("case {} (seed {}, {}): {}", index, seed, device.str(), what);
    r.report = fmt::format("--- reproducer: smelt fuzz --device {} --seed {} (case {}) ---\n{}{}\n",
                           device.str(), seed, index, program_str(p), what);
  };
  std::vector<Tensor> in = make_inputs(p);
  std::vector<Tensor> want, want_grads;
  try {
    want = call_program(p, in);
    want_grads = take_grads(in);
  } catch (const Error& e) {
    fail(fmt::format("eager raised (the generator should not keep such programs): {}", e.what()));
    return r;
  }
  // The same inputs on the device, leaves of their own where the CPU's
  // require grad (gradient programs: their .grad is compared too).
  std::vector<Tensor> on_device;
  for (auto& t : make_inputs(p)) {
    Tensor d = t.detach().to(device);
    if (t.requires_grad()) d.requires_grad_(true);
    on_device.push_back(d);
  }
  std::vector<Tensor> got, got_grads;
  try {
    got = call_program(p, on_device);
    got_grads = take_grads(on_device);
  } catch (const std::exception& e) {
    fail(fmt::format("{} raised, the CPU did not: {}", device.str(), e.what()));
    return r;
  }
  // The device's results (eager, then compiled) against the CPU's eager ones,
  // and compiled against eager on the device.
  auto check = [&](const std::vector<Tensor>& outs, const std::vector<Tensor>& ref,
                   const std::string& what, const std::string& ref_what) {
    if (outs.size() != ref.size()) {
      fail(fmt::format("{} returned {} outputs, {} {}", what, outs.size(), ref_what, ref.size()));
      return false;
    }
    for (size_t k = 0; k < ref.size(); ++k) {
      const int v = p.outputs[k];
      if (outs[k].device() != device) {
        fail(fmt::format("{}: output {} ({}) is on {}, not {}", what, k, vname(v),
                         outs[k].device().str(), device.str()));
        return false;
      }
      const double tol = std::max(base_tol(ref[k].dtype()), p.scale[v]);
      const std::string d = compare(ref[k].cpu(), outs[k].cpu(), tol);
      if (!d.empty()) {
        g_bad_output = static_cast<int>(k);
        fail(fmt::format("{} vs {}: output {} ({}): {}", what, ref_what, k, vname(v), d));
        return false;
      }
    }
    return true;
  };
  // A gradient mixes every value of the program: the largest scale, widened.
  // Across devices, too, a backward sums broadcast gradients in another order
  // (the GPU's tree against the CPU's lanes): a gradient that passed through
  // a narrower floating dtype than its input's (a float64 input beside a
  // float32 one, sub(sum(x64), y32) is float32) differs by that dtype's
  // rounding: the tolerance of the narrowest floating input or output.
  double narrowest = 0;
  for (const std::vector<Tensor>* ts : {&in, &want})
    for (const Tensor& t : *ts)
      if (t.defined()) narrowest = std::max(narrowest, base_tol(t.dtype()));
  const double widest =
      std::max(*std::max_element(p.scale.begin(), p.scale.end()), narrowest / kGradTolFactor);
  auto check_grads = [&](const std::vector<Tensor>& grads, const std::vector<Tensor>& ref,
                         const std::string& what, const std::string& ref_what) {
    for (size_t i = 0; i < ref.size() && i < grads.size(); ++i) {
      const std::string name = vname(static_cast<int>(i));
      if (ref[i].defined() != grads[i].defined()) {
        fail(fmt::format("the .grad of input {} is {} {} and {} {}", name,
                         ref[i].defined() ? "defined" : "undefined", ref_what,
                         grads[i].defined() ? "defined" : "undefined", what));
        return false;
      }
      if (!ref[i].defined()) continue;
      ++r.grads;
      const double tol = std::max(base_tol(ref[i].dtype()), widest * kGradTolFactor);
      const std::string d = compare(ref[i].cpu(), grads[i].cpu(), tol);
      if (!d.empty()) {
        fail(fmt::format("{} vs {}: the .grad of input {}: {}", what, ref_what, name, d));
        return false;
      }
    }
    return true;
  };
  const std::string eager_what = "eager on " + device.str();
  if (!check(got, want, eager_what, "eager on the CPU")) return r;
  if (p.grad && !check_grads(got_grads, want_grads, eager_what, "eager on the CPU")) return r;
  std::vector<Tensor> before;
  for (auto& t : on_device) before.push_back(t.cpu());
  CompiledRun compiled;
  try {
    compiled = run_compiled(p, on_device);
  } catch (const std::exception& e) {
    fail(fmt::format("compiled on {} raised, eager did not: {}", device.str(), e.what()));
    return r;
  }
  r.graph_break = compiled.stats.graph_breaks > 0 || compiled.stats.eager_calls > 0;
  r.kernels = fmt::format("{}", fmt::join(compiled.stats.kernel_names, ", "));
  const std::string compiled_what = "compiled on " + device.str();
  for (size_t c = 0; c < compiled.outs.size(); ++c) {
    if (!check(compiled.outs[c], want, compiled_what, "eager on the CPU") ||
        !check(compiled.outs[c], got, compiled_what, eager_what))
      return r;
    if (p.grad && (!check_grads(compiled.grads[c], want_grads, compiled_what, "eager on the CPU") ||
                   !check_grads(compiled.grads[c], got_grads, compiled_what, eager_what)))
      return r;
  }
  for (size_t i = 0; i < on_device.size(); ++i)
    if (!same_bits(before[i], on_device[i].cpu())) {
      fail(fmt::format("compiled code on {} modified input {}", device.str(),
                       vname(static_cast<int>(i))));
      return r;
    }
  return r;
}

Program minimize(const Program& p, uint64_t seed, int index, std::optional<Device> device) {
  auto check_program = [&device](const Program& q, uint64_t s, int i) {
    return device ? check_program_on_device(q, *device, s, i) : fuzz::check_program(q, s, i);
  };
  CaseResult r = check_program(p, seed, index);
  if (r.ok) return p;
  Program best = p;
  // A candidate the generator would not keep (replaying it raises: a gradient
  // program's in-place write into a view of an input leaf) is skipped.
  auto candidate = [](auto make) -> std::optional<Program> {
    try {
      return make();
    } catch (const Error&) {
      return std::nullopt;
    }
  };
  if (g_bad_output >= 0) {
    const int bad = p.outputs[g_bad_output];
    std::optional<Program> q = candidate([&] { return restrict_program(p, {bad}); });
    if (q && !check_program(*q, seed, index).ok) best = *q;
  }
  // Greedily bypass steps: use an earlier value of the same shape and dtype instead.
  bool progress = true;
  while (progress) {
    progress = false;
    // The values' shapes and dtypes only: without autograd, which would refuse
    // a gradient program's in-place write into a view of an input leaf.
    std::vector<Tensor> v;
    {
      NoGradGuard no_grad;
      v = make_inputs(best);
      for (auto& s : best.steps) v.push_back(exec(s, v));
    }
    int n_in = static_cast<int>(best.inputs.size());
    for (int from = static_cast<int>(v.size()) - 1; from >= n_in && !progress; --from) {
      const Step& s = best.steps[from - n_in];
      std::vector<int> cands = s.in;
      for (int to : cands) {
        if (v[to].sizes() != v[from].sizes() || v[to].dtype() != v[from].dtype()) continue;
        std::optional<Program> q = candidate([&] { return substitute(best, from, to); });
        if (q && q->steps.size() < best.steps.size() && !check_program(*q, seed, index).ok) {
          best = *q;
          progress = true;
          break;
        }
      }
    }
  }
  return best;
}

const std::set<std::string>& kinked_ops() {
  static const std::set<std::string> ops = {
      "abs",       "relu", "maximum", "minimum", "fmax", "fmin", "clamp",     "clamp_min",
      "clamp_max", "amax", "amin",    "max",     "min",  "prod", "nan_to_num"};
  return ops;
}

std::vector<std::string> fuzzed_ops() {
  std::set<std::string> ops(built_ops().begin(), built_ops().end());
  for (const auto& by_arity : op_sets().pointwise)
    for (const detail::OpDef* d : by_arity) ops.emplace(d->name);
  for (const detail::OpDef* d : op_sets().reductions) ops.emplace(d->name);
  return {ops.begin(), ops.end()};
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
    Program p = generate(opts.seed, i, opts.grad);
    for (const Step& s : p.steps) ++sum.op_counts[s.op];
    CaseResult r = opts.device.empty()
                       ? check_program(p, opts.seed, i)
                       : check_program_on_device(p, Device(opts.device), opts.seed, i);
    ++sum.cases;
    if (r.graph_break) ++sum.graph_breaks;
    if (r.grads > 0) ++sum.grad_cases;
    if (!r.ok) ++sum.mismatches;
    if (opts.before_log && (opts.verbose || !r.ok)) opts.before_log();
    if (r.ok) {
      if (opts.verbose)
        std::fprintf(log, "case %d ok%s: %zu inputs, %zu steps; compiled: %s\n%s", i,
                     r.graph_break ? " (ran eagerly: graph break)" : "", p.inputs.size(),
                     p.steps.size(), r.kernels.c_str(), program_str(p).c_str());
      if (opts.on_case) opts.on_case(sum);
      continue;
    }
    sum.failures.push_back(r.summary);
    std::fprintf(log, "FAIL %s\n", r.summary.c_str());
    if (opts.verbose) std::fprintf(log, "%s", r.report.c_str());
    std::fflush(log);
    if (opts.minimize) {
      const std::optional<Device> dev =
          opts.device.empty() ? std::nullopt : std::optional<Device>(Device(opts.device));
      Program m = minimize(p, opts.seed, i, dev);
      CaseResult mr =
          dev ? check_program_on_device(m, *dev, opts.seed, i) : check_program(m, opts.seed, i);
      std::fprintf(log, "%s", (mr.ok ? r.report : mr.report).c_str());
    }
    std::fflush(log);
    if (opts.on_case) opts.on_case(sum);
  }
  return sum;
}

}  // namespace smelt::fuzz
