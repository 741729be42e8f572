#include "compiler/graph/graph.h"

#include <fmt/format.h>

#include <cstring>
#include <variant>

#include "core/tensor_impl.h"

namespace smelt::compiler {

const char* buffer_kind_name(BufferKind k) {
  switch (k) {
    case BufferKind::Input:
      return "input";
    case BufferKind::Param:
      return "param";
    case BufferKind::Constant:
      return "constant";
    case BufferKind::Node:
      return "node";
  }
  return "?";
}

std::string Buffer::name() const {
  switch (kind) {
    case BufferKind::Input:
      return fmt::format("arg{}", input_index);
    case BufferKind::Param:
      return fmt::format("param{}", input_index);
    case BufferKind::Constant:
      return fmt::format("const{}", id);
    case BufferKind::Node:
      return fmt::format("buf{}", id);
  }
  return "?";
}

bool Operand::same_as(const Operand& o) const {
  if (is_scalar() != o.is_scalar()) return false;
  if (is_scalar()) return dtype == o.dtype && scalar->str() == o.scalar->str();
  return buf == o.buf && sizes == o.sizes && strides == o.strides && offset == o.offset &&
         dtype == o.dtype;
}

std::string Operand::str() const {
  if (is_scalar()) return scalar->str();
  std::string s = fmt::format("%{}", buf);
  s += detail::shape_str(sizes);
  if (strides != detail::contiguous_strides(sizes) || offset != 0)
    s += fmt::format("{{strides={},offset={}}}", detail::shape_str(strides), offset);
  return s;
}

bool input_aligned(const Tensor& arg) {
  return !arg.device().is_cuda() || reinterpret_cast<uintptr_t>(arg.data_ptr()) % 16 == 0;
}

int Graph::add_buffer(Buffer b) {
  b.id = static_cast<int>(buffers.size());
  buffers.push_back(std::move(b));
  return buffers.back().id;
}

int Graph::add_node(const std::string& op, std::vector<Operand> inputs, detail::Attrs attrs,
                    const std::vector<detail::OutMeta>& outs) {
  Node n{op, std::move(inputs), std::move(attrs), {}};
  int index = static_cast<int>(nodes.size());
  for (size_t k = 0; k < outs.size(); ++k) {
    Buffer b;
    b.kind = BufferKind::Node;
    b.dtype = outs[k].dtype;
    b.device = outs[k].device;
    b.sizes = outs[k].sizes;
    b.extent = detail::shape_numel(outs[k].sizes);
    b.producer = index;
    n.outputs.push_back(add_buffer(std::move(b)));
  }
  nodes.push_back(std::move(n));
  return index;
}

std::vector<int> Graph::use_counts() const {
  std::vector<int> uses(buffers.size(), 0);
  for (auto& n : nodes)
    for (auto& in : n.inputs)
      if (!in.is_scalar()) ++uses[in.buf];
  for (auto& o : outputs)
    if (!o.is_scalar()) ++uses[o.buf];
  for (auto& [dst, src] : mutations) ++uses[src];
  return uses;
}

std::vector<bool> Graph::escaping() const {
  std::vector<bool> e(buffers.size(), false);
  for (auto& o : outputs)
    if (!o.is_scalar()) e[o.buf] = true;
  for (auto& [dst, src] : mutations) e[src] = true;
  return e;
}

std::string Graph::str() const {
  std::string s;
  for (auto& b : buffers)
    if (b.kind != BufferKind::Node)
      s += fmt::format("  %{} = {} {} extent={}{}\n", b.id, b.name(), dtype_name(b.dtype), b.extent,
                       b.written ? " (written)" : "");
  for (auto& n : nodes) {
    std::vector<std::string> outs, ins;
    for (int o : n.outputs)
      outs.push_back(fmt::format("%{}: {}{}", o, dtype_name(buffers[o].dtype),
                                 detail::shape_str(buffers[o].sizes)));
    for (auto& i : n.inputs) ins.push_back(i.str());
    s += fmt::format("  {} = {}({}){}\n", fmt::join(outs, ", "), n.op, fmt::join(ins, ", "),
                     n.attrs.items.empty() ? "" : "  [" + n.attrs.str() + "]");
  }
  std::vector<std::string> outs;
  for (auto& o : outputs) outs.push_back(o.str());
  s += fmt::format("  return ({})\n", fmt::join(outs, ", "));
  for (auto& [dst, src] : mutations) s += fmt::format("  write back %{} -> %{}\n", src, dst);
  return s;
}

namespace {

/// Word-at-a-time hashing (each word mixed by splitmix64's finalizer).
struct Hasher {
  uint64_t h = 0x6a09e667f3bcc909ull;
  void add(uint64_t v) {
    v += h + 0x9e3779b97f4a7c15ull;
    v = (v ^ (v >> 30)) * 0xbf58476d1ce4e5b9ull;
    v = (v ^ (v >> 27)) * 0x94d049bb133111ebull;
    h = v ^ (v >> 31);
  }
  void add(const std::string& s) {
    add(s.size());
    uint64_t w = 0;
    size_t i = 0;
    for (; i + 8 <= s.size(); i += 8) {
      std::memcpy(&w, s.data() + i, 8);
      add(w);
    }
    w = 0;
    std::memcpy(&w, s.data() + i, s.size() - i);
    add(w);
  }
  void add(double d) {
    uint64_t w;
    std::memcpy(&w, &d, 8);
    add(w);
  }
  void add(const Shape& v) {
    add(v.size());
    for (auto x : v) add(static_cast<uint64_t>(x));
  }
  void add(const Scalar& s) {
    add(static_cast<uint64_t>(s.kind()));
    if (s.is_floating())
      add(s.to_double());
    else
      add(static_cast<uint64_t>(s.to_int()));
  }
  void add(const Device& d) {
    add(static_cast<uint64_t>(d.type));
    add(static_cast<uint64_t>(d.index));
  }
  void add(const Operand& o) {
    add(static_cast<uint64_t>(o.is_scalar()));
    add(static_cast<uint64_t>(o.dtype));
    if (o.is_scalar()) return add(*o.scalar);
    add(static_cast<uint64_t>(o.buf));
    add(o.sizes);
    add(o.strides);
    add(static_cast<uint64_t>(o.offset));
  }
  void add(const detail::AttrValue& v) {
    add(static_cast<uint64_t>(v.index()));
    std::visit(
        [this](const auto& x) {
          using T = std::decay_t<decltype(x)>;
          if constexpr (std::is_same_v<T, bool> || std::is_same_v<T, int64_t> ||
                        std::is_same_v<T, DType>)
            add(static_cast<uint64_t>(x));
          else
            add(x);
        },
        v);
  }
};

}  // namespace

Device Graph::device() const {
  for (auto& b : buffers)
    if (!b.device.is_cpu()) return b.device;
  return Device();
}

bool Graph::on_one_device() const {
  const Device d = device();
  for (auto& b : buffers)
    if (b.device != d) return false;
  return true;
}

uint64_t Graph::hash() const {
  Hasher h;
  h.add(buffers.size());
  for (auto& b : buffers) {
    h.add(static_cast<uint64_t>(b.kind));
    h.add(static_cast<uint64_t>(b.dtype));
    h.add(b.device);
    h.add(static_cast<uint64_t>(b.extent));
    h.add(b.sizes);
    h.add(static_cast<uint64_t>(b.producer));
    h.add(static_cast<uint64_t>(b.input_index));
    h.add(static_cast<uint64_t>(b.captured));
    h.add(static_cast<uint64_t>(b.written));
    h.add(static_cast<uint64_t>(b.aligned));
  }
  h.add(nodes.size());
  for (auto& n : nodes) {
    h.add(n.op);
    h.add(n.inputs.size());
    for (auto& in : n.inputs) h.add(in);
    h.add(n.attrs.items.size());
    for (auto& [name, value] : n.attrs.items) {
      h.add(name);
      h.add(value);
    }
    h.add(n.outputs.size());
    for (int o : n.outputs) h.add(static_cast<uint64_t>(o));
  }
  h.add(outputs.size());
  for (auto& o : outputs) h.add(o);
  h.add(mutations.size());
  for (auto& [dst, src] : mutations) {
    h.add(static_cast<uint64_t>(dst));
    h.add(static_cast<uint64_t>(src));
  }
  h.add(static_cast<uint64_t>(num_inputs));
  h.add(static_cast<uint64_t>(num_params));
  return h.h;
}

Operand whole(const Buffer& b) {
  Operand o;
  o.buf = b.id;
  o.sizes = b.kind == BufferKind::Node ? b.sizes : Shape{b.extent};
  o.strides = detail::contiguous_strides(o.sizes);
  o.dtype = b.dtype;
  return o;
}

bool is_whole_contiguous(const Operand& o, const Buffer& b) {
  if (o.is_scalar() || o.offset != 0) return false;
  if (detail::shape_numel(o.sizes) != b.extent) return false;
  int64_t expect = 1;
  for (int64_t d = static_cast<int64_t>(o.sizes.size()) - 1; d >= 0; --d) {
    if (o.sizes[d] != 1 && o.strides[d] != expect) return false;
    expect *= o.sizes[d];
  }
  return true;
}

std::optional<Operand> window_through(const Operand& o, const Buffer& b, const Operand& inner) {
  if (o.is_scalar() || inner.is_scalar() || inner.sizes != b.sizes) return std::nullopt;
  const Shape cs = detail::contiguous_strides(b.sizes);
  // o's offset unravelled over b's dims: where each of b's dims starts.
  std::vector<int64_t> start(b.sizes.size(), 0);
  int64_t rest = o.offset;
  for (size_t e = 0; e < b.sizes.size(); ++e) {
    if (b.sizes[e] == 1) continue;
    start[e] = rest / cs[e];
    rest %= cs[e];
  }
  if (rest != 0 || o.offset < 0) return std::nullopt;
  Operand r = o;
  r.buf = inner.buf;
  r.dtype = inner.dtype;
  r.offset = inner.offset;
  for (size_t e = 0; e < b.sizes.size(); ++e) r.offset += start[e] * inner.strides[e];
  std::vector<bool> used(b.sizes.size(), false);
  for (size_t d = 0; d < o.sizes.size(); ++d) {
    if (o.sizes[d] == 1) {
      r.strides[d] = 0;
      continue;
    }
    // Dims of b longer than 1 have distinct contiguous strides: at most one fits.
    size_t e = 0;
    while (e < b.sizes.size() && !(b.sizes[e] > 1 && cs[e] == o.strides[d])) ++e;
    if (e == b.sizes.size() || used[e] || start[e] + o.sizes[d] > b.sizes[e]) return std::nullopt;
    used[e] = true;
    r.strides[d] = inner.strides[e];
  }
  return r;
}

}  // namespace smelt::compiler
