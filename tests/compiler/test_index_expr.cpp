// Device-free tests of the symbolic index expressions (compiler/lower/index_expr.h):
// canonical forms and equality, each floordiv/mod simplification rule with
// its firing and non-firing case, bounds, coefficient() as used for
// contiguity, fits_int32, exact printed text, and a property test comparing
// the simplified expressions with a reference evaluation of the unsimplified
// trees at every point of small ranges.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <map>
#include <random>
#include <sstream>

#include "compiler/lower/index_expr.h"
#include "compiler/lower/loop_ir.h"
#include "smelt/error.h"

using smelt::compiler::Bounds;
using smelt::compiler::IndexExpr;
using Kind = IndexExpr::Kind;

namespace {

IndexExpr V(const std::string& name, int64_t extent) { return IndexExpr::var(name, extent); }

}  // namespace

// ---- Canonical forms and equality.

TEST(IndexExprCanonical, SumsAreCommutativeAndAssociative) {
  IndexExpr x = V("x", 10), y = V("y", 10), z = V("z", 10);
  EXPECT_EQ(x + y, y + x);
  EXPECT_EQ((x + y) + z, x + (y + z));
  EXPECT_EQ((x + y).hash(), (y + x).hash());
  EXPECT_EQ((z + x + y).str(), "x + y + z");
  EXPECT_NE(x + 1, x + 2);
  EXPECT_NE(x + y, x + z);
}

TEST(IndexExprCanonical, LikeTermsMerge) {
  IndexExpr x = V("x", 10), y = V("y", 10);
  EXPECT_EQ(x * 3 + y + x * 2, x * 5 + y);
  EXPECT_EQ((x * 3 + y + x * 2).str(), "x*5 + y");
  EXPECT_EQ(x - x, IndexExpr::constant(0));
  EXPECT_TRUE((x + y - x - y).is_const());
  EXPECT_EQ((x + 2 + 3).str(), "x + 5");
  EXPECT_EQ((x + 3 - 3).kind(), Kind::Var);
}

TEST(IndexExprCanonical, ProductsDistributeAndSort) {
  IndexExpr x = V("x", 10), y = V("y", 10);
  EXPECT_EQ(x * y, y * x);
  EXPECT_EQ(2 * (x + y), x * 2 + y * 2);
  EXPECT_EQ((2 * (x + y)).str(), "x*2 + y*2");
  EXPECT_EQ((x + 1) * (y + 2), x * y + x * 2 + y + 2);
  EXPECT_EQ(((x + 1) * (y + 2)).str(), "x*2 + x*y + y + 2");
  IndexExpr p = (y * 3) * x;
  ASSERT_EQ(p.kind(), Kind::Mul);
  ASSERT_EQ(p.operands().size(), 3u);
  EXPECT_EQ(p.operands()[0], x);
  EXPECT_EQ(p.operands()[1], y);
  EXPECT_EQ(p.operands()[2].as_const(), 3);
}

TEST(IndexExprCanonical, IdentitiesFold) {
  IndexExpr x = V("x", 10);
  EXPECT_EQ(IndexExpr(), IndexExpr::constant(0));
  EXPECT_EQ(x + 0, x);
  EXPECT_EQ(0 + x, x);
  EXPECT_EQ(x * 1, x);
  EXPECT_EQ((x * 0).as_const(), 0);
  EXPECT_EQ(floordiv(x, 1), x);
  EXPECT_EQ(mod(x, 1).as_const(), 0);
  EXPECT_EQ((IndexExpr::constant(6) * 7).as_const(), 42);
  EXPECT_EQ(floordiv(IndexExpr::constant(-7), 2).as_const(), -4);
  EXPECT_EQ(mod(IndexExpr::constant(-7), 3).as_const(), 2);
}

TEST(IndexExprCanonical, SizeOneLoopIsZero) {
  IndexExpr i = V("i", 1), j = V("j", 4);
  EXPECT_EQ(i.as_const(), 0);
  EXPECT_EQ((i * 1 + 0).str(), "0");
  EXPECT_EQ((i * 4 + j).str(), "j");
  EXPECT_EQ(mod(i, 3).as_const(), 0);
  EXPECT_EQ((i * 4 + j).free_vars(), std::vector<std::string>{"j"});
}

TEST(IndexExprCanonical, LeafAccessors) {
  IndexExpr x = V("x", 7), s = IndexExpr::sym("s0", 12);
  EXPECT_EQ(x.kind(), Kind::Var);
  EXPECT_EQ(x.name(), "x");
  EXPECT_EQ(x.extent(), 7);
  EXPECT_EQ(s.kind(), Kind::Sym);
  EXPECT_EQ(s.name(), "s0");
  EXPECT_EQ(s.extent(), 12);
  EXPECT_FALSE(s.is_const());
  EXPECT_EQ((x * s).str(), "x*s0");
  EXPECT_NE(IndexExpr::sym("s0", 12), IndexExpr::sym("s0", 13));
  EXPECT_THROW(IndexExpr::var("bad", 0), smelt::Error);
  EXPECT_THROW(floordiv(x, x - 3), smelt::Error);  // divisor not positive
}

// ---- floordiv rules.

TEST(IndexExprFloorDiv, SplitsDivisibleTermsWhenRestIsBounded) {
  IndexExpr x = V("x", 10);
  EXPECT_EQ(floordiv(x * 4 + V("y", 4), 4), x);
  IndexExpr kept = floordiv(x * 4 + V("y", 5), 4);
  EXPECT_EQ(kept.kind(), Kind::FloorDiv);
  EXPECT_EQ(kept.str(), "(x*4 + y) / 4");
  EXPECT_EQ(floordiv(x * 4 + 3, 4), x);
  EXPECT_EQ(floordiv(x * 4 + 5, 4), x + 1);
  EXPECT_EQ(floordiv(x * 8 + V("y", 4), 4), x * 2);
  EXPECT_EQ(floordiv(x * 4 + V("y", 10), 3).str(), "(x*4 + y) / 3");
}

TEST(IndexExprFloorDiv, SmallDividendIsZero) {
  EXPECT_EQ(floordiv(V("x", 4), 4).as_const(), 0);
  EXPECT_EQ(floordiv(V("x", 5), 4).str(), "x / 4");
  EXPECT_EQ(floordiv(V("x", 4) + 1, 4).str(), "(x + 1) / 4");
  IndexExpr y = V("y", 3);
  EXPECT_EQ(floordiv(V("x", 2), y + 2).as_const(), 0);  // divisor >= 2 > x
  EXPECT_EQ(floordiv(V("x", 3), y + 2).str(), "x / (y + 2)");
}

TEST(IndexExprFloorDiv, NestedDivisionsCombine) {
  IndexExpr x = V("x", 1000);
  EXPECT_EQ(floordiv(floordiv(x, 4), 3), floordiv(x, 12));
  EXPECT_EQ(floordiv(floordiv(x, 4), 3).str(), "x / 12");
  EXPECT_EQ(floordiv(x + 1, x + 1).as_const(), 1);
}

TEST(IndexExprFloorDiv, CommonFactorCancels) {
  IndexExpr x = V("x", 100), y = V("y", 100);
  EXPECT_EQ(floordiv(x * 4 + y * 2, 8), floordiv(x * 2 + y, 4));
  EXPECT_EQ(floordiv(x * 4 + y * 2, 8).str(), "(x*2 + y) / 4");
  EXPECT_EQ(floordiv(x * 4 + y * 3, 8).str(), "(x*4 + y*3) / 8");
}

TEST(IndexExprFloorDiv, SymbolicDivisor) {
  IndexExpr s = IndexExpr::sym("s", 8), x = V("x", 10);
  EXPECT_EQ(floordiv(x * s + V("y", 8), s), x);
  EXPECT_EQ(floordiv(x * s + V("y", 9), s).str(), "(x*s + y) / s");
  EXPECT_EQ(floordiv(V("z", 20), s).str(), "z / s");
}

TEST(IndexExprFloorDiv, ReshapeDecomposition) {
  // A row-major [2, 3, 5] index viewed as [6, 5]: the div/mod recovers the parts.
  IndexExpr i = V("i", 2), j = V("j", 3), k = V("k", 5);
  IndexExpr flat = i * 15 + j * 5 + k;
  EXPECT_EQ(floordiv(flat, 5), i * 3 + j);
  EXPECT_EQ(mod(flat, 5), k);
  EXPECT_EQ(mod(floordiv(flat, 5), 3), j);
  EXPECT_EQ(floordiv(flat, 15), i);
}

// ---- mod rules.

TEST(IndexExprMod, MultiplesOfTheDivisorDropOut) {
  IndexExpr x = V("x", 10);
  EXPECT_EQ(mod(x * 4 + V("y", 4), 4), V("y", 4));
  EXPECT_EQ(mod(x * 4 + V("y", 5), 4).str(), "y % 4");
  EXPECT_EQ(mod(x * 5, 4).str(), "x % 4");
  EXPECT_EQ(mod(x * 3 + 9, 4).str(), "(x*3 + 1) % 4");
  EXPECT_EQ(mod(x * 8, 4).as_const(), 0);
  IndexExpr s = IndexExpr::sym("s", 6);
  EXPECT_EQ(mod(x * s + V("y", 20), s).str(), "y % s");
}

// A vector's lane beside a run offset that is a multiple of the vector
// width: the quotient and remainder of a row position r = u*4 + v over runs
// of 3136 (batch_norm's H*W) split into u's and v's parts, every value equal.
TEST(IndexExprMod, CommonFactorComesOutAndLanesSplitOff) {
  IndexExpr x = V("x", 100), y = V("y", 10);
  EXPECT_EQ(mod(x * 4 + y * 8, 12).str(), "((x + y*2) % 3)*4");
  IndexExpr u = V("u", 50176), v = V("v", 4);
  const IndexExpr r = u * 4 + v;
  EXPECT_EQ(floordiv(r, 3136).str(), "u / 784");
  EXPECT_EQ(mod(r, 3136).str(), "v + (u % 784)*4");
  for (int64_t uu : {0, 1, 783, 784, 785, 50175})
    for (int64_t vv = 0; vv < 4; ++vv) {
      const std::map<std::string, int64_t> env{{"u", uu}, {"v", vv}};
      EXPECT_EQ(floordiv(r, 3136).eval(env), (uu * 4 + vv) / 3136);
      EXPECT_EQ(mod(r, 3136).eval(env), (uu * 4 + vv) % 3136);
    }
}

// Property: sums whose coefficients share a factor with the divisor (the
// common-factor rule), some with a lane term beside them (r = u*vec + v),
// negative coefficients and constants too: floordiv and mod as simplified
// equal floor division and modulo at every point.
TEST(IndexExprMod, CommonFactorSumsAgreeWithFloorModuloEverywhere) {
  std::mt19937 rng(7);
  auto uni = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  auto floor_div = [](int64_t a, int64_t b) { return a / b - (a % b != 0 && (a < 0) != (b < 0)); };
  int points = 0;
  for (int iter = 0; iter < 2000; ++iter) {
    const int64_t g = std::vector<int64_t>{2, 3, 4, 8}[static_cast<size_t>(uni(0, 3))];
    const int64_t d = g * uni(1, 12) * (uni(0, 3) == 0 ? g : 1);
    const int64_t ex = uni(1, 9), ey = uni(1, 9), ev = uni(1, 2 * g);
    const int64_t cx = g * uni(-3, 5), cy = g * uni(-2, 6), c0 = g * uni(-2, 3);
    const int64_t cv = uni(0, 1);  // a lane term v (coefficient 1) or none
    const IndexExpr e = V("x", ex) * cx + V("y", ey) * cy + V("v", ev) * cv + c0;
    const IndexExpr q = floordiv(e, d), m = mod(e, d);
    SCOPED_TRACE(e.str() + " by " + std::to_string(d) + ": " + q.str() + ", " + m.str());
    for (int64_t x = 0; x < ex; ++x)
      for (int64_t y = 0; y < ey; ++y)
        for (int64_t v = 0; v < ev; ++v) {
          const std::map<std::string, int64_t> env{{"x", x}, {"y", y}, {"v", v}};
          const int64_t a = x * cx + y * cy + v * cv + c0;
          ASSERT_EQ(q.eval(env), floor_div(a, d)) << "x=" << x << " y=" << y << " v=" << v;
          ASSERT_EQ(m.eval(env), a - floor_div(a, d) * d) << "x=" << x << " y=" << y << " v=" << v;
          ++points;
        }
  }
  EXPECT_GT(points, 50000);
}

TEST(IndexExprMod, SmallDividendIsKept) {
  EXPECT_EQ(mod(V("x", 7), 7), V("x", 7));
  EXPECT_EQ(mod(V("x", 8), 7).str(), "x % 7");
  EXPECT_EQ(mod(V("x", 3) + 5, 4), V("x", 3) + 1);  // 5 % 4, then x + 1 < 4
  EXPECT_EQ(mod(V("x", 4) + 4, 8), V("x", 4) + 4);
  EXPECT_EQ(mod(V("x", 4) + 8, 6), V("x", 4) + 2);  // x + 8 in [8, 12): subtract 6
  EXPECT_EQ(mod(V("x", 5) + 8, 6).str(), "(x + 2) % 6");
}

TEST(IndexExprMod, NestedModuli) {
  IndexExpr x = V("x", 100);
  EXPECT_EQ(mod(mod(x, 12), 4), mod(x, 4));
  EXPECT_EQ(mod(mod(x, 10), 4).str(), "x % 10 % 4");
  EXPECT_EQ(mod(mod(x, 4), 12), mod(x, 4));  // x % 4 < 12
  EXPECT_EQ(mod(x + 1, x + 1).as_const(), 0);
}

TEST(IndexExprMod, DivModIdentity) {
  IndexExpr x = V("x", 100), y = V("y", 7);
  EXPECT_EQ(floordiv(x, 4) * 4 + mod(x, 4), x);
  EXPECT_EQ((floordiv(x, 4) * 4 + mod(x, 4)) * 3, x * 3);
  EXPECT_EQ(floordiv(x, 4) * 12 + mod(x, 4) * 3 + y, x * 3 + y);
  EXPECT_EQ((floordiv(x, 4) * 4 + mod(x, 8)).str(), "(x / 4)*4 + x % 8");
  EXPECT_EQ((floordiv(x, 4) * 8 + mod(x, 4)).str(), "(x / 4)*8 + x % 4");
}

TEST(IndexExprMod, UnravelledInnerDimsMergeBack) {
  // w = r % 56 and h = r / 56 % 56 of a contiguous 56x56 plane, n = r / 3136:
  // the plane's offset is one r % 3136 (as batch_norm's reduction over N, H, W reads it).
  IndexExpr r = V("r", 200704), o = V("o", 256);
  IndexExpr plane = mod(r, 56) + mod(floordiv(r, 56), 56) * 56;
  EXPECT_EQ(plane, mod(r, 3136));
  EXPECT_EQ((o * 3136 + floordiv(r, 3136) * 802816 + plane).str(),
            "o*3136 + (r / 3136)*802816 + r % 3136");
  EXPECT_EQ(mod(r, 56) * 3 + mod(floordiv(r, 56), 56) * 168, mod(r, 3136) * 3);
  // Only with the plane's own stride: a different multiple keeps both terms.
  EXPECT_EQ((mod(r, 56) + mod(floordiv(r, 56), 56) * 57).str(), "r % 56 + (r / 56 % 56)*57");
  // Three unravelled dims merge into one.
  EXPECT_EQ(mod(r, 4) + mod(floordiv(r, 4), 5) * 4 + mod(floordiv(r, 20), 6) * 20, mod(r, 120));
}

// ---- Bounds.

TEST(IndexExprBounds, Leaves) {
  EXPECT_EQ(IndexExpr::constant(-3).bounds(), (Bounds{-3, -3}));
  EXPECT_EQ(V("x", 10).bounds(), (Bounds{0, 9}));
  EXPECT_EQ(IndexExpr::sym("s", 64).bounds(), (Bounds{64, 64}));
}

TEST(IndexExprBounds, AddAndMul) {
  IndexExpr x = V("x", 5), y = V("y", 4);
  EXPECT_EQ((x + y * 2 - 3).bounds(), (Bounds{-3, 7}));
  EXPECT_EQ((x * -3).bounds(), (Bounds{-12, 0}));
  // x*(y - 2) distributes to x*y - x*2: [0, 12] + [-8, 0] (per term, conservative).
  EXPECT_EQ((x * (y - 2)).bounds(), (Bounds{-8, 12}));
  EXPECT_EQ((x * y).bounds(), (Bounds{0, 12}));
  // A product of ranges takes the extreme corner products: [0, 3] * [-3, -1].
  EXPECT_EQ((floordiv(V("w", 4) - 5, 2) * y).bounds(), (Bounds{-9, 0}));
  EXPECT_EQ((x * IndexExpr::sym("s", 3)).bounds(), (Bounds{0, 12}));
}

TEST(IndexExprBounds, DivAndMod) {
  IndexExpr x = V("x", 4), y = V("y", 3);
  EXPECT_EQ(floordiv(x - 5, 2).bounds(), (Bounds{-3, -1}));
  EXPECT_EQ(floordiv(V("z", 10), y + 1).bounds(), (Bounds{0, 9}));
  EXPECT_EQ(floordiv(V("z", 100), 7).bounds(), (Bounds{0, 14}));
  EXPECT_EQ(mod(V("z", 100), 7).bounds(), (Bounds{0, 6}));
  EXPECT_EQ(mod(V("z", 100), y + 1).bounds(), (Bounds{0, 2}));
  EXPECT_EQ(mod(V("z", 3), y + 2).bounds(), (Bounds{0, 2}));
}

TEST(IndexExprBounds, Saturate) {
  const int64_t max = std::numeric_limits<int64_t>::max();
  IndexExpr x = V("x", int64_t{1} << 62);
  EXPECT_EQ((x * 4).bounds(), (Bounds{0, max}));
  EXPECT_EQ((x * -4).bounds().lo, std::numeric_limits<int64_t>::min());
  EXPECT_EQ((x * x).bounds().hi, max);
}

TEST(IndexExprBounds, FitsInt32) {
  EXPECT_TRUE(V("x", int64_t{1} << 31).fits_int32());
  EXPECT_FALSE(V("x", (int64_t{1} << 31) + 1).fits_int32());
  // A row-major flat index over 2^31 elements fits; one more row does not.
  IndexExpr flat = V("i", 2048) * (1 << 20) + V("j", 1024) * 1024 + V("k", 1024);
  EXPECT_TRUE(flat.fits_int32());
  EXPECT_FALSE((V("i", 2049) * (1 << 20) + V("j", 1024) * 1024 + V("k", 1024)).fits_int32());
  EXPECT_TRUE((flat - 1).fits_int32());
  // The value fits but the partial sum a*2^30 + b*2^30 does not.
  IndexExpr p = V("a", 2) * (1 << 30) + V("b", 2) * (1 << 30) - (1 << 30);
  EXPECT_EQ(p.bounds(), (Bounds{-(1 << 30), 1 << 30}));
  EXPECT_FALSE(p.fits_int32());
  EXPECT_TRUE((V("a", 2) * (1 << 30) - (1 << 30)).fits_int32());
}

// ---- coefficient().

TEST(IndexExprCoefficient, RowMajorInnermostIsContiguous) {
  IndexExpr i = V("i", 2), j = V("j", 3), k = V("k", 5);
  IndexExpr flat = i * 15 + j * 5 + k;
  EXPECT_EQ(flat.coefficient("k"), 1);
  EXPECT_EQ(flat.coefficient("j"), 5);
  EXPECT_EQ(flat.coefficient("i"), 15);
  EXPECT_EQ(flat.coefficient("absent"), 0);
  EXPECT_EQ(flat.free_vars(), (std::vector<std::string>{"i", "j", "k"}));
}

TEST(IndexExprCoefficient, TransposedReadHasRowStride) {
  // Output [5, 3] reading input [3, 5] transposed: offset = j*5 + i.
  IndexExpr i = V("i", 5), j = V("j", 3);
  IndexExpr off = j * 5 + i;
  EXPECT_EQ(off.coefficient("j"), 5);
  EXPECT_EQ(off.coefficient("i"), 1);
}

TEST(IndexExprCoefficient, NonLinearIsNullopt) {
  IndexExpr x = V("x", 8), y = V("y", 8);
  EXPECT_EQ((floordiv(x, 4) + y).coefficient("x"), std::nullopt);
  EXPECT_EQ((floordiv(x, 4) + y).coefficient("y"), 1);
  EXPECT_EQ((mod(x, 3) + y * 2).coefficient("x"), std::nullopt);
  EXPECT_EQ((x * y).coefficient("x"), std::nullopt);
  EXPECT_EQ((x * x + y).coefficient("x"), std::nullopt);
}

TEST(IndexExprCoefficient, SymbolicStride) {
  IndexExpr s = IndexExpr::sym("s", 48), x = V("x", 4), y = V("y", 48);
  IndexExpr off = x * s + y + s * 2;
  EXPECT_EQ(off.coefficient("x"), 48);
  EXPECT_EQ(off.coefficient_expr("x"), s);
  EXPECT_EQ(off.coefficient("y"), 1);
  EXPECT_EQ((x * s * 3 + x).coefficient_expr("x"), s * 3 + 1);
}

// ---- Printing.

TEST(IndexExprPrint, ExactText) {
  IndexExpr x0 = V("x0", 100), x1 = V("x1", 100);
  EXPECT_EQ((x0 * 4 + x1).str(), "x0*4 + x1");
  EXPECT_EQ((x1 + x0 * 4).str(), "x0*4 + x1");
  EXPECT_EQ(floordiv(x0 + 3, 5).str(), "(x0 + 3) / 5");
  EXPECT_EQ(mod(V("x", 9), 7).str(), "x % 7");
  EXPECT_EQ((x1 - x0 * 2 + 3).str(), "-x0*2 + x1 + 3");
  EXPECT_EQ((x0 - 3).str(), "x0 - 3");
  EXPECT_EQ((-x0).str(), "-x0");
  EXPECT_EQ(IndexExpr::constant(-3).str(), "-3");
  EXPECT_EQ(mod(floordiv(x0, 4), 8).str(), "x0 / 4 % 8");
  EXPECT_EQ(floordiv(x0, V("y", 3) + 1).str(), "x0 / (y + 1)");
  EXPECT_EQ((floordiv(x0, 4) * x1 * 2).str(), "x1*(x0 / 4)*2");
  EXPECT_EQ((x0 + floordiv(x1, 4) * 4).str(), "x0 + (x1 / 4)*4");
  EXPECT_EQ(mod(x0 * 3, 8).str(), "x0*3 % 8");
  std::ostringstream os;
  os << x0 * 4 + x1;
  EXPECT_EQ(os.str(), "x0*4 + x1");
}

TEST(IndexExprPrint, NoIdentityNoise) {
  IndexExpr i = V("i", 6), j = V("j", 4);
  for (const IndexExpr& e : {i * 1 + 0, (i + 0) * 1, floordiv(i, 1) + mod(j, 1), i * 4 + j * 1}) {
    const std::string s = e.str();
    EXPECT_EQ(s.find("*1"), std::string::npos) << s;
    EXPECT_EQ(s.find("+ 0"), std::string::npos) << s;
    EXPECT_EQ(s.find("% 1"), std::string::npos) << s;
    EXPECT_EQ(s.find("/ 1"), std::string::npos) << s;
  }
  EXPECT_EQ((i * 1 + 0).str(), "i");
  EXPECT_EQ((i * 4 + j * 1).str(), "i*4 + j");
}

TEST(IndexExprPrint, LeafMapping) {
  IndexExpr x = V("x0", 64), s = IndexExpr::sym("s0", 64);
  auto leaf = [](const IndexExpr& e) {
    return e.kind() == Kind::Var ? "(int64_t)" + e.name() : "ks_" + e.name();
  };
  EXPECT_EQ((x * s + floordiv(x, 8)).str(leaf), "(int64_t)x0*ks_s0 + (int64_t)x0 / 8");
}

// ---- substitute / bind_symbols / eval.

TEST(IndexExprSubstitute, ReplacesAndResimplifies) {
  IndexExpr x = V("x", 10), y = V("y", 5);
  EXPECT_EQ((x * 3 + y).substitute({{"x", y * 2 + 1}}), y * 7 + 3);
  IndexExpr e = floordiv(x * 4 + y, 4);  // y in [0, 5): kept
  EXPECT_EQ(e.kind(), Kind::FloorDiv);
  EXPECT_EQ(e.substitute({{"y", V("z", 4)}}), x);
  EXPECT_EQ(e.substitute({{"x", IndexExpr::constant(2)}}), floordiv(y + 8, 4));
  EXPECT_EQ(e.substitute({{"x", IndexExpr::constant(2)}, {"y", IndexExpr::constant(3)}}).as_const(),
            2);
  EXPECT_EQ(e.substitute({}), e);
}

TEST(IndexExprSubstitute, BindSymbols) {
  IndexExpr s = IndexExpr::sym("s", 6), x = V("x", 20);
  IndexExpr e = x * s + s + floordiv(x, s);
  EXPECT_EQ(e.str(), "x*s + s + x / s");
  EXPECT_EQ(e.bind_symbols().str(), "x*6 + x / 6 + 6");
  EXPECT_EQ(e.bind_symbols(), x * 6 + 6 + floordiv(x, 6));
  EXPECT_EQ(e.eval({{"x", 13}}), 13 * 6 + 6 + 2);
  EXPECT_EQ(e.eval({{"x", 13}, {"s", 4}}), 13 * 4 + 4 + 3);  // env overrides the symbol
  EXPECT_TRUE(e.depends_on("s"));
  EXPECT_FALSE(e.bind_symbols().depends_on("s"));
  EXPECT_EQ(e.free_vars(), std::vector<std::string>{"x"});
  EXPECT_THROW(e.eval({}), smelt::Error);  // x has no value
}

// ---- Property test against a reference evaluation of the unsimplified tree.

namespace {

/// An unsimplified expression tree with its own evaluator (Python semantics).
struct Ref {
  enum Op { Leaf, Add, Mul, Div, Mod } op = Leaf;
  std::string name;  // Leaf: variable name, or "" for a constant
  int64_t value = 0;
  std::vector<Ref> kids;

  int64_t eval(const std::map<std::string, int64_t>& env) const {
    switch (op) {
      case Leaf:
        return name.empty() ? value : env.at(name);
      case Add:
        return kids[0].eval(env) + kids[1].eval(env);
      case Mul:
        return kids[0].eval(env) * kids[1].eval(env);
      case Div: {
        int64_t a = kids[0].eval(env), b = kids[1].eval(env);
        int64_t q = a / b;
        return (a % b != 0 && a < 0) ? q - 1 : q;
      }
      case Mod: {
        int64_t a = kids[0].eval(env), b = kids[1].eval(env), r = a % b;
        return r < 0 ? r + b : r;
      }
    }
    return 0;
  }
};

struct Pair {
  Ref ref;
  IndexExpr expr;
};

class Generator {
 public:
  explicit Generator(uint32_t seed) : rng_(seed) {}

  int64_t uniform(int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng_);
  }

  /// Extents of x, y, z and the value of the symbol s for one expression.
  void reset() {
    ext_ = {{"x", uniform(1, 5)}, {"y", uniform(1, 5)}, {"z", uniform(1, 3)}};
    sval_ = uniform(2, 5);
  }
  const std::map<std::string, int64_t>& extents() const { return ext_; }
  int64_t sym_value() const { return sval_; }

  Pair leaf() {
    switch (uniform(0, 5)) {
      case 0:
      case 1: {
        int64_t c = uniform(-4, 9);
        return {Ref{Ref::Leaf, "", c, {}}, IndexExpr::constant(c)};
      }
      case 2:
        return {Ref{Ref::Leaf, "s", 0, {}}, IndexExpr::sym("s", sval_)};
      default: {
        const char* names[] = {"x", "y", "z"};
        std::string n = names[uniform(0, 2)];
        return {Ref{Ref::Leaf, n, 0, {}}, IndexExpr::var(n, ext_.at(n))};
      }
    }
  }

  /// A positive divisor: a constant, the symbol, a var plus a constant, or a product.
  Pair divisor() {
    switch (uniform(0, 4)) {
      case 0:
      case 1: {
        int64_t c = uniform(1, 9);
        return {Ref{Ref::Leaf, "", c, {}}, IndexExpr::constant(c)};
      }
      case 2:
        return {Ref{Ref::Leaf, "s", 0, {}}, IndexExpr::sym("s", sval_)};
      case 3: {
        Pair v{Ref{Ref::Leaf, "y", 0, {}}, IndexExpr::var("y", ext_.at("y"))};
        int64_t c = uniform(1, 3);
        return combine(Ref::Add, v, {Ref{Ref::Leaf, "", c, {}}, IndexExpr::constant(c)});
      }
      default: {
        int64_t c = uniform(2, 4);
        return combine(Ref::Mul, {Ref{Ref::Leaf, "s", 0, {}}, IndexExpr::sym("s", sval_)},
                       {Ref{Ref::Leaf, "", c, {}}, IndexExpr::constant(c)});
      }
    }
  }

  static Pair combine(Ref::Op op, const Pair& a, const Pair& b) {
    Ref r{op, "", 0, {a.ref, b.ref}};
    switch (op) {
      case Ref::Add:
        return {r, a.expr + b.expr};
      case Ref::Mul:
        return {r, a.expr * b.expr};
      case Ref::Div:
        return {r, floordiv(a.expr, b.expr)};
      default:
        return {r, mod(a.expr, b.expr)};
    }
  }

  Pair expr(int depth) {
    if (depth == 0 || uniform(0, 3) == 0) return leaf();
    switch (uniform(0, 5)) {
      case 0:
      case 1:
        return combine(Ref::Add, expr(depth - 1), expr(depth - 1));
      case 2:
        return combine(Ref::Mul, expr(depth - 1), expr(depth - 1));
      case 3:
        return combine(Ref::Div, expr(depth - 1), divisor());
      default:
        return combine(Ref::Mod, expr(depth - 1), divisor());
    }
  }

 private:
  std::mt19937 rng_;
  std::map<std::string, int64_t> ext_;
  int64_t sval_ = 2;
};

/// Rebuilds `e` from its operands through the smart constructors.
IndexExpr rebuild(const IndexExpr& e) {
  const auto& ops = e.operands();
  switch (e.kind()) {
    case Kind::Add: {
      IndexExpr r;
      for (const auto& o : ops) r = r + rebuild(o);
      return r;
    }
    case Kind::Mul: {
      IndexExpr r = IndexExpr::constant(1);
      for (const auto& o : ops) r = r * rebuild(o);
      return r;
    }
    case Kind::FloorDiv:
      return floordiv(rebuild(ops[0]), rebuild(ops[1]));
    case Kind::Mod:
      return mod(rebuild(ops[0]), rebuild(ops[1]));
    default:
      return e;
  }
}

}  // namespace

TEST(IndexExprProperty, SimplifiedAgreesWithReferenceEverywhere) {
  Generator gen(20240611);
  int checked_points = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    gen.reset();
    Pair p = gen.expr(4);
    const IndexExpr& e = p.expr;
    SCOPED_TRACE("expr " + e.str());
    const auto& ext = gen.extents();
    const Bounds b = e.bounds();
    const IndexExpr bound = e.bind_symbols();
    EXPECT_EQ(rebuild(e), e) << "canonical form is not a fixed point: " << rebuild(e);
    EXPECT_EQ(e + 0, e);
    std::map<std::string, std::optional<int64_t>> coef;
    for (const char* v : {"x", "y", "z"}) coef[v] = e.coefficient(v);
    for (int64_t x = 0; x < ext.at("x"); ++x)
      for (int64_t y = 0; y < ext.at("y"); ++y)
        for (int64_t z = 0; z < ext.at("z"); ++z) {
          std::map<std::string, int64_t> env{{"x", x}, {"y", y}, {"z", z}};
          const int64_t want = p.ref.eval({{"x", x}, {"y", y}, {"z", z}, {"s", gen.sym_value()}});
          const int64_t got = e.eval(env);
          ASSERT_EQ(got, want) << "at x=" << x << " y=" << y << " z=" << z;
          EXPECT_EQ(bound.eval(env), want);
          EXPECT_LE(b.lo, got);
          EXPECT_GE(b.hi, got);
          IndexExpr folded = e.substitute({{"x", IndexExpr::constant(x)},
                                           {"y", IndexExpr::constant(y)},
                                           {"z", IndexExpr::constant(z)},
                                           {"s", IndexExpr::constant(gen.sym_value())}});
          ASSERT_EQ(folded.as_const(), want);
          // A linear variable's coefficient is the step of the value.
          for (const char* v : {"x", "y", "z"}) {
            if (!coef[v] || env[v] + 1 >= ext.at(v)) continue;
            auto next = env;
            ++next[v];
            EXPECT_EQ(e.eval(next) - got, *coef[v]) << "coefficient of " << v;
          }
          ++checked_points;
        }
  }
  EXPECT_GT(checked_points, 10000);
}

TEST(IndexExprFloorDiv, OffsetWithinACommonStrideDropsOut) {
  // A row of 64 inside rows of 1024: (o*64 + r) / 1024 == o / 16 for r < 64.
  IndexExpr o = IndexExpr::var("o", 256), r = IndexExpr::var("r", 64);
  EXPECT_EQ(floordiv(o * 64 + r, 1024), floordiv(o, 16));
  EXPECT_EQ(mod(o * 64 + r, 1024), mod(o * 64, 1024) + r);
  // Not when the offset can reach the stride.
  IndexExpr r2 = IndexExpr::var("r", 65);
  EXPECT_NE(floordiv(o * 64 + r2, 1024), floordiv(o, 16));
  for (int64_t ov : {0, 15, 16, 17, 255})
    for (int64_t rv : {0, 63, 64})
      EXPECT_EQ(floordiv(o * 64 + r2, 1024).eval({{"o", ov}, {"r", rv}}), (ov * 64 + rv) / 1024);
}

// ---- CUDA pointwise vectors (CudaDialect::element_index): a read index that
// is not linear in the flat position i is printed with i = i_w * vec + i_v.

namespace {

/// `e` at `env` as the printed C computes it (truncating / and %), checking
/// that every division and modulo it prints has a non-negative dividend.
int64_t eval_as_c(const IndexExpr& e, const std::map<std::string, int64_t>& env) {
  const auto& ops = e.operands();
  switch (e.kind()) {
    case Kind::Const:
      return e.value();
    case Kind::Var:
    case Kind::Sym:
      return env.count(e.name()) ? env.at(e.name()) : e.extent();
    case Kind::Add: {
      int64_t s = 0;
      for (const auto& o : ops) s += eval_as_c(o, env);
      return s;
    }
    case Kind::Mul: {
      int64_t p = 1;
      for (const auto& o : ops) p *= eval_as_c(o, env);
      return p;
    }
    case Kind::FloorDiv:
    case Kind::Mod: {
      const int64_t a = eval_as_c(ops[0], env), b = eval_as_c(ops[1], env);
      EXPECT_GE(a, 0) << "printed " << (e.kind() == Kind::Mod ? "%" : "/")
                      << " of a negative dividend: " << e.str();
      EXPECT_GT(b, 0) << e.str();
      if (b <= 0) return 0;
      return e.kind() == Kind::Mod ? a % b : a / b;
    }
  }
  return 0;
}

}  // namespace

TEST(IndexExprProperty, VectorLanesOfPermutedReadsAgreeEverywhere) {
  using smelt::Shape;
  std::mt19937 rng(20261202);
  auto uniform = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  const int64_t sizes[] = {1, 2, 3, 4, 5, 6, 8, 12, 16, 32};
  // The contiguous strides of `s`.
  auto dense = [](const Shape& s) {
    Shape st(s.size(), 1);
    for (int64_t k = static_cast<int64_t>(s.size()) - 2; k >= 0; --k) st[k] = st[k + 1] * s[k + 1];
    return st;
  };
  // A read of an operand of logical shape `out` through a random
  // permutation of a dense buffer, with broadcast (stride 0) and strided
  // (sliced) dims and an offset, at flat position `flat`, as the code
  // generator builds it (unflatten, then the operand's strides).
  auto permuted_read = [&](const Shape& out, const IndexExpr& flat) {
    const size_t r = out.size();
    std::vector<size_t> perm(r);
    for (size_t k = 0; k < r; ++k) perm[k] = k;
    std::shuffle(perm.begin(), perm.end(), rng);
    Shape buf(r);
    for (size_t k = 0; k < r; ++k) buf[k] = out[perm[k]];
    const Shape bst = dense(buf);
    Shape st(r);
    for (size_t k = 0; k < r; ++k) st[perm[k]] = bst[k];
    const int64_t slice = uniform(0, 3) == 0 ? uniform(2, 3) : 1;
    for (size_t k = 0; k < r; ++k) {
      st[k] *= slice;
      if (uniform(0, 4) == 0) st[k] = 0;  // broadcast
    }
    IndexExpr e = IndexExpr::constant(uniform(0, 2) == 0 ? uniform(0, 40) : 0);
    const auto it = smelt::compiler::unflatten(out, flat);
    for (size_t k = 0; k < r; ++k)
      if (out[k] != 1 && st[k] != 0) e = e + it.vars[k] * st[k];
    return e;
  };
  int64_t checked = 0, rewritten = 0;
  for (int iter = 0; iter < 1500; ++iter) {
    const int64_t rank = uniform(1, 4);
    Shape out(rank);
    for (auto& s : out) s = sizes[uniform(0, 9)];
    int64_t n = 1;
    for (auto s : out) n *= s;
    if (n < 2 || n > 4096) continue;
    const IndexExpr i = IndexExpr::var("i", n);
    IndexExpr index = permuted_read(out, i);
    if (uniform(0, 2) == 0) {
      // Read again through a reshape (a view of a permuted producer): the
      // producer's flat offset unflattened over another shape of its numel.
      Shape p(out.rbegin(), out.rend());
      if (uniform(0, 1) == 0) {
        p.clear();
        int64_t left = n;
        for (int64_t d : {2, 3, 4, 8})
          while (left % d == 0 && uniform(0, 1) == 0) {
            p.push_back(d);
            left /= d;
          }
        p.push_back(left);
        std::shuffle(p.begin(), p.end(), rng);
      }
      if (index.bounds().hi < n && index.bounds().lo >= 0) index = permuted_read(p, index);
    }
    if (uniform(0, 4) == 0) index = mod(index, uniform(2, 12));
    if (uniform(0, 4) == 0) index = floordiv(index, uniform(2, 12));
    if (index.coefficient("i")) continue;  // linear: printed as it is
    for (int64_t vec : {2, 4, 8, 16}) {
      if (n % vec != 0) continue;
      const IndexExpr lanes =
          index.substitute({{"i", IndexExpr::var("i_w", std::max<int64_t>(2, n / vec)) * vec +
                                      IndexExpr::var("i_v", vec)}});
      SCOPED_TRACE(index.str() + " with vec " + std::to_string(vec) + " -> " + lanes.str());
      ++rewritten;
      for (int64_t x = 0; x < n; ++x) {
        const int64_t want = index.eval({{"i", x}});
        const std::map<std::string, int64_t> env{{"i_w", x / vec}, {"i_v", x % vec}};
        ASSERT_EQ(lanes.eval(env), want) << "at i=" << x;
        ASSERT_EQ(eval_as_c(lanes, env), want) << "at i=" << x;
        ASSERT_EQ(eval_as_c(index, {{"i", x}}), want) << "at i=" << x;
        ++checked;
      }
    }
  }
  EXPECT_GT(rewritten, 300);
  EXPECT_GT(checked, 30000);
}
