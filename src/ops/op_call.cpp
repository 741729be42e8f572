// call_op: one table entry per op; each only unpacks its arguments and calls
// the public function of include/smelt/ops.h.
#include "ops/op_call.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <map>
#include <optional>

#include "core/tensor_impl.h"
#include "ops/decompose.h"
#include "ops/optimizer_step.h"
#include "smelt/ops.h"

namespace smelt::detail {

namespace {

constexpr size_t kMany = std::numeric_limits<size_t>::max();

/// One call: the op's inputs and attrs with typed accessors that raise Error
/// naming the op on a missing or mistyped argument.
class Args {
 public:
  Args(const std::string& op, const std::vector<Tensor>& in, const Attrs& attrs)
      : op_(op), in_(in), attrs_(attrs) {}

  const std::string& op() const { return op_; }
  const Attrs& attrs() const { return attrs_; }
  size_t n() const { return in_.size(); }
  const std::vector<Tensor>& all() const { return in_; }
  const Tensor& at(size_t i) const {
    SMELT_CHECK(i < in_.size(), "{}: tensor input {} is missing (got {} inputs)", op_, i,
                in_.size());
    return in_[i];
  }
  bool has(const char* k) const { return attrs_.has(k); }
  bool is_list(const char* k) const {
    return has(k) && std::holds_alternative<std::vector<int64_t>>(attrs_.get(k));
  }

  // ---- numbers ----
  int64_t i64(const char* k) const {
    SMELT_CHECK(has(k), "{}: required argument '{}' is missing", op_, k);
    return to_i64(k, attrs_.get(k));
  }
  int64_t i64(const char* k, int64_t def) const { return has(k) ? i64(k) : def; }
  /// An optional single dim: absent -> nullopt; a list of one -> its element; an empty list or a
  /// list of several (all dims, as reductions record them) -> nullopt (reduce everything).
  std::optional<int64_t> opt_dim(const char* k) const {
    if (!has(k)) return std::nullopt;
    if (auto* v = std::get_if<std::vector<int64_t>>(&attrs_.get(k))) {
      if (v->size() == 1) return (*v)[0];
      return std::nullopt;
    }
    return i64(k);
  }
  std::optional<int64_t> opt_i64(const char* k) const {
    if (!has(k)) return std::nullopt;
    return i64(k);
  }
  double f64(const char* k, double def) const { return has(k) ? to_f64(k, attrs_.get(k)) : def; }
  double f64(const char* k) const {
    SMELT_CHECK(has(k), "{}: required argument '{}' is missing", op_, k);
    return to_f64(k, attrs_.get(k));
  }
  std::optional<double> opt_f64(const char* k) const {
    if (!has(k)) return std::nullopt;
    return to_f64(k, attrs_.get(k));
  }
  bool flag(const char* k, bool def) const {
    if (!has(k)) return def;
    const AttrValue& v = attrs_.get(k);
    if (auto* b = std::get_if<bool>(&v)) return *b;
    if (auto* i = std::get_if<int64_t>(&v)) return *i != 0;
    if (auto* s = std::get_if<Scalar>(&v); s && !s->is_floating()) return s->to_int() != 0;
    bad_type(k, "a bool");
  }
  Scalar scalar(const char* k) const {
    SMELT_CHECK(has(k), "{}: required argument '{}' is missing", op_, k);
    const AttrValue& v = attrs_.get(k);
    if (auto* s = std::get_if<Scalar>(&v)) return *s;
    if (auto* b = std::get_if<bool>(&v)) return Scalar(*b);
    if (auto* i = std::get_if<int64_t>(&v)) return Scalar(*i);
    if (auto* d = std::get_if<double>(&v)) return Scalar(*d);
    bad_type(k, "a number");
  }
  Scalar scalar(const char* k, const Scalar& def) const { return has(k) ? scalar(k) : def; }
  std::optional<Scalar> opt_scalar(const char* k) const {
    if (!has(k)) return std::nullopt;
    return scalar(k);
  }

  // ---- lists, strings, dtypes ----
  std::vector<int64_t> ints(const char* k) const {
    SMELT_CHECK(has(k), "{}: required argument '{}' is missing", op_, k);
    const AttrValue& v = attrs_.get(k);
    if (auto* l = std::get_if<std::vector<int64_t>>(&v)) return *l;
    return {to_i64(k, v)};
  }
  std::vector<int64_t> ints(const char* k, std::vector<int64_t> def) const {
    return has(k) ? ints(k) : def;
  }
  std::string str(const char* k, const std::string& def) const {
    if (!has(k)) return def;
    const AttrValue& v = attrs_.get(k);
    if (auto* s = std::get_if<std::string>(&v)) return *s;
    bad_type(k, "a string");
  }
  std::optional<std::string> opt_str(const char* k) const {
    if (!has(k)) return std::nullopt;
    return str(k, "");
  }
  std::optional<DType> opt_dtype(const char* k) const {
    if (!has(k)) return std::nullopt;
    const AttrValue& v = attrs_.get(k);
    if (auto* t = std::get_if<DType>(&v)) return *t;
    if (auto* s = std::get_if<std::string>(&v)) {
      std::string_view name = *s;
      if (name.rfind("torch.", 0) == 0) name.remove_prefix(6);
      return dtype_from_name(name);
    }
    bad_type(k, "a dtype");
  }
  DType dtype(const char* k) const {
    auto t = opt_dtype(k);
    SMELT_CHECK(t.has_value(), "{}: required argument '{}' is missing", op_, k);
    return *t;
  }

  /// A number argument that PyTorch passes positionally as a Python scalar: from attr `k`, or
  /// from the wrapped-number / 0-dim tensor input `i`.
  std::optional<Scalar> number(const char* k, size_t i) const {
    if (has(k)) return scalar(k);
    if (i < in_.size()) {
      SMELT_CHECK(in_[i].dim() == 0, "{}: '{}' must be a number or a 0-dim tensor, got shape {}",
                  op_, k, shape_str(in_[i].sizes()));
      return in_[i].item();
    }
    return std::nullopt;
  }

  /// Optional tensor inputs from position `first` on, in PyTorch's order `names`: placed by the
  /// recorded flag "has_<name>" when present, else taken from the inputs left. Error if inputs
  /// remain unused.
  std::vector<std::optional<Tensor>> optional_tensors(
      size_t first, std::initializer_list<const char*> names) const {
    std::vector<std::optional<Tensor>> out;
    size_t next = first;
    for (const char* name : names) {
      std::string flag_name = std::string("has_") + name;
      bool present = attrs_.has(flag_name) ? flag(flag_name.c_str(), false) : next < in_.size();
      if (present) {
        SMELT_CHECK(next < in_.size(), "{}: '{}' is flagged present but only {} inputs were given",
                    op_, name, in_.size());
        out.emplace_back(in_[next++]);
      } else {
        out.emplace_back(std::nullopt);
      }
    }
    SMELT_CHECK(next == in_.size(), "{}: {} tensor inputs given but only {} are used", op_,
                in_.size(), next);
    return out;
  }

 private:
  [[noreturn]] void bad_type(const char* k, const char* want) const {
    detail::throw_error(
        fmt::format("{}: argument '{}' must be {}, got {}", op_, k, want, attrs_.str()));
  }
  int64_t to_i64(const char* k, const AttrValue& v) const {
    if (auto* i = std::get_if<int64_t>(&v)) return *i;
    if (auto* b = std::get_if<bool>(&v)) return *b;
    if (auto* s = std::get_if<Scalar>(&v); s && !s->is_floating()) return s->to_int();
    if (auto* l = std::get_if<std::vector<int64_t>>(&v); l && l->size() == 1) return (*l)[0];
    bad_type(k, "an integer");
  }
  double to_f64(const char* k, const AttrValue& v) const {
    if (auto* d = std::get_if<double>(&v)) return *d;
    if (auto* i = std::get_if<int64_t>(&v)) return static_cast<double>(*i);
    if (auto* s = std::get_if<Scalar>(&v)) return s->to_double();
    if (auto* b = std::get_if<bool>(&v)) return *b ? 1.0 : 0.0;
    bad_type(k, "a number");
  }

  const std::string& op_;
  const std::vector<Tensor>& in_;
  const Attrs& attrs_;
};

using Outs = std::vector<Tensor>;
using Fn = std::function<Outs(const Args&)>;

struct Entry {
  size_t min_inputs;
  size_t max_inputs;
  std::vector<std::string> attrs;  // accepted attribute names (besides has_<input>)
  Fn fn;
};

Outs two(const std::tuple<Tensor, Tensor>& t) { return {std::get<0>(t), std::get<1>(t)}; }

Outs inplace_result(const Tensor& t) { return {t}; }

const std::map<std::string, Entry>& table() {
  static const std::map<std::string, Entry> t = [] {
    std::map<std::string, Entry> m;
    auto add = [&m](const char* name, size_t lo, size_t hi, std::vector<std::string> attrs, Fn f) {
      m.emplace(name, Entry{lo, hi, std::move(attrs), std::move(f)});
    };
    // ---- unary pointwise ----
#define SMELT_UNARY(op) \
  add(#op, 1, 1, {}, [](const Args& a) -> Outs { return {smelt::op(a.at(0))}; })
    SMELT_UNARY(neg);
    SMELT_UNARY(abs);
    SMELT_UNARY(sign);
    SMELT_UNARY(exp);
    SMELT_UNARY(exp2);
    SMELT_UNARY(expm1);
    SMELT_UNARY(log);
    SMELT_UNARY(log2);
    SMELT_UNARY(log1p);
    SMELT_UNARY(sqrt);
    SMELT_UNARY(rsqrt);
    SMELT_UNARY(reciprocal);
    SMELT_UNARY(sin);
    SMELT_UNARY(cos);
    SMELT_UNARY(tan);
    SMELT_UNARY(tanh);
    SMELT_UNARY(sigmoid);
    SMELT_UNARY(relu);
    SMELT_UNARY(silu);
    SMELT_UNARY(erf);
    SMELT_UNARY(floor);
    SMELT_UNARY(ceil);
    SMELT_UNARY(round);
    SMELT_UNARY(trunc);
    SMELT_UNARY(logical_not);
    SMELT_UNARY(bitwise_not);
    SMELT_UNARY(isnan);
    SMELT_UNARY(isinf);
    SMELT_UNARY(clone);
    SMELT_UNARY(contiguous);
    SMELT_UNARY(t);
#undef SMELT_UNARY
    add("gelu", 1, 1, {"approximate"},
        [](const Args& a) -> Outs { return {gelu(a.at(0), a.str("approximate", "none"))}; });
    add("nan_to_num", 1, 1, {"nan", "posinf", "neginf"}, [](const Args& a) -> Outs {
      return {nan_to_num(a.at(0), a.f64("nan", 0.0), a.opt_f64("posinf"), a.opt_f64("neginf"))};
    });
    add("to_dtype", 1, 1, {"dtype"},
        [](const Args& a) -> Outs { return {to_dtype(a.at(0), a.dtype("dtype"))}; });

    // ---- binary pointwise ----
#define SMELT_BINARY(op) \
  add(#op, 2, 2, {}, [](const Args& a) -> Outs { return {smelt::op(a.at(0), a.at(1))}; })
    SMELT_BINARY(mul);
    SMELT_BINARY(floor_divide);
    SMELT_BINARY(remainder);
    SMELT_BINARY(fmod);
    SMELT_BINARY(pow);
    SMELT_BINARY(maximum);
    SMELT_BINARY(minimum);
    SMELT_BINARY(fmax);
    SMELT_BINARY(fmin);
    SMELT_BINARY(atan2);
    SMELT_BINARY(eq);
    SMELT_BINARY(ne);
    SMELT_BINARY(lt);
    SMELT_BINARY(le);
    SMELT_BINARY(gt);
    SMELT_BINARY(ge);
    SMELT_BINARY(logical_and);
    SMELT_BINARY(logical_or);
    SMELT_BINARY(logical_xor);
    SMELT_BINARY(bitwise_and);
    SMELT_BINARY(bitwise_or);
    SMELT_BINARY(bitwise_xor);
    SMELT_BINARY(matmul);
#undef SMELT_BINARY
    // gemm_bias: linear's bias add as traced (detail::add_gemm_bias, alpha 1)
    add("add", 2, 2, {"alpha", "gemm_bias"}, [](const Args& a) -> Outs {
      const Scalar alpha = a.scalar("alpha", 1);
      if (a.flag("gemm_bias", false) && alpha.to_double() == 1.0)
        return {add_gemm_bias(a.at(0), a.at(1))};
      return {smelt::add(a.at(0), a.at(1), alpha)};
    });
    add("sub", 2, 2, {"alpha"},
        [](const Args& a) -> Outs { return {smelt::sub(a.at(0), a.at(1), a.scalar("alpha", 1))}; });
    add("div", 2, 2, {"rounding_mode"},
        [](const Args& a) -> Outs { return {div(a.at(0), a.at(1), a.opt_str("rounding_mode"))}; });
    add("div_trunc", 2, 2, {},
        [](const Args& a) -> Outs { return {div(a.at(0), a.at(1), std::string("trunc"))}; });
    add("div_floor", 2, 2, {},
        [](const Args& a) -> Outs { return {div(a.at(0), a.at(1), std::string("floor"))}; });
    add("where", 3, 3, {},
        [](const Args& a) -> Outs { return {where(a.at(0), a.at(1), a.at(2))}; });
    add("clamp", 1, 3, {"min", "max"}, [](const Args& a) -> Outs {
      if (a.n() == 1) return {clamp(a.at(0), a.opt_scalar("min"), a.opt_scalar("max"))};
      auto opt = a.optional_tensors(1, {"min", "max"});
      return {clamp(a.at(0), opt[0], opt[1])};
    });
    // clamp with one bound, as recorded by clamp(x, min, max) when the other is absent
    add("clamp_min", 2, 2, {}, [](const Args& a) -> Outs {
      return {clamp(a.at(0), std::optional<Tensor>(a.at(1)), std::optional<Tensor>())};
    });
    add("clamp_max", 2, 2, {}, [](const Args& a) -> Outs {
      return {clamp(a.at(0), std::optional<Tensor>(), std::optional<Tensor>(a.at(1)))};
    });
    add("lerp", 2, 3, {"weight"}, [](const Args& a) -> Outs {
      if (a.n() == 3 && !a.at(2).is_wrapped_number()) return {lerp(a.at(0), a.at(1), a.at(2))};
      auto w = a.number("weight", 2);
      SMELT_CHECK(w.has_value(), "lerp: argument 'weight' is missing");
      return {lerp(a.at(0), a.at(1), *w)};
    });

    // ---- reductions ----
    add("sum", 1, 1, {"dim", "keepdim", "dtype"}, [](const Args& a) -> Outs {
      return {sum(a.at(0), a.ints("dim", {}), a.flag("keepdim", false), a.opt_dtype("dtype"))};
    });
    add("mean", 1, 1, {"dim", "keepdim", "dtype"}, [](const Args& a) -> Outs {
      return {mean(a.at(0), a.ints("dim", {}), a.flag("keepdim", false), a.opt_dtype("dtype"))};
    });
    add("prod", 1, 1, {"dim", "keepdim", "dtype"}, [](const Args& a) -> Outs {
      return {prod(a.at(0), a.opt_dim("dim"), a.flag("keepdim", false), a.opt_dtype("dtype"))};
    });
#define SMELT_DIMS_REDUCTION(op)                                              \
  add(#op, 1, 1, {"dim", "keepdim"}, [](const Args& a) -> Outs {              \
    return {smelt::op(a.at(0), a.ints("dim", {}), a.flag("keepdim", false))}; \
  })
    SMELT_DIMS_REDUCTION(amax);
    SMELT_DIMS_REDUCTION(amin);
    SMELT_DIMS_REDUCTION(any);
    SMELT_DIMS_REDUCTION(all);
#undef SMELT_DIMS_REDUCTION
    add("logsumexp", 1, 1, {"dim", "keepdim"}, [](const Args& a) -> Outs {
      return {logsumexp(a.at(0), a.ints("dim", {}), a.flag("keepdim", false))};
    });
    add("max", 1, 1, {"dim", "keepdim"}, [](const Args& a) -> Outs {
      auto d = a.opt_dim("dim");
      if (!d) return {smelt::max(a.at(0))};
      return two(smelt::max(a.at(0), *d, a.flag("keepdim", false)));
    });
    add("min", 1, 1, {"dim", "keepdim"}, [](const Args& a) -> Outs {
      auto d = a.opt_dim("dim");
      if (!d) return {smelt::min(a.at(0))};
      return two(smelt::min(a.at(0), *d, a.flag("keepdim", false)));
    });
    add("argmax", 1, 1, {"dim", "keepdim"}, [](const Args& a) -> Outs {
      return {argmax(a.at(0), a.opt_dim("dim"), a.flag("keepdim", false))};
    });
    add("argmin", 1, 1, {"dim", "keepdim"}, [](const Args& a) -> Outs {
      return {argmin(a.at(0), a.opt_dim("dim"), a.flag("keepdim", false))};
    });
    // correction: PyTorch's name; "unbiased" (older spelling) maps to correction 1 / 0.
    auto correction = [](const Args& a) {
      if (a.has("correction")) return a.f64("correction");
      return a.flag("unbiased", true) ? 1.0 : 0.0;
    };
    add("var", 1, 1, {"dim", "correction", "unbiased", "keepdim"},
        [correction](const Args& a) -> Outs {
          return {var(a.at(0), a.ints("dim", {}), correction(a), a.flag("keepdim", false))};
        });
    add("std", 1, 1, {"dim", "correction", "unbiased", "keepdim"},
        [correction](const Args& a) -> Outs {
          return {smelt::std(a.at(0), a.ints("dim", {}), correction(a), a.flag("keepdim", false))};
        });
    add("var_mean", 1, 1, {"dim", "correction", "unbiased", "keepdim"},
        [correction](const Args& a) -> Outs {
          return two(var_mean(a.at(0), a.ints("dim", {}), correction(a), a.flag("keepdim", false)));
        });
    add("cumsum", 1, 1, {"dim", "dtype"}, [](const Args& a) -> Outs {
      return {cumsum(a.at(0), a.i64("dim"), a.opt_dtype("dtype"))};
    });

    // ---- views ----
    add("view", 1, 1, {"shape", "size"}, [](const Args& a) -> Outs {
      return {view(a.at(0), a.has("shape") ? a.ints("shape") : a.ints("size"))};
    });
    add("reshape", 1, 1, {"shape"},
        [](const Args& a) -> Outs { return {reshape(a.at(0), a.ints("shape"))}; });
    add("permute", 1, 1, {"dims"},
        [](const Args& a) -> Outs { return {permute(a.at(0), a.ints("dims"))}; });
    add("transpose", 1, 1, {"dim0", "dim1"},
        [](const Args& a) -> Outs { return {transpose(a.at(0), a.i64("dim0"), a.i64("dim1"))}; });
    add("squeeze", 1, 1, {"dim"}, [](const Args& a) -> Outs {
      std::optional<std::vector<int64_t>> d;
      if (a.has("dim")) d = a.ints("dim");
      return {squeeze(a.at(0), d)};
    });
    add("unsqueeze", 1, 1, {"dim"},
        [](const Args& a) -> Outs { return {unsqueeze(a.at(0), a.i64("dim"))}; });
    add("expand", 1, 1, {"size"},
        [](const Args& a) -> Outs { return {expand(a.at(0), a.ints("size"))}; });
    add("broadcast_to", 1, 1, {"size", "shape"}, [](const Args& a) -> Outs {
      return {broadcast_to(a.at(0), a.has("size") ? a.ints("size") : a.ints("shape"))};
    });
    add("flatten", 1, 1, {"start_dim", "end_dim"}, [](const Args& a) -> Outs {
      return {flatten(a.at(0), a.i64("start_dim", 0), a.i64("end_dim", -1))};
    });
    add("unflatten", 1, 1, {"dim", "sizes"},
        [](const Args& a) -> Outs { return {unflatten(a.at(0), a.i64("dim"), a.ints("sizes"))}; });
    add("narrow", 1, 1, {"dim", "start", "length"}, [](const Args& a) -> Outs {
      return {narrow(a.at(0), a.i64("dim"), a.i64("start"), a.i64("length"))};
    });
    add("slice", 1, 1, {"dim", "start", "end", "step"}, [](const Args& a) -> Outs {
      return {
          slice(a.at(0), a.i64("dim", 0), a.opt_i64("start"), a.opt_i64("end"), a.i64("step", 1))};
    });
    add("select", 1, 1, {"dim", "index"},
        [](const Args& a) -> Outs { return {select(a.at(0), a.i64("dim"), a.i64("index"))}; });
    add("split", 1, 1, {"split_size", "split_size_or_sections", "split_sizes", "dim"},
        [](const Args& a) -> Outs {
          const char* k = a.has("split_size")               ? "split_size"
                          : a.has("split_size_or_sections") ? "split_size_or_sections"
                                                            : "split_sizes";
          // an int is one size for every piece; a list gives each piece's size
          if (a.is_list(k)) return split(a.at(0), a.ints(k), a.i64("dim", 0));
          return split(a.at(0), a.i64(k), a.i64("dim", 0));
        });
    add("chunk", 1, 1, {"chunks", "dim"},
        [](const Args& a) -> Outs { return chunk(a.at(0), a.i64("chunks"), a.i64("dim", 0)); });

    // ---- data movement ----
    add("index_select", 2, 2, {"dim"},
        [](const Args& a) -> Outs { return {index_select(a.at(0), a.i64("dim"), a.at(1))}; });
    add("gather", 2, 2, {"dim"},
        [](const Args& a) -> Outs { return {gather(a.at(0), a.i64("dim"), a.at(1))}; });
    add("scatter_add", 3, 3, {"dim"}, [](const Args& a) -> Outs {
      return {scatter_add(a.at(0), a.i64("dim"), a.at(1), a.at(2))};
    });
    add("cat", 1, kMany, {"dim"},
        [](const Args& a) -> Outs { return {cat(a.all(), a.i64("dim", 0))}; });
    add("stack", 1, kMany, {"dim"},
        [](const Args& a) -> Outs { return {stack(a.all(), a.i64("dim", 0))}; });
    add("pad", 1, 1, {"pad", "value", "mode"}, [](const Args& a) -> Outs {
      std::string mode = a.str("mode", "constant");
      SMELT_CHECK(mode == "constant", "pad: mode '{}' is not supported; only \"constant\"", mode);
      return {pad(a.at(0), a.ints("pad"), a.f64("value", 0.0))};
    });
    add("tril", 1, 1, {"diagonal"},
        [](const Args& a) -> Outs { return {tril(a.at(0), a.i64("diagonal", 0))}; });
    add("triu", 1, 1, {"diagonal"},
        [](const Args& a) -> Outs { return {triu(a.at(0), a.i64("diagonal", 0))}; });
    add("masked_fill", 2, 3, {"value"}, [](const Args& a) -> Outs {
      auto v = a.number("value", 2);
      SMELT_CHECK(v.has_value(), "masked_fill: argument 'value' is missing");
      return {masked_fill(a.at(0), a.at(1), *v)};
    });
    add("embedding", 2, 2, {}, [](const Args& a) -> Outs {
      // PyTorch's F.embedding(input, weight) takes the indices first; smelt's embedding(weight,
      // indices) the weight first. Recorded graph nodes may use either order: integer first
      // and floating second means PyTorch's order.
      if (is_integral(a.at(0).dtype(), true) && !is_integral(a.at(1).dtype(), true))
        return {embedding(a.at(1), a.at(0))};
      return {embedding(a.at(0), a.at(1))};
    });
    add("index_put", 3, 3, {"accumulate"}, [](const Args& a) -> Outs {
      SMELT_CHECK(!a.flag("accumulate", false), "index_put: accumulate=true is not supported");
      Tensor r = clone(a.at(0));
      r.index_put_(a.at(1), a.at(2));
      return {r};
    });

    // ---- neural-network functional ----
    add("linear", 2, 3, {}, [](const Args& a) -> Outs {
      auto opt = a.optional_tensors(2, {"bias"});
      return {linear(a.at(0), a.at(1), opt[0])};
    });
    add("softmax", 1, 1, {"dim", "dtype"}, [](const Args& a) -> Outs {
      return {softmax(a.at(0), a.i64("dim"), a.opt_dtype("dtype"))};
    });
    add("log_softmax", 1, 1, {"dim", "dtype"}, [](const Args& a) -> Outs {
      return {log_softmax(a.at(0), a.i64("dim"), a.opt_dtype("dtype"))};
    });
    add("layer_norm", 1, 3, {"normalized_shape", "eps"}, [](const Args& a) -> Outs {
      auto opt = a.optional_tensors(1, {"weight", "bias"});
      return {layer_norm(a.at(0), a.ints("normalized_shape"), opt[0], opt[1], a.f64("eps", 1e-5))};
    });
    add("rms_norm", 1, 2, {"normalized_shape", "eps"}, [](const Args& a) -> Outs {
      auto opt = a.optional_tensors(1, {"weight"});
      return {rms_norm(a.at(0), a.ints("normalized_shape"), opt[0], a.opt_f64("eps"))};
    });
    add("batch_norm", 1, 5, {"training", "momentum", "eps"}, [](const Args& a) -> Outs {
      auto opt = a.optional_tensors(1, {"running_mean", "running_var", "weight", "bias"});
      return {batch_norm(a.at(0), opt[0], opt[1], opt[2], opt[3], a.flag("training", false),
                         a.f64("momentum", 0.1), a.f64("eps", 1e-5))};
    });
    add("dropout", 1, 1, {"p", "training"}, [](const Args& a) -> Outs {
      return {dropout(a.at(0), a.f64("p", 0.5), a.flag("training", true))};
    });
    add("cross_entropy", 2, 2, {"ignore_index", "reduction", "label_smoothing"},
        [](const Args& a) -> Outs {
          return {cross_entropy(a.at(0), a.at(1), a.i64("ignore_index", -100),
                                a.str("reduction", "mean"), a.f64("label_smoothing", 0.0))};
        });
    add("nll_loss", 2, 3, {"ignore_index", "reduction"}, [](const Args& a) -> Outs {
      auto opt = a.optional_tensors(2, {"weight"});
      return {nll_loss(a.at(0), a.at(1), opt[0], a.i64("ignore_index", -100),
                       a.str("reduction", "mean"))};
    });
    add("binary_cross_entropy_with_logits", 2, 4, {"reduction"}, [](const Args& a) -> Outs {
      auto opt = a.optional_tensors(2, {"weight", "pos_weight"});
      return {binary_cross_entropy_with_logits(a.at(0), a.at(1), opt[0], a.str("reduction", "mean"),
                                               opt[1])};
    });
    add("mse_loss", 2, 2, {"reduction"}, [](const Args& a) -> Outs {
      return {mse_loss(a.at(0), a.at(1), a.str("reduction", "mean"))};
    });
    add("scaled_dot_product_attention", 3, 4, {"attn_mask", "dropout_p", "is_causal", "scale"},
        [](const Args& a) -> Outs {
          auto opt = a.optional_tensors(3, {"attn_mask"});
          return {scaled_dot_product_attention(a.at(0), a.at(1), a.at(2), opt[0],
                                               a.f64("dropout_p", 0.0), a.flag("is_causal", false),
                                               a.opt_f64("scale"))};
        });

    // ---- in place: write into inputs[0] and return it ----
    add("copy_", 2, 2, {}, [](const Args& a) -> Outs {
      Tensor d = a.at(0);
      d.copy_(a.at(1));
      return inplace_result(d);
    });
    add("fill_", 1, 2, {"value"}, [](const Args& a) -> Outs {
      Tensor d = a.at(0);
      auto v = a.number("value", 1);
      SMELT_CHECK(v.has_value(), "fill_: argument 'value' is missing");
      d.fill_(*v);
      return inplace_result(d);
    });
    add("zero_", 1, 1, {}, [](const Args& a) -> Outs {
      Tensor d = a.at(0);
      d.zero_();
      return inplace_result(d);
    });
    add("masked_fill_", 2, 3, {"value"}, [](const Args& a) -> Outs {
      Tensor d = a.at(0);
      auto v = a.number("value", 2);
      SMELT_CHECK(v.has_value(), "masked_fill_: argument 'value' is missing");
      d.masked_fill_(a.at(1), *v);
      return inplace_result(d);
    });
    // The optimizers' multi-tensor steps (ops/optimizer_step.h): in place, the
    // updated tensors returned.
    add("_fused_sgd_", 2, kMany,
        {"n", "lr", "momentum", "dampening", "weight_decay", "nesterov", "maximize", "first_step"},
        [](const Args& a) -> Outs { return detail::fused_sgd_(a.all(), a.attrs()); });
    add("_fused_adam_", 5, kMany,
        {"n", "lr", "beta1", "beta2", "eps", "weight_decay", "amsgrad", "maximize",
         "decoupled_weight_decay"},
        [](const Args& a) -> Outs { return detail::fused_adam_(a.all(), a.attrs()); });
    add("index_put_", 3, 3, {"accumulate"}, [](const Args& a) -> Outs {
      SMELT_CHECK(!a.flag("accumulate", false), "index_put_: accumulate=true is not supported");
      Tensor d = a.at(0);
      d.index_put_(a.at(1), a.at(2));
      return inplace_result(d);
    });
    return m;
  }();
  return t;
}

}  // namespace

Tensor wrapped_scalar(const Scalar& v) {
  Tensor t = make_empty({}, v.dtype(), Device());
  switch (v.dtype()) {
    case DType::Bool:
      *static_cast<bool*>(t.data_ptr()) = v.to_int() != 0;
      break;
    case DType::Int64:
      *static_cast<int64_t*>(t.data_ptr()) = v.to_int();
      break;
    default:
      *static_cast<double*>(t.data_ptr()) = v.to_double();
      break;
  }
  t.impl()->wrapped_number = true;
  return t;
}

bool has_call_op(const std::string& op) { return table().count(op) != 0; }

std::vector<std::string> call_op_attrs(const std::string& op) {
  auto it = table().find(op);
  return it == table().end() ? std::vector<std::string>{} : it->second.attrs;
}

std::vector<std::string> call_op_names() {
  std::vector<std::string> names;
  for (const auto& [name, e] : table()) names.push_back(name);
  return names;
}

std::vector<Tensor> call_op(const std::string& op, const std::vector<Tensor>& inputs,
                            const Attrs& attrs) {
  auto it = table().find(op);
  SMELT_CHECK(it != table().end(),
              "call_op: unknown op '{}'; `smelt ops` lists the ops smelt knows", op);
  const Entry& e = it->second;
  SMELT_CHECK(inputs.size() >= e.min_inputs && inputs.size() <= e.max_inputs,
              "{}: takes {} tensor inputs, got {}", op,
              e.max_inputs == kMany          ? fmt::format("at least {}", e.min_inputs)
              : e.min_inputs == e.max_inputs ? fmt::format("{}", e.min_inputs)
                                             : fmt::format("{} to {}", e.min_inputs, e.max_inputs),
              inputs.size());
  for (const Tensor& t : inputs) SMELT_CHECK(t.defined(), "{}: an input tensor is undefined", op);
  for (const auto& [name, value] : attrs.items) {
    bool known = name.rfind("has_", 0) == 0 ||
                 std::find(e.attrs.begin(), e.attrs.end(), name) != e.attrs.end();
    SMELT_CHECK(known, "{}: unexpected argument '{}' (accepted: {})", op, name,
                fmt::join(e.attrs, ", "));
  }
  return e.fn(Args(op, inputs, attrs));
}

}  // namespace smelt::detail
