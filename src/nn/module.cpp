// nn::Module: registration, enumeration, modes, dtype/device conversion, state dicts.
#include <fmt/format.h>

#include <algorithm>
#include <ostream>
#include <set>
#include <sstream>

#include "core/tensor_impl.h"
#include "smelt/autograd.h"
#include "smelt/io.h"
#include "smelt/nn/module.h"

namespace smelt::nn {

namespace {
std::string join_name(const std::string& prefix, const std::string& name) {
  if (prefix.empty()) return name;
  return name.empty() ? prefix : prefix + "." + name;
}

std::string key_list(const std::vector<std::string>& keys) {
  std::string s;
  const size_t shown = std::min<size_t>(keys.size(), 10);
  for (size_t i = 0; i < shown; ++i) s += (i ? ", \"" : "\"") + keys[i] + "\"";
  if (keys.size() > shown) s += fmt::format(", ... ({} in all)", keys.size());
  return s;
}

// Replaces t's metadata and storage with those of `src` (a fresh tensor, made
// under NoGradGuard), so every handle to t's TensorImpl sees the change. t stays
// a leaf that requires grad if it was one; its .grad is converted alike.
void assign_impl(const Tensor& t, const Tensor& src, DType dtype) {
  if (src.is_same(t)) return;
  const bool requires_grad = t.requires_grad();
  Tensor grad = t.grad();
  *t.impl() = *src.impl();
  t.impl()->autograd = nullptr;
  t.impl()->view_base = nullptr;
  if (requires_grad) t.requires_grad_(true);
  if (grad.defined()) t.mutable_grad() = grad.to(src.device()).to(dtype);
}
}  // namespace

Module::Module(std::string name) : name_(std::move(name)) {}

Tensor Module::forward(const Tensor&) {
  detail::throw_error(fmt::format(
      "{}.forward: this module has no forward (a container such as ModuleList, or a subclass "
      "that did not override forward); call its children instead",
      name_));
}

// ---- registration -------------------------------------------------------------

void Module::check_new_name(const std::string& name, const char* what) const {
  SMELT_CHECK(!name.empty(), "{}.{}: the name must not be empty", name_, what);
  SMELT_CHECK(name.find('.') == std::string::npos,
              "{}.{}: name \"{}\" must not contain '.' (dots separate nesting levels in "
              "state_dict names)",
              name_, what, name);
  auto has = [&](const auto& v) {
    return std::any_of(v.begin(), v.end(), [&](const auto& p) { return p.first == name; });
  };
  SMELT_CHECK(!has(parameters_) && !has(buffers_) && !has(children_),
              "{}.{}: \"{}\" is already registered in this module; pick another name", name_, what,
              name);
}

Tensor& Module::add_tensor(const std::string& name, Tensor* slot, Tensor value, bool buffer) {
  const char* what = buffer ? "register_buffer" : "register_parameter";
  check_new_name(name, what);
  SMELT_CHECK(value.defined(), "{}.{}: {} \"{}\" is an undefined tensor", name_, what,
              buffer ? "buffer" : "parameter", name);
  if (slot != nullptr) {
    auto uses = [&](const auto& v) {
      return std::any_of(v.begin(), v.end(), [&](const auto& p) { return p.second == slot; });
    };
    SMELT_CHECK(!uses(parameters_) && !uses(buffers_),
                "{}.{}: the member given for \"{}\" is already registered under another name; "
                "give each parameter/buffer its own member",
                name_, what, name);
  } else {
    slot = &owned_.emplace_back();
  }
  // A parameter is a leaf that requires grad (floating dtypes), as nn.Parameter.
  if (!buffer && value.grad_fn()) value = value.detach();
  if (!buffer && is_floating(value.dtype())) value.requires_grad_(true);
  *slot = std::move(value);
  (buffer ? buffers_ : parameters_).emplace_back(name, slot);
  return *slot;
}

Tensor& Module::register_parameter(const std::string& name, Tensor& slot, Tensor value) {
  return add_tensor(name, &slot, std::move(value), false);
}

Tensor& Module::register_buffer(const std::string& name, Tensor& slot, Tensor value) {
  return add_tensor(name, &slot, std::move(value), true);
}

Tensor& Module::register_parameter(const std::string& name, Tensor tensor) {
  return add_tensor(name, nullptr, std::move(tensor), false);
}

Tensor& Module::register_buffer(const std::string& name, Tensor tensor) {
  return add_tensor(name, nullptr, std::move(tensor), true);
}

void Module::add_child(const std::string& name, std::shared_ptr<Module> module) {
  check_new_name(name, "register_module");
  SMELT_CHECK(module != nullptr, "{}.register_module: module \"{}\" is null", name_, name);
  SMELT_CHECK(module.get() != this, "{}.register_module: a module cannot be its own child", name_);
  children_.emplace_back(name, std::move(module));
}

void Module::replace_module(const std::string& name, std::shared_ptr<Module> module) {
  SMELT_CHECK(module != nullptr, "{}.replace_module: module \"{}\" is null", name_, name);
  for (auto& [n, m] : children_) {
    if (n == name) {
      m = std::move(module);
      return;
    }
  }
  detail::throw_error(fmt::format(
      "{}.replace_module: no child named \"{}\"; use register_module to add one", name_, name));
}

// ---- enumeration ------------------------------------------------------------------

void Module::collect(const std::string& prefix, std::vector<NamedTensor>& out, bool params,
                     bool bufs, bool recurse) const {
  // Read through the registered pointers: a member that was reassigned shows
  // its current tensor; one that was set to an undefined Tensor is skipped.
  if (params)
    for (const auto& [n, t] : parameters_)
      if (t->defined()) out.push_back({join_name(prefix, n), *t, false});
  if (bufs)
    for (const auto& [n, t] : buffers_)
      if (t->defined()) out.push_back({join_name(prefix, n), *t, true});
  if (recurse)
    for (const auto& [n, m] : children_) m->collect(join_name(prefix, n), out, params, bufs, true);
}

namespace {
/// (name, tensor) pairs of `all`, in order.
std::vector<std::pair<std::string, Tensor>> to_pairs(std::vector<NamedTensor> all) {
  std::vector<std::pair<std::string, Tensor>> out;
  out.reserve(all.size());
  for (auto& nt : all) out.emplace_back(std::move(nt.name), std::move(nt.tensor));
  return out;
}

/// The tensors of `named`, in order.
std::vector<Tensor> tensors_of(const std::vector<std::pair<std::string, Tensor>>& named) {
  std::vector<Tensor> out;
  out.reserve(named.size());
  for (const auto& [n, t] : named) out.push_back(t);
  return out;
}
}  // namespace

std::vector<NamedTensor> Module::named_parameters_and_buffers() const {
  std::vector<NamedTensor> out;
  collect("", out, true, true, true);
  return out;
}

std::vector<std::pair<std::string, Tensor>> Module::named_parameters(bool recurse) const {
  std::vector<NamedTensor> all;
  collect("", all, true, false, recurse);
  return to_pairs(std::move(all));
}

std::vector<Tensor> Module::parameters(bool recurse) const {
  return tensors_of(named_parameters(recurse));
}

std::vector<std::pair<std::string, Tensor>> Module::named_buffers(bool recurse) const {
  std::vector<NamedTensor> all;
  collect("", all, false, true, recurse);
  return to_pairs(std::move(all));
}

std::vector<Tensor> Module::buffers(bool recurse) const {
  return tensors_of(named_buffers(recurse));
}

std::vector<std::shared_ptr<Module>> Module::children() const {
  std::vector<std::shared_ptr<Module>> out;
  for (const auto& [n, m] : children_) out.push_back(m);
  return out;
}

std::vector<std::pair<std::string, Module*>> Module::named_modules() {
  std::vector<std::pair<std::string, Module*>> out{{"", this}};
  for (const auto& [n, m] : children_)
    for (auto& [sub, p] : m->named_modules()) out.emplace_back(join_name(n, sub), p);
  return out;
}

std::shared_ptr<Module> Module::submodule(const std::string& path) const {
  SMELT_CHECK(!path.empty(), "{}.submodule: empty path", name_);
  const Module* cur = this;
  std::shared_ptr<Module> found;
  size_t start = 0;
  while (true) {
    size_t dot = path.find('.', start);
    std::string part =
        path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    found = nullptr;
    for (const auto& [n, m] : cur->children_)
      if (n == part) found = m;
    SMELT_CHECK(found != nullptr, "{}.submodule: no module at \"{}\" (\"{}\" has no child \"{}\")",
                name_, path, cur->name_, part);
    cur = found.get();
    if (dot == std::string::npos) return found;
    start = dot + 1;
  }
}

Tensor Module::get_tensor(const std::string& path) const {
  size_t dot = path.rfind('.');
  const Module* owner = this;
  std::shared_ptr<Module> holder;
  std::string leaf = path;
  if (dot != std::string::npos) {
    holder = submodule(path.substr(0, dot));
    owner = holder.get();
    leaf = path.substr(dot + 1);
  }
  if (const Tensor* t = owner->find_own(leaf)) return *t;
  detail::throw_error(
      fmt::format("{}.get_tensor: no parameter or buffer named \"{}\"", name_, path));
}

const Tensor* Module::find_own(const std::string& name) const {
  for (const auto* v : {&parameters_, &buffers_})
    for (const auto& [n, t] : *v)
      if (n == name && t->defined()) return t;
  return nullptr;
}

// ---- mode ----------------------------------------------------------------------------

void Module::train(bool on) {
  training_ = on;
  for (const auto& [n, m] : children_) m->train(on);
}

// ---- conversion ------------------------------------------------------------------------

Module& Module::to(DType dtype) {
  SMELT_CHECK(is_floating(dtype),
              "{}.to: only floating dtypes are accepted (got {}), as in PyTorch; convert "
              "individual tensors with Tensor::to for other dtypes",
              name_, dtype_name(dtype));
  // Convert everything first, then assign, so an error leaves the module untouched.
  NoGradGuard no_grad;
  auto all = named_parameters_and_buffers();
  std::vector<std::pair<Tensor, Tensor>> updates;
  for (auto& nt : all)
    if (is_floating(nt.tensor.dtype()) && nt.tensor.dtype() != dtype)
      updates.emplace_back(nt.tensor, nt.tensor.to(dtype));
  for (auto& [t, c] : updates) assign_impl(t, c, dtype);
  return *this;
}

Module& Module::to(Device device) {
  NoGradGuard no_grad;
  auto all = named_parameters_and_buffers();
  std::vector<std::pair<Tensor, Tensor>> updates;
  for (auto& nt : all)
    if (nt.tensor.device() != device) updates.emplace_back(nt.tensor, nt.tensor.to(device));
  for (auto& [t, c] : updates) assign_impl(t, c, c.dtype());
  return *this;
}

// ---- state ---------------------------------------------------------------------------------

StateDict Module::state_dict() const {
  StateDict out;
  for (auto& nt : named_parameters_and_buffers()) out.emplace(nt.name, nt.tensor);
  return out;
}

LoadStateDictResult Module::load_state_dict(const StateDict& state, bool strict) {
  auto mine = named_parameters_and_buffers();
  LoadStateDictResult result;
  std::set<std::string> my_names;
  // 1. Validate everything before writing anything.
  for (const auto& nt : mine) {
    my_names.insert(nt.name);
    auto it = state.find(nt.name);
    if (it == state.end()) {
      result.missing_keys.push_back(nt.name);
      continue;
    }
    const Tensor& src = it->second;
    SMELT_CHECK(src.defined(), "load_state_dict: \"{}\" is an undefined tensor in the state dict",
                nt.name);
    SMELT_CHECK(src.sizes() == nt.tensor.sizes(),
                "load_state_dict: size mismatch for \"{}\": copying a tensor of shape {} into "
                "the module's {} of shape {}; the checkpoint was made for a different "
                "architecture (check the layer sizes)",
                nt.name, detail::shape_str(src.sizes()), nt.is_buffer ? "buffer" : "parameter",
                detail::shape_str(nt.tensor.sizes()));
    SMELT_CHECK(src.dtype() == nt.tensor.dtype(),
                "load_state_dict: dtype mismatch for \"{}\": the state dict has {} but the "
                "module's {} is {}; convert the module with to({}) first, or the tensor with "
                "Tensor::to",
                nt.name, dtype_name(src.dtype()), nt.is_buffer ? "buffer" : "parameter",
                dtype_name(nt.tensor.dtype()), dtype_name(src.dtype()));
  }
  for (const auto& [k, v] : state)
    if (!my_names.count(k)) result.unexpected_keys.push_back(k);
  if (strict) {
    SMELT_CHECK(result.missing_keys.empty() && result.unexpected_keys.empty(),
                "load_state_dict: error(s) in loading state_dict for {}: missing keys [{}], "
                "unexpected keys [{}]; pass strict=false to load a partial state dict",
                name_, key_list(result.missing_keys), key_list(result.unexpected_keys));
  }
  // 2. Copy into the existing tensors (identity preserved), outside autograd as
  // PyTorch does (parameters are leaves that require grad).
  NoGradGuard no_grad;
  for (auto& nt : mine) {
    auto it = state.find(nt.name);
    if (it == state.end() || it->second.is_same(nt.tensor)) continue;
    nt.tensor.copy_(it->second);
  }
  return result;
}

void Module::save(const std::string& path) const { save_safetensors(path, state_dict()); }

LoadStateDictResult Module::load(const std::string& path, bool strict) {
  return load_state_dict(load_safetensors(path), strict);
}

// ---- printing -------------------------------------------------------------------------------

std::string Module::str_indented(int indent) const {
  std::string s = name_ + "(" + extra_repr();
  if (children_.empty()) return s + ")";
  std::string pad(static_cast<size_t>(indent + 2), ' ');
  s += "\n";
  for (const auto& [n, m] : children_)
    s += pad + "(" + n + "): " + m->str_indented(indent + 2) + "\n";
  return s + std::string(static_cast<size_t>(indent), ' ') + ")";
}

std::string Module::str() const { return str_indented(0); }

std::ostream& operator<<(std::ostream& os, const Module& m) { return os << m.str(); }

}  // namespace smelt::nn
