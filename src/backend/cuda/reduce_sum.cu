// CUDA kernels of sum, prod and mean (reduce.cuh), accumulating in
// reduce::accumulate_t<AccRule::Sum> of the input (the op has already
// converted it to the result dtype, or it is an integer summed into int64).
#include "backend/cuda/reduce.cuh"

namespace smelt::cuda::impl {

void launch_reduce_sum(const ReduceArgs& a, const Workspace& ws) {
  dispatch_dtype(a.x_dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = reduce::accumulate_t<reduce::AccRule::Sum, T>;
    if (a.kind == ReduceKind::Mean) {
      if constexpr (std::is_floating_point_v<T> || scalar::is_half_v<T>)
        red::run<reduce::Sum<A>, T>(a, ws, red::MeanEmit<T>{reinterpret_cast<T*>(a.out), a.n_red});
      return;
    }
    auto go = [&](auto op) {
      using Op = decltype(op);
      if (a.out_dtype == a.x_dtype) {
        red::run<Op, T>(a, ws, red::StoreEmit<T>{reinterpret_cast<T*>(a.out)});
      } else {
        red::run<Op, T>(a, ws, red::StoreEmit<int64_t>{reinterpret_cast<int64_t*>(a.out)});
      }
    };
    if (a.kind == ReduceKind::Sum) {
      go(reduce::Sum<A>{});
    } else {
      go(reduce::Prod<A>{});
    }
  });
}

}  // namespace smelt::cuda::impl
