// Tensor::str() and operator<< in PyTorch's style (torch/_tensor_str.py with
// its default print options: precision 4, linewidth 80, threshold 1000,
// edgeitems 3). The dtype suffix drops PyTorch's "torch." prefix:
// "tensor([1, 2], dtype=int32)".
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/tensor_impl.h"
#include "smelt/ops.h"

namespace smelt {

namespace {

constexpr int kPrecision = 4;
constexpr int64_t kLineWidth = 80;
constexpr int64_t kThreshold = 1000;
constexpr int64_t kEdgeItems = 3;

struct Printer {
  DType dtype;
  bool floating = false;
  bool summarize = false;
  Shape sizes;
  Shape cstrides;              // row-major strides of the value vectors
  std::vector<double> fvals;   // floating dtypes
  std::vector<int64_t> ivals;  // integer and bool dtypes
  // Formatter state (PyTorch's _Formatter).
  bool int_mode = true;
  bool sci_mode = false;
  size_t max_width = 1;

  /// Offsets of the elements that are displayed (all, or the summarized edges).
  void shown(size_t level, int64_t offset, std::vector<int64_t>& out) const {
    if (level == sizes.size()) {
      out.push_back(offset);
      return;
    }
    const int64_t n = sizes[level];
    for (int64_t i = 0; i < n; ++i) {
      if (summarize && n > 2 * kEdgeItems && i == kEdgeItems) i = n - kEdgeItems;
      shown(level + 1, offset + i * cstrides[level], out);
    }
  }

  std::string raw(int64_t off) const {
    if (floating) {
      double v = fvals[off];
      if (std::isnan(v)) return "nan";  // PyTorch prints nan whatever its sign bit
      if (sci_mode) return fmt::format("{:.{}e}", v, kPrecision);
      if (int_mode) {
        std::string s = fmt::format("{:.0f}", v);
        if (std::isfinite(v)) s += ".";
        return s;
      }
      return fmt::format("{:.{}f}", v, kPrecision);
    }
    if (dtype == DType::Bool) return ivals[off] ? "True" : "False";
    return fmt::format("{}", ivals[off]);
  }

  std::string format(int64_t off) const {
    std::string s = raw(off);
    if (s.size() < max_width) s.insert(0, max_width - s.size(), ' ');
    return s;
  }

  void init_formatter() {
    std::vector<int64_t> offs;
    shown(0, 0, offs);
    if (!floating) {
      for (auto o : offs) max_width = std::max(max_width, raw(o).size());
      return;
    }
    std::vector<double> nz;
    for (auto o : offs)
      if (std::isfinite(fvals[o]) && fvals[o] != 0.0) nz.push_back(fvals[o]);
    // nan/inf/0 only: printed as "nan", "inf", "0." with no width padding beyond 1.
    if (nz.empty()) {
      max_width = 1;
      return;
    }
    double mn = std::abs(nz[0]), mx = std::abs(nz[0]);
    for (double v : nz) {
      mn = std::min(mn, std::abs(v));
      mx = std::max(mx, std::abs(v));
      if (v != std::ceil(v)) int_mode = false;
    }
    if (int_mode) {
      if (mx / mn > 1000.0 || mx > 1.0e8) sci_mode = true;
    } else if (mx / mn > 1000.0 || mx > 1.0e8 || mn < 1.0e-4) {
      sci_mode = true;
    }
    max_width = 1;
    for (double v : nz) {
      std::string s;
      if (sci_mode) {
        s = fmt::format("{:.{}e}", v, kPrecision);
      } else if (int_mode) {
        s = fmt::format("{:.0f}", v) + ".";
      } else {
        s = fmt::format("{:.{}f}", v, kPrecision);
      }
      max_width = std::max(max_width, s.size());
    }
  }

  std::string vector_str(int64_t offset, int64_t indent) const {
    const int64_t n = sizes.back();
    const int64_t st = cstrides.back();
    const int64_t elem_len = static_cast<int64_t>(max_width) + 2;
    const int64_t per_line = std::max<int64_t>(1, (kLineWidth - indent) / elem_len);
    std::vector<std::string> data;
    for (int64_t i = 0; i < n; ++i) {
      if (summarize && n > 2 * kEdgeItems && i == kEdgeItems) {
        data.push_back(" ...");
        i = n - kEdgeItems;
      }
      data.push_back(format(offset + i * st));
    }
    std::string s = "[";
    for (size_t i = 0; i < data.size(); ++i) {
      if (i > 0) {
        if (static_cast<int64_t>(i) % per_line == 0) {
          s += ",\n" + std::string(indent + 1, ' ');
        } else {
          s += ", ";
        }
      }
      s += data[i];
    }
    return s + "]";
  }

  std::string tensor_str(size_t level, int64_t offset, int64_t indent) const {
    const size_t nd = sizes.size();
    if (nd == 0) return format(offset);
    if (level == nd - 1) return vector_str(offset, indent);
    const int64_t n = sizes[level];
    std::vector<std::string> slices;
    for (int64_t i = 0; i < n; ++i) {
      if (summarize && n > 2 * kEdgeItems && i == kEdgeItems) {
        slices.push_back("...");
        i = n - kEdgeItems;
      }
      slices.push_back(tensor_str(level + 1, offset + i * cstrides[level], indent + 1));
    }
    const std::string sep = "," + std::string(nd - level - 1, '\n') + std::string(indent + 1, ' ');
    std::string s = "[";
    for (size_t i = 0; i < slices.size(); ++i) {
      if (i > 0) s += sep;
      s += slices[i];
    }
    return s + "]";
  }
};

std::string add_suffixes(std::string s, const std::vector<std::string>& suffixes, int64_t indent) {
  size_t nl = s.rfind('\n');
  int64_t last_line_len = static_cast<int64_t>(s.size()) -
                          (nl == std::string::npos ? -1 : static_cast<int64_t>(nl)) + 1;
  for (const auto& suf : suffixes) {
    const int64_t len = static_cast<int64_t>(suf.size());
    if (last_line_len + len + 2 > kLineWidth) {
      s += ",\n" + std::string(indent, ' ') + suf;
      last_line_len = indent + len;
    } else {
      s += ", " + suf;
      last_line_len += len + 2;
    }
  }
  return s + ")";
}

}  // namespace

std::string Tensor::str() const {
  if (!defined()) return "tensor(undefined)";
  if (is_tracer()) {
    detail::throw_value_read_while_tracing("printing a tensor (str(), operator<<)",
                                           "print a result of the compiled function, outside it");
  }
  const std::string prefix = "tensor(";
  const int64_t indent = static_cast<int64_t>(prefix.size());
  const DType dt = dtype();
  const bool default_dtype_ok = dt == default_dtype() || dt == DType::Int64 || dt == DType::Bool;
  std::vector<std::string> suffixes;
  // PyTorch names a non-CPU device first: tensor([1.], device='cuda:0').
  if (!device().is_cpu()) suffixes.push_back(fmt::format("device='{}'", device().str()));
  std::string body;
  if (numel() == 0) {
    if (dim() != 1) {
      std::string sz = "size=(";
      for (int64_t i = 0; i < dim(); ++i) sz += (i ? ", " : "") + std::to_string(sizes()[i]);
      if (dim() == 1) sz += ",";
      suffixes.push_back(sz + ")");
    }
    if (dt != default_dtype()) suffixes.push_back(fmt::format("dtype={}", dtype_name(dt)));
    body = "[]";
  } else {
    if (!default_dtype_ok) suffixes.push_back(fmt::format("dtype={}", dtype_name(dt)));
    Printer p;
    p.dtype = dt;
    p.floating = is_floating(dt);
    p.summarize = numel() > kThreshold;
    p.sizes = sizes();
    p.cstrides = detail::contiguous_strides(p.sizes);
    if (p.floating) {
      p.fvals = to_vector<double>();
    } else {
      p.ivals = to_vector<int64_t>();
    }
    p.init_formatter();
    body = p.tensor_str(0, 0, indent);
  }
  return add_suffixes(prefix + body, suffixes, indent);
}

}  // namespace smelt
