// The shared C-like printer (printer.h): walks a KernelDesc and prints it;
// only what differs by target goes through the Dialect.
#include "compiler/codegen/printer.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <map>
#include <optional>

#include "kernels/scalar_ops.h"
#include "smelt/error.h"

namespace smelt::compiler {

const char* range_tag_name(RangeTag t) {
  switch (t) {
    case RangeTag::Serial:
      return "serial";
    case RangeTag::Parallel:
      return "parallel";
    case RangeTag::Vector:
      return "vector";
    case RangeTag::Block:
      return "block";
    case RangeTag::Thread:
      return "thread";
  }
  return "?";
}

std::string Dialect::storage_type(DType t) const {
  switch (t) {
    case DType::Float16:
      return "smelt::Half";
    case DType::BFloat16:
      return "smelt::BFloat16";
    default:
      return std::string(dtype_ctype(t));
  }
}

std::string Dialect::value_type(DType t) const {
  return (t == DType::Float16 || t == DType::BFloat16) ? "float" : storage_type(t);
}

std::string Dialect::half_to_float(DType, const std::string& v) const {
  return fmt::format("static_cast<float>({})", v);
}

std::string Dialect::float_to_half(DType t, const std::string& v) const {
  return fmt::format("{}({})", storage_type(t), v);
}

namespace {
/// `d` converted to integer dtype `t` as eager converts it (scalar::cast).
int64_t float_to_integer(double d, DType t) {
  switch (t) {
    case DType::UInt8:
      return scalar::cast<uint8_t>(d);
    case DType::Int8:
      return scalar::cast<int8_t>(d);
    case DType::Int16:
      return scalar::cast<int16_t>(d);
    case DType::Int32:
      return scalar::cast<int32_t>(d);
    default:
      return scalar::cast<int64_t>(d);
  }
}
}  // namespace

std::string Dialect::literal(const Scalar& s, DType t) const {
  std::string ty = value_type(t);
  if (t == DType::Bool) return s.to_double() != 0 ? "true" : "false";
  if (!is_floating(t)) {
    int64_t v = s.is_floating() ? float_to_integer(s.to_double(), t) : s.to_int();
    // INT64_MIN has no literal of its own: -9223372036854775808 negates an
    // out-of-range constant.
    if (v == std::numeric_limits<int64_t>::min())
      return fmt::format("static_cast<{}>(-INT64_C(9223372036854775807) - 1)", ty);
    return fmt::format("static_cast<{}>(INT64_C({}))", ty, v);
  }
  double v = s.to_double();
  if (std::isnan(v))
    return fmt::format("{}std::numeric_limits<{}>::quiet_NaN()", std::signbit(v) ? "-" : "", ty);
  if (std::isinf(v))
    return fmt::format("{}std::numeric_limits<{}>::infinity()", v < 0 ? "-" : "", ty);
  // Hexadecimal floating literals are exact: -0.0, subnormals and every
  // float16/bfloat16/float32/float64 value print as themselves.
  return fmt::format("static_cast<{}>({:a})", ty, v);
}

std::string Dialect::load(const std::string& ptr, const std::string& index) const {
  return fmt::format("{}[{}]", ptr, index);
}

std::string Dialect::store(const std::string& ptr, const std::string& index,
                           const std::string& value) const {
  return fmt::format("{}[{}] = {}", ptr, index, value);
}

void Dialect::range_end(const Range&, const KernelConfig&, CodeBuffer& out) const { out.line("}"); }

std::string Dialect::row_buffer(const std::string& type, const std::string& name, int64_t extent,
                                const KernelConfig&) const {
  return fmt::format("alignas(64) {} {}[{}];", type, name, extent);
}

std::string Dialect::row_slot(const IndexExpr& index, const KernelConfig&) const {
  return index.str();
}

std::string Dialect::element_index(const IndexExpr& index, const KernelConfig&) const {
  return index.str();
}

std::string Dialect::order_result(const std::string& partial, const std::string& lane) const {
  return fmt::format("{}.result({})", partial, lane);
}

std::string Dialect::index_type(int bits) const { return bits == 32 ? "int32_t" : "int64_t"; }

void CodeBuffer::line(const std::string& s) {
  size_t start = 0;
  while (start <= s.size()) {
    size_t end = s.find('\n', start);
    std::string piece = s.substr(start, end == std::string::npos ? std::string::npos : end - start);
    bool pragma = piece.rfind("#pragma", 0) == 0;
    out_ += std::string(pragma ? 0 : depth_ * 2, ' ') + piece + "\n";
    if (end == std::string::npos) break;
    start = end + 1;
  }
}

namespace {

bool is_half(DType t) { return t == DType::Float16 || t == DType::BFloat16; }

class Printer {
 public:
  Printer(const KernelDesc& k, const Dialect& d) : k_(k), d_(d) {}

  std::string run() {
    out_.line(fmt::format("// {}: {}", k_.name, k_.config.str()));
    d_.kernel_begin(k_, out_);
    for (auto& s : k_.body) stmt(s);
    out_.dedent();
    out_.line("}");
    return out_.str();
  }

 private:
  std::string acc_type(const std::string& accumulator, DType acc) const {
    bool untyped = accumulator == "Any" || accumulator == "All";
    return fmt::format("smelt::reduce::{}{}", accumulator,
                       untyped ? "" : "<" + d_.value_type(acc) + ">");
  }

  /// `v` (a value of `from`) as a value of `to`: floating -> integer and
  /// integer -> floating through the conversion eager uses (scalar::cast:
  /// out-of-range values as PyTorch on x86-64; +0.0, never -0.0, from an
  /// integer, which GCC's folding of a float -> integer -> float round trip
  /// into trunc would otherwise give), any other pair by static_cast.
  std::string convert_value(const std::string& v, DType from, DType to) const {
    if ((is_floating(from) && !is_floating(to) && to != DType::Bool) ||
        (!is_floating(from) && is_floating(to)))
      return fmt::format("smelt::scalar::cast<{}>({})", d_.value_type(to), v);
    return fmt::format("static_cast<{}>({})", d_.value_type(to), v);
  }

  std::string expr(const Expr& e) const {
    switch (e.kind) {
      case Expr::Kind::Temp:
        return e.name;
      case Expr::Kind::Literal:
        return d_.literal(e.literal, e.dtype);
      case Expr::Kind::Load: {
        std::string l = d_.load(e.name, d_.element_index(e.index, k_.config));
        if (is_half(e.dtype) && !e.raw) l = d_.half_to_float(e.dtype, l);
        // A guarded read happens only where its guard holds.
        if (e.mask) l = fmt::format("({} ? {} : {}(0))", expr(*e.mask), l, d_.value_type(e.dtype));
        return l;
      }
      case Expr::Kind::Select:
        return fmt::format("({} ? {} : {})", expr(*e.operands[0]), expr(*e.operands[1]),
                           expr(*e.operands[2]));
      case Expr::Kind::InBounds: {
        std::vector<std::string> terms;
        for (auto& [x, lo, hi] : e.guard) {
          const Bounds b = x.bounds();
          if (b.lo < lo) terms.push_back(fmt::format("{} <= {}", lo, x.str()));
          if (hi != std::numeric_limits<int64_t>::max() && b.hi >= hi)
            terms.push_back(fmt::format("{} < {}", x.str(), hi));
        }
        return terms.empty() ? "true" : fmt::format("({})", fmt::join(terms, " && "));
      }
      case Expr::Kind::Clamp: {
        const auto n = static_cast<int64_t>(e.number);
        std::string v = fmt::format("static_cast<int64_t>({})", expr(*e.operands[0]));
        return fmt::format("({0} < 0 ? INT64_C(0) : {0} >= INT64_C({1}) ? INT64_C({2}) : {0})", v,
                           n, n > 0 ? n - 1 : 0);
      }
      case Expr::Kind::RowLoad: {
        const std::string v = fmt::format("{}[{}]", e.name, d_.row_slot(e.index, k_.config));
        return e.raw ? d_.half_to_float(e.dtype, v) : v;
      }
      case Expr::Kind::Call: {
        std::vector<std::string> args;
        for (auto& o : e.operands) args.push_back(expr(*o));
        return fmt::format("smelt::scalar::{}<{}>({})", e.name, d_.value_type(e.from),
                           fmt::join(args, ", "));
      }
      case Expr::Kind::Convert: {
        // A conversion rounds as if stored: float16/bfloat16 through storage.
        std::string v = expr(*e.operands[0]);
        if (e.from == e.dtype) return v;
        if (e.dtype == DType::Bool) return fmt::format("({} != 0)", v);
        if (is_half(e.dtype))
          return d_.half_to_float(
              e.dtype, d_.float_to_half(e.dtype, convert_value(v, e.from, DType::Float32)));
        return convert_value(v, e.from, e.dtype);
      }
      case Expr::Kind::Cast:
        return convert_value(expr(*e.operands[0]), e.from, e.dtype);
      case Expr::Kind::AccValue: {
        std::string ty = acc_type(e.accumulator, e.acc_dtype);
        if (e.lane) {
          SMELT_INTERNAL_ASSERT(e.field == "finalize", "lane accumulator result '{}'", e.field);
          return fmt::format("{}::finalize({}[{}])", ty, e.name, e.index.str());
        }
        if (e.field == "finalize") return fmt::format("{}::finalize({})", ty, e.name);
        if (e.field == "value" || e.field == "index") return e.name + "." + e.field;
        if (e.field == "sum_mean")
          return fmt::format("smelt::reduce::mean_finalize({}, INT64_C({}))", e.name,
                             static_cast<int64_t>(e.number));
        if (e.field == "mean") return fmt::format("{}::mean({})", ty, e.name);
        if (e.field == "var") return fmt::format("{}::var({}, {:.17g})", ty, e.name, e.number);
        if (e.field == "std")
          return fmt::format("std::sqrt({}::var({}, {:.17g}))", ty, e.name, e.number);
        SMELT_INTERNAL_ASSERT(false, "unknown accumulator result '{}'", e.field);
      }
    }
    return "";
  }

  /// `v` through conversions to its own dtype (which print as nothing).
  static const Expr* own_dtype(const Expr* v) {
    while (v->kind == Expr::Kind::Convert && v->from == v->dtype) v = v->operands[0].get();
    return v;
  }

  /// The float32 element of AccRun `s` when it is Welford in float64 over a
  /// float32 value widened (Welford<double> folds float elements in float
  /// lanes, as eager's var and layer_norm of float32 pass them:
  /// kernels/reduce_ops.h, welford_lanes); null otherwise.
  static const Expr* widened_float(const Stmt& s) {
    const Expr* v = own_dtype(s.value.get());
    const bool widened = v->kind == Expr::Kind::Convert && s.accumulator == "Welford" &&
                         v->from == DType::Float32 && v->dtype == DType::Float64;
    return widened ? v->operands[0].get() : nullptr;
  }

  /// The pointer `base` of AccRun `s` when its element at `r` is read from
  /// memory at base[r] (a load or a row buffer, of the accumulate type or,
  /// for Welford in float64, float32 widened, in runs contiguous in memory);
  /// "" otherwise.
  std::string contiguous_pointer(const Stmt& s) const {
    if (!s.contiguous || !s.value || !s.run_var.empty()) return "";
    // The element: the value itself, or the one temp the body defines it as.
    const Expr* v = own_dtype(s.value.get());
    // Welford<double> folds float elements too (kernels/reduce_jit.h).
    const Expr* narrow = widened_float(s);
    const bool widened = narrow != nullptr;
    if (widened) v = own_dtype(narrow);
    if (v->kind == Expr::Kind::Temp && s.body.size() == 1 && s.body[0].kind == Stmt::Kind::Let &&
        s.body[0].name == v->name && s.body[0].dtype == v->dtype && s.body[0].value)
      v = s.body[0].value.get();
    else if (!s.body.empty())
      return "";
    const Expr& e = *v;
    const bool load = e.kind == Expr::Kind::Load && !e.mask;
    if ((!load && e.kind != Expr::Kind::RowLoad) || is_half(e.dtype) ||
        e.dtype != (widened ? DType::Float32 : s.acc_dtype))
      return "";
    const std::string& r = s.range.var;
    if (e.index.coefficient(r) != std::optional<int64_t>(1)) return "";
    const IndexExpr base = e.index.substitute({{r, IndexExpr::constant(0)}});
    // The row buffer's slot of element r (the index itself where one thread
    // holds the row) must be r too.
    if (!load && d_.row_slot(e.index, k_.config) != e.index.str()) return "";
    const std::string at = base.is_const() && base.value() == 0 ? "" : " + (" + base.str() + ")";
    return e.name + at;
  }

  void body(const std::vector<Stmt>& b) {
    for (auto& s : b) stmt(s);
  }

  /// A float16 / bfloat16 store of a vector loop that the dialect stages
  /// (Dialect::staged_store_lane): each lane's float goes to `floats`, and the
  /// last lane converts them all and stores them together.
  struct StagedStore {
    const Stmt* store = nullptr;
    std::string floats;  // float[vec]
  };
  struct Staging {
    std::string lane;  // the vector loop's lane variable
    std::vector<StagedStore> stores;
    const StagedStore* find(const Stmt* s) const {
      for (auto& st : stores)
        if (st.store == s) return &st;
      return nullptr;
    }
  };

  /// The stores of loop `s`'s own body that the dialect stages: contiguous
  /// along the loop (coefficient 1), of a dtype the dialect names. Staging
  /// moves a lane's store after the later lanes' loads, which is safe because
  /// a vector loop reads no element another lane of it writes: a kernel
  /// writing into the memory of an input reads each element only in the lane
  /// that writes it (compiler/fusion/in_place.h).
  Staging staged_stores(const Stmt& s) {
    Staging st;
    for (const Stmt& b : s.body) {
      if (b.kind != Stmt::Kind::Store ||
          b.index.coefficient(s.range.var) != std::optional<int64_t>(1))
        continue;
      const std::string lane = d_.staged_store_lane(s.range, k_.config, b.dtype);
      if (lane.empty()) continue;
      st.lane = lane;
      st.stores.push_back({&b, fmt::format("{}_stage{}", b.name, staged_count_++)});
    }
    return st;
  }

  /// At the vector loop's last lane: the staged floats converted together,
  /// then stored at the vector's elements (the loop variable redeclared as
  /// each lane's: the staged stores are linear in it).
  void flush_staged_stores(const Range& r) {
    if (staging_.stores.empty()) return;
    const int vec = k_.config.vec;
    const std::string t = d_.index_type(k_.config.index_bits);
    out_.line(fmt::format("if ({} == {}) {{", staging_.lane, vec - 1));
    out_.indent();
    for (const StagedStore& st : staging_.stores) {
      const std::string bits = st.floats + "_bits";
      out_.line(fmt::format("{} {}[{}];", d_.storage_type(st.store->dtype), bits, vec));
      out_.line(d_.floats_to_half(st.store->dtype, st.floats, bits) + ";");
    }
    out_.line(fmt::format("const {} {}_last = {};", t, r.var, r.var));
    // The vector's elements stored, each the value `lane_value` gives (of
    // the lane variable's name) for the staged stores `stores`.
    auto store_lanes = [&](const std::vector<const StagedStore*>& stores, auto lane_value) {
      out_.line("#pragma unroll");
      out_.line(fmt::format("for (int {0}_j = 0; {0}_j < {1}; ++{0}_j) {{", r.var, vec));
      out_.indent();
      out_.line(fmt::format("const {0} {1} = {1}_last - {2} + {1}_j;", t, r.var, vec - 1));
      for (const StagedStore* st : stores)
        out_.line(d_.store(st->store->name, d_.element_index(st->store->index, k_.config),
                           lane_value(*st, r.var + "_j")) +
                  ";");
      out_.dedent();
      out_.line("}");
    };
    std::vector<const StagedStore*> all;
    for (const StagedStore& st : staging_.stores) all.push_back(&st);
    store_lanes(all, [](const StagedStore& st, const std::string& j) {
      return fmt::format("{}_bits[{}]", st.floats, j);
    });
    // Lanes the bulk conversion gives other bits than float_to_half, stored again.
    for (const StagedStore& st : staging_.stores) {
      const std::string redo = d_.staged_store_redo(st.store->dtype, st.floats);
      if (redo.empty()) continue;
      out_.line(fmt::format("if ({}) {{", redo));
      out_.indent();
      store_lanes({&st}, [this](const StagedStore& s, const std::string& j) {
        return d_.float_to_half(s.store->dtype, fmt::format("{}[{}]", s.floats, j));
      });
      out_.dedent();
      out_.line("}");
    }
    out_.dedent();
    out_.line("}");
  }

  void stmt(const Stmt& s) {
    switch (s.kind) {
      case Stmt::Kind::Loop: {
        const bool lanes = s.range.tag == RangeTag::Thread;
        Staging staging = staged_stores(s);
        for (const StagedStore& st : staging.stores)
          out_.line(fmt::format("float {}[{}];", st.floats, k_.config.vec));
        d_.range_begin(s.range, k_.config, out_);
        out_.indent();
        thread_ranges_ += lanes;
        std::swap(staging_, staging);
        body(s.body);
        flush_staged_stores(s.range);
        std::swap(staging_, staging);
        thread_ranges_ -= lanes;
        out_.dedent();
        d_.range_end(s.range, k_.config, out_);
        return;
      }
      case Stmt::Kind::Let: {
        const Expr& e = *s.value;
        if (e.kind == Expr::Kind::Convert && is_half(e.dtype) && e.from != e.dtype &&
            s.dtype == e.dtype) {
          // A value rounded to float16/bfloat16: its bits are a temp of their
          // own, which a store of the value writes as they are (converting
          // the rounded float back would round it a second time, to the
          // same bits, at the cost of a conversion per element).
          const std::string bits = s.name + "_bits";
          std::string source = convert_value(expr(*e.operands[0]), e.from, DType::Float32);
          if (!staging_.stores.empty()) {
            // Its float too, which a staged store takes in place of the bits.
            out_.line(fmt::format("const float {}_unrounded = {};", s.name, source));
            source = s.name + "_unrounded";
            half_source_[s.name] = source;
          }
          out_.line(fmt::format("const {} {} = {};", d_.storage_type(e.dtype), bits,
                                d_.float_to_half(e.dtype, source)));
          out_.line(fmt::format("const {} {} = {};", d_.value_type(s.dtype), s.name,
                                d_.half_to_float(e.dtype, bits)));
          half_bits_[s.name] = {e.dtype, bits};
          return;
        }
        out_.line(fmt::format("const {} {} = {};", d_.value_type(s.dtype), s.name, expr(e)));
        return;
      }
      case Stmt::Kind::Store: {
        std::string v = expr(*s.value);
        if (const StagedStore* st = staging_.find(&s)) {
          // The float whose rounding is stored (that of a rounded temp: its
          // bits, computed for the store only, are then not computed at all).
          auto src = s.value->kind == Expr::Kind::Temp ? half_source_.find(s.value->name)
                                                       : half_source_.end();
          if (src != half_source_.end() && half_bits_.at(s.value->name).first == s.dtype)
            v = src->second;
          out_.line(fmt::format("{}[{}] = {};", st->floats, staging_.lane, v));
          return;
        }
        if (is_half(s.dtype)) {
          auto it =
              s.value->kind == Expr::Kind::Temp ? half_bits_.find(s.value->name) : half_bits_.end();
          v = it != half_bits_.end() && it->second.first == s.dtype ? it->second.second
                                                                    : d_.float_to_half(s.dtype, v);
        }
        // A per-row result of a reduction: stored by one of the row's threads.
        const std::string once =
            k_.config.reduction && thread_ranges_ == 0 ? d_.once_per_row(k_.config) : "";
        out_.line(once + d_.store(s.name, d_.element_index(s.index, k_.config), v) + ";");
        return;
      }
      case Stmt::Kind::RowBuffer:
        out_.line(d_.row_buffer(s.raw ? d_.storage_type(s.dtype) : d_.value_type(s.dtype), s.name,
                                s.extent, k_.config));
        return;
      case Stmt::Kind::RowStore:
        out_.line(
            fmt::format("{}[{}] = {};", s.name, d_.row_slot(s.index, k_.config), expr(*s.value)));
        return;
      case Stmt::Kind::CheckZero:
        out_.line(fmt::format("if ({}{} == 0) {}", s.mask ? expr(*s.mask) + " && " : "",
                              expr(*s.value), d_.set_error_flag(s.code)));
        return;
      case Stmt::Kind::CheckIndex:
        out_.line(fmt::format("if ({}({} < 0 || {} >= {})) {}",
                              s.mask ? expr(*s.mask) + " && " : "", expr(*s.value), expr(*s.value),
                              s.extent, d_.set_error_flag(s.code)));
        return;
      case Stmt::Kind::AccInit:
        if (s.order == AccOrder::Plain && s.extent > 0) {
          const std::string ty = acc_type(s.accumulator, s.acc_dtype);
          out_.line(fmt::format("alignas(64) {}::acc_t {}[{}];", ty, s.name, s.extent));
          out_.line(
              fmt::format("for ({0} {1}_k = 0; {1}_k < {2}; ++{1}_k) {1}[{1}_k] = {3}::init();",
                          d_.index_type(k_.config.index_bits), s.name, s.extent, ty));
        } else if (s.order == AccOrder::Plain) {
          out_.line(
              fmt::format("auto {} = {}::init();", s.name, acc_type(s.accumulator, s.acc_dtype)));
        } else if (s.order == AccOrder::Column && s.extent > 0) {
          out_.line(fmt::format("smelt::reduce::ColumnLanes<{}, {}> {};",
                                acc_type(s.accumulator, s.acc_dtype), s.extent, s.name));
        } else {
          out_.line(fmt::format("smelt::reduce::{}Order<{}> {};",
                                s.order == AccOrder::Inner ? "Inner" : "Column",
                                acc_type(s.accumulator, s.acc_dtype), s.name));
        }
        return;
      case Stmt::Kind::AccStep: {
        if (s.order == AccOrder::Column) {
          out_.line(fmt::format("{}.step({}, {});", s.name, s.index.str(), expr(*s.value)));
          return;
        }
        const std::string acc = s.lane ? fmt::format("{}[{}]", s.name, s.index.str()) : s.name;
        out_.line(fmt::format("{0} = {1}::step({0}, {2}{3});", acc,
                              acc_type(s.accumulator, s.acc_dtype), expr(*s.value),
                              s.indexed ? ", r" : ""));
        return;
      }
      case Stmt::Kind::AccRun:
        if (const std::string p = contiguous_pointer(s); !p.empty()) {
          const std::string fold =
              d_.contiguous_stretch(s.name, s.index.str(), s.range.extent.str(), s.extent, p);
          if (!fold.empty()) {
            out_.line(fold);
            return;
          }
        }
        // The element at index `r` is computed by a lambda the order struct
        // calls (inlined: contiguous runs vectorize); a float32 element of
        // Welford<double> as it is, not widened (see widened_float).
        {
          const Expr* narrow = s.value ? widened_float(s) : nullptr;
          out_.line(fmt::format("{}.stretch<{}>({}, {}, {}, [&]({} {}) -> {} {{", s.name,
                                s.contiguous ? "true" : "false", s.index.str(),
                                s.range.extent.str(), s.extent, d_.index_type(k_.config.index_bits),
                                s.range.var, d_.value_type(narrow ? DType::Float32 : s.acc_dtype)));
          out_.indent();
          if (!s.run_var.empty())
            out_.line(fmt::format("const {} {} = {} - ({});", d_.index_type(k_.config.index_bits),
                                  s.run_var, s.range.var, s.index.str()));
          body(s.body);
          out_.line(fmt::format("return {};", expr(narrow ? *narrow : *s.value)));
        }
        out_.dedent();
        out_.line("});");
        return;
      case Stmt::Kind::AccNext:
        out_.line(fmt::format("{}.next();", s.name));
        return;
      case Stmt::Kind::AccFinish:
        out_.line(fmt::format("const auto {} = {};", s.name,
                              d_.order_result(s.partial, s.lane ? s.index.str() : "")));
        return;
      case Stmt::Kind::SplitReduce: {
        Printer p(k_, d_);
        p.body(s.body);
        d_.split_reduce(s, acc_type(s.accumulator, s.acc_dtype), p.out_.str(), k_.config, out_);
        return;
      }
    }
  }

  const KernelDesc& k_;
  const Dialect& d_;
  CodeBuffer out_;
  int thread_ranges_ = 0;  // Thread ranges (a row's elements over its threads) open
  /// Temps holding a value rounded to float16/bfloat16: its dtype and the
  /// temp of its bits (see Stmt::Kind::Let).
  std::map<std::string, std::pair<DType, std::string>> half_bits_;
  /// Those temps' float before the rounding.
  std::map<std::string, std::string> half_source_;
  Staging staging_;  // of the innermost loop being printed
  int staged_count_ = 0;
};

}  // namespace

std::string print_kernel(const KernelDesc& k, const Dialect& d) { return Printer(k, d).run(); }

}  // namespace smelt::compiler
