// Symbolic index expressions: node storage, the smart constructors that keep
// every expression canonical (a polynomial over atoms: sorted monomials with
// merged coefficients; floordiv/mod rules driven by bounds), bounds, queries,
// substitution, evaluation and the C-like printer. See index_expr.h.
#include "compiler/lower/index_expr.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <set>

#include "smelt/error.h"

namespace smelt::compiler {

struct IndexExpr::Node {
  Kind kind = Kind::Const;
  int64_t value = 0;  // Const: value; Var: extent; Sym: bound value
  std::string name;   // Var, Sym
  std::vector<IndexExpr> ops;
  Bounds bounds;
  size_t hash = 0;
};

using Kind = IndexExpr::Kind;

namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();

int64_t saturate(__int128 v) {
  if (v > kMax) return kMax;
  if (v < kMin) return kMin;
  return static_cast<int64_t>(v);
}

int64_t checked_add(int64_t a, int64_t b) {
  int64_t r = 0;
  SMELT_INTERNAL_ASSERT(!__builtin_add_overflow(a, b, &r),
                        "index expression: {} + {} overflows int64", a, b);
  return r;
}

int64_t checked_mul(int64_t a, int64_t b) {
  int64_t r = 0;
  SMELT_INTERNAL_ASSERT(!__builtin_mul_overflow(a, b, &r),
                        "index expression: {} * {} overflows int64", a, b);
  return r;
}

/// floor(a / b) for b > 0.
int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  if (a % b != 0 && a < 0) --q;
  return q;
}

/// a mod b in [0, b) for b > 0.
int64_t py_mod(int64_t a, int64_t b) {
  int64_t r = a % b;
  return r < 0 ? r + b : r;
}

uint64_t abs_u(int64_t v) {
  return v < 0 ? 0 - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
}

size_t hash_combine(size_t seed, size_t v) {
  return seed ^ (v + 0x9e3779b97f4a7c15ULL + (seed << 6) + (seed >> 2));
}

Bounds add_bounds(Bounds a, Bounds b) {
  return {saturate(static_cast<__int128>(a.lo) + b.lo),
          saturate(static_cast<__int128>(a.hi) + b.hi)};
}

Bounds mul_bounds(Bounds a, Bounds b) {
  const __int128 c[4] = {static_cast<__int128>(a.lo) * b.lo, static_cast<__int128>(a.lo) * b.hi,
                         static_cast<__int128>(a.hi) * b.lo, static_cast<__int128>(a.hi) * b.hi};
  return {saturate(*std::min_element(c, c + 4)), saturate(*std::max_element(c, c + 4))};
}

/// floor(a / b) over a in A, b in B (B.lo >= 1): for fixed b the quotient is
/// monotone in a, for fixed a monotone in b, so the extremes are at corners.
Bounds floordiv_bounds(Bounds a, Bounds b) {
  const int64_t c[4] = {floor_div(a.lo, b.lo), floor_div(a.lo, b.hi), floor_div(a.hi, b.lo),
                        floor_div(a.hi, b.hi)};
  return {*std::min_element(c, c + 4), *std::max_element(c, c + 4)};
}

Bounds mod_bounds(Bounds a, Bounds b) {
  if (a.lo >= 0 && a.hi < b.lo) return a;
  if (b.lo == b.hi && floor_div(a.lo, b.lo) == floor_div(a.hi, b.lo))
    return {py_mod(a.lo, b.lo), py_mod(a.hi, b.lo)};
  Bounds r{0, b.hi - 1};
  if (a.lo >= 0) r.hi = std::min(r.hi, a.hi);
  return r;
}

}  // namespace

/// Builds nodes (computing their bounds and hash) and reads them.
struct IndexExprBuilder {
  static const IndexExpr::Node& of(const IndexExpr& e) { return *e.n_; }

  static IndexExpr make(Kind kind, int64_t value, std::string name, std::vector<IndexExpr> ops) {
    auto n = std::make_shared<IndexExpr::Node>();
    n->kind = kind;
    n->value = value;
    n->name = std::move(name);
    n->ops = std::move(ops);
    size_t h = hash_combine(std::hash<int>()(static_cast<int>(kind)), std::hash<int64_t>()(value));
    h = hash_combine(h, std::hash<std::string>()(n->name));
    for (const auto& o : n->ops) h = hash_combine(h, o.hash());
    n->hash = h;
    switch (kind) {
      case Kind::Const:
      case Kind::Sym:
        n->bounds = {value, value};
        break;
      case Kind::Var:
        n->bounds = {0, value - 1};
        break;
      case Kind::Add:
        n->bounds = {0, 0};
        for (const auto& o : n->ops) n->bounds = add_bounds(n->bounds, o.bounds());
        break;
      case Kind::Mul:
        n->bounds = {1, 1};
        for (const auto& o : n->ops) n->bounds = mul_bounds(n->bounds, o.bounds());
        break;
      case Kind::FloorDiv:
        n->bounds = floordiv_bounds(n->ops[0].bounds(), n->ops[1].bounds());
        break;
      case Kind::Mod:
        n->bounds = mod_bounds(n->ops[0].bounds(), n->ops[1].bounds());
        break;
    }
    return IndexExpr(std::move(n));
  }
};

namespace {

using B = IndexExprBuilder;

/// Structural three-way comparison: kind, then value/name, then operands.
int compare(const IndexExpr& a, const IndexExpr& b) {
  const auto& x = B::of(a);
  const auto& y = B::of(b);
  if (&x == &y) return 0;
  if (x.kind != y.kind) return x.kind < y.kind ? -1 : 1;
  if (x.kind == Kind::Var || x.kind == Kind::Sym) {
    if (int c = x.name.compare(y.name)) return c < 0 ? -1 : 1;
  }
  if (x.value != y.value) return x.value < y.value ? -1 : 1;
  const size_t n = std::min(x.ops.size(), y.ops.size());
  for (size_t i = 0; i < n; ++i)
    if (int c = compare(x.ops[i], y.ops[i])) return c;
  if (x.ops.size() != y.ops.size()) return x.ops.size() < y.ops.size() ? -1 : 1;
  return 0;
}

bool less(const IndexExpr& a, const IndexExpr& b) { return compare(a, b) < 0; }

// ---- Polynomial form: monomial (sorted atoms; empty = the constant) -> coefficient.

using Monomial = std::vector<IndexExpr>;

struct MonoLess {
  bool operator()(const Monomial& a, const Monomial& b) const {
    return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end(), less);
  }
};

using Poly = std::map<Monomial, int64_t, MonoLess>;

void poly_accumulate(Poly& p, const Monomial& m, int64_t c) {
  if (c == 0) return;
  auto [it, inserted] = p.emplace(m, c);
  if (!inserted) {
    it->second = checked_add(it->second, c);
    if (it->second == 0) p.erase(it);
  }
}

Poly to_poly(const IndexExpr& e) {
  const auto& n = B::of(e);
  Poly p;
  switch (n.kind) {
    case Kind::Const:
      poly_accumulate(p, {}, n.value);
      break;
    case Kind::Add:
      for (const auto& t : n.ops)
        for (const auto& [m, c] : to_poly(t)) poly_accumulate(p, m, c);
      break;
    case Kind::Mul: {
      Monomial m;
      int64_t c = 1;
      for (const auto& f : n.ops) {
        if (f.is_const())
          c = f.value();
        else
          m.push_back(f);
      }
      poly_accumulate(p, m, c);
      break;
    }
    default:
      poly_accumulate(p, {e}, 1);
  }
  return p;
}

Poly poly_mul(const Poly& a, const Poly& b) {
  Poly p;
  for (const auto& [ma, ca] : a)
    for (const auto& [mb, cb] : b) {
      Monomial m;
      m.reserve(ma.size() + mb.size());
      std::merge(ma.begin(), ma.end(), mb.begin(), mb.end(), std::back_inserter(m), less);
      poly_accumulate(p, m, checked_mul(ca, cb));
    }
  return p;
}

IndexExpr term_expr(const Monomial& m, int64_t c) {
  if (m.empty() || c == 0) return IndexExpr::constant(c);
  if (m.size() == 1 && c == 1) return m[0];
  std::vector<IndexExpr> ops = m;
  if (c != 1) ops.push_back(IndexExpr::constant(c));
  return B::make(Kind::Mul, 0, "", std::move(ops));
}

/// The canonical expression of a polynomial (no further rules applied).
IndexExpr from_poly(const Poly& p) {
  std::vector<IndexExpr> terms;
  int64_t constant = 0;
  for (const auto& [m, c] : p) {
    if (m.empty())
      constant = c;
    else
      terms.push_back(term_expr(m, c));
  }
  if (terms.empty()) return IndexExpr::constant(constant);
  if (terms.size() == 1 && constant == 0) return terms[0];
  if (constant != 0) terms.push_back(IndexExpr::constant(constant));
  return B::make(Kind::Add, 0, "", std::move(terms));
}

/// c*m / (dc*dm) as a term when it is one (dc divides c, dm is a sub-multiset of m).
std::optional<std::pair<Monomial, int64_t>> divide_term(const Monomial& m, int64_t c,
                                                        const Monomial& dm, int64_t dc) {
  if (c % dc != 0) return std::nullopt;
  Monomial rest;
  size_t j = 0;
  for (const auto& atom : m) {
    if (j < dm.size() && compare(atom, dm[j]) == 0)
      ++j;
    else
      rest.push_back(atom);
  }
  if (j != dm.size()) return std::nullopt;
  return std::make_pair(std::move(rest), c / dc);
}

/// The divisor as a single positive term c*atoms, if it is one.
std::optional<std::pair<Monomial, int64_t>> single_term(const IndexExpr& d) {
  Poly p = to_poly(d);
  if (p.size() != 1 || p.begin()->second <= 0) return std::nullopt;
  return *p.begin();
}

IndexExpr build(Poly p);

/// k*D*(a / D) + k*(a % D) -> k*a, wherever both parts occur in `p`.
void fold_divmod_identity(Poly& p) {
  for (bool changed = true; changed;) {
    changed = false;
    for (const auto& [m, k] : p) {
      if (m.size() != 1 || m[0].kind() != Kind::Mod) continue;
      const IndexExpr& a = m[0].operands()[0];
      const IndexExpr& d = m[0].operands()[1];
      Poly quot = to_poly(floordiv(a, d) * d * k);
      bool present = !quot.empty();
      for (const auto& [qm, qc] : quot) {
        auto it = p.find(qm);
        if (it == p.end() || it->second != qc) present = false;
      }
      if (!present) continue;
      Poly next = p;
      poly_accumulate(next, m, -k);
      for (const auto& [qm, qc] : quot) poly_accumulate(next, qm, -qc);
      for (const auto& [am, ac] : to_poly(a)) poly_accumulate(next, am, checked_mul(ac, k));
      p = std::move(next);
      changed = true;
      break;
    }
  }
}

/// Splits p = S + R for a constant divisor D where every coefficient of S is a
/// multiple of some c > 1 dividing D and 0 <= R < c. Then floor(p / D) ==
/// floor(S / D) and p % D == S % D + R: S is a multiple of c, and so is D.
/// Tried with R = the terms of smallest |coefficient| first (a row's offset
/// inside a larger stride, e.g. (o*64 + r) / 1024 with r < 64 -> o / 16).
std::optional<std::pair<Poly, Poly>> split_small(const Poly& p, int64_t D) {
  std::vector<std::pair<Monomial, int64_t>> terms(p.begin(), p.end());
  std::stable_sort(terms.begin(), terms.end(),
                   [](const auto& a, const auto& b) { return abs_u(a.second) < abs_u(b.second); });
  for (size_t k = 1; k < terms.size(); ++k) {
    Poly small, big;
    uint64_t c = static_cast<uint64_t>(D);
    for (size_t i = 0; i < terms.size(); ++i) {
      if (i < k) {
        poly_accumulate(small, terms[i].first, terms[i].second);
      } else {
        poly_accumulate(big, terms[i].first, terms[i].second);
        c = std::gcd(c, abs_u(terms[i].second));
      }
    }
    if (c <= 1) continue;
    const Bounds rb = from_poly(small).bounds();
    if (rb.lo >= 0 && static_cast<uint64_t>(rb.hi) < c) return std::make_pair(big, small);
  }
  return std::nullopt;
}

/// k*(a % D) + k*D*((a / D) % M) -> k*(a % (D*M)) for constants D and M,
/// wherever both parts occur in `p`: the two innermost of dims unravelled from
/// one index (w = r % 56 and h = r / 56 % 56 of a contiguous 56x56 plane)
/// merged back into one (r % 3136), one division fewer per element.
void fold_mod_chain(Poly& p) {
  for (bool changed = true; changed;) {
    changed = false;
    for (const auto& [m, k] : p) {
      if (m.size() != 1 || m[0].kind() != Kind::Mod) continue;
      const IndexExpr& a = m[0].operands()[0];
      const auto D = m[0].operands()[1].as_const();
      if (!D || *D <= 1) continue;
      const IndexExpr quotient = floordiv(a, *D);
      for (const auto& [m2, k2] : p) {
        if (m2.size() != 1 || m2[0].kind() != Kind::Mod || m2[0].operands()[0] != quotient)
          continue;
        const auto M = m2[0].operands()[1].as_const();
        if (!M || *M <= 1 || k2 != checked_mul(k, *D)) continue;
        Poly next = p;
        poly_accumulate(next, m, -k);
        poly_accumulate(next, m2, -k2);
        for (const auto& [am, ac] : to_poly(mod(a, checked_mul(*D, *M)) * k))
          poly_accumulate(next, am, ac);
        p = std::move(next);
        changed = true;
        break;
      }
      if (changed) break;
    }
  }
}

IndexExpr build(Poly p) {
  fold_divmod_identity(p);
  fold_mod_chain(p);
  return from_poly(p);
}

using LeafFn = std::function<std::string(const IndexExpr&)>;

std::string print(const IndexExpr& e, const LeafFn* leaf);

/// A product's text without its sign; *neg tells the sign of its coefficient.
std::string print_product(const IndexExpr& e, const LeafFn* leaf, bool* neg) {
  std::string s;
  int64_t c = 1;
  for (const auto& f : e.operands()) {
    if (f.is_const()) {
      c = f.value();
      continue;
    }
    const bool paren = f.kind() == Kind::FloorDiv || f.kind() == Kind::Mod;
    if (!s.empty()) s += "*";
    s += paren ? "(" + print(f, leaf) + ")" : print(f, leaf);
  }
  *neg = c < 0;
  if (abs_u(c) != 1) s += "*" + std::to_string(abs_u(c));
  return s;
}

/// A term of a sum without its sign.
std::string print_unsigned(const IndexExpr& e, const LeafFn* leaf, bool* neg) {
  if (e.is_const()) {
    *neg = e.value() < 0;
    return std::to_string(abs_u(e.value()));
  }
  if (e.kind() == Kind::Mul) return print_product(e, leaf, neg);
  *neg = false;
  return print(e, leaf);
}

std::string print(const IndexExpr& e, const LeafFn* leaf) {
  switch (e.kind()) {
    case Kind::Const:
      return std::to_string(e.value());
    case Kind::Var:
    case Kind::Sym:
      return leaf ? (*leaf)(e) : e.name();
    case Kind::Add: {
      std::string s;
      for (const auto& t : e.operands()) {
        bool neg = false;
        std::string body = print_unsigned(t, leaf, &neg);
        if (s.empty())
          s = neg ? "-" + body : body;
        else
          s += (neg ? " - " : " + ") + body;
      }
      return s;
    }
    case Kind::Mul: {
      bool neg = false;
      std::string body = print_product(e, leaf, &neg);
      return neg ? "-" + body : body;
    }
    case Kind::FloorDiv:
    case Kind::Mod: {
      const IndexExpr& a = e.operands()[0];
      const IndexExpr& b = e.operands()[1];
      std::string lhs = print(a, leaf);
      if (a.kind() == Kind::Add) lhs = "(" + lhs + ")";
      std::string rhs = print(b, leaf);
      if (b.kind() != Kind::Var && b.kind() != Kind::Sym && b.kind() != Kind::Const)
        rhs = "(" + rhs + ")";
      return lhs + (e.kind() == Kind::FloorDiv ? " / " : " % ") + rhs;
    }
  }
  return "?";
}

using LeafMap = std::function<std::optional<IndexExpr>(const IndexExpr&)>;

IndexExpr rebuild(const IndexExpr& e, const LeafMap& f) {
  switch (e.kind()) {
    case Kind::Const:
      return e;
    case Kind::Var:
    case Kind::Sym:
      return f(e).value_or(e);
    default:
      break;
  }
  const auto& ops = e.operands();
  std::vector<IndexExpr> next;
  next.reserve(ops.size());
  bool changed = false;
  for (const auto& o : ops) {
    next.push_back(rebuild(o, f));
    changed |= !(next.back() == o);
  }
  if (!changed) return e;
  switch (e.kind()) {
    case Kind::Add: {
      IndexExpr r;
      for (const auto& o : next) r = r + o;
      return r;
    }
    case Kind::Mul: {
      IndexExpr r = IndexExpr::constant(1);
      for (const auto& o : next) r = r * o;
      return r;
    }
    case Kind::FloorDiv:
      return floordiv(next[0], next[1]);
    default:
      return mod(next[0], next[1]);
  }
}

void collect_vars(const IndexExpr& e, std::set<std::string>& out) {
  if (e.kind() == Kind::Var) out.insert(e.name());
  for (const auto& o : e.operands()) collect_vars(o, out);
}

bool fits32(Bounds b) {
  return b.lo >= std::numeric_limits<int32_t>::min() && b.hi <= std::numeric_limits<int32_t>::max();
}

bool fits_int32_rec(const IndexExpr& e) {
  if (!fits32(e.bounds())) return false;
  Bounds acc = e.kind() == Kind::Mul ? Bounds{1, 1} : Bounds{0, 0};
  for (const auto& o : e.operands()) {
    if (!fits_int32_rec(o)) return false;
    if (e.kind() == Kind::Add) acc = add_bounds(acc, o.bounds());
    if (e.kind() == Kind::Mul) acc = mul_bounds(acc, o.bounds());
    if (!fits32(acc)) return false;
  }
  return true;
}

const IndexExpr& zero() {
  static const IndexExpr z = IndexExpr::constant(0);
  return z;
}

}  // namespace

// ---- Leaves and accessors.

IndexExpr::IndexExpr() : IndexExpr(zero()) {}

IndexExpr IndexExpr::constant(int64_t v) { return B::make(Kind::Const, v, "", {}); }

IndexExpr IndexExpr::var(std::string name, int64_t extent) {
  SMELT_INTERNAL_ASSERT(extent >= 1, "IndexExpr::var: extent of '{}' is {}, must be >= 1", name,
                        extent);
  if (extent == 1) return constant(0);
  return B::make(Kind::Var, extent, std::move(name), {});
}

IndexExpr IndexExpr::sym(std::string name, int64_t value) {
  return B::make(Kind::Sym, value, std::move(name), {});
}

IndexExpr::Kind IndexExpr::kind() const { return n_->kind; }

int64_t IndexExpr::value() const {
  SMELT_INTERNAL_ASSERT(n_->kind == Kind::Const, "IndexExpr::value of non-constant {}", str());
  return n_->value;
}

const std::string& IndexExpr::name() const {
  SMELT_INTERNAL_ASSERT(n_->kind == Kind::Var || n_->kind == Kind::Sym,
                        "IndexExpr::name of non-leaf {}", str());
  return n_->name;
}

int64_t IndexExpr::extent() const {
  SMELT_INTERNAL_ASSERT(n_->kind == Kind::Var || n_->kind == Kind::Sym,
                        "IndexExpr::extent of non-leaf {}", str());
  return n_->value;
}

const std::vector<IndexExpr>& IndexExpr::operands() const { return n_->ops; }

std::optional<int64_t> IndexExpr::as_const() const {
  if (n_->kind != Kind::Const) return std::nullopt;
  return n_->value;
}

Bounds IndexExpr::bounds() const { return n_->bounds; }

size_t IndexExpr::hash() const { return n_->hash; }

// ---- Arithmetic.

IndexExpr operator+(const IndexExpr& a, const IndexExpr& b) {
  auto ca = a.as_const(), cb = b.as_const();
  if (ca && cb) return IndexExpr::constant(checked_add(*ca, *cb));
  if (cb && *cb == 0) return a;
  if (ca && *ca == 0) return b;
  Poly p = to_poly(a);
  for (const auto& [m, c] : to_poly(b)) poly_accumulate(p, m, c);
  return build(std::move(p));
}

IndexExpr operator*(const IndexExpr& a, const IndexExpr& b) {
  auto ca = a.as_const(), cb = b.as_const();
  if (ca && cb) return IndexExpr::constant(checked_mul(*ca, *cb));
  if (cb && *cb == 1) return a;
  if (ca && *ca == 1) return b;
  return build(poly_mul(to_poly(a), to_poly(b)));
}

IndexExpr operator-(const IndexExpr& a) { return a * IndexExpr::constant(-1); }
IndexExpr operator-(const IndexExpr& a, const IndexExpr& b) { return a + (-b); }
IndexExpr operator+(const IndexExpr& a, int64_t b) { return a + IndexExpr::constant(b); }
IndexExpr operator+(int64_t a, const IndexExpr& b) { return IndexExpr::constant(a) + b; }
IndexExpr operator-(const IndexExpr& a, int64_t b) { return a - IndexExpr::constant(b); }
IndexExpr operator-(int64_t a, const IndexExpr& b) { return IndexExpr::constant(a) - b; }
IndexExpr operator*(const IndexExpr& a, int64_t b) { return a * IndexExpr::constant(b); }
IndexExpr operator*(int64_t a, const IndexExpr& b) { return IndexExpr::constant(a) * b; }

IndexExpr floordiv(const IndexExpr& a, const IndexExpr& b) {
  const Bounds bb = b.bounds();
  SMELT_INTERNAL_ASSERT(bb.lo >= 1, "floordiv: divisor {} must be positive (bounds [{}, {}])",
                        b.str(), bb.lo, bb.hi);
  auto ca = a.as_const(), cb = b.as_const();
  if (ca && cb) return IndexExpr::constant(floor_div(*ca, *cb));
  if (cb && *cb == 1) return a;
  const Bounds ab = a.bounds();
  if (ab.lo >= 0 && ab.hi < bb.lo) return IndexExpr::constant(0);
  if (a == b) return IndexExpr::constant(1);
  if (a.kind() == Kind::FloorDiv) return floordiv(a.operands()[0], a.operands()[1] * b);
  if (auto d = single_term(b)) {
    const auto& [dm, dc] = *d;
    const Poly p = to_poly(a);
    Poly q, r;
    for (const auto& [m, c] : p) {
      if (auto t = divide_term(m, c, dm, dc))
        poly_accumulate(q, t->first, t->second);
      else
        poly_accumulate(r, m, c);
    }
    // (Q*D + R) / D == Q + R / D exactly; keep the split only when R / D is a constant.
    if (!q.empty() || dm.empty()) {
      const Bounds rb = from_poly(r).bounds();
      std::optional<int64_t> k;
      if (dm.empty()) {
        if (floor_div(rb.lo, dc) == floor_div(rb.hi, dc)) k = floor_div(rb.lo, dc);
      } else if (rb.lo >= 0 && rb.hi < bb.lo) {
        k = 0;
      }
      if (k) return build(std::move(q)) + *k;
    }
    if (dm.empty())
      if (auto split = split_small(p, dc)) return floordiv(build(std::move(split->first)), b);
    if (dm.empty()) {
      uint64_t g = static_cast<uint64_t>(dc);
      for (const auto& [m, c] : p) g = std::gcd(g, abs_u(c));
      if (g > 1) {
        Poly reduced;
        for (const auto& [m, c] : p) poly_accumulate(reduced, m, c / static_cast<int64_t>(g));
        return floordiv(from_poly(reduced), dc / static_cast<int64_t>(g));
      }
    }
  }
  return B::make(Kind::FloorDiv, 0, "", {a, b});
}

IndexExpr mod(const IndexExpr& a, const IndexExpr& b) {
  const Bounds bb = b.bounds();
  SMELT_INTERNAL_ASSERT(bb.lo >= 1, "mod: divisor {} must be positive (bounds [{}, {}])", b.str(),
                        bb.lo, bb.hi);
  auto ca = a.as_const(), cb = b.as_const();
  if (ca && cb) return IndexExpr::constant(py_mod(*ca, *cb));
  if (cb && *cb == 1) return IndexExpr::constant(0);
  const Bounds ab = a.bounds();
  if (ab.lo >= 0 && ab.hi < bb.lo) return a;
  if (a == b) return IndexExpr::constant(0);
  if (auto d = single_term(b)) {
    const auto& [dm, dc] = *d;
    // (x % M) % D -> x % D when D divides M.
    if (a.kind() == Kind::Mod) {
      if (auto inner = single_term(a.operands()[1]))
        if (divide_term(inner->first, inner->second, dm, dc)) return mod(a.operands()[0], b);
    }
    // Terms that are multiples of D drop out; a constant D reduces every coefficient.
    Poly r;
    bool changed = false;
    for (const auto& [m, c] : to_poly(a)) {
      if (divide_term(m, c, dm, dc)) {
        changed = true;
        continue;
      }
      const int64_t c2 = dm.empty() ? py_mod(c, dc) : c;
      changed |= c2 != c;
      poly_accumulate(r, m, c2);
    }
    if (changed) return mod(build(std::move(r)), b);
    if (dm.empty())
      if (auto split = split_small(to_poly(a), dc))
        return mod(build(std::move(split->first)), b) + build(std::move(split->second));
    // A factor g common to every coefficient and D comes out:
    // (x*4 + y*8) % 12 -> (x + y*2) % 3 * 4 (a multiple of g, visibly).
    if (dm.empty()) {
      const Poly p = to_poly(a);
      uint64_t g = static_cast<uint64_t>(dc);
      for (const auto& [m, c] : p) g = std::gcd(g, abs_u(c));
      if (g > 1 && p.size() > 0 && !a.is_const()) {
        Poly reduced;
        for (const auto& [m, c] : p) poly_accumulate(reduced, m, c / static_cast<int64_t>(g));
        return mod(from_poly(reduced), dc / static_cast<int64_t>(g)) * static_cast<int64_t>(g);
      }
    }
    if (dm.empty() && floor_div(ab.lo, dc) == floor_div(ab.hi, dc))
      return a - checked_mul(floor_div(ab.lo, dc), dc);
  }
  return B::make(Kind::Mod, 0, "", {a, b});
}

IndexExpr floordiv(const IndexExpr& a, int64_t b) { return floordiv(a, IndexExpr::constant(b)); }
IndexExpr mod(const IndexExpr& a, int64_t b) { return mod(a, IndexExpr::constant(b)); }

// ---- Queries.

std::optional<int64_t> IndexExpr::var_extent(const std::string& name) const {
  if (n_->kind == Kind::Var && n_->name == name) return extent();
  for (const auto& o : n_->ops)
    if (auto e = o.var_extent(name)) return e;
  return std::nullopt;
}

bool IndexExpr::depends_on(const std::string& name) const {
  if ((n_->kind == Kind::Var || n_->kind == Kind::Sym) && n_->name == name) return true;
  for (const auto& o : n_->ops)
    if (o.depends_on(name)) return true;
  return false;
}

std::vector<std::string> IndexExpr::free_vars() const {
  std::set<std::string> s;
  collect_vars(*this, s);
  return {s.begin(), s.end()};
}

std::optional<IndexExpr> IndexExpr::coefficient_expr(const std::string& var) const {
  IndexExpr sum;
  for (const auto& [m, c] : to_poly(*this)) {
    int count = 0;
    Monomial rest;
    for (const auto& atom : m) {
      if (atom.kind() == Kind::Var && atom.name() == var) {
        ++count;
      } else if (atom.depends_on(var)) {
        return std::nullopt;  // under a div/mod
      } else {
        rest.push_back(atom);
      }
    }
    if (count == 0) continue;
    if (count > 1) return std::nullopt;
    for (const auto& atom : rest)
      if (!atom.free_vars().empty()) return std::nullopt;  // product with another var
    sum = sum + term_expr(rest, c);
  }
  return sum;
}

std::optional<int64_t> IndexExpr::coefficient(const std::string& var) const {
  auto e = coefficient_expr(var);
  if (!e) return std::nullopt;
  auto c = e->bind_symbols().as_const();
  SMELT_INTERNAL_ASSERT(c.has_value(), "coefficient of {} in {} is not constant", var, str());
  return c;
}

IndexExpr IndexExpr::substitute(const std::map<std::string, IndexExpr>& m) const {
  return rebuild(*this, [&](const IndexExpr& leaf) -> std::optional<IndexExpr> {
    auto it = m.find(leaf.name());
    if (it == m.end()) return std::nullopt;
    return it->second;
  });
}

IndexExpr IndexExpr::bind_symbols() const {
  return rebuild(*this, [](const IndexExpr& leaf) -> std::optional<IndexExpr> {
    if (leaf.kind() != Kind::Sym) return std::nullopt;
    return IndexExpr::constant(leaf.extent());
  });
}

int64_t IndexExpr::eval(const std::map<std::string, int64_t>& env) const {
  switch (n_->kind) {
    case Kind::Const:
      return n_->value;
    case Kind::Var:
    case Kind::Sym: {
      auto it = env.find(n_->name);
      if (it != env.end()) return it->second;
      SMELT_INTERNAL_ASSERT(n_->kind == Kind::Sym, "IndexExpr::eval: no value for variable '{}'",
                            n_->name);
      return n_->value;
    }
    case Kind::Add: {
      int64_t r = 0;
      for (const auto& o : n_->ops) r = checked_add(r, o.eval(env));
      return r;
    }
    case Kind::Mul: {
      int64_t r = 1;
      for (const auto& o : n_->ops) r = checked_mul(r, o.eval(env));
      return r;
    }
    case Kind::FloorDiv:
    case Kind::Mod: {
      const int64_t a = n_->ops[0].eval(env), b = n_->ops[1].eval(env);
      SMELT_INTERNAL_ASSERT(b > 0, "IndexExpr::eval: divisor {} of {} is {}", n_->ops[1].str(),
                            str(), b);
      return n_->kind == Kind::FloorDiv ? floor_div(a, b) : py_mod(a, b);
    }
  }
  return 0;
}

std::string IndexExpr::str() const { return print(*this, nullptr); }

std::string IndexExpr::str(const std::function<std::string(const IndexExpr&)>& leaf) const {
  return print(*this, &leaf);
}

bool IndexExpr::fits_int32() const { return fits_int32_rec(*this); }

bool operator==(const IndexExpr& a, const IndexExpr& b) {
  if (a.n_ == b.n_) return true;
  if (a.hash() != b.hash()) return false;
  return compare(a, b) == 0;
}

bool operator<(const IndexExpr& a, const IndexExpr& b) { return compare(a, b) < 0; }

std::ostream& operator<<(std::ostream& os, const IndexExpr& e) { return os << e.str(); }

}  // namespace smelt::compiler
