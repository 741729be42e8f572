// Symbolic index expressions for the loop IR and the kernel printers, in the
// spirit of Inductor's sympy indexing: integer expressions over loop variables
// (each with an extent), size symbols (bound to a concrete value for now),
// constants, +, *, floor division and Python-style modulo. Every expression is
// kept in one canonical form by the smart constructors (a sum is a sorted
// linear combination of monomials plus a constant; a product is a sorted list
// of atoms times a coefficient; floordiv/mod fold whatever the bounds of their
// operands allow), so structural equality is semantic equality for the forms
// the code generator builds. The printers use it to map indices onto
// blocks/threads/vector lanes (coefficient(), free_vars()), to prove
// contiguity for vector loads (coefficient of the innermost variable is 1) and
// to choose 32- or 64-bit index arithmetic (fits_int32()).
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace smelt::compiler {

/// Inclusive integer range [lo, hi]. Computations saturate at the int64 limits
/// instead of overflowing, so a saturated bound is a conservative bound.
struct Bounds {
  int64_t lo = 0, hi = 0;
  bool operator==(const Bounds& o) const { return lo == o.lo && hi == o.hi; }
};

/// An immutable integer index expression (a shared node inside: cheap to copy).
///
/// Leaves: constants, loop variables `var(name, extent)` with 0 <= v < extent,
/// and size symbols `sym(name, value)` (printed by name, bound to `value`).
/// Inner nodes: Add (terms), Mul (factors), FloorDiv {a, b}, Mod {a, b}.
/// Divisors must be positive (an internal error otherwise); `floordiv` rounds
/// toward -inf and `mod` takes the sign of the divisor (Python semantics).
/// Integer overflow of a folded constant or coefficient is an internal error.
///
/// Canonical form (what the constructors guarantee):
///  - Add: operands are the non-constant terms sorted by structural order
///    (operator<), then the constant when it is non-zero; at least 2 operands.
///    A term is an atom or a Mul. Like terms are merged; products distribute
///    over sums (the expression is a polynomial in its atoms).
///  - Mul: operands are the atoms sorted by structural order, then the
///    coefficient when it is not 1; never a Const alone with one atom of
///    coefficient 1, never a zero coefficient.
///  - atoms are Var (extent >= 2), Sym, FloorDiv and Mod; `var(name, 1)` is
///    constant(0) (a size-1 loop only has index 0).
///  - FloorDiv / Mod rules: see floordiv() and mod().
class IndexExpr {
 public:
  enum class Kind { Const, Var, Sym, Add, Mul, FloorDiv, Mod };
  struct Node;

  /// constant(0).
  IndexExpr();
  static IndexExpr constant(int64_t v);
  /// Loop variable with 0 <= v < extent; extent >= 1. Extent 1 gives constant(0).
  static IndexExpr var(std::string name, int64_t extent);
  /// Size symbol, bound to `value` (bounds [value, value]); printed by name.
  static IndexExpr sym(std::string name, int64_t value);

  friend IndexExpr operator+(const IndexExpr& a, const IndexExpr& b);
  friend IndexExpr operator*(const IndexExpr& a, const IndexExpr& b);
  friend IndexExpr operator-(const IndexExpr& a, const IndexExpr& b);
  friend IndexExpr operator-(const IndexExpr& a);
  friend IndexExpr operator+(const IndexExpr& a, int64_t b);
  friend IndexExpr operator+(int64_t a, const IndexExpr& b);
  friend IndexExpr operator-(const IndexExpr& a, int64_t b);
  friend IndexExpr operator-(int64_t a, const IndexExpr& b);
  friend IndexExpr operator*(const IndexExpr& a, int64_t b);
  friend IndexExpr operator*(int64_t a, const IndexExpr& b);

  /// floor(a / b), b > 0. Simplifications:
  ///  - constants fold; a / 1 -> a; a / a -> 1;
  ///  - a / b -> 0 when 0 <= a.lo and a.hi < b.lo;
  ///  - (x / A) / B -> x / (A*B);
  ///  - for a single-term divisor D (c*atoms, c > 0): a = Q + R with Q the
  ///    terms divisible by D; (Q + R) / D -> Q/D + k when R / D is known to be
  ///    the constant k (R in [k*D, (k+1)*D) from the bounds; for a symbolic D
  ///    only k = 0). E.g. (x*4 + y) / 4 -> x for y in [0, 4), kept for y in [0, 5);
  ///  - constant D: a common factor g of every coefficient and D is cancelled:
  ///    (x*4 + y*2) / 8 -> (x*2 + y) / 4.
  friend IndexExpr floordiv(const IndexExpr& a, const IndexExpr& b);
  friend IndexExpr floordiv(const IndexExpr& a, int64_t b);
  /// a mod b (Python: result in [0, b)), b > 0. Simplifications:
  ///  - constants fold; a % 1 -> 0; a % a -> 0;
  ///  - a % b -> a when 0 <= a.lo and a.hi < b.lo;
  ///  - (x % M) % D -> x % D when D divides M;
  ///  - terms divisible by a single-term divisor D drop out: (x*4 + y) % 4 -> y % 4;
  ///    for a constant D every coefficient is reduced modulo D (x*5 % 4 -> x % 4);
  ///  - constant D: p = S + R with S's coefficients multiples of some c > 1
  ///    dividing D and 0 <= R < c: p % D -> S % D + R; a factor g of every
  ///    coefficient and of D comes out: (x*4 + y) % 12 -> (x % 3)*4 + y for y
  ///    in [0, 4) (a vector's lanes y beside a run offset that is a multiple of 4);
  ///  - constant D and a in [k*D, (k+1)*D): a % D -> a - k*D.
  friend IndexExpr mod(const IndexExpr& a, const IndexExpr& b);
  friend IndexExpr mod(const IndexExpr& a, int64_t b);

  Kind kind() const;
  /// Const: the value (internal error for any other kind).
  int64_t value() const;
  /// Var, Sym: the name (internal error for any other kind).
  const std::string& name() const;
  /// Var: the extent. Sym: its bound value. Internal error for any other kind.
  int64_t extent() const;
  /// Add: terms; Mul: factors; FloorDiv, Mod: {a, b}; leaves: empty.
  const std::vector<IndexExpr>& operands() const;
  bool is_const() const { return kind() == Kind::Const; }
  std::optional<int64_t> as_const() const;

  /// Value range from var extents, sym values and the operation rules
  /// (saturating). Cached: O(1).
  Bounds bounds() const;
  /// True when a Var or Sym of this name occurs.
  bool depends_on(const std::string& name) const;
  /// The extent of the Var of this name where it occurs; nullopt when it does not.
  std::optional<int64_t> var_extent(const std::string& name) const;
  /// Names of the Vars (not Syms) that occur, sorted, unique.
  std::vector<std::string> free_vars() const;
  /// Coefficient c when the expression is c*v + (terms not involving v), i.e.
  /// the stride of v; 0 when v does not occur; nullopt when v occurs
  /// non-linearly (under a div/mod, squared, or in a product with another
  /// Var). A coefficient made of size symbols is evaluated at their values.
  std::optional<int64_t> coefficient(const std::string& var) const;
  /// Same, as an expression (a product of syms and a constant).
  std::optional<IndexExpr> coefficient_expr(const std::string& var) const;

  /// Replaces every Var/Sym whose name is a key of `m`, re-simplifying.
  IndexExpr substitute(const std::map<std::string, IndexExpr>& m) const;
  /// Replaces every Sym by its constant value, simplified.
  IndexExpr bind_symbols() const;
  /// Value at `env` (Var and Sym values by name; a Sym missing from env takes
  /// its bound value; a Var missing is an internal error).
  int64_t eval(const std::map<std::string, int64_t>& env) const;

  /// C-like text: "x0*4 + x1", "(x0 + 3) / 5", "x % 7", "-x0*2 + x1 + 3".
  /// Generated code only divides non-negative operands, so C's / and % are
  /// printed. Parentheses only where C precedence needs them (and around a
  /// div/mod factor of a product). Deterministic.
  std::string str() const;
  /// Same, with each Var/Sym leaf printed as `leaf(leaf_expr)` (the dialect
  /// decides names and casts).
  std::string str(const std::function<std::string(const IndexExpr&)>& leaf) const;

  /// Structural hash of the canonical form. Cached: O(1).
  size_t hash() const;
  friend bool operator==(const IndexExpr& a, const IndexExpr& b);
  friend bool operator!=(const IndexExpr& a, const IndexExpr& b) { return !(a == b); }
  /// Deterministic structural total order (kind, then name/value, then operands);
  /// the order of terms and factors in the canonical form.
  friend bool operator<(const IndexExpr& a, const IndexExpr& b);
  /// True when the value and every intermediate value computed by the printed
  /// expression (every sub-expression, every partial sum) lies in
  /// [INT32_MIN, INT32_MAX].
  bool fits_int32() const;

 private:
  explicit IndexExpr(std::shared_ptr<const Node> n) : n_(std::move(n)) {}
  friend struct IndexExprBuilder;
  std::shared_ptr<const Node> n_;
};

std::ostream& operator<<(std::ostream& os, const IndexExpr& e);

}  // namespace smelt::compiler

template <>
struct std::hash<smelt::compiler::IndexExpr> {
  size_t operator()(const smelt::compiler::IndexExpr& e) const { return e.hash(); }
};
