// Integer (and other non-half) operands of float16/bfloat16 arithmetic, eager
// and compiled, on every device, against the values PyTorch 2.15 computes on
// the CPU (the tables below come from PyTorch, not from smelt). PyTorch's
// TensorIterator casts each operand to the common dtype first and then
// computes in float (opmath), so int16 257 + bfloat16 0.5 is bfloat16(257) =
// 256 plus 0.5, which rounds to 256 (not 258 from 257.5). The exceptions it
// keeps are checked too: a wrapped number is converted by its op's NumberRule
// (bfloat16 x * 257 multiplies by 257), and mul and div read a one-element
// second operand unrounded (bfloat16 x * int16 tensor(257) also multiplies by
// 257), while add, sub and where round it. Every result is compared bit for
// bit (NaN with NaN, the sign of a zero); so is lerp, which PyTorch rounds
// once (a fused multiply-add). The CUDA instances skip themselves ("no CUDA
// device") without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "compiler/compile_test_util.h"
#include "smelt/cuda.h"

using namespace smelt;
using smelt_test::kInf;
using smelt_test::kNaN;

namespace {

/// One op over an integer tensor `a` and a float16/bfloat16 tensor `b`.
struct Case {
  const char* op;
  DType a, b, out;
  std::vector<double> want;
};

// clang-format off
const std::vector<Case>& cases() {
  static const std::vector<Case> c = {
    {"add", DType::Int8, DType::Float16, DType::Float16, {-127.5, 126.5, 4.5, -6.25, 97.0, 2.5, 1.2998046875, 6.0}},
    {"radd", DType::Int8, DType::Float16, DType::Float16, {-127.5, 126.5, 4.5, -6.25, 97.0, 2.5, 1.2998046875, 6.0}},
    {"sub", DType::Int8, DType::Float16, DType::Float16, {-128.5, 127.5, 1.5, -7.75, 103.0, -2.5, 0.7001953125, -8.0}},
    {"rsub", DType::Int8, DType::Float16, DType::Float16, {128.5, -127.5, -1.5, 7.75, -103.0, 2.5, -0.7001953125, 8.0}},
    {"mul", DType::Int8, DType::Float16, DType::Float16, {-64.0, -63.5, 4.5, -5.25, -300.0, 0.0, 0.300048828125, -7.0}},
    {"div", DType::Int8, DType::Float16, DType::Float16, {-256.0, -254.0, 2.0, -9.3359375, -33.34375, 0.0, 3.33203125, -0.142822265625}},
    {"rdiv", DType::Int8, DType::Float16, DType::Float16, {-0.00390625, -0.003936767578125, 0.5, -0.10711669921875, -0.029998779296875, kInf, 0.300048828125, -7.0}},
    {"where", DType::Int8, DType::Float16, DType::Float16, {-128.0, -0.5, 3.0, 0.75, 100.0, 0.0, 0.300048828125, -1.0}},
    {"rwhere", DType::Int8, DType::Float16, DType::Float16, {0.5, 127.0, 1.5, -7.0, -3.0, 2.5, 1.0, 7.0}},
    {"add_alpha", DType::Int8, DType::Float16, DType::Float16, {-383.5, 380.5, 10.5, -20.25, 297.0, 2.5, 3.30078125, 4.0}},
    {"maximum", DType::Int8, DType::Float16, DType::Float16, {0.5, 127.0, 3.0, 0.75, 100.0, 2.5, 1.0, 7.0}},
    {"eq", DType::Int8, DType::Float16, DType::Bool, {0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0}},
    {"lt", DType::Int8, DType::Float16, DType::Bool, {0.0, 1.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0}},
    {"add", DType::Int8, DType::BFloat16, DType::BFloat16, {-127.5, 126.5, 4.5, -6.25, 97.0, 2.5, 1.296875, 6.0}},
    {"radd", DType::Int8, DType::BFloat16, DType::BFloat16, {-127.5, 126.5, 4.5, -6.25, 97.0, 2.5, 1.296875, 6.0}},
    {"sub", DType::Int8, DType::BFloat16, DType::BFloat16, {-128.0, 127.5, 1.5, -7.75, 103.0, -2.5, 0.69921875, -8.0}},
    {"rsub", DType::Int8, DType::BFloat16, DType::BFloat16, {128.0, -127.5, -1.5, 7.75, -103.0, 2.5, -0.69921875, 8.0}},
    {"mul", DType::Int8, DType::BFloat16, DType::BFloat16, {-64.0, -63.5, 4.5, -5.25, -300.0, 0.0, 0.30078125, -7.0}},
    {"div", DType::Int8, DType::BFloat16, DType::BFloat16, {-256.0, -254.0, 2.0, -9.3125, -33.25, 0.0, 3.328125, -0.142578125}},
    {"rdiv", DType::Int8, DType::BFloat16, DType::BFloat16, {-0.00390625, -0.003936767578125, 0.5, -0.10693359375, -0.030029296875, kInf, 0.30078125, -7.0}},
    {"where", DType::Int8, DType::BFloat16, DType::BFloat16, {-128.0, -0.5, 3.0, 0.75, 100.0, 0.0, 0.30078125, -1.0}},
    {"rwhere", DType::Int8, DType::BFloat16, DType::BFloat16, {0.5, 127.0, 1.5, -7.0, -3.0, 2.5, 1.0, 7.0}},
    {"add_alpha", DType::Int8, DType::BFloat16, DType::BFloat16, {-384.0, 380.0, 10.5, -20.25, 296.0, 2.5, 3.296875, 4.0}},
    {"maximum", DType::Int8, DType::BFloat16, DType::BFloat16, {0.5, 127.0, 3.0, 0.75, 100.0, 2.5, 1.0, 7.0}},
    {"eq", DType::Int8, DType::BFloat16, DType::Bool, {0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0}},
    {"lt", DType::Int8, DType::BFloat16, DType::Bool, {0.0, 1.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0}},
    {"add", DType::UInt8, DType::Float16, DType::Float16, {255.5, 253.5, 4.5, 7.75, 126.0, 2.5, 1.2998046875, 207.0}},
    {"radd", DType::UInt8, DType::Float16, DType::Float16, {255.5, 253.5, 4.5, 7.75, 126.0, 2.5, 1.2998046875, 207.0}},
    {"sub", DType::UInt8, DType::Float16, DType::Float16, {254.5, 254.5, 1.5, 6.25, 132.0, -2.5, 0.7001953125, 193.0}},
    {"rsub", DType::UInt8, DType::Float16, DType::Float16, {-254.5, -254.5, -1.5, -6.25, -132.0, 2.5, -0.7001953125, -193.0}},
    {"mul", DType::UInt8, DType::Float16, DType::Float16, {127.5, -127.0, 4.5, 5.25, -387.0, 0.0, 0.300048828125, 1400.0}},
    {"div", DType::UInt8, DType::Float16, DType::Float16, {510.0, -508.0, 2.0, 9.3359375, -43.0, 0.0, 3.33203125, 28.578125}},
    {"rdiv", DType::UInt8, DType::Float16, DType::Float16, {0.00196075439453125, -0.0019683837890625, 0.5, 0.10711669921875, -0.02325439453125, kInf, 0.300048828125, 0.035003662109375}},
    {"where", DType::UInt8, DType::Float16, DType::Float16, {255.0, -0.5, 3.0, 0.75, 129.0, 0.0, 0.300048828125, 200.0}},
    {"rwhere", DType::UInt8, DType::Float16, DType::Float16, {0.5, 254.0, 1.5, 7.0, -3.0, 2.5, 1.0, 7.0}},
    {"add_alpha", DType::UInt8, DType::Float16, DType::Float16, {765.5, 761.5, 10.5, 21.75, 384.0, 2.5, 3.30078125, 607.0}},
    {"maximum", DType::UInt8, DType::Float16, DType::Float16, {255.0, 254.0, 3.0, 7.0, 129.0, 2.5, 1.0, 200.0}},
    {"eq", DType::UInt8, DType::Float16, DType::Bool, {0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0}},
    {"lt", DType::UInt8, DType::Float16, DType::Bool, {1.0, 1.0, 1.0, 1.0, 1.0, 0.0, 1.0, 1.0}},
    {"add", DType::UInt8, DType::BFloat16, DType::BFloat16, {256.0, 254.0, 4.5, 7.75, 126.0, 2.5, 1.296875, 207.0}},
    {"radd", DType::UInt8, DType::BFloat16, DType::BFloat16, {256.0, 254.0, 4.5, 7.75, 126.0, 2.5, 1.296875, 207.0}},
    {"sub", DType::UInt8, DType::BFloat16, DType::BFloat16, {254.0, 254.0, 1.5, 6.25, 132.0, -2.5, 0.69921875, 193.0}},
    {"rsub", DType::UInt8, DType::BFloat16, DType::BFloat16, {-254.0, -254.0, -1.5, -6.25, -132.0, 2.5, -0.69921875, -193.0}},
    {"mul", DType::UInt8, DType::BFloat16, DType::BFloat16, {127.5, -127.0, 4.5, 5.25, -388.0, 0.0, 0.30078125, 1400.0}},
    {"div", DType::UInt8, DType::BFloat16, DType::BFloat16, {510.0, -508.0, 2.0, 9.3125, -43.0, 0.0, 3.328125, 28.625}},
    {"rdiv", DType::UInt8, DType::BFloat16, DType::BFloat16, {0.0019683837890625, -0.0019683837890625, 0.5, 0.10693359375, -0.0233154296875, kInf, 0.30078125, 0.034912109375}},
    {"where", DType::UInt8, DType::BFloat16, DType::BFloat16, {255.0, -0.5, 3.0, 0.75, 129.0, 0.0, 0.30078125, 200.0}},
    {"rwhere", DType::UInt8, DType::BFloat16, DType::BFloat16, {0.5, 254.0, 1.5, 7.0, -3.0, 2.5, 1.0, 7.0}},
    {"add_alpha", DType::UInt8, DType::BFloat16, DType::BFloat16, {764.0, 760.0, 10.5, 21.75, 384.0, 2.5, 3.296875, 608.0}},
    {"maximum", DType::UInt8, DType::BFloat16, DType::BFloat16, {255.0, 254.0, 3.0, 7.0, 129.0, 2.5, 1.0, 200.0}},
    {"eq", DType::UInt8, DType::BFloat16, DType::Bool, {0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0}},
    {"lt", DType::UInt8, DType::BFloat16, DType::Bool, {1.0, 1.0, 1.0, 1.0, 1.0, 0.0, 1.0, 1.0}},
    {"add", DType::Int16, DType::Float16, DType::Float16, {257.5, -257.5, 2050.0, -2047.0, 32768.0, -32768.0, 4096.0, 8.0}},
    {"radd", DType::Int16, DType::Float16, DType::Float16, {257.5, -257.5, 2050.0, -2047.0, 32768.0, -32768.0, 4096.0, 8.0}},
    {"sub", DType::Int16, DType::Float16, DType::Float16, {256.5, -256.5, 2046.0, -2048.0, 32768.0, -32768.0, 4096.0, -6.0}},
    {"rsub", DType::Int16, DType::Float16, DType::Float16, {-256.5, 256.5, -2046.0, 2048.0, -32768.0, 32768.0, -4096.0, 6.0}},
    {"mul", DType::Int16, DType::Float16, DType::Float16, {128.5, 128.5, 3072.0, -1536.0, -kInf, -kInf, 1229.0, 7.0}},
    {"div", DType::Int16, DType::Float16, DType::Float16, {514.0, 514.0, 1365.0, -2730.0, -10920.0, -13104.0, 13648.0, 0.142822265625}},
    {"rdiv", DType::Int16, DType::Float16, DType::Float16, {0.00194549560546875, 0.00194549560546875, 0.000732421875, -0.0003662109375, -9.1552734375e-05, -7.62939453125e-05, 7.325410842895508e-05, 7.0}},
    {"where", DType::Int16, DType::Float16, DType::Float16, {257.0, -0.5, 2048.0, 0.75, 32768.0, -32768.0, 0.300048828125, 1.0}},
    {"rwhere", DType::Int16, DType::Float16, DType::Float16, {0.5, -257.0, 1.5, -2048.0, -3.0, 2.5, 4096.0, 7.0}},
    {"add_alpha", DType::Int16, DType::Float16, DType::Float16, {771.5, -771.5, 6144.0, -6144.0, kInf, -kInf, 12288.0, 10.0}},
    {"maximum", DType::Int16, DType::Float16, DType::Float16, {257.0, -0.5, 2048.0, 0.75, 32768.0, 2.5, 4096.0, 7.0}},
    {"eq", DType::Int16, DType::Float16, DType::Bool, {0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0}},
    {"lt", DType::Int16, DType::Float16, DType::Bool, {1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0}},
    {"add", DType::Int16, DType::BFloat16, DType::BFloat16, {256.0, -256.0, 2048.0, -2048.0, 32768.0, -32768.0, 4096.0, 8.0}},
    {"radd", DType::Int16, DType::BFloat16, DType::BFloat16, {256.0, -256.0, 2048.0, -2048.0, 32768.0, -32768.0, 4096.0, 8.0}},
    {"sub", DType::Int16, DType::BFloat16, DType::BFloat16, {256.0, -256.0, 2048.0, -2048.0, 32768.0, -32768.0, 4096.0, -6.0}},
    {"rsub", DType::Int16, DType::BFloat16, DType::BFloat16, {-256.0, 256.0, -2048.0, 2048.0, -32768.0, 32768.0, -4096.0, 6.0}},
    {"mul", DType::Int16, DType::BFloat16, DType::BFloat16, {128.0, 128.0, 3072.0, -1536.0, -98304.0, -81920.0, 1232.0, 7.0}},
    {"div", DType::Int16, DType::BFloat16, DType::BFloat16, {512.0, 512.0, 1368.0, -2736.0, -10944.0, -13120.0, 13632.0, 0.142578125}},
    {"rdiv", DType::Int16, DType::BFloat16, DType::BFloat16, {0.001953125, 0.001953125, 0.000732421875, -0.0003662109375, -9.1552734375e-05, -7.62939453125e-05, 7.343292236328125e-05, 7.0}},
    {"where", DType::Int16, DType::BFloat16, DType::BFloat16, {256.0, -0.5, 2048.0, 0.75, 32768.0, -32768.0, 0.30078125, 1.0}},
    {"rwhere", DType::Int16, DType::BFloat16, DType::BFloat16, {0.5, -256.0, 1.5, -2048.0, -3.0, 2.5, 4096.0, 7.0}},
    {"add_alpha", DType::Int16, DType::BFloat16, DType::BFloat16, {768.0, -768.0, 6144.0, -6144.0, 98304.0, -98304.0, 12288.0, 10.0}},
    {"maximum", DType::Int16, DType::BFloat16, DType::BFloat16, {256.0, -0.5, 2048.0, 0.75, 32768.0, 2.5, 4096.0, 7.0}},
    {"eq", DType::Int16, DType::BFloat16, DType::Bool, {0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0}},
    {"lt", DType::Int16, DType::BFloat16, DType::Bool, {1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0}},
    {"add", DType::Int32, DType::Float16, DType::Float16, {kInf, -kInf, 2050.0, 257.75, kInf, -kInf, kInf, kInf}},
    {"radd", DType::Int32, DType::Float16, DType::Float16, {kInf, -kInf, 2050.0, 257.75, kInf, -kInf, kInf, kInf}},
    {"sub", DType::Int32, DType::Float16, DType::Float16, {kInf, -kInf, 2046.0, 256.25, kInf, -kInf, kInf, kInf}},
    {"rsub", DType::Int32, DType::Float16, DType::Float16, {-kInf, kInf, -2046.0, -256.25, -kInf, kInf, -kInf, -kInf}},
    {"mul", DType::Int32, DType::Float16, DType::Float16, {kInf, kInf, 3072.0, 192.75, -kInf, -kInf, kInf, kInf}},
    {"div", DType::Int32, DType::Float16, DType::Float16, {kInf, kInf, 1365.0, 342.75, -kInf, -kInf, kInf, kInf}},
    {"rdiv", DType::Int32, DType::Float16, DType::Float16, {0.0, 0.0, 0.000732421875, 0.002918243408203125, -0.0, -0.0, 0.0, 0.0}},
    {"where", DType::Int32, DType::Float16, DType::Float16, {kInf, -0.5, 2048.0, 0.75, kInf, -kInf, 0.300048828125, kInf}},
    {"rwhere", DType::Int32, DType::Float16, DType::Float16, {0.5, -kInf, 1.5, 257.0, -3.0, 2.5, kInf, 7.0}},
    {"add_alpha", DType::Int32, DType::Float16, DType::Float16, {kInf, -kInf, 6144.0, 772.0, kInf, -kInf, kInf, kInf}},
    {"maximum", DType::Int32, DType::Float16, DType::Float16, {kInf, -0.5, 2048.0, 257.0, kInf, 2.5, kInf, kInf}},
    {"eq", DType::Int32, DType::Float16, DType::Bool, {0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0}},
    {"lt", DType::Int32, DType::Float16, DType::Bool, {1.0, 0.0, 1.0, 1.0, 1.0, 0.0, 1.0, 1.0}},
    {"add", DType::Int32, DType::BFloat16, DType::BFloat16, {16777216.0, -16777216.0, 2048.0, 256.0, 2147483648.0, -2147483648.0, 65536.0, 99840.0}},
    {"radd", DType::Int32, DType::BFloat16, DType::BFloat16, {16777216.0, -16777216.0, 2048.0, 256.0, 2147483648.0, -2147483648.0, 65536.0, 99840.0}},
    {"sub", DType::Int32, DType::BFloat16, DType::BFloat16, {16777216.0, -16777216.0, 2048.0, 255.0, 2147483648.0, -2147483648.0, 65536.0, 99840.0}},
    {"rsub", DType::Int32, DType::BFloat16, DType::BFloat16, {-16777216.0, 16777216.0, -2048.0, -255.0, -2147483648.0, 2147483648.0, -65536.0, -99840.0}},
    {"mul", DType::Int32, DType::BFloat16, DType::BFloat16, {8388608.0, 8388608.0, 3072.0, 192.0, -6442450944.0, -5368709120.0, 19712.0, 700416.0}},
    {"div", DType::Int32, DType::BFloat16, DType::BFloat16, {33554432.0, 33554432.0, 1368.0, 342.0, -717225984.0, -859832320.0, 218112.0, 14272.0}},
    {"rdiv", DType::Int32, DType::BFloat16, DType::BFloat16, {2.9802322387695312e-08, 2.9802322387695312e-08, 0.000732421875, 0.0029296875, -1.3969838619232178e-09, -1.1641532182693481e-09, 4.589557647705078e-06, 7.009506225585938e-05}},
    {"where", DType::Int32, DType::BFloat16, DType::BFloat16, {16777216.0, -0.5, 2048.0, 0.75, 2147483648.0, -2147483648.0, 0.30078125, 99840.0}},
    {"rwhere", DType::Int32, DType::BFloat16, DType::BFloat16, {0.5, -16777216.0, 1.5, 256.0, -3.0, 2.5, 65536.0, 7.0}},
    {"add_alpha", DType::Int32, DType::BFloat16, DType::BFloat16, {50331648.0, -50331648.0, 6144.0, 768.0, 6442450944.0, -6442450944.0, 196608.0, 299008.0}},
    {"maximum", DType::Int32, DType::BFloat16, DType::BFloat16, {16777216.0, -0.5, 2048.0, 256.0, 2147483648.0, 2.5, 65536.0, 99840.0}},
    {"eq", DType::Int32, DType::BFloat16, DType::Bool, {0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0}},
    {"lt", DType::Int32, DType::BFloat16, DType::Bool, {1.0, 0.0, 1.0, 1.0, 1.0, 0.0, 1.0, 1.0}},
  };
  return c;
}
// clang-format on

/// The operands of every case of a dtype pair (PyTorch computed the table
/// from exactly these).
std::vector<double> int_values(DType t) {
  switch (t) {
    case DType::Int8:
      return {-128, 127, 3, -7, 100, 0, 1, -1};
    case DType::UInt8:
      return {255, 254, 3, 7, 129, 0, 1, 200};
    case DType::Int16:
      return {257, -257, 2049, -2049, 32767, -32768, 4097, 1};
    default:
      return {16777217, -16777217, 2049, 257, 2147483647, -2147483647, 65537, 100001};
  }
}
const std::vector<double> kHalfValues = {0.5, -0.5, 1.5, 0.75, -3.0, 2.5, 0.3, 7.0};
const std::vector<double> kCond = {1, 0, 1, 0, 1, 1, 0, 1};

/// Every op of the table, in its order, over (a, b) with where's condition c.
std::vector<Tensor> all_ops(const Tensor& a, const Tensor& b, const Tensor& c) {
  return {a + b,          b + a,          a - b,        b - a,         a * b,    a / b,   b / a,
          where(c, a, b), where(c, b, a), add(b, a, 3), maximum(a, b), eq(a, b), lt(b, a)};
}
const std::vector<std::string> kOps = {"add",     "radd", "sub",   "rsub",   "mul",
                                       "div",     "rdiv", "where", "rwhere", "add_alpha",
                                       "maximum", "eq",   "lt"};

/// got equals want bit for bit as doubles: NaN for NaN, the same sign of zero.
::testing::AssertionResult same_values(const Tensor& got, DType dtype,
                                       const std::vector<double>& want) {
  if (got.dtype() != dtype)
    return ::testing::AssertionFailure()
           << "dtype " << dtype_name(got.dtype()) << ", want " << dtype_name(dtype);
  const std::vector<double> v = got.cpu().to_vector<double>();
  if (v.size() != want.size()) return ::testing::AssertionFailure() << v.size() << " elements";
  for (size_t i = 0; i < v.size(); ++i) {
    const bool ok = std::isnan(want[i])
                        ? std::isnan(v[i])
                        : v[i] == want[i] && std::signbit(v[i]) == std::signbit(want[i]);
    if (!ok)
      return ::testing::AssertionFailure()
             << "element " << i << ": got " << v[i] << ", want " << want[i];
  }
  return ::testing::AssertionSuccess();
}

class MixedPromotion : public smelt_test::CompilerTest,
                       public ::testing::WithParamInterface<Device> {
 protected:
  void SetUp() override {
    smelt_test::CompilerTest::SetUp();
    SMELT_SKIP_UNLESS_DEVICE(GetParam());
  }
  Tensor T(const std::vector<double>& v, DType dt, const Shape& s) const {
    return from_vector<double>(v, s, TensorOptions(dt)).to(GetParam());
  }
  Tensor T(const std::vector<double>& v, DType dt) const {
    return T(v, dt, {static_cast<int64_t>(v.size())});
  }
  /// A 0-dim tensor (of the device under test, or of the CPU: a CPU scalar).
  Tensor scalar_tensor(double v, DType dt, bool cpu = false) const {
    Tensor t = from_vector<double>({v}, {}, TensorOptions(dt));
    return cpu ? t : t.to(GetParam());
  }
};

CompileOptions fullgraph() {
  CompileOptions o;
  o.fullgraph = true;  // a graph break would hide the compiled path
  return o;
}

}  // namespace

INSTANTIATE_TEST_SUITE_P(Devices, MixedPromotion, testing::ValuesIn(smelt_test::test_devices()),
                         smelt_test::device_name);

// int8/uint8/int16/int32 with float16/bfloat16: add, sub, mul, div (both
// orders), where, add with alpha, maximum and comparisons.
TEST_P(MixedPromotion, IntegerWithHalfMatchesPyTorch) {
  for (DType it : {DType::Int8, DType::UInt8, DType::Int16, DType::Int32}) {
    for (DType ht : {DType::Float16, DType::BFloat16}) {
      SCOPED_TRACE(std::string(dtype_name(it)) + " with " + std::string(dtype_name(ht)));
      const Tensor a = T(int_values(it), it), b = T(kHalfValues, ht), c = T(kCond, DType::Bool);
      const std::vector<Tensor> eager = all_ops(a, b, c);
      auto compiled = compile(all_ops, fullgraph());
      const std::vector<Tensor> got = compiled(a, b, c);
      EXPECT_EQ(compiled.stats().eager_calls, 0);
      ASSERT_EQ(got.size(), kOps.size());
      size_t checked = 0;
      for (const Case& k : cases()) {
        if (k.a != it || k.b != ht) continue;
        const size_t i = static_cast<size_t>(
            std::find(kOps.begin(), kOps.end(), std::string(k.op)) - kOps.begin());
        ASSERT_LT(i, kOps.size()) << k.op;
        EXPECT_TRUE(same_values(eager[i], k.out, k.want)) << k.op << " eager";
        EXPECT_TRUE(same_values(got[i], k.out, k.want)) << k.op << " compiled";
        ++checked;
      }
      EXPECT_EQ(checked, kOps.size());
    }
  }
}

namespace {

/// One expression over the tensors of ScalarOperands and what PyTorch gives.
struct Expected {
  const char* expr;
  DType out;
  std::vector<double> want;
};

// clang-format off
const std::vector<Expected>& scalar_cases() {
  static const std::vector<Expected> c = {
      {"i0 + B", DType::BFloat16, {256.0, 258.0, 255.0, 260.0}},
      {"B - i0", DType::BFloat16, {-256.0, -254.0, -256.0, -253.0}},
      {"add(B, i0, 2)", DType::BFloat16, {512.0, 512.0, 512.0, 516.0}},
      {"add(B, n32, 3)", DType::BFloat16, {50331648.0, 50331648.0, 50331648.0, 50331648.0}},
      {"B + f0", DType::BFloat16, {256.0, 258.0, 255.0, 260.0}},
      {"where(C, i0, B)", DType::BFloat16, {256.0, 1.5, 256.0, 3.0}},
      {"H + b0", DType::Float16, {2048.0, 2050.0, 2047.0, 2052.0}},
      {"H - j0", DType::Float16, {-2048.0, -2046.0, -2048.0, -2045.0}},
      {"i0 * B", DType::BFloat16, {128.0, 384.0, -192.0, 768.0}},
      {"B * i0", DType::BFloat16, {128.0, 386.0, -193.0, 772.0}},
      {"B * i1", DType::BFloat16, {128.0, 386.0, -193.0, 772.0}},
      {"B * I4", DType::BFloat16, {128.0, 384.0, -192.0, 768.0}},
      {"B * d0", DType::BFloat16, {128.0, 386.0, -193.0, 772.0}},
      {"B / i0", DType::BFloat16, {0.00194549560546875, 0.005828857421875, -0.0029144287109375, 0.01165771484375}},
      {"i0 / B", DType::BFloat16, {512.0, 171.0, -342.0, 85.5}},
      {"div(B2, i0, \"trunc\")", DType::BFloat16, {7.0, -7.0, 3.0, 19.0}},
      {"div(B2, i0, \"floor\")", DType::BFloat16, {7.0, -8.0, 3.0, 19.0}},
      {"div(B2, I4, \"trunc\")", DType::BFloat16, {8.0, -8.0, 3.0, 19.0}},
      {"remainder(B2, i0)", DType::BFloat16, {0.0, -0.0, 232.0, 128.0}},
      {"B + 257", DType::BFloat16, {256.0, 258.0, 255.0, 260.0}},
      {"B * 257", DType::BFloat16, {128.0, 386.0, -193.0, 772.0}},
      {"H * 2049", DType::Float16, {1024.0, 3074.0, -1537.0, 6148.0}},
      {"B / 257", DType::BFloat16, {0.00194549560546875, 0.005828857421875, -0.0029144287109375, 0.01165771484375}},
      {"lerp(B, E, 0.3)", DType::BFloat16, {90.5, -89.0, 1.578125, 302.0}},
  };
  return c;
}
// clang-format on

/// The expressions of scalar_cases(), in its order: B, H bfloat16/float16
/// [0.5, 1.5, -0.75, 3], E bfloat16 [300, -300, 7, 1000], B2 bfloat16
/// [2048, -2048, 1000, 5000], C bool [1, 0, 1, 0], I4 int16 [257] * 4, i1
/// int16 [257]; 0-dim: i0 int16 257, n32 int32 16777217, f0 float32 257, d0
/// float64 257, b0 bfloat16 2049, j0 int32 2049.
std::vector<Tensor> scalar_exprs(const Tensor& B, const Tensor& H, const Tensor& E,
                                 const Tensor& B2, const Tensor& C, const Tensor& I4,
                                 const Tensor& i1, const Tensor& i0, const Tensor& n32,
                                 const Tensor& f0, const Tensor& d0, const Tensor& b0,
                                 const Tensor& j0) {
  (void)E;
  return {i0 + B,
          B - i0,
          add(B, i0, 2),
          add(B, n32, 3),
          B + f0,
          where(C, i0, B),
          H + b0,
          H - j0,
          i0 * B,
          B * i0,
          B * i1,
          B * I4,
          B * d0,
          B / i0,
          i0 / B,
          div(B2, i0, "trunc"),
          div(B2, i0, "floor"),
          div(B2, I4, "trunc"),
          remainder(B2, i0),
          B + 257,
          B * 257,
          H * 2049,
          B / 257,
          lerp(B, E, 0.3)};
}

}  // namespace

// 0-dim tensors, one-element tensors and numbers with float16/bfloat16
// tensors: rounded to the common dtype (add, sub, where, remainder, a
// 0-dim integer with alpha), except a number mul, div and lerp read at opmath
// precision and a one-element second operand of mul and div (trunc, floor).
TEST_P(MixedPromotion, ZeroDimAndNumbersMatchPyTorch) {
  const std::vector<double> v = {0.5, 1.5, -0.75, 3.0};
  const Tensor B = T(v, DType::BFloat16), H = T(v, DType::Float16),
               E = T({300, -300, 7, 1000}, DType::BFloat16),
               B2 = T({2048, -2048, 1000, 5000}, DType::BFloat16), C = T({1, 0, 1, 0}, DType::Bool),
               I4 = T({257, 257, 257, 257}, DType::Int16), i1 = T({257}, DType::Int16);
  for (bool cpu_scalars : {false, true}) {
    SCOPED_TRACE(cpu_scalars ? "0-dim CPU tensors" : "0-dim tensors on the device");
    const Tensor i0 = scalar_tensor(257, DType::Int16, cpu_scalars),
                 n32 = scalar_tensor(16777217, DType::Int32, cpu_scalars),
                 f0 = scalar_tensor(257, DType::Float32, cpu_scalars),
                 d0 = scalar_tensor(257, DType::Float64, cpu_scalars),
                 b0 = scalar_tensor(2049, DType::BFloat16, cpu_scalars),
                 j0 = scalar_tensor(2049, DType::Int32, cpu_scalars);
    const std::vector<Tensor> eager = scalar_exprs(B, H, E, B2, C, I4, i1, i0, n32, f0, d0, b0, j0);
    std::vector<Tensor> got;
    // Compiled with 0-dim tensors of the device (on the CPU both runs are that).
    if (!cpu_scalars) {
      auto compiled = compile(scalar_exprs, fullgraph());
      got = compiled(B, H, E, B2, C, I4, i1, i0, n32, f0, d0, b0, j0);
      EXPECT_EQ(compiled.stats().eager_calls, 0);
    }
    ASSERT_EQ(eager.size(), scalar_cases().size());
    for (size_t i = 0; i < eager.size(); ++i) {
      const Expected& k = scalar_cases()[i];
      EXPECT_EQ(eager[i].device(), GetParam()) << k.expr;
      EXPECT_TRUE(same_values(eager[i], k.out, k.want)) << k.expr << " eager";
      if (!got.empty()) {
        EXPECT_TRUE(same_values(got[i], k.out, k.want)) << k.expr << " compiled";
      }
    }
  }
}

// lerp as PyTorch's CPU kernel computes it: one fused multiply-add from the
// nearer end (lerp_vec), rounded once; values where the unfused formula is one
// float32 ulp away, with a tensor weight and a number, and in bfloat16.
TEST_P(MixedPromotion, LerpRoundsOnceAsPyTorch) {
  // clang-format off
  const std::vector<double> s = {0x1.b28a2a0000000p-1, 0x1.961a000000000p+0, -0x1.289ea60000000p-2, -0x1.78096e0000000p+0, 0x1.9c8bbc0000000p-1, -0x1.7e5ab80000000p-4, 0x1.0e2be80000000p+0, -0x1.3bf0460000000p+0, -0x1.ffac840000000p-2, -0x1.2018580000000p-3, -0x1.99a28e0000000p-2, -0x1.e9ba7a0000000p-1};
  const std::vector<double> e = {0x1.8cf42a0000000p+5, 0x1.a68bb40000000p+6, 0x1.bf9b4e0000000p+7, -0x1.6b6ae40000000p+6, -0x1.7f890c0000000p+6, 0x1.0cb0d60000000p+5, 0x1.8c432e0000000p+5, -0x1.9bc4d20000000p+6, 0x1.2693900000000p+2, 0x1.6ac3ec0000000p+4, -0x1.f8f9ce0000000p+5, -0x1.2f918e0000000p+8};
  const std::vector<double> w = {-0x1.2687b00000000p-3, -0x1.497de00000000p-4, -0x1.d282a00000000p-2, -0x1.41c2280000000p-2, 0x1.595a080000000p-2, -0x1.8f72380000000p-2, 0x1.244a640000000p+0, 0x1.6a75180000000p-1, 0x1.6efe640000000p-1, 0x1.2d66b80000000p+0, 0x1.e14dd00000000p-1, 0x1.47f47e0000000p+0};
  const std::vector<double> want = {-0x1.8a91c60000000p+2, -0x1.b228120000000p+2, -0x1.99864e0000000p+6, 0x1.a9e18c0000000p+4, -0x1.fcdb480000000p+4, -0x1.a766820000000p+3, 0x1.c33d620000000p+5, -0x1.24f1720000000p+6, 0x1.942e720000000p+1, 0x1.ab801a0000000p+4, -0x1.dae48a0000000p+5, -0x1.84a0060000000p+8};
  const std::vector<double> want_03 = {0x1.ef5b0c0000000p+3, 0x1.0669320000000p+5, 0x1.0bc0c00000000p+6, -0x1.c48d7c0000000p+4, -0x1.c337ce0000000p+4, 0x1.4056840000000p+3, 0x1.f327a80000000p+3, -0x1.fbf1e60000000p+4, 0x1.07f2e40000000p+0, 0x1.ad042c0000000p+2, -0x1.3377440000000p+4, -0x1.6ef5e20000000p+6};
  const std::vector<double> want_bf16 = {-0x1.8800000000000p+2, -0x1.b200000000000p+2, -0x1.9a00000000000p+6, 0x1.aa00000000000p+4, -0x1.fe00000000000p+4, -0x1.a600000000000p+3, 0x1.c200000000000p+5, -0x1.2400000000000p+6, 0x1.9200000000000p+1, 0x1.ac00000000000p+4, -0x1.da00000000000p+5, -0x1.8600000000000p+8};
  // clang-format on
  auto f = [](const Tensor& a, const Tensor& b, const Tensor& c) {
    return std::vector<Tensor>{lerp(a, b, c), lerp(a, b, 0.3)};
  };
  auto compiled = compile(f, fullgraph());
  for (DType dt : {DType::Float32, DType::BFloat16}) {
    SCOPED_TRACE(dtype_name(dt));
    const Tensor a = T(s, dt), b = T(e, dt), c = T(w, dt);
    const std::vector<Tensor> eager = f(a, b, c), got = compiled(a, b, c);
    if (dt == DType::Float32) {
      EXPECT_TRUE(same_values(eager[0], dt, want));
      EXPECT_TRUE(same_values(got[0], dt, want));
      EXPECT_TRUE(same_values(eager[1], dt, want_03));
      EXPECT_TRUE(same_values(got[1], dt, want_03));
    } else {
      EXPECT_TRUE(same_values(eager[0], dt, want_bf16));
      EXPECT_TRUE(same_values(got[0], dt, want_bf16));
    }
  }
  EXPECT_EQ(compiled.stats().eager_calls, 0);
}

// add / sub with alpha != 1: one fused multiply-add (float32 and float64 too),
// alpha rounded to a float16 / bfloat16 dtype first, as PyTorch computes them
// (its values, PyTorch 2.15 on the CPU; inputs exact in their dtype). 32
// elements: PyTorch's vectorized loop; its scalar loop for a tail shorter than
// a vector rounds a float16 / bfloat16 product to that dtype before the add.
// A 0-dim weight of another dtype (a tensor, not a number): PyTorch reads it
// at start's opmath precision (float32 for float16 / bfloat16, unrounded).
// Values from PyTorch 2.15.
TEST_P(MixedPromotion, LerpTakesAZeroDimWeightOfAnotherDtype) {
  const std::vector<double> s = {0, 1, 2, -3.5, 100}, e = {10, 10, -7.25, 4, -50};
  struct Row {
    DType dt, wdt;
    double w;
    std::vector<double> want;
  };
  const std::vector<Row> rows = {
      {DType::Float16, DType::Float32, 0.3, {3.0, 3.701171875, -0.775390625, -1.25, 55.0}},
      {DType::BFloat16, DType::Float64, 0.3, {3.0, 3.703125, -0.78125, -1.2421875, 55.0}},
      {DType::Float32,
       DType::Float64,
       0.1,
       {1.0, 1.899999976158142, 1.0749999284744263, -2.75, 85.0}},
      {DType::Float32, DType::Int64, 1, {10.0, 10.0, -7.25, 4.0, -50.0}},
      {DType::Float16,
       DType::BFloat16,
       0.7,
       {6.9921875, 7.29296875, -4.46875, 1.744140625, -4.8828125}},
  };
  auto f = [](const Tensor& a, const Tensor& b, const Tensor& w) {
    return std::vector<Tensor>{lerp(a, b, w)};
  };
  auto compiled = compile(f, fullgraph());
  for (const Row& r : rows) {
    SCOPED_TRACE(std::string(dtype_name(r.dt)) + " with a 0-dim " + std::string(dtype_name(r.wdt)));
    const Tensor a = T(s, r.dt), b = T(e, r.dt), w = scalar_tensor(r.w, r.wdt);
    EXPECT_TRUE(same_values(f(a, b, w)[0], r.dt, r.want)) << "eager";
    EXPECT_TRUE(same_values(compiled(a, b, w)[0], r.dt, r.want)) << "compiled";
    EXPECT_EQ(compiled.stats().eager_calls, 0);
  }
  // The result dtype promotes the three, as PyTorch's: uint8 ends with a float32
  // 0-dim weight give float32; 0-dim float32 ends with a float64 one, float64.
  const std::vector<Tensor> u8 = compiled(T({1, 2}, DType::UInt8), T({3, 4}, DType::UInt8),
                                          scalar_tensor(0.5, DType::Float32));
  EXPECT_TRUE(same_values(u8[0], DType::Float32, {2, 3}));
  const std::vector<Tensor> d0 =
      f(scalar_tensor(1, DType::Float32), scalar_tensor(3, DType::Float32),
        scalar_tensor(0.3, DType::Float64));
  EXPECT_TRUE(same_values(d0[0].reshape({1}), DType::Float64, {0x1.999999999999ap+0}));
  // Only a 0-dim weight may differ: a one-element [1] float64 weight is refused, as in PyTorch.
  const Tensor a = T(s, DType::Float32), b = T(e, DType::Float32);
  EXPECT_THROW(lerp(a, b, T({0.5}, DType::Float64)), Error);
  // Its gradient comes back in its own dtype: d/dw sum(lerp) = sum(e - s).
  AutoGradMode grad(true);  // the fixture turns it off
  Tensor w = scalar_tensor(0.5, DType::Float64).requires_grad_(true);
  lerp(a, b, w).sum().backward();
  ASSERT_TRUE(w.grad().defined());
  EXPECT_EQ(w.grad().dtype(), DType::Float64);
  EXPECT_EQ(w.grad().cpu().item().to_double(), -132.75);
  // start's gradient takes 1 - weight in the weight's dtype, as PyTorch's
  // formula: 1 - float16(0.3) = 0.69995 rounds to 0.70020 in float16.
  Tensor s32 = T({0, 1}, DType::Float32).requires_grad_(true), e32 = T({10, 10}, DType::Float32);
  lerp(s32, e32, scalar_tensor(0.3, DType::Float16)).sum().backward();
  EXPECT_EQ(s32.grad().cpu().to_vector<double>(),
            (std::vector<double>{0.7001953125, 0.7001953125}));
}

// div with rounding_mode trunc / floor and floor_divide of float16 / bfloat16
// by a tensor: PyTorch rounds the quotient to the dtype before truncating,
// and each step of c10's div_floor_floating (bfloat16 256 / -1.5: trunc
// -171, as -170.67 rounds to -171 first). A one-element divisor keeps float
// until the one rounding (trunc -170). Values from PyTorch 2.15: pairs where
// the two rules differ, and a few where they agree.
TEST_P(MixedPromotion, HalfDivisionRoundsAsPyTorch) {
  struct Row {
    DType dt;
    double a, b, trunc, floor;
  };
  // clang-format off
  const std::vector<Row> rows = {
      {DType::Float16, -0x1.7980000000000p-4, 0x1.cec0000000000p+0, -0x0.0p+0, -0x1.0000000000000p+0},
      {DType::Float16, 0x1.2480000000000p-9, 0x1.1e00000000000p+3, 0x0.0p+0, 0x0.0p+0},
      {DType::Float16, -0x1.6d40000000000p+1, -0x1.b440000000000p-11, 0x1.acc0000000000p+11, 0x1.acc0000000000p+11},
      {DType::Float16, 0x1.1780000000000p+5, 0x1.9b40000000000p-2, 0x1.5c00000000000p+6, 0x1.5800000000000p+6},
      {DType::Float16, 0x1.a900000000000p+1, 0x1.4080000000000p-8, 0x1.5380000000000p+9, 0x1.5300000000000p+9},
      {DType::Float16, 0x1.a7c0000000000p+6, -0x1.2980000000000p-4, -0x1.6cc0000000000p+10, -0x1.6cc0000000000p+10},
      {DType::Float16, -0x1.fcc0000000000p+1, -0x1.9940000000000p-9, 0x1.3e40000000000p+10, 0x1.3e00000000000p+10},
      {DType::Float16, -0x1.1040000000000p+1, 0x1.9f40000000000p-12, -0x1.4fc0000000000p+12, -0x1.4fc0000000000p+12},
      {DType::Float16, 0x1.2480000000000p+8, -0x1.0840000000000p-5, -0x1.1b40000000000p+13, -0x1.1b40000000000p+13},
      {DType::Float16, -0x1.0800000000000p+6, 0x1.2e40000000000p-5, -0x1.bf40000000000p+10, -0x1.bf80000000000p+10},
      {DType::Float16, 0x1.ff40000000000p+6, 0x1.1740000000000p-6, 0x1.d4c0000000000p+12, 0x1.d4c0000000000p+12},
      {DType::Float16, -0x1.cfc0000000000p+9, -0x1.cf80000000000p-3, 0x1.0040000000000p+12, 0x1.0040000000000p+12},
      {DType::Float16, 0x1.5140000000000p+11, 0x1.9000000000000p-2, 0x1.afc0000000000p+12, 0x1.afc0000000000p+12},
      {DType::Float16, 0x1.0000000000000p+8, -0x1.8000000000000p+0, -0x1.5400000000000p+7, -0x1.5600000000000p+7},
      {DType::BFloat16, 0x1.9400000000000p-11, -0x1.3800000000000p-3, -0x0.0p+0, -0x1.0000000000000p+0},
      {DType::BFloat16, 0x1.5600000000000p+0, -0x1.8c00000000000p+2, -0x0.0p+0, -0x1.0000000000000p+0},
      {DType::BFloat16, -0x1.ae00000000000p+0, 0x1.3c00000000000p-4, -0x1.5000000000000p+4, -0x1.6000000000000p+4},
      {DType::BFloat16, -0x1.cc00000000000p-1, 0x1.0c00000000000p-7, -0x1.b800000000000p+6, -0x1.b800000000000p+6},
      {DType::BFloat16, -0x1.6a00000000000p+3, -0x1.be00000000000p-4, 0x1.a000000000000p+6, 0x1.9800000000000p+6},
      {DType::BFloat16, 0x1.a600000000000p+2, -0x1.1000000000000p-5, -0x1.8e00000000000p+7, -0x1.8e00000000000p+7},
      {DType::BFloat16, -0x1.3600000000000p+6, -0x1.3000000000000p-6, 0x1.0600000000000p+12, 0x1.0600000000000p+12},
      {DType::BFloat16, -0x1.1800000000000p+6, 0x1.e200000000000p-3, -0x1.2a00000000000p+8, -0x1.2c00000000000p+8},
      {DType::BFloat16, 0x1.ee00000000000p+4, -0x1.6800000000000p-1, -0x1.6000000000000p+5, -0x1.6000000000000p+5},
      {DType::BFloat16, -0x1.ae00000000000p+2, -0x1.1600000000000p-6, 0x1.8c00000000000p+8, 0x1.8a00000000000p+8},
      {DType::BFloat16, -0x1.7a00000000000p+5, 0x1.7000000000000p-7, -0x1.0600000000000p+12, -0x1.0600000000000p+12},
      {DType::BFloat16, -0x1.8200000000000p+2, 0x1.3e00000000000p-7, -0x1.3600000000000p+9, -0x1.3600000000000p+9},
      {DType::BFloat16, 0x1.0000000000000p+8, -0x1.8000000000000p+0, -0x1.5600000000000p+7, -0x1.5600000000000p+7},
  };
  // clang-format on
  auto f = [](const Tensor& a, const Tensor& b, const Tensor& s) {
    // An expanded one-element divisor is a scalar to PyTorch too (its stride is 0).
    return std::vector<Tensor>{div(a, b, std::string("trunc")), div(a, b, std::string("floor")),
                               floor_divide(a, b), div(a, s, std::string("trunc")),
                               div(a, s.expand(a.sizes()), std::string("trunc"))};
  };
  auto compiled = compile(f, fullgraph());
  for (DType dt : {DType::Float16, DType::BFloat16}) {
    SCOPED_TRACE(dtype_name(dt));
    std::vector<double> a, b, trunc, floor;
    for (const Row& r : rows) {
      if (r.dt != dt) continue;
      a.push_back(r.a);
      b.push_back(r.b);
      trunc.push_back(r.trunc);
      floor.push_back(r.floor);
    }
    // The last row is 256 / -1.5; by the one-element tensor [-1.5]: float's -170.
    const Tensor ta = T(a, dt), tb = T(b, dt), s = T({-1.5}, dt);
    const std::vector<Tensor> eager = f(ta, tb, s), got = compiled(ta, tb, s);
    for (const auto* r : {&eager, &got}) {
      const char* how = r == &eager ? "eager" : "compiled";
      EXPECT_TRUE(same_values((*r)[0], dt, trunc)) << "trunc " << how;
      EXPECT_TRUE(same_values((*r)[1], dt, floor)) << "floor " << how;
      EXPECT_TRUE(same_values((*r)[2], dt, floor)) << "floor_divide " << how;
      EXPECT_EQ((*r)[3].select(0, static_cast<int64_t>(a.size()) - 1).cpu().item().to_double(),
                -170.0)
          << "256 / [-1.5] " << how;
      EXPECT_EQ((*r)[4].select(0, static_cast<int64_t>(a.size()) - 1).cpu().item().to_double(),
                -170.0)
          << "256 / [-1.5].expand " << how;
    }
  }
  EXPECT_EQ(compiled.stats().eager_calls, 0);
}

TEST_P(MixedPromotion, AddAndSubWithAlphaAsPyTorch) {
  struct AlphaCase {
    DType dt;
    double alpha;
    std::vector<double> a, b, add, sub;
  };
  // clang-format off
  const std::vector<AlphaCase> cases = {
    {DType::Float32, 3.0000001,
     {0x1.0f6e8e0000000p-2, 0x1.80f4700000000p-3, 0x1.d627660000000p+2, 0x1.5e20f60000000p+2, 0x1.1f115c0000000p+2, 0x1.dc18640000000p+2, 0x1.33d44a0000000p+1, 0x1.79c4cc0000000p+1, -0x1.9d12780000000p+1, -0x1.98c1020000000p+1, 0x1.8919aa0000000p+1, 0x1.08e2d20000000p+1, 0x1.f6d8ea0000000p+2, 0x1.cae4f20000000p+0, 0x1.2925700000000p+1, -0x1.0c99540000000p+2, 0x1.07b9a60000000p-1, -0x1.2a06c60000000p+0, 0x1.d502660000000p+0, 0x1.b17a780000000p+2, 0x1.751bc40000000p+2, 0x1.eea5a20000000p+2, -0x1.711ab80000000p+2, 0x1.749d020000000p+1, -0x1.99aa1c0000000p-2, -0x1.36f1ba0000000p+3, -0x1.3790c80000000p-1, -0x1.586ff80000000p+3, 0x1.bdfa980000000p+2, -0x1.0c449e0000000p+1, -0x1.22b12c0000000p+0, 0x1.cf6ff40000000p+0},
     {-0x1.44e6ac0000000p+2, 0x1.48de640000000p+2, -0x1.1dd12c0000000p+1, -0x1.58c6be0000000p+0, 0x1.cab50e0000000p-2, 0x1.46ed940000000p-1, 0x1.2681ae0000000p+1, -0x1.221d620000000p+1, 0x1.58ff8c0000000p+1, -0x1.dfd5200000000p+1, 0x1.74c4280000000p+1, 0x1.6dd3ea0000000p-3, 0x1.477df60000000p+1, 0x1.44d4060000000p+0, -0x1.876f960000000p+2, 0x1.76c32c0000000p+1, 0x1.3c27d60000000p+2, 0x1.f3b6ec0000000p+1, 0x1.131ca60000000p-1, -0x1.4e6d000000000p-2, 0x1.ab339e0000000p-1, -0x1.b8392c0000000p+2, 0x1.13f0d40000000p+1, -0x1.1c14da0000000p+3, -0x1.7e2c760000000p+0, -0x1.8b4bde0000000p+2, -0x1.4d800c0000000p-1, -0x1.f044060000000p+1, -0x1.4ee78a0000000p+1, -0x1.61007e0000000p+2, -0x1.6cb04e0000000p+2, -0x1.b5d4ca0000000p+0},
     {-0x1.dede8e0000000p+3, 0x1.f351680000000p+3, 0x1.4b6d200000000p-1, 0x1.6e2f9e0000000p+0, 0x1.75134e0000000p+2, 0x1.2b58be0000000p+3, 0x1.29d6540000000p+3, -0x1.ec935a0000000p+1, 0x1.36f6160000000p+2, -0x1.ce10180000000p+3, 0x1.79d9880000000p+3, 0x1.4d7a8e0000000p+1, 0x1.f10aee0000000p+3, 0x1.6658400000000p+2, -0x1.006f020000000p+4, 0x1.258b6e0000000p+2, 0x1.eab75c0000000p+3, 0x1.5188580000000p+3, 0x1.b8d6b00000000p+1, 0x1.72c6080000000p+2, 0x1.0aa7900000000p+3, -0x1.9d02f00000000p+3, 0x1.6674300000000p-1, -0x1.7b8ba60000000p+4, -0x1.383bfa0000000p+2, -0x1.c3f1c40000000p+4, -0x1.48043c0000000p+1, -0x1.66517e0000000p+4, -0x1.c305b80000000p-1, -0x1.2a48f20000000p+4, -0x1.23af4e0000000p+4, -0x1.a907340000000p+1},
     {0x1.efd5760000000p+3, -0x1.e749c40000000p+3, 0x1.c170940000000p+3, 0x1.305b020000000p+3, 0x1.921ed20000000p+1, 0x1.617f4c0000000p+2, -0x1.1fd8600000000p+2, 0x1.38073c0000000p+3, -0x1.6a04480000000p+3, 0x1.01af980000000p+3, -0x1.6a99680000000p+2, 0x1.88962c0000000p+0, 0x1.737f200000000p-3, -0x1.01cb900000000p+1, 0x1.4ab85e0000000p+4, -0x1.9f5f0c0000000p+3, -0x1.c9c0260000000p+3, -0x1.9c0a0a0000000p+3, 0x1.c2bb680000000p-3, 0x1.f02ee80000000p+2, 0x1.a9d0d20000000p+1, 0x1.c5d44a0000000p+4, -0x1.8781fc0000000p+3, 0x1.d8b2e80000000p+4, 0x1.0506b60000000p+2, 0x1.1a00140000000p+3, 0x1.5877ae0000000p+0, 0x1.bc30c80000000p-1, 0x1.da2af40000000p+3, 0x1.ce6f960000000p+3, 0x1.feb2500000000p+3, 0x1.bc3b940000000p+2}},
    {DType::Float64, 0.1,
     {0x1.0f6e8d3a53973p-2, 0x1.80f46f1ebf213p-3, 0x1.d6276549d121ep+2, 0x1.5e20f53cc4c77p+2, 0x1.1f115c8471adbp+2, 0x1.dc186469a9861p+2, 0x1.33d449b0b2b5bp+1, 0x1.79c4cc50d0f5bp+1, -0x1.9d127871df74bp+1, -0x1.98c1010293323p+1, 0x1.8919a94819b5dp+1, 0x1.08e2d281fd3b7p+1, 0x1.f6d8e92fd72cep+2, 0x1.cae4f230cc977p+0, 0x1.29257037f8aa8p+1, -0x1.0c99542db62ebp+2, 0x1.07b9a6152aa19p-1, -0x1.2a06c67e33848p+0, 0x1.d5026572adeb7p+0, 0x1.b17a7806ce055p+2, 0x1.751bc44dd094ap+2, 0x1.eea5a21096e4bp+2, -0x1.711ab8c9c9497p+2, 0x1.749d011ade7a0p+1, -0x1.99aa1cb7c6ac4p-2, -0x1.36f1b9fa84205p+3, -0x1.3790c8dcbdd93p-1, -0x1.586ff8c3a394bp+3, 0x1.bdfa986709c28p+2, -0x1.0c449e70ad4cdp+1, -0x1.22b12c8c0e81cp+0, 0x1.cf6ff3d1fa92fp+0},
     {-0x1.44e6ac05bbe58p+2, 0x1.48de64b0ea533p+2, -0x1.1dd12c4e0a98ep+1, -0x1.58c6bdfc80ccdp+0, 0x1.cab50d24f4e21p-2, 0x1.46ed947eac5a4p-1, 0x1.2681ad21df0e9p+1, -0x1.221d618b7cdf4p+1, 0x1.58ff8b4e3986fp+1, -0x1.dfd51f2e95415p+1, 0x1.74c427b162532p+1, 0x1.6dd3e94b83e0fp-3, 0x1.477df58675679p+1, 0x1.44d40628b5668p+0, -0x1.876f9619a0de4p+2, 0x1.76c32c2c9e686p+1, 0x1.3c27d5e2175b7p+2, 0x1.f3b6eca217339p+1, 0x1.131ca56f3d9e0p-1, -0x1.4e6cff9649bbdp-2, 0x1.ab339e1a8f23ep-1, -0x1.b8392ca8b429dp+2, 0x1.13f0d33abdc09p+1, -0x1.1c14dab975a39p+3, -0x1.7e2c751fd0453p+0, -0x1.8b4bde8f2bacfp+2, -0x1.4d800b3596af2p-1, -0x1.f04406b1fa866p+1, -0x1.4ee78a4fdaccfp+1, -0x1.61007d9ae7167p+2, -0x1.6cb04e7aa4983p+2, -0x1.b5d4c983545a6p+0},
     {-0x1.f0d1d8d0e549bp-3, 0x1.67556c55380aep-1, 0x1.c7dcefdf83cd7p+2, 0x1.558263b00e5bfp+2, 0x1.21ef4affe0025p+2, 0x1.e02e8fde72140p+2, 0x1.5147a7cdaf6a6p+1, 0x1.5cc1dc294478fp+1, -0x1.7a92841d401a6p+1, -0x1.c8bcb75408858p+1, 0x1.ae607a0d09f15p+1, 0x1.0b2c2590dc74dp+1, 0x1.039c678814ec4p+3, 0x1.eb608c6811ee8p+0, 0x1.b5b7d798e42f5p+0, -0x1.f3b8bd8a2952fp+1, 0x1.0253289838423p+0, -0x1.8c2ac7eec4279p-1, 0x1.e2c3d41ea4335p+0, 0x1.af63633aaa5c2p+2, 0x1.7a72cfe158c51p+2, 0x1.c29fea661e7a2p+2, -0x1.634eae3a0c997p+2, 0x1.02fb1003e29efp+1, -0x1.194458fbd9ca6p-1, -0x1.4ab5851b464f6p+3, -0x1.58ea63954ceabp-1, -0x1.64d8128816a4ep+3, 0x1.ad3bd17ca5384p+2, -0x1.52de512941eaep+1, -0x1.b4914bf050584p+0, 0x1.a3a77944d889ep+0},
     {0x1.8ba3036e8ce9ap-1, -0x1.4db6698bb0f49p-2, 0x1.e471dab41e765p+2, 0x1.66bf86c97b32fp+2, 0x1.1c336e0903591p+2, 0x1.d80238f4e0f82p+2, 0x1.1660eb93b6010p+1, 0x1.96c7bc785d727p+1, -0x1.bf926cc67ecf0p+1, -0x1.68c54ab11ddeep+1, 0x1.63d2d883297a5p+1, 0x1.06997f731e021p+1, 0x1.e679034f84815p+2, 0x1.aa6957f987406p+0, 0x1.776ef4a37f3d6p+1, -0x1.1f56499657b3fp+2, 0x1.599f5f3c97d98p-6, -0x1.8df8290504f53p+0, 0x1.c740f6c6b7a39p+0, 0x1.b3918cd2f1ae8p+2, 0x1.6fc4b8ba48643p+2, 0x1.0d55acdd87a7ap+3, -0x1.7ee6c35985f97p+2, 0x1.e63ef231da551p+1, -0x1.00cb8777d9c3cp-2, -0x1.232deed9c1f14p+3, -0x1.16372e242ec7bp-1, -0x1.4c07deff30848p+3, 0x1.ceb95f516e4ccp+2, -0x1.8b55d770315d7p+0, -0x1.21a21a4f99569p-1, 0x1.fb386e5f1c9c0p+0}},
    {DType::Float16, 0.1,
     {0x1.0f80000000000p-2, 0x1.8100000000000p-3, 0x1.d640000000000p+2, 0x1.5e40000000000p+2, 0x1.1f00000000000p+2, 0x1.dc00000000000p+2, 0x1.33c0000000000p+1, 0x1.79c0000000000p+1, -0x1.9d00000000000p+1, -0x1.98c0000000000p+1, 0x1.8900000000000p+1, 0x1.0900000000000p+1, 0x1.f6c0000000000p+2, 0x1.cb00000000000p+0, 0x1.2940000000000p+1, -0x1.0c80000000000p+2, 0x1.07c0000000000p-1, -0x1.2a00000000000p+0, 0x1.d500000000000p+0, 0x1.b180000000000p+2, 0x1.7500000000000p+2, 0x1.eec0000000000p+2, -0x1.7100000000000p+2, 0x1.7480000000000p+1, -0x1.99c0000000000p-2, -0x1.3700000000000p+3, -0x1.3780000000000p-1, -0x1.5880000000000p+3, 0x1.be00000000000p+2, -0x1.0c40000000000p+1, -0x1.22c0000000000p+0, 0x1.cf80000000000p+0},
     {-0x1.4500000000000p+2, 0x1.48c0000000000p+2, -0x1.1dc0000000000p+1, -0x1.58c0000000000p+0, 0x1.cac0000000000p-2, 0x1.4700000000000p-1, 0x1.2680000000000p+1, -0x1.2200000000000p+1, 0x1.5900000000000p+1, -0x1.dfc0000000000p+1, 0x1.74c0000000000p+1, 0x1.6dc0000000000p-3, 0x1.4780000000000p+1, 0x1.44c0000000000p+0, -0x1.8780000000000p+2, 0x1.76c0000000000p+1, 0x1.3c40000000000p+2, 0x1.f3c0000000000p+1, 0x1.1300000000000p-1, -0x1.4e80000000000p-2, 0x1.ab40000000000p-1, -0x1.b840000000000p+2, 0x1.1400000000000p+1, -0x1.1c00000000000p+3, -0x1.7e40000000000p+0, -0x1.8b40000000000p+2, -0x1.4d80000000000p-1, -0x1.f040000000000p+1, -0x1.4f00000000000p+1, -0x1.6100000000000p+2, -0x1.6cc0000000000p+2, -0x1.b5c0000000000p+0},
     {-0x1.f0c0000000000p-3, 0x1.6740000000000p-1, 0x1.c800000000000p+2, 0x1.55c0000000000p+2, 0x1.21c0000000000p+2, 0x1.e000000000000p+2, 0x1.5140000000000p+1, 0x1.5cc0000000000p+1, -0x1.7a80000000000p+1, -0x1.c8c0000000000p+1, 0x1.ae40000000000p+1, 0x1.0b40000000000p+1, 0x1.0380000000000p+3, 0x1.eb80000000000p+0, 0x1.b600000000000p+0, -0x1.f380000000000p+1, 0x1.0240000000000p+0, -0x1.8c40000000000p-1, 0x1.e2c0000000000p+0, 0x1.af80000000000p+2, 0x1.7a40000000000p+2, 0x1.c2c0000000000p+2, -0x1.6340000000000p+2, 0x1.0300000000000p+1, -0x1.1940000000000p-1, -0x1.4ac0000000000p+3, -0x1.58c0000000000p-1, -0x1.6500000000000p+3, 0x1.ad40000000000p+2, -0x1.52c0000000000p+1, -0x1.b480000000000p+0, 0x1.a3c0000000000p+0},
     {0x1.8bc0000000000p-1, -0x1.4d40000000000p-2, 0x1.e480000000000p+2, 0x1.66c0000000000p+2, 0x1.1c40000000000p+2, 0x1.d800000000000p+2, 0x1.1640000000000p+1, 0x1.96c0000000000p+1, -0x1.bf80000000000p+1, -0x1.68c0000000000p+1, 0x1.63c0000000000p+1, 0x1.06c0000000000p+1, 0x1.e680000000000p+2, 0x1.aa80000000000p+0, 0x1.7780000000000p+1, -0x1.1f40000000000p+2, 0x1.5a00000000000p-6, -0x1.8e00000000000p+0, 0x1.c740000000000p+0, 0x1.b380000000000p+2, 0x1.6fc0000000000p+2, 0x1.0d80000000000p+3, -0x1.7ec0000000000p+2, 0x1.e600000000000p+1, -0x1.0100000000000p-2, -0x1.2340000000000p+3, -0x1.1640000000000p-1, -0x1.4c00000000000p+3, 0x1.cec0000000000p+2, -0x1.8b40000000000p+0, -0x1.21c0000000000p-1, 0x1.fb40000000000p+0}},
    {DType::BFloat16, 3.3,
     {0x1.1000000000000p-2, 0x1.8000000000000p-3, 0x1.d600000000000p+2, 0x1.5e00000000000p+2, 0x1.2000000000000p+2, 0x1.dc00000000000p+2, 0x1.3400000000000p+1, 0x1.7a00000000000p+1, -0x1.9e00000000000p+1, -0x1.9800000000000p+1, 0x1.8a00000000000p+1, 0x1.0800000000000p+1, 0x1.f600000000000p+2, 0x1.ca00000000000p+0, 0x1.2a00000000000p+1, -0x1.0c00000000000p+2, 0x1.0800000000000p-1, -0x1.2a00000000000p+0, 0x1.d600000000000p+0, 0x1.b200000000000p+2, 0x1.7600000000000p+2, 0x1.ee00000000000p+2, -0x1.7200000000000p+2, 0x1.7400000000000p+1, -0x1.9a00000000000p-2, -0x1.3600000000000p+3, -0x1.3800000000000p-1, -0x1.5800000000000p+3, 0x1.be00000000000p+2, -0x1.0c00000000000p+1, -0x1.2200000000000p+0, 0x1.d000000000000p+0},
     {-0x1.4400000000000p+2, 0x1.4800000000000p+2, -0x1.1e00000000000p+1, -0x1.5800000000000p+0, 0x1.ca00000000000p-2, 0x1.4600000000000p-1, 0x1.2600000000000p+1, -0x1.2200000000000p+1, 0x1.5800000000000p+1, -0x1.e000000000000p+1, 0x1.7400000000000p+1, 0x1.6e00000000000p-3, 0x1.4800000000000p+1, 0x1.4400000000000p+0, -0x1.8800000000000p+2, 0x1.7600000000000p+1, 0x1.3c00000000000p+2, 0x1.f400000000000p+1, 0x1.1400000000000p-1, -0x1.4e00000000000p-2, 0x1.ac00000000000p-1, -0x1.b800000000000p+2, 0x1.1400000000000p+1, -0x1.1c00000000000p+3, -0x1.7e00000000000p+0, -0x1.8c00000000000p+2, -0x1.4e00000000000p-1, -0x1.f000000000000p+1, -0x1.4e00000000000p+1, -0x1.6200000000000p+2, -0x1.6c00000000000p+2, -0x1.b600000000000p+0},
     {-0x1.0600000000000p+4, 0x1.1200000000000p+4, -0x1.7400000000000p-6, 0x1.0a00000000000p+0, 0x1.7e00000000000p+2, 0x1.3200000000000p+3, 0x1.4000000000000p+3, -0x1.2200000000000p+2, 0x1.6800000000000p+2, -0x1.f200000000000p+3, 0x1.9600000000000p+3, 0x1.5400000000000p+1, 0x1.0400000000000p+4, 0x1.7e00000000000p+2, -0x1.1e00000000000p+4, 0x1.5c00000000000p+2, 0x1.0c00000000000p+4, 0x1.7600000000000p+3, 0x1.ce00000000000p+1, 0x1.6e00000000000p+2, 0x1.1400000000000p+3, -0x1.de00000000000p+3, 0x1.5400000000000p+0, -0x1.a600000000000p+4, -0x1.5400000000000p+2, -0x1.e200000000000p+4, -0x1.6200000000000p+1, -0x1.7800000000000p+4, -0x1.a200000000000p+0, -0x1.4600000000000p+4, -0x1.3e00000000000p+4, -0x1.ea00000000000p+1},
     {0x1.1000000000000p+4, -0x1.0c00000000000p+4, 0x1.d600000000000p+3, 0x1.3c00000000000p+3, 0x1.8400000000000p+1, 0x1.5600000000000p+2, -0x1.4a00000000000p+2, 0x1.4e00000000000p+3, -0x1.8400000000000p+3, 0x1.2600000000000p+3, -0x1.a000000000000p+2, 0x1.7a00000000000p+0, -0x1.3600000000000p-1, -0x1.3200000000000p+1, 0x1.6800000000000p+4, -0x1.ba00000000000p+3, -0x1.f800000000000p+3, -0x1.c200000000000p+3, 0x1.e000000000000p-5, 0x1.f600000000000p+2, 0x1.8c00000000000p+1, 0x1.e600000000000p+4, -0x1.9c00000000000p+3, 0x1.0200000000000p+5, 0x1.2200000000000p+2, 0x1.5600000000000p+3, 0x1.8a00000000000p+0, 0x1.0400000000000p+1, 0x1.f200000000000p+3, 0x1.0200000000000p+4, 0x1.1a00000000000p+4, 0x1.de00000000000p+2}},
  };
  // clang-format on
  for (const AlphaCase& k : cases) {
    SCOPED_TRACE(std::string(dtype_name(k.dt)) + " alpha " + std::to_string(k.alpha));
    const double alpha = k.alpha;
    auto f = [alpha](const Tensor& a, const Tensor& b) {
      return std::vector<Tensor>{add(a, b, alpha), sub(a, b, alpha)};
    };
    auto compiled = compile(f, fullgraph());
    const Tensor a = T(k.a, k.dt), b = T(k.b, k.dt);
    const std::vector<Tensor> eager = f(a, b), got = compiled(a, b);
    EXPECT_TRUE(same_values(eager[0], k.dt, k.add)) << "add eager";
    EXPECT_TRUE(same_values(eager[1], k.dt, k.sub)) << "sub eager";
    EXPECT_TRUE(same_values(got[0], k.dt, k.add)) << "add compiled";
    EXPECT_TRUE(same_values(got[1], k.dt, k.sub)) << "sub compiled";
    EXPECT_EQ(compiled.stats().eager_calls, 0);
  }
}
