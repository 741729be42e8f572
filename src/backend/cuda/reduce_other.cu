// CUDA kernels of var / std / var_mean (Welford in double, as the CPU) and of
// any / all (reduce.cuh).
#include "backend/cuda/reduce.cuh"

namespace smelt::cuda::impl {

void launch_reduce_other(const ReduceArgs& a, const Workspace& ws) {
  dispatch_dtype(a.x_dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (a.kind == ReduceKind::Var) {
      if constexpr (std::is_floating_point_v<T> || scalar::is_half_v<T>) {
        using W = reduce::Welford<reduce::accumulate_t<reduce::AccRule::Welford, T>>;
        red::run<W, T>(a, ws,
                       red::VarEmit<T, W>{reinterpret_cast<T*>(a.out), reinterpret_cast<T*>(a.out2),
                                          a.correction, a.take_sqrt});
      }
      return;
    }
    uint8_t* out = reinterpret_cast<uint8_t*>(a.out);
    if (a.kind == ReduceKind::Any) {
      red::run<reduce::Any, T>(a, ws, red::BoolEmit{out});
    } else {
      red::run<reduce::All, T>(a, ws, red::BoolEmit{out});
    }
  });
}

}  // namespace smelt::cuda::impl
