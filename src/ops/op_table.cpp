#include "ops/op_table.h"

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

const std::vector<OpDef>& op_table() {
  using K = OpKind;
  using R = DTypeRule;
  static const std::vector<OpDef> table = {
      // ---- pointwise, unary: {name, kind, arity, rule, functor} ----
      {"neg", K::Pointwise, 1, R::Same, "neg"},
      {"abs", K::Pointwise, 1, R::Same, "abs"},
      {"sign", K::Pointwise, 1, R::Same, "sign"},
      {"exp", K::Pointwise, 1, R::IntToFloat, "exp"},
      {"exp2", K::Pointwise, 1, R::IntToFloat, "exp2"},
      {"expm1", K::Pointwise, 1, R::IntToFloat, "expm1"},
      {"log", K::Pointwise, 1, R::IntToFloat, "log"},
      {"log2", K::Pointwise, 1, R::IntToFloat, "log2"},
      {"log1p", K::Pointwise, 1, R::IntToFloat, "log1p"},
      {"sqrt", K::Pointwise, 1, R::IntToFloat, "sqrt"},
      {"rsqrt", K::Pointwise, 1, R::IntToFloat, "rsqrt"},
      {"reciprocal", K::Pointwise, 1, R::IntToFloat, "reciprocal"},
      {"sin", K::Pointwise, 1, R::IntToFloat, "sin"},
      {"cos", K::Pointwise, 1, R::IntToFloat, "cos"},
      {"tan", K::Pointwise, 1, R::IntToFloat, "tan"},
      {"tanh", K::Pointwise, 1, R::IntToFloat, "tanh"},
      {"sigmoid", K::Pointwise, 1, R::IntToFloat, "sigmoid"},
      {"relu", K::Pointwise, 1, R::Same, "relu"},
      {"gelu", K::Pointwise, 1, R::Same, "gelu"},  // approximate="tanh": functor gelu_tanh
      {"silu", K::Pointwise, 1, R::Same, "silu"},
      {"erf", K::Pointwise, 1, R::IntToFloat, "erf"},
      {"floor", K::Pointwise, 1, R::Same, "floor"},
      {"ceil", K::Pointwise, 1, R::Same, "ceil"},
      {"round", K::Pointwise, 1, R::Same, "round"},
      {"trunc", K::Pointwise, 1, R::Same, "trunc"},
      {"logical_not", K::Pointwise, 1, R::Logical, "logical_not"},
      {"bitwise_not", K::Pointwise, 1, R::IntegralOnly, "bitwise_not"},
      {"isnan", K::Pointwise, 1, R::Compare, "isnan"},
      {"isinf", K::Pointwise, 1, R::Compare, "isinf"},
      {"nan_to_num", K::Pointwise, 1, R::Same, "nan_to_num"},
      {"to_dtype", K::Pointwise, 1, R::None, "cast"},
      {"clone", K::Pointwise, 1, R::Same, "identity"},
      // ---- pointwise, binary and ternary ----
      {"add", K::Pointwise, 2, R::Same, "add"},  // alpha != 1: functor add_alpha(a, b, alpha)
      {"sub", K::Pointwise, 2, R::Same, "sub"},  // alpha != 1: functor sub_alpha(a, b, alpha)
      {"mul", K::Pointwise, 2, R::Same, "mul"},
      // rounding_mode="trunc"/"floor" (also floor_divide): dtype Same, functor div_trunc/div_floor
      {"div", K::Pointwise, 2, R::IntToFloat, "div"},
      {"remainder", K::Pointwise, 2, R::Same, "remainder"},
      {"fmod", K::Pointwise, 2, R::Same, "fmod"},
      {"pow", K::Pointwise, 2, R::Same, "pow"},
      {"maximum", K::Pointwise, 2, R::Same, "maximum"},
      {"minimum", K::Pointwise, 2, R::Same, "minimum"},
      {"fmax", K::Pointwise, 2, R::Same, "fmax"},
      {"fmin", K::Pointwise, 2, R::Same, "fmin"},
      {"atan2", K::Pointwise, 2, R::IntToFloat, "atan2"},
      {"eq", K::Pointwise, 2, R::Compare, "eq"},
      {"ne", K::Pointwise, 2, R::Compare, "ne"},
      {"lt", K::Pointwise, 2, R::Compare, "lt"},
      {"le", K::Pointwise, 2, R::Compare, "le"},
      {"gt", K::Pointwise, 2, R::Compare, "gt"},
      {"ge", K::Pointwise, 2, R::Compare, "ge"},
      {"logical_and", K::Pointwise, 2, R::Logical, "logical_and"},
      {"logical_or", K::Pointwise, 2, R::Logical, "logical_or"},
      {"logical_xor", K::Pointwise, 2, R::Logical, "logical_xor"},
      {"bitwise_and", K::Pointwise, 2, R::IntegralOnly, "bitwise_and"},
      {"bitwise_or", K::Pointwise, 2, R::IntegralOnly, "bitwise_or"},
      {"bitwise_xor", K::Pointwise, 2, R::IntegralOnly, "bitwise_xor"},
      {"where", K::Pointwise, 3, R::Same, "where"},
      {"clamp", K::Pointwise, 3, R::Same, "clamp"},
      {"clamp_min", K::Pointwise, 2, R::Same, "clamp_min"},  // clamp with only min
      {"clamp_max", K::Pointwise, 2, R::Same, "clamp_max"},  // clamp with only max
      {"lerp", K::Pointwise, 3, R::IntToFloat, "lerp"},
      // ---- reductions ----
      {"sum", K::Reduction},
      {"mean", K::Reduction},
      {"prod", K::Reduction},
      {"amax", K::Reduction},
      {"amin", K::Reduction},
      {"max", K::Reduction},
      {"min", K::Reduction},
      {"argmax", K::Reduction},
      {"argmin", K::Reduction},
      {"var", K::Reduction},
      {"std", K::Reduction},
      {"var_mean", K::Reduction},
      {"logsumexp", K::Reduction},
      {"any", K::Reduction},
      {"all", K::Reduction},
      {"cumsum", K::Reduction},
      // ---- views ----
      {"view", K::View},
      {"reshape", K::View},
      {"permute", K::View},
      {"transpose", K::View},
      {"t", K::View},
      {"squeeze", K::View},
      {"unsqueeze", K::View},
      {"expand", K::View},
      {"broadcast_to", K::View},
      {"flatten", K::View},
      {"unflatten", K::View},
      {"narrow", K::View},
      {"slice", K::View},
      {"select", K::View},
      {"split", K::View},
      {"chunk", K::View},
      {"contiguous", K::View},
      // ---- data movement ----
      {"index_select", K::Movement},
      {"gather", K::Movement},
      {"cat", K::Movement},
      {"stack", K::Movement},
      {"pad", K::Movement},
      {"tril", K::Movement},
      {"triu", K::Movement},
      {"masked_fill", K::Movement},
      {"embedding", K::Movement},
      {"index_put", K::Movement},
      // ---- library calls ----
      {"matmul", K::Extern},
      // ---- composites (own eager kernel + decomposition) ----
      {"linear", K::Composite},
      {"softmax", K::Composite},
      {"log_softmax", K::Composite},
      {"layer_norm", K::Composite},
      {"rms_norm", K::Composite},
      {"batch_norm", K::Composite},
      {"cross_entropy", K::Composite},
      {"mse_loss", K::Composite},
      {"scaled_dot_product_attention", K::Composite},
      // ---- random ----
      {"dropout", K::Random},
      {"rand", K::Random},
      {"randn", K::Random},
      {"randint", K::Random},
      // ---- factories ----
      {"empty", K::Factory},
      {"zeros", K::Factory},
      {"ones", K::Factory},
      {"full", K::Factory},
      {"arange", K::Factory},
      {"linspace", K::Factory},
      {"eye", K::Factory},
      {"scalar_tensor", K::Factory},
      // ---- in place ----
      {"copy_", K::InPlace},
      {"fill_", K::InPlace},
      {"zero_", K::InPlace},
      {"masked_fill_", K::InPlace},
      {"index_put_", K::InPlace},
  };
  return table;
}

const OpDef* find_op(std::string_view name) {
  for (const auto& op : op_table())
    if (op.name == name) return &op;
  return nullptr;
}

}  // namespace smelt::detail
