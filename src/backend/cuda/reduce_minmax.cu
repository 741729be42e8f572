// CUDA kernels of amax / amin and of the arg reductions (max/min with dim,
// argmax, argmin), comparing in reduce::accumulate_t<AccRule::Compare>
// (reduce.cuh): NaN propagates, the first index wins ties and the first NaN
// wins over everything.
#include "backend/cuda/reduce.cuh"

namespace smelt::cuda::impl {

void launch_reduce_minmax(const ReduceArgs& a, const Workspace& ws) {
  dispatch_dtype(a.x_dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = reduce::accumulate_t<reduce::AccRule::Compare, T>;
    T* values = reinterpret_cast<T*>(a.out);
    switch (a.kind) {
      case ReduceKind::Max:
        return red::run<reduce::Max<A>, T>(a, ws, red::StoreEmit<T>{values});
      case ReduceKind::Min:
        return red::run<reduce::Min<A>, T>(a, ws, red::StoreEmit<T>{values});
      case ReduceKind::ArgMax:
        return red::run<reduce::ArgMax<A>, T>(
            a, ws, red::ArgEmit<T>{values, reinterpret_cast<int64_t*>(a.out2)});
      case ReduceKind::ArgMin:
        return red::run<reduce::ArgMin<A>, T>(
            a, ws, red::ArgEmit<T>{values, reinterpret_cast<int64_t*>(a.out2)});
      default:
        return;
    }
  });
}

}  // namespace smelt::cuda::impl
