// Eager CPU indexing kernels: index_select, gather, scatter_add, index_copy
// (rows along dim 0) and the triangle mask of tril / triu. Index values arrive
// validated.
#pragma once
#include <cstdint>

#include "core/tensor_impl.h"

namespace smelt::cpu {

/// See Backend::index_select / gather / scatter_add / index_copy / triangle_zero.
void index_select(const Tensor& out, const Tensor& x, int64_t dim, const Tensor& index);
void gather(const Tensor& out, const Tensor& x, int64_t dim, const Tensor& index);
void scatter_add(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src);
void index_copy(const Tensor& out, const Tensor& index, const Tensor& src);
void triangle_zero(const Tensor& out, int64_t diagonal, bool lower);

}  // namespace smelt::cpu
