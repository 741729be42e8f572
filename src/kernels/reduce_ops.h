// smelt/kernels/reduce_ops.h — accumulator combine rules of every reduction
// (sum, prod, NaN-propagating max/min, argmax/argmin, Welford mean/variance),
// written once. Included by eager kernels and embedded into JIT-generated code.
#pragma once
#include "smelt/half.h"
