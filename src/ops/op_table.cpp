// The op table's entries (see op_table.h) and the accessors that resolve an
// op's attribute-dependent fields (variants). Each differentiable entry carries
// its backward formula: short pointwise ones inline, longer ones by name from
// ops/derivatives.cpp (PyTorch's derivatives.yaml in C++).
#include "ops/op_table.h"

#include <cmath>
#include <numbers>
#include <string_view>
#include <unordered_map>

#include "core/dtype_dispatch.h"
#include "kernels/reduce_ops.h"
#include "ops/derivatives.h"
#include "ops/dispatch.h"
#include "smelt/ops.h"

namespace smelt::detail {

std::string_view op_kind_name(OpKind k) {
  switch (k) {
    case OpKind::Pointwise:
      return "pointwise";
    case OpKind::Reduction:
      return "reduction";
    case OpKind::View:
      return "view";
    case OpKind::Movement:
      return "movement";
    case OpKind::Extern:
      return "extern";
    case OpKind::Composite:
      return "composite";
    case OpKind::Factory:
      return "factory";
    case OpKind::Random:
      return "random";
    case OpKind::InPlace:
      return "inplace";
  }
  return "?";
}

std::string_view accumulator_name(Accumulator a) {
  switch (a) {
    case Accumulator::None:
      return "";
    case Accumulator::Sum:
      return "Sum";
    case Accumulator::Prod:
      return "Prod";
    case Accumulator::Max:
      return "Max";
    case Accumulator::Min:
      return "Min";
    case Accumulator::ArgMax:
      return "ArgMax";
    case Accumulator::ArgMin:
      return "ArgMin";
    case Accumulator::Welford:
      return "Welford";
    case Accumulator::Any:
      return "Any";
    case Accumulator::All:
      return "All";
  }
  return "?";
}

Accumulation accumulation(const OpDef& def, DType in, DType out) {
  using reduce::AccRule;
  AccRule rule = AccRule::Sum;
  switch (def.accumulator) {
    case Accumulator::Sum:
    case Accumulator::Prod:
      rule = def.scan ? AccRule::Scan : AccRule::Sum;
      break;
    case Accumulator::Max:
    case Accumulator::Min:
    case Accumulator::ArgMax:
    case Accumulator::ArgMin:
      rule = AccRule::Compare;
      break;
    case Accumulator::Welford:
      rule = AccRule::Welford;
      break;
    case Accumulator::Any:
    case Accumulator::All:
      rule = AccRule::Bool;
      break;
    case Accumulator::None:
      SMELT_INTERNAL_ASSERT(false, "accumulation: '{}' has no accumulator", def.name);
  }
  const DType element = rule == AccRule::Sum || rule == AccRule::Scan ? out : in;
  const DType acc = SMELT_DISPATCH_ALL(element, "accumulation", [&] {
    switch (rule) {
      case AccRule::Sum:
        return dtype_of<reduce::accumulate_t<AccRule::Sum, T>>::value;
      case AccRule::Compare:
        return dtype_of<reduce::accumulate_t<AccRule::Compare, T>>::value;
      case AccRule::Welford:
        return dtype_of<reduce::accumulate_t<AccRule::Welford, T>>::value;
      case AccRule::Scan:
        return dtype_of<reduce::accumulate_t<AccRule::Scan, T>>::value;
      case AccRule::Bool:
        break;
    }
    return dtype_of<reduce::accumulate_t<AccRule::Bool, T>>::value;
  });
  return {element, acc};
}

std::string_view runtime_check_name(RuntimeCheck c) {
  switch (c) {
    case RuntimeCheck::None:
      return "";
    case RuntimeCheck::IntegerDivisionByZero:
      return "int_div_by_zero";
    case RuntimeCheck::IndexOutOfRange:
      return "index_out_of_range";
  }
  return "?";
}

std::string_view runtime_check_message(RuntimeCheck c) {
  switch (c) {
    case RuntimeCheck::None:
      return "";
    case RuntimeCheck::IntegerDivisionByZero:
      return "ZeroDivisionError: integer division by zero; use a floating dtype to get inf/nan "
             "instead";
    case RuntimeCheck::IndexOutOfRange:
      return "index out of range: every index must lie in [0, size) of the dim it selects";
  }
  return "?";
}

std::string_view number_rule_name(NumberRule r) {
  switch (r) {
    case NumberRule::Convert:
      return "convert";
    case NumberRule::Opmath:
      return "opmath";
    case NumberRule::Checked:
      return "checked";
    case NumberRule::CheckedIfIntegral:
      return "checked_if_integral";
  }
  return "?";
}

std::string_view precision_name(Precision p) {
  switch (p) {
    case Precision::Exact:
      return "exact";
    case Precision::Transcendental:
      return "transcendental";
    case Precision::Accumulated:
      return "accumulated";
  }
  return "?";
}

namespace {

/// Builds one table entry on one line: a constructor for the kind's columns,
/// then one call per field that differs from the default.
class Def {
 public:
  Def(std::string_view name, OpKind kind) { d_.name = name, d_.kind = kind; }
  Def& functor(std::string_view f) { return d_.functor = f, *this; }
  Def& check(RuntimeCheck c) { return d_.check = c, *this; }
  Def& epilogue(EpilogueActivation e) { return d_.epilogue = e, *this; }
  Def& variant(OpVariant v) { return d_.variants.push_back(v), *this; }
  Def& numbers(NumberRule r) { return d_.numbers = r, *this; }
  Def& discontinuous() { return d_.discontinuous = true, *this; }
  Def& index_map() { return d_.index_map = true, *this; }
  Def& transcendental() { return d_.precision = Precision::Transcendental, *this; }
  Def& accumulated() { return d_.precision = Precision::Accumulated, *this; }
  Def& not_differentiable() { return d_.differentiable = false, *this; }
  Def& scan() { return d_.scan = true, *this; }
  Def& multi_tensor() { return d_.multi_tensor = true, *this; }
  /// The backward formula and what it reads (saved inputs / outputs, bit masks).
  Def& grad(DerivativeFn f, SaveMask inputs = kSaveNone, SaveMask outputs = kSaveNone) {
    d_.derivative = f, d_.save_inputs = inputs, d_.save_outputs = outputs;
    return *this;
  }
  /// Differentiated through the ops its eager code records (see OpDef::derivative_via).
  Def& grad_via(std::string_view what) { return d_.derivative_via = what, *this; }
  operator OpDef() const { return d_; }  // NOLINT(google-explicit-constructor)

 private:
  friend Def pointwise(std::string_view, int, DTypeRule);
  friend Def reduction(std::string_view, Accumulator, std::vector<std::string_view>);
  OpDef d_;
};

/// add / sub's alpha (1 when not recorded).
Scalar alpha_of(const GradContext& c) {
  return c.attrs.has("alpha") ? c.attrs.as<Scalar>("alpha") : Scalar(1);
}

/// div: a / b for true division; with a rounding mode the result is piecewise
/// constant and both gradients are 0 (div_tensor_self_backward), except for
/// floor_divide, which PyTorch gives no derivative: its backward raises.
Grads div_backward(const GradContext& c) {
  const Tensor& g = c.grad();
  SMELT_CHECK(!c.attrs.has("floor_divide"),
              "floor_divide: the derivative for floor_divide is not implemented (as in PyTorch); "
              "use div(a, b, \"floor\"), whose gradients are 0, or compute it under "
              "smelt::NoGradGuard");
  if (c.attrs.has("rounding_mode")) return {zeros_like(g), zeros_like(g)};
  const Tensor& b = c.in(1);
  return {c.needs(0) ? g / b : Tensor(), c.needs(1) ? -g * c.in(0) / (b * b) : Tensor()};
}

/// A pointwise op whose scalar functor has the op's name (functor() renames it).
Def pointwise(std::string_view name, int arity, DTypeRule rule) {
  Def d(name, OpKind::Pointwise);
  d.d_.arity = arity, d.d_.rule = rule, d.d_.functor = name;
  return d;
}

/// A reduction with its accumulator and per-output finals.
Def reduction(std::string_view name, Accumulator acc, std::vector<std::string_view> finals) {
  Def d(name, OpKind::Reduction);
  d.d_.accumulator = acc, d.d_.finals = std::move(finals);
  return d;
}

}  // namespace

const std::vector<OpDef>& op_table() {
  using K = OpKind;
  using R = DTypeRule;
  using A = Accumulator;
  using E = EpilogueActivation;
  constexpr auto kIntDiv = RuntimeCheck::IntegerDivisionByZero;
  using C = const GradContext&;
  constexpr SaveMask kIn = kSaveAll, kOut = kSaveAll, kNone = kSaveNone;
  constexpr double kLn2 = std::numbers::ln2;
  static const std::vector<OpDef> table = {
      // ---- pointwise, unary ----
      pointwise("neg", 1, R::Same).grad([](C c) -> Grads { return {neg(c.grad())}; }),
      pointwise("abs", 1, R::Same)
          .grad([](C c) -> Grads { return {c.grad() * sign(c.in(0))}; }, kIn),
      pointwise("sign", 1, R::Same).discontinuous().grad([](C c) -> Grads {
        return {zeros_like(c.grad())};
      }),
      pointwise("exp", 1, R::IntToFloat)
          .transcendental()
          .grad([](C c) -> Grads { return {c.grad() * c.out()}; }, kNone, kOut),
      pointwise("exp2", 1, R::IntToFloat)
          .transcendental()
          .grad([](C c) -> Grads { return {c.grad() * c.out() * kLn2}; }, kNone, kOut),
      pointwise("expm1", 1, R::IntToFloat)
          .transcendental()
          .grad([](C c) -> Grads { return {c.grad() * (c.out() + 1.0)}; }, kNone, kOut),
      pointwise("log", 1, R::IntToFloat)
          .transcendental()
          .grad([](C c) -> Grads { return {c.grad() / c.in(0)}; }, kIn),
      pointwise("log2", 1, R::IntToFloat)
          .transcendental()
          .grad([](C c) -> Grads { return {c.grad() / (c.in(0) * kLn2)}; }, kIn),
      pointwise("log1p", 1, R::IntToFloat)
          .transcendental()
          .grad([](C c) -> Grads { return {c.grad() / (c.in(0) + 1.0)}; }, kIn),
      pointwise("sqrt", 1, R::IntToFloat)
          .transcendental()
          .grad([](C c) -> Grads { return {c.grad() / (c.out() * 2.0)}; }, kNone, kOut),
      pointwise("rsqrt", 1, R::IntToFloat)
          .transcendental()
          .grad([](C c) -> Grads { return {c.grad() * pow(c.out(), 3.0) * -0.5}; }, kNone, kOut),
      pointwise("reciprocal", 1, R::IntToFloat)
          .transcendental()
          .grad([](C c) -> Grads { return {-c.grad() * (c.out() * c.out())}; }, kNone, kOut),
      pointwise("sin", 1, R::IntToFloat)
          .transcendental()
          .grad([](C c) -> Grads { return {c.grad() * cos(c.in(0))}; }, kIn),
      pointwise("cos", 1, R::IntToFloat)
          .transcendental()
          .grad([](C c) -> Grads { return {c.grad() * -sin(c.in(0))}; }, kIn),
      pointwise("tan", 1, R::IntToFloat)
          .transcendental()
          .grad([](C c) -> Grads { return {c.grad() * (c.out() * c.out() + 1.0)}; }, kNone, kOut),
      pointwise("tanh", 1, R::IntToFloat)
          .transcendental()
          .epilogue(E::Tanh)
          .grad([](C c) -> Grads { return {c.grad() * (1.0 - c.out() * c.out())}; }, kNone, kOut),
      pointwise("sigmoid", 1, R::IntToFloat)
          .transcendental()
          .epilogue(E::Sigmoid)
          .grad([](C c) -> Grads { return {c.grad() * (1.0 - c.out()) * c.out()}; }, kNone, kOut),
      pointwise("relu", 1, R::Same)
          .epilogue(E::Relu)
          .grad([](C c) -> Grads { return {where(c.out() <= 0.0, Scalar(0.0), c.grad())}; }, kNone,
                kOut),
      pointwise("gelu", 1, R::Same)
          .transcendental()
          .grad(gelu_backward, kIn)
          .epilogue(E::GeluErf)
          .variant({.attr = "approximate",
                    .value = "tanh",
                    .functor = "gelu_tanh",
                    .epilogue = E::GeluTanh}),
      pointwise("silu", 1, R::Same)
          .transcendental()
          .epilogue(E::Silu)
          .grad(
              [](C c) -> Grads {
                Tensor sg = sigmoid(c.in(0));
                return {c.grad() * sg * (c.in(0) * (1.0 - sg) + 1.0)};
              },
              kIn),
      pointwise("erf", 1, R::IntToFloat)
          .transcendental()
          .grad(
              [](C c) -> Grads {
                return {c.grad() * exp(-(c.in(0) * c.in(0))) * (2.0 * std::numbers::inv_sqrtpi)};
              },
              kIn),
      pointwise("floor", 1, R::Same).discontinuous().grad([](C c) -> Grads {
        return {zeros_like(c.grad())};
      }),
      pointwise("ceil", 1, R::Same).discontinuous().grad([](C c) -> Grads {
        return {zeros_like(c.grad())};
      }),
      pointwise("round", 1, R::Same).discontinuous().grad([](C c) -> Grads {
        return {zeros_like(c.grad())};
      }),
      pointwise("trunc", 1, R::Same).discontinuous().grad([](C c) -> Grads {
        return {zeros_like(c.grad())};
      }),
      pointwise("logical_not", 1, R::Logical).discontinuous().not_differentiable(),
      pointwise("bitwise_not", 1, R::IntegralOnly).not_differentiable(),
      pointwise("isnan", 1, R::Compare).discontinuous().not_differentiable(),
      pointwise("isinf", 1, R::Compare).discontinuous().not_differentiable(),
      // extra arguments nan, posinf, neginf; jumps at infinity (inf -> the largest finite value)
      pointwise("nan_to_num", 1, R::Same)
          .discontinuous()
          .grad(
              [](C c) -> Grads {
                return {where(isnan(c.in(0)) | isinf(c.in(0)), Scalar(0.0), c.grad())};
              },
              kIn),
      // discontinuous when casting to an integer or bool dtype (float -> float is not)
      pointwise("to_dtype", 1, R::None).functor("cast").discontinuous().grad([](C c) -> Grads {
        return {c.grad()};
      }),
      pointwise("clone", 1, R::Same).functor("identity").grad([](C c) -> Grads {
        return {c.grad()};
      }),
      // ---- pointwise, binary and ternary ----
      pointwise("add", 2, R::Same)  // alpha != 1: functor add_alpha(a, b, alpha)
          .grad([](C c) -> Grads {
            return {c.grad(), c.grad() * alpha_of(c)};
          }),
      pointwise("sub", 2, R::Same)  // alpha != 1: functor sub_alpha(a, b, alpha)
          .grad([](C c) -> Grads {
            return {c.grad(), c.grad() * -alpha_of(c).to_double()};
          }),
      pointwise("mul", 2, R::Same)
          .numbers(NumberRule::Opmath)
          .grad(
              [](C c) -> Grads {
                return {c.needs(0) ? c.grad() * c.in(1) : Tensor(),
                        c.needs(1) ? c.grad() * c.in(0) : Tensor()};
              },
              kIn),
      // with a rounding_mode (also floor_divide): dtype Same (not int->float)
      pointwise("div", 2, R::IntToFloat)
          .transcendental()
          .grad(div_backward, kIn)
          .numbers(NumberRule::Opmath)
          .variant({.attr = "rounding_mode",
                    .value = "trunc",
                    .functor = "div_trunc",
                    .check = kIntDiv,
                    .discontinuous = true})
          .variant({.attr = "rounding_mode",
                    .value = "floor",
                    .functor = "div_floor",
                    .check = kIntDiv,
                    .discontinuous = true}),
      pointwise("remainder", 2, R::Same)
          .check(kIntDiv)
          .discontinuous()
          .grad(
              [](C c) -> Grads {
                return {c.grad(),
                        c.needs(1) ? -c.grad() * div(c.in(0), c.in(1), "floor") : Tensor()};
              },
              kIn),
      pointwise("fmod", 2, R::Same)
          .check(kIntDiv)
          .discontinuous()
          .grad(
              [](C c) -> Grads {
                return {c.grad(),
                        c.needs(1) ? -c.grad() * div(c.in(0), c.in(1), "trunc") : Tensor()};
              },
              kIn),
      pointwise("pow", 2, R::Same)
          .transcendental()
          .numbers(NumberRule::Checked)
          .grad(pow_backward, kIn, kOut),
      pointwise("maximum", 2, R::Same).grad(maximum_backward, kIn),
      pointwise("minimum", 2, R::Same).grad(minimum_backward, kIn),
      pointwise("fmax", 2, R::Same).grad(fmax_backward, kIn),
      pointwise("fmin", 2, R::Same).grad(fmin_backward, kIn),
      // jumps by 2 pi across the negative x axis (atan2(+-0, x < 0) = +-pi)
      pointwise("atan2", 2, R::IntToFloat)
          .transcendental()
          .discontinuous()
          .grad(
              [](C c) -> Grads {
                Tensor a = c.in(0), b = c.in(1);
                Tensor r = reciprocal(a * a + b * b);
                return {c.grad() * b * r, c.grad() * -a * r};
              },
              kIn),
      pointwise("eq", 2, R::Compare).discontinuous().not_differentiable(),
      pointwise("ne", 2, R::Compare).discontinuous().not_differentiable(),
      pointwise("lt", 2, R::Compare).discontinuous().not_differentiable(),
      pointwise("le", 2, R::Compare).discontinuous().not_differentiable(),
      pointwise("gt", 2, R::Compare).discontinuous().not_differentiable(),
      pointwise("ge", 2, R::Compare).discontinuous().not_differentiable(),
      pointwise("logical_and", 2, R::Logical).discontinuous().not_differentiable(),
      pointwise("logical_or", 2, R::Logical).discontinuous().not_differentiable(),
      pointwise("logical_xor", 2, R::Logical).discontinuous().not_differentiable(),
      pointwise("bitwise_and", 2, R::IntegralOnly).not_differentiable(),
      pointwise("bitwise_or", 2, R::IntegralOnly).not_differentiable(),
      pointwise("bitwise_xor", 2, R::IntegralOnly).not_differentiable(),
      // continuous in the values; the condition is bool
      pointwise("where", 3, R::Same)
          .numbers(NumberRule::CheckedIfIntegral)
          .grad(
              [](C c) -> Grads {
                const Tensor& cond = c.in(0);
                return {Tensor(), c.needs(1) ? where(cond, c.grad(), Scalar(0.0)) : Tensor(),
                        c.needs(2) ? where(cond, Scalar(0.0), c.grad()) : Tensor()};
              },
              save_bit(0)),
      pointwise("clamp", 3, R::Same).numbers(NumberRule::Checked).grad(clamp_backward, kIn),
      pointwise("clamp_min", 2, R::Same)
          .numbers(NumberRule::Checked)
          .grad(clamp_min_backward, kIn),  // clamp with only min
      pointwise("clamp_max", 2, R::Same)
          .numbers(NumberRule::Checked)
          .grad(clamp_max_backward, kIn),  // clamp with only max
      pointwise("lerp", 3, R::IntToFloat)
          .transcendental()
          .numbers(NumberRule::Opmath)
          .grad(
              [](C c) -> Grads {
                const Tensor& w = c.in(2);
                // A number weight stays a number (1 - w of two numbers would round to float32).
                Tensor start = w.is_wrapped_number() ? c.grad() * (1.0 - w.item<double>())
                                                     : c.grad() * (1.0 - w);
                return {start, c.grad() * w,
                        c.needs(2) ? c.grad() * (c.in(1) - c.in(0)) : Tensor()};
              },
              kIn),
      // ---- reductions ----
      reduction("sum", A::Sum, {"value"}).accumulated().grad(sum_backward),
      reduction("mean", A::Sum, {"mean"}).accumulated().grad(mean_backward),
      reduction("prod", A::Prod, {"value"}).accumulated().grad(prod_backward, kIn, kOut),
      reduction("amax", A::Max, {"value"}).grad(amax_amin_backward, kIn, kOut),
      reduction("amin", A::Min, {"value"}).grad(amax_amin_backward, kIn, kOut),
      reduction("max", A::ArgMax, {"value", "index"})  // the index jumps
          .discontinuous()
          .grad(max_min_dim_backward, kNone, save_bit(1)),
      reduction("min", A::ArgMin, {"value", "index"})
          .discontinuous()
          .grad(max_min_dim_backward, kNone, save_bit(1)),
      reduction("argmax", A::ArgMax, {"index"}).discontinuous().not_differentiable(),
      reduction("argmin", A::ArgMin, {"index"}).discontinuous().not_differentiable(),
      reduction("var", A::Welford, {"var"}).accumulated().grad(var_backward, kIn),
      reduction("std", A::Welford, {"std"}).accumulated().grad(std_backward, kIn, kOut),
      reduction("var_mean", A::Welford, {"var", "mean"}).accumulated().grad(var_mean_backward, kIn),
      // eager code over amax, exp, sum (never a graph node); one autograd node of its own
      reduction("logsumexp", A::None, {}).accumulated().grad(logsumexp_backward, kIn, kOut),
      reduction("any", A::Any, {"value"}).discontinuous().not_differentiable(),
      reduction("all", A::All, {"value"}).discontinuous().not_differentiable(),
      reduction("cumsum", A::Sum, {"value"}).scan().accumulated().grad(cumsum_backward),
      // ---- views ----
      Def("view", K::View).grad(reshape_backward),
      Def("reshape", K::View).grad(reshape_backward),
      Def("permute", K::View).grad(permute_backward),
      Def("transpose", K::View).grad(transpose_backward),
      Def("t", K::View).grad(t_backward),
      Def("squeeze", K::View).grad(reshape_backward),
      Def("unsqueeze", K::View).grad(reshape_backward),
      Def("expand", K::View).grad(expand_backward),
      Def("broadcast_to", K::View).grad_via("expand"),
      Def("flatten", K::View).grad(reshape_backward),
      Def("unflatten", K::View).grad_via("view"),
      Def("narrow", K::View).grad(narrow_backward),
      Def("slice", K::View).grad(slice_view_backward),
      Def("select", K::View).grad(select_backward),
      Def("split", K::View).grad_via("narrow"),
      Def("chunk", K::View).grad_via("narrow"),
      Def("contiguous", K::View).grad_via("clone"),
      // ---- data movement ----
      Def("index_select", K::Movement)
          .index_map()
          .check(RuntimeCheck::IndexOutOfRange)
          .grad(index_select_backward, save_bit(1)),
      Def("gather", K::Movement)
          .index_map()
          .check(RuntimeCheck::IndexOutOfRange)
          .grad(gather_backward, save_bit(1)),
      Def("cat", K::Movement).index_map().grad(cat_backward),
      Def("stack", K::Movement).grad(stack_backward),
      Def("pad", K::Movement).index_map().grad(pad_backward),
      Def("tril", K::Movement).index_map().grad(tril_backward),
      Def("triu", K::Movement).index_map().grad(triu_backward),
      Def("masked_fill", K::Movement).index_map().grad(masked_fill_backward, save_bit(1)),
      Def("embedding", K::Movement)
          .index_map()
          .check(RuntimeCheck::IndexOutOfRange)
          .grad(embedding_backward, save_bit(1)),
      Def("index_put", K::Movement).grad(index_put_backward, save_bit(1)),
      // out-of-place self.scatter_add(dim, index, src): sums src into self at index
      Def("scatter_add", K::Movement).accumulated().grad(scatter_add_backward, save_bit(1)),
      // ---- library calls ----
      Def("matmul", K::Extern).accumulated().grad(matmul_backward, kIn),
      // ---- composites (own eager kernel + decomposition) ----
      Def("linear", K::Composite).accumulated().grad(linear_backward, save_bit(0) | save_bit(1)),
      Def("softmax", K::Composite).accumulated().grad(softmax_backward, kNone, kOut),
      Def("log_softmax", K::Composite).accumulated().grad(log_softmax_backward, kNone, kOut),
      Def("layer_norm", K::Composite).accumulated().grad(layer_norm_backward, kIn),
      Def("rms_norm", K::Composite).accumulated().grad(rms_norm_backward, kIn),
      Def("batch_norm", K::Composite).accumulated().grad_via("decomposition"),
      Def("cross_entropy", K::Composite).accumulated().grad_via("decomposition"),
      Def("nll_loss", K::Composite).accumulated().grad_via("decomposition"),
      Def("binary_cross_entropy_with_logits", K::Composite).accumulated().grad_via("decomposition"),
      Def("mse_loss", K::Composite).accumulated().grad(mse_loss_backward, kIn),
      Def("scaled_dot_product_attention", K::Composite).accumulated().grad_via("decomposition"),
      // ---- random ----
      Def("dropout", K::Random).grad_via("mul"),
      Def("rand", K::Random).not_differentiable(),
      Def("randn", K::Random).not_differentiable(),
      Def("randint", K::Random).not_differentiable(),
      // ---- factories ----
      Def("empty", K::Factory).not_differentiable(),
      Def("zeros", K::Factory).not_differentiable(),
      Def("ones", K::Factory).not_differentiable(),
      Def("full", K::Factory).not_differentiable(),
      Def("arange", K::Factory).not_differentiable(),
      Def("linspace", K::Factory).not_differentiable(),
      Def("eye", K::Factory).not_differentiable(),
      Def("scalar_tensor", K::Factory).not_differentiable(),
      // ---- in place ----
      // self gets no gradient (overwritten), src the gradient summed to its shape
      Def("copy_", K::InPlace).grad([](C c) -> Grads {
        return {Tensor(), c.grad()};
      }),
      Def("fill_", K::InPlace).not_differentiable(),
      Def("zero_", K::InPlace).not_differentiable(),
      Def("masked_fill_", K::InPlace).grad_via("masked_fill, copy_"),
      Def("index_put_", K::InPlace).grad_via("index_put, copy_"),
      // the optimizers' steps over all parameters at once (ops/optimizer_step.h)
      Def("_fused_sgd_", K::InPlace).multi_tensor().not_differentiable(),
      Def("_fused_adam_", K::InPlace).multi_tensor().not_differentiable(),
  };
  return table;
}

const Tensor& GradContext::in(size_t i) const {
  SMELT_INTERNAL_ASSERT(i < inputs.size() && inputs[i].defined(),
                        "derivative reads input {}, which its op-table entry does not save", i);
  return inputs[i];
}

const Tensor& GradContext::out(size_t i) const {
  SMELT_INTERNAL_ASSERT(i < outputs.size() && outputs[i].defined(),
                        "derivative reads output {}, which its op-table entry does not save", i);
  return outputs[i];
}

const OpDef* find_op(std::string_view name) {
  // Every eager call looks its op up: a hash index over the table, built once.
  static const std::unordered_map<std::string_view, const OpDef*> index = [] {
    std::unordered_map<std::string_view, const OpDef*> m;
    for (const auto& op : op_table()) m.emplace(op.name, &op);
    return m;
  }();
  auto it = index.find(name);
  return it == index.end() ? nullptr : it->second;
}

const OpVariant* find_variant(const OpDef& def, const Attrs& attrs) {
  for (const auto& v : def.variants) {
    std::string attr(v.attr);
    if (attrs.has(attr)) {
      const auto* s = std::get_if<std::string>(&attrs.get(attr));
      if (s && *s == v.value) return &v;
    }
  }
  return nullptr;
}

std::string_view op_functor(const OpDef& def, const Attrs& attrs) {
  const OpVariant* v = find_variant(def, attrs);
  return v ? v->functor : def.functor;
}

RuntimeCheck runtime_check(std::string_view op, const Attrs& attrs) {
  const OpDef* def = find_op(op);
  if (!def) return RuntimeCheck::None;
  const OpVariant* v = find_variant(*def, attrs);
  return v ? v->check : def->check;
}

EpilogueActivation epilogue_activation(std::string_view op, const Attrs& attrs) {
  const OpDef* def = find_op(op);
  if (!def) return EpilogueActivation::None;
  const OpVariant* v = find_variant(*def, attrs);
  return v ? v->epilogue : def->epilogue;
}

bool is_discontinuous(std::string_view op, const Attrs& attrs) {
  const OpDef* def = find_op(op);
  if (!def) return false;
  const OpVariant* v = find_variant(*def, attrs);
  return v ? v->discontinuous : def->discontinuous;
}

}  // namespace smelt::detail
