#include <gtest/gtest.h>

#include "smelt/ops.h"

using namespace smelt;

TEST(Core, PromoteTypes) {
  EXPECT_EQ(promote_types(DType::UInt8, DType::Int8), DType::Int16);
  EXPECT_EQ(promote_types(DType::Float16, DType::BFloat16), DType::Float32);
  EXPECT_EQ(promote_types(DType::Bool, DType::Int32), DType::Int32);
  EXPECT_EQ(promote_types(DType::Int64, DType::Float16), DType::Float16);
}

TEST(Core, HalfRounding) {
  EXPECT_EQ(static_cast<float>(Half(65504.0f)), 65504.0f);
  EXPECT_TRUE(std::isinf(static_cast<float>(Half(65520.0f))));
  EXPECT_EQ(static_cast<float>(Half(65519.0f)), 65504.0f);
  EXPECT_EQ(static_cast<float>(Half(5.960464477539063e-08f)), 5.960464477539063e-08f);
  EXPECT_EQ(static_cast<float>(Half(2.9802322387695312e-08f)), 0.0f);  // ties to even -> 0
  EXPECT_EQ(static_cast<float>(Half(1.0009765625f)), 1.0009765625f);
  EXPECT_EQ(static_cast<float>(Half(1.00048828125f)), 1.0f);  // tie -> even
  EXPECT_EQ(static_cast<float>(BFloat16(1.00390625f)), 1.0f);  // tie -> even
  EXPECT_EQ(static_cast<float>(BFloat16(1.01171875f)), 1.015625f);
  EXPECT_TRUE(std::isnan(static_cast<float>(BFloat16(NAN))));
}
