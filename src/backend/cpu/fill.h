// Eager CPU fills: constants, arange / linspace, and random numbers from the
// Philox stream (the kernels behind the factory and random ops).
#pragma once
#include "backend/backend.h"

namespace smelt::cpu {

/// See Backend::fill / arange / linspace / random.
void fill(const Tensor& dst, const Scalar& v);
void arange(const Tensor& out, const Scalar& start, const Scalar& step);
void linspace(const Tensor& out, double start, double end);
void random_fill(const Tensor& out, const backend::RandomFill& r);

}  // namespace smelt::cpu
