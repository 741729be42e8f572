// The op table's entries (see op_table.h) and the accessors that resolve an
// op's attribute-dependent fields (variants).
#include "ops/op_table.h"

#include "core/dtype_dispatch.h"
#include "kernels/reduce_ops.h"
#include "ops/dispatch.h"

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
  operator OpDef() const { return d_; }  // NOLINT(google-explicit-constructor)

 private:
  friend Def pointwise(std::string_view, int, DTypeRule);
  friend Def reduction(std::string_view, Accumulator, std::vector<std::string_view>);
  OpDef d_;
};

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
  static const std::vector<OpDef> table = {
      // ---- pointwise, unary ----
      pointwise("neg", 1, R::Same),
      pointwise("abs", 1, R::Same),
      pointwise("sign", 1, R::Same).discontinuous(),
      pointwise("exp", 1, R::IntToFloat).transcendental(),
      pointwise("exp2", 1, R::IntToFloat).transcendental(),
      pointwise("expm1", 1, R::IntToFloat).transcendental(),
      pointwise("log", 1, R::IntToFloat).transcendental(),
      pointwise("log2", 1, R::IntToFloat).transcendental(),
      pointwise("log1p", 1, R::IntToFloat).transcendental(),
      pointwise("sqrt", 1, R::IntToFloat).transcendental(),
      pointwise("rsqrt", 1, R::IntToFloat).transcendental(),
      pointwise("reciprocal", 1, R::IntToFloat).transcendental(),
      pointwise("sin", 1, R::IntToFloat).transcendental(),
      pointwise("cos", 1, R::IntToFloat).transcendental(),
      pointwise("tan", 1, R::IntToFloat).transcendental(),
      pointwise("tanh", 1, R::IntToFloat).transcendental().epilogue(E::Tanh),
      pointwise("sigmoid", 1, R::IntToFloat).transcendental().epilogue(E::Sigmoid),
      pointwise("relu", 1, R::Same).epilogue(E::Relu),
      pointwise("gelu", 1, R::Same)
          .transcendental()
          .epilogue(E::GeluErf)
          .variant({.attr = "approximate",
                    .value = "tanh",
                    .functor = "gelu_tanh",
                    .epilogue = E::GeluTanh}),
      pointwise("silu", 1, R::Same).transcendental().epilogue(E::Silu),
      pointwise("erf", 1, R::IntToFloat).transcendental(),
      pointwise("floor", 1, R::Same).discontinuous(),
      pointwise("ceil", 1, R::Same).discontinuous(),
      pointwise("round", 1, R::Same).discontinuous(),
      pointwise("trunc", 1, R::Same).discontinuous(),
      pointwise("logical_not", 1, R::Logical).discontinuous().not_differentiable(),
      pointwise("bitwise_not", 1, R::IntegralOnly).not_differentiable(),
      pointwise("isnan", 1, R::Compare).discontinuous().not_differentiable(),
      pointwise("isinf", 1, R::Compare).discontinuous().not_differentiable(),
      // extra arguments nan, posinf, neginf; jumps at infinity (inf -> the largest finite value)
      pointwise("nan_to_num", 1, R::Same).discontinuous(),
      // discontinuous when casting to an integer or bool dtype (float -> float is not)
      pointwise("to_dtype", 1, R::None).functor("cast").discontinuous(),
      pointwise("clone", 1, R::Same).functor("identity"),
      // ---- pointwise, binary and ternary ----
      pointwise("add", 2, R::Same),  // alpha != 1: functor add_alpha(a, b, alpha)
      pointwise("sub", 2, R::Same),  // alpha != 1: functor sub_alpha(a, b, alpha)
      pointwise("mul", 2, R::Same).numbers(NumberRule::Opmath),
      // with a rounding_mode (also floor_divide): dtype Same (not int->float)
      pointwise("div", 2, R::IntToFloat)
          .transcendental()
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
      pointwise("remainder", 2, R::Same).check(kIntDiv).discontinuous(),
      pointwise("fmod", 2, R::Same).check(kIntDiv).discontinuous(),
      pointwise("pow", 2, R::Same).transcendental().numbers(NumberRule::Checked),
      pointwise("maximum", 2, R::Same),
      pointwise("minimum", 2, R::Same),
      pointwise("fmax", 2, R::Same),
      pointwise("fmin", 2, R::Same),
      // jumps by 2 pi across the negative x axis (atan2(+-0, x < 0) = +-pi)
      pointwise("atan2", 2, R::IntToFloat).transcendental().discontinuous(),
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
      pointwise("where", 3, R::Same).numbers(NumberRule::CheckedIfIntegral),
      pointwise("clamp", 3, R::Same).numbers(NumberRule::Checked),
      pointwise("clamp_min", 2, R::Same).numbers(NumberRule::Checked),  // clamp with only min
      pointwise("clamp_max", 2, R::Same).numbers(NumberRule::Checked),  // clamp with only max
      pointwise("lerp", 3, R::IntToFloat).transcendental().numbers(NumberRule::Opmath),
      // ---- reductions ----
      reduction("sum", A::Sum, {"value"}).accumulated(),
      reduction("mean", A::Sum, {"mean"}).accumulated(),
      reduction("prod", A::Prod, {"value"}).accumulated(),
      reduction("amax", A::Max, {"value"}),
      reduction("amin", A::Min, {"value"}),
      reduction("max", A::ArgMax, {"value", "index"}).discontinuous(),  // the index jumps
      reduction("min", A::ArgMin, {"value", "index"}).discontinuous(),
      reduction("argmax", A::ArgMax, {"index"}).discontinuous().not_differentiable(),
      reduction("argmin", A::ArgMin, {"index"}).discontinuous().not_differentiable(),
      reduction("var", A::Welford, {"var"}).accumulated(),
      reduction("std", A::Welford, {"std"}).accumulated(),
      reduction("var_mean", A::Welford, {"var", "mean"}).accumulated(),
      reduction("logsumexp", A::None, {}).accumulated(),  // eager code over amax, exp, sum: no node
      reduction("any", A::Any, {"value"}).discontinuous().not_differentiable(),
      reduction("all", A::All, {"value"}).discontinuous().not_differentiable(),
      reduction("cumsum", A::Sum, {"value"}).scan().accumulated(),
      // ---- views ----
      Def("view", K::View),
      Def("reshape", K::View),
      Def("permute", K::View),
      Def("transpose", K::View),
      Def("t", K::View),
      Def("squeeze", K::View),
      Def("unsqueeze", K::View),
      Def("expand", K::View),
      Def("broadcast_to", K::View),
      Def("flatten", K::View),
      Def("unflatten", K::View),
      Def("narrow", K::View),
      Def("slice", K::View),
      Def("select", K::View),
      Def("split", K::View),
      Def("chunk", K::View),
      Def("contiguous", K::View),
      // ---- data movement ----
      Def("index_select", K::Movement).index_map().check(RuntimeCheck::IndexOutOfRange),
      Def("gather", K::Movement).index_map().check(RuntimeCheck::IndexOutOfRange),
      Def("cat", K::Movement).index_map(),
      Def("stack", K::Movement),
      Def("pad", K::Movement).index_map(),
      Def("tril", K::Movement).index_map(),
      Def("triu", K::Movement).index_map(),
      Def("masked_fill", K::Movement).index_map(),
      Def("embedding", K::Movement).index_map().check(RuntimeCheck::IndexOutOfRange),
      Def("index_put", K::Movement),
      // ---- library calls ----
      Def("matmul", K::Extern).accumulated(),
      // ---- composites (own eager kernel + decomposition) ----
      Def("linear", K::Composite).accumulated(),
      Def("softmax", K::Composite).accumulated(),
      Def("log_softmax", K::Composite).accumulated(),
      Def("layer_norm", K::Composite).accumulated(),
      Def("rms_norm", K::Composite).accumulated(),
      Def("batch_norm", K::Composite).accumulated(),
      Def("cross_entropy", K::Composite).accumulated(),
      Def("mse_loss", K::Composite).accumulated(),
      Def("scaled_dot_product_attention", K::Composite).accumulated(),
      // ---- random ----
      Def("dropout", K::Random),
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
      Def("copy_", K::InPlace),
      Def("fill_", K::InPlace).not_differentiable(),
      Def("zero_", K::InPlace).not_differentiable(),
      Def("masked_fill_", K::InPlace),
      Def("index_put_", K::InPlace),
  };
  return table;
}

const OpDef* find_op(std::string_view name) {
  for (const auto& op : op_table())
    if (op.name == name) return &op;
  return nullptr;
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
