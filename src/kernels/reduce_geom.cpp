// The geometry of a reduction (reduce_geom.h).
#include "kernels/reduce_geom.h"

#include <algorithm>
#include <cstdlib>
#include <numeric>

#include "kernels/reduce_ops.h"

namespace smelt::reduce {

namespace {
/// Merges each pair of neighbouring dims over which `strides` is contiguous
/// (stride[d - 1] == stride[d] * size[d]) into one dim, innermost first.
void merge_contiguous_dims(Shape& sizes, Shape& strides) {
  for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d > 0; --d) {
    if (strides[d - 1] != strides[d] * sizes[d]) continue;
    sizes[d - 1] *= sizes[d];
    strides[d - 1] = strides[d];
    sizes.erase(sizes.begin() + d);
    strides.erase(strides.begin() + d);
  }
}
}  // namespace

ReduceGeom make_reduce_geom(const Shape& sizes, const Shape& strides,
                            const std::vector<int64_t>& dims, bool keep_order) {
  const size_t nd = sizes.size();
  std::vector<bool> is_red(nd, false);
  for (int64_t d : dims) is_red[static_cast<size_t>(d)] = true;
  ReduceGeom g;
  for (size_t d = 0; d < nd; ++d) {
    if (is_red[d]) {
      g.n_red *= sizes[d];
      if (sizes[d] != 1) {
        g.red_sizes.push_back(sizes[d]);
        g.red_strides.push_back(strides[d]);
        g.red_dims.push_back(static_cast<int64_t>(d));
      }
    } else {
      g.n_out *= sizes[d];
      if (sizes[d] != 1) {
        g.out_sizes.push_back(sizes[d]);
        g.out_in_strides.push_back(strides[d]);
      }
    }
  }
  // Kept dims: the output is contiguous over them, so two neighbours merge when
  // the input is contiguous over them too.
  merge_contiguous_dims(g.out_sizes, g.out_in_strides);
  g.out_out_strides.assign(g.out_sizes.size(), 1);
  for (int64_t d = static_cast<int64_t>(g.out_sizes.size()) - 2; d >= 0; --d)
    g.out_out_strides[d] = g.out_out_strides[d + 1] * g.out_sizes[d + 1];
  // Reduced dims: innermost = smallest stride, unless the index order matters.
  if (!keep_order && g.red_sizes.size() > 1) {
    std::vector<size_t> perm(g.red_sizes.size());
    std::iota(perm.begin(), perm.end(), size_t{0});
    std::stable_sort(perm.begin(), perm.end(), [&](size_t a, size_t b) {
      return std::llabs(g.red_strides[a]) > std::llabs(g.red_strides[b]);
    });
    Shape s, st;
    std::vector<int64_t> rd;
    for (size_t p : perm) {
      s.push_back(g.red_sizes[p]);
      st.push_back(g.red_strides[p]);
      rd.push_back(g.red_dims[p]);
    }
    g.red_sizes = std::move(s);
    g.red_strides = std::move(st);
    g.red_dims = std::move(rd);
  }
  merge_contiguous_dims(g.red_sizes, g.red_strides);
  // ColumnOrder when a kept dim is innermost in memory.
  if (!g.red_sizes.empty()) {
    int64_t min_red = INT64_MAX;
    for (int64_t s : g.red_strides) min_red = std::min<int64_t>(min_red, std::llabs(s));
    for (size_t d = 0; d < g.out_sizes.size(); ++d) {
      const int64_t s = std::llabs(g.out_in_strides[d]);
      if (s < min_red && (g.column < 0 || s < std::llabs(g.out_in_strides[g.column])))
        g.column = static_cast<int64_t>(d);
    }
  }
  return g;
}

}  // namespace smelt::reduce
