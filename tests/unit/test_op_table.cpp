// The op table (src/ops/op_table.h): the fields other lists derive from are
// consistent, and the attribute variants resolve as the compiler expects.
#include <gtest/gtest.h>

#include <set>

#include "kernels/gemm_epilogue.h"
#include "ops/dispatch.h"
#include "ops/op_table.h"

using namespace smelt;
using detail::Accumulator;
using detail::Attrs;
using detail::OpKind;
using detail::RuntimeCheck;

TEST(OpTable, NamesAreUniqueAndFieldsMatchTheKind) {
  std::set<std::string_view> names;
  for (const auto& op : detail::op_table()) {
    EXPECT_TRUE(names.insert(op.name).second) << op.name;
    EXPECT_EQ(detail::find_op(op.name), &op);
    // A differentiable op has a derivative (or names the ops it is differentiated
    // through); the others have none.
    EXPECT_EQ(op.differentiable, op.derivative != nullptr || !op.derivative_via.empty()) << op.name;
    if (op.kind == OpKind::Pointwise) {
      EXPECT_GE(op.arity, 1) << op.name;
      EXPECT_FALSE(op.functor.empty()) << op.name;
    } else {
      EXPECT_EQ(op.arity, 0) << op.name;
      EXPECT_TRUE(op.functor.empty()) << op.name;
      EXPECT_TRUE(op.variants.empty()) << op.name;
      EXPECT_EQ(op.epilogue, EpilogueActivation::None) << op.name;
      // only index maps that read indices from a tensor check them at run time
      if (!op.index_map) {
        EXPECT_EQ(op.check, RuntimeCheck::None) << op.name;
      }
    }
    if (op.index_map) {
      EXPECT_EQ(op.kind, OpKind::Movement) << op.name;
    }
    if (op.kind != OpKind::Reduction) {
      EXPECT_EQ(op.accumulator, Accumulator::None) << op.name;
      EXPECT_FALSE(op.scan) << op.name;
    }
    // a reduction with an accumulator names what each output finalizes to
    EXPECT_EQ(op.accumulator == Accumulator::None, op.finals.empty()) << op.name;
    // bool-valued ops have no gradient
    if (op.rule == detail::DTypeRule::Compare || op.rule == detail::DTypeRule::Logical) {
      EXPECT_FALSE(op.differentiable) << op.name;
    }
  }
  EXPECT_EQ(detail::find_op("no_such_op"), nullptr);
}

TEST(OpTable, AccumulatorsNameTheReduceStructs) {
  EXPECT_EQ(detail::accumulator_name(detail::find_op("mean")->accumulator), "Sum");
  EXPECT_EQ(detail::accumulator_name(detail::find_op("var_mean")->accumulator), "Welford");
  EXPECT_EQ(detail::find_op("var_mean")->finals, (std::vector<std::string_view>{"var", "mean"}));
  EXPECT_EQ(detail::find_op("cumsum")->accumulator, Accumulator::Sum);
  EXPECT_TRUE(detail::find_op("cumsum")->scan);
  EXPECT_FALSE(detail::find_op("sum")->scan);
}

TEST(OpTable, RuntimeCheckOfIntegerDivisionDependsOnRoundingMode) {
  EXPECT_EQ(detail::runtime_check("remainder", {}), RuntimeCheck::IntegerDivisionByZero);
  EXPECT_EQ(detail::runtime_check("fmod", {}), RuntimeCheck::IntegerDivisionByZero);
  EXPECT_EQ(detail::runtime_check("div", {}), RuntimeCheck::None);
  Attrs floor{{"rounding_mode", std::string("floor")}};
  EXPECT_EQ(detail::runtime_check("div", floor), RuntimeCheck::IntegerDivisionByZero);
  EXPECT_EQ(detail::op_functor(*detail::find_op("div"), floor), "div_floor");
  EXPECT_TRUE(detail::is_discontinuous("div", floor));
  EXPECT_FALSE(detail::is_discontinuous("div", {}));
  EXPECT_EQ(detail::runtime_check("mul", {}), RuntimeCheck::None);
  EXPECT_EQ(detail::runtime_check("no_such_op", {}), RuntimeCheck::None);
}

TEST(OpTable, EpilogueActivationFollowsTheApproximateAttr) {
  const auto* gelu = detail::find_op("gelu");
  ASSERT_NE(gelu, nullptr);
  Attrs tanh{{"approximate", std::string("tanh")}}, none{{"approximate", std::string("none")}};
  EXPECT_EQ(detail::epilogue_activation(gelu->name, {}), EpilogueActivation::GeluErf);
  EXPECT_EQ(detail::epilogue_activation(gelu->name, none), EpilogueActivation::GeluErf);
  EXPECT_EQ(detail::epilogue_activation(gelu->name, tanh), EpilogueActivation::GeluTanh);
  EXPECT_EQ(detail::op_functor(*gelu, tanh), "gelu_tanh");
  EXPECT_EQ(detail::epilogue_activation("relu", {}), EpilogueActivation::Relu);
  EXPECT_EQ(detail::epilogue_activation("exp", {}), EpilogueActivation::None);
  // every activation a GEMM backend implements is reachable from some op
  std::set<EpilogueActivation> reached;
  for (const auto& op : detail::op_table()) {
    reached.insert(op.epilogue);
    for (const auto& v : op.variants) reached.insert(v.epilogue);
  }
  for (EpilogueActivation a : kEpilogueActivations) {
    EXPECT_TRUE(reached.count(a)) << epilogue_activation_name(a);
    EXPECT_EQ(parse_epilogue_activation(epilogue_activation_name(a)), a);
  }
  EXPECT_FALSE(parse_epilogue_activation("softplus").has_value());
}
