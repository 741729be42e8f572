// smelt/nn/module.h — the base class of every layer, and the holder that gives
// modules value semantics (libtorch's TORCH_MODULE pattern).
//
//   struct Net : smelt::nn::Module {
//     smelt::nn::Linear fc1{nullptr}, fc2{nullptr};
//     Net() : Module("Net") {
//       fc1 = register_module("fc1", smelt::nn::Linear(4, 8));
//       fc2 = register_module("fc2", smelt::nn::Linear(8, 2));
//     }
//     smelt::Tensor forward(const smelt::Tensor& x) override {
//       return fc2(smelt::relu(fc1(x)));
//     }
//   };
//
// Parameters and buffers are ordinary Tensors held by the module (usually in
// members registered as slots, see register_parameter); every accessor returns
// handles to the very same TensorImpls (so parameter identity is stable:
// load_state_dict, to(dtype) and the compiler all update them in place), and
// assigning a new tensor to a registered member is seen by all of them. Names are dotted paths as
// in PyTorch's state_dict ("0.weight", "block.ln_1.bias").
#pragma once
#include <deque>
#include <iosfwd>
#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "smelt/ops.h"
#include "smelt/tensor.h"

namespace smelt::nn {

/// One parameter or buffer with its dotted name.
struct NamedTensor {
  std::string name;
  Tensor tensor;
  bool is_buffer = false;  // false: a parameter
};

/// name -> tensor, sorted by name (the form save_safetensors takes).
using StateDict = std::map<std::string, Tensor>;

/// What load_state_dict(strict=false) skipped (both empty after a strict load).
struct LoadStateDictResult {
  std::vector<std::string> missing_keys;     // in the module, not in the dict
  std::vector<std::string> unexpected_keys;  // in the dict, not in the module
};

class Module {
 public:
  /// `name` is the type name shown when printing ("Linear", "Sequential").
  explicit Module(std::string name = "Module");
  virtual ~Module() = default;
  // Neither copyable nor movable: the registry points at this object's members
  // (slots), so a copy would point into another object. Share modules through
  // shared_ptr / ModuleHolder instead.
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;
  Module(Module&&) = delete;
  Module& operator=(Module&&) = delete;

  /// The computation. The default raises Error (containers such as ModuleList have none).
  virtual Tensor forward(const Tensor& x);
  Tensor operator()(const Tensor& x) { return forward(x); }

  /// Type name given at construction.
  const std::string& name() const { return name_; }

  // ---- registration ----------------------------------------------------------
  // The registry holds a POINTER to each parameter/buffer handle, so it always
  // sees what the handle holds right now: after `lin->weight = randn({3, 6})`,
  // parameters(), state_dict(), ... (and smelt::compile's guards) return the new
  // tensor, as in PyTorch. A registered handle that is set to an undefined
  // Tensor is skipped by every accessor (like a parameter set to None).
  //
  // Every `name` must be non-empty, contain no '.', and be unused in this
  // module; Error otherwise. The initial value must be a defined tensor.
  //
  // A parameter is a leaf that requires grad (a floating one; as nn.Parameter):
  // register_parameter detaches a value that has a history and calls
  // requires_grad_(). Buffers never require grad. Run inference under
  // smelt::NoGradGuard to record no graph (and to run smelt::compile'd code).

  /// Slot form (what built-in modules use): stores `value` into `slot` and
  /// registers `slot` itself; returns `slot`. `slot` MUST be a data member of
  /// this very module object (modules live in a shared_ptr and cannot be
  /// copied or moved, so member addresses are stable for the module's
  /// lifetime); registering a local variable or another object's member is
  /// undefined behaviour. A slot may be registered only once.
  ///   weight_ref = register_parameter("weight", weight, randn({3, 6}));
  Tensor& register_parameter(const std::string& name, Tensor& slot, Tensor value);
  /// Slot form of register_buffer (same rules as above).
  Tensor& register_buffer(const std::string& name, Tensor& slot, Tensor value);
  /// Adds a parameter held by the module itself and returns a reference to that
  /// handle (stable for the module's lifetime). Assigning a new tensor through
  /// the returned reference is seen by the registry; a copy kept in a member
  /// (`w = register_parameter("w", t);`) shares the TensorImpl but is NOT
  /// tracked if the member is later reassigned: use the slot form for members.
  Tensor& register_parameter(const std::string& name, Tensor tensor);
  /// Adds a buffer (state that is not trained: running statistics, counters);
  /// same rules as the 2-argument register_parameter.
  Tensor& register_buffer(const std::string& name, Tensor tensor);
  /// Adds a child module; returns it so it can be kept in a member.
  template <class M, class = std::enable_if_t<std::is_base_of_v<Module, M>>>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> module) {
    add_child(name, module);
    return module;
  }
  template <class H, class = typename H::ContainedType>
  H register_module(const std::string& name, H holder) {
    add_child(name, holder.ptr());
    return holder;
  }
  /// Replaces the child `name` (Error if it does not exist).
  void replace_module(const std::string& name, std::shared_ptr<Module> module);

  // ---- enumeration (stable order: registration order, depth first) ------------
  std::vector<Tensor> parameters(bool recurse = true) const;
  std::vector<std::pair<std::string, Tensor>> named_parameters(bool recurse = true) const;
  std::vector<Tensor> buffers(bool recurse = true) const;
  std::vector<std::pair<std::string, Tensor>> named_buffers(bool recurse = true) const;
  /// EVERY parameter and buffer of this module and its descendants, in PyTorch's
  /// state_dict order: for each module (pre-order, children in registration
  /// order) its own parameters, then its own buffers. Names are dotted paths.
  /// This is what smelt::compile uses to find (and swap) model state.
  std::vector<NamedTensor> named_parameters_and_buffers() const;
  std::vector<std::shared_ptr<Module>> children() const;
  const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& named_children() const {
    return children_;
  }
  /// This module (name "") and all descendants, pre-order (pointers owned by the tree).
  std::vector<std::pair<std::string, Module*>> named_modules();
  /// The descendant at a dotted path ("0", "block.ln_1"); Error if there is none.
  std::shared_ptr<Module> submodule(const std::string& path) const;
  /// The parameter or buffer at a dotted path ("0.weight"); Error if there is none.
  Tensor get_tensor(const std::string& path) const;

  // ---- mode ---------------------------------------------------------------------
  /// Sets training mode here and in all descendants (Dropout, BatchNorm read it).
  virtual void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }

  // ---- conversion -----------------------------------------------------------------
  /// Converts every floating-point parameter and buffer to `dtype`, in place:
  /// the tensor handles keep their identity (integer buffers such as
  /// num_batches_tracked are left alone, as in PyTorch). `dtype` must be
  /// floating; Error otherwise.
  Module& to(DType dtype);
  /// Moves every parameter and buffer to `device`, in place (Error for a device
  /// this build cannot reach).
  Module& to(Device device);

  // ---- state -----------------------------------------------------------------------
  /// Every parameter and buffer by dotted name (handles to the live tensors, not copies).
  StateDict state_dict() const;
  /// Copies `state` INTO the existing tensors (with copy_, so handles held
  /// elsewhere see the new values). Everything is checked before anything is
  /// written: a shape or dtype that differs from the module's raises Error
  /// naming the key and both shapes/dtypes; under `strict`, missing or
  /// unexpected keys raise Error listing them. Without `strict` they are
  /// returned instead.
  LoadStateDictResult load_state_dict(const StateDict& state, bool strict = true);
  /// Writes state_dict() to a safetensors file (see smelt/io.h).
  void save(const std::string& path) const;
  /// Reads a safetensors file and load_state_dict()s it.
  LoadStateDictResult load(const std::string& path, bool strict = true);

  // ---- printing --------------------------------------------------------------------
  /// The constructor arguments shown in str(), e.g. "in_features=4, out_features=8, bias=true".
  virtual std::string extra_repr() const { return {}; }
  /// PyTorch-style multi-line description of the module tree.
  std::string str() const;

 protected:
  void add_child(const std::string& name, std::shared_ptr<Module> module);

 private:
  void check_new_name(const std::string& name, const char* what) const;
  void collect(const std::string& prefix, std::vector<NamedTensor>& out, bool params, bool bufs,
               bool recurse) const;
  std::string str_indented(int indent) const;

  std::string name_;
  bool training_ = true;
  Tensor& add_tensor(const std::string& name, Tensor* slot, Tensor value, bool buffer);
  const Tensor* find_own(const std::string& name) const;

  // Registered handles: pointers to member slots, or into owned_ (whose
  // elements never move). Read through the pointer everywhere.
  std::vector<std::pair<std::string, Tensor*>> parameters_;
  std::vector<std::pair<std::string, Tensor*>> buffers_;
  std::deque<Tensor> owned_;  // the tensors registered without a slot
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
};

std::ostream& operator<<(std::ostream& os, const Module& m);

/// A shared_ptr<Impl> with value syntax: `nn::Linear l(4, 8); l(x); l->weight`.
/// Copies share the module. Construct with arguments for Impl's constructor,
/// with an existing shared_ptr<Impl>, or with nullptr for an empty holder
/// (assigned later, e.g. from register_module).
template <class Impl>
class ModuleHolder {
 public:
  using ContainedType = Impl;

  template <
      class... Args,
      class = std::enable_if_t<
          !(sizeof...(Args) == 1 && (std::is_same_v<std::decay_t<Args>, ModuleHolder> || ...)) &&
          !(sizeof...(Args) == 1 && (std::is_same_v<std::decay_t<Args>, std::nullptr_t> || ...)) &&
          !(sizeof...(Args) == 1 &&
            (std::is_same_v<std::decay_t<Args>, std::shared_ptr<Impl>> || ...))>>
  ModuleHolder(Args&&... args)  // NOLINT(google-explicit-constructor)
      : impl_(std::make_shared<Impl>(std::forward<Args>(args)...)) {}
  ModuleHolder(std::nullptr_t) {}           // NOLINT(google-explicit-constructor)
  ModuleHolder(std::shared_ptr<Impl> impl)  // NOLINT(google-explicit-constructor)
      : impl_(std::move(impl)) {}
  ModuleHolder(const ModuleHolder&) = default;
  ModuleHolder(ModuleHolder&&) = default;
  ModuleHolder& operator=(const ModuleHolder&) = default;
  ModuleHolder& operator=(ModuleHolder&&) = default;

  Impl* operator->() const { return checked(); }
  Impl& operator*() const { return *checked(); }
  Impl* get() const { return impl_.get(); }
  const std::shared_ptr<Impl>& ptr() const { return impl_; }
  bool is_empty() const { return impl_ == nullptr; }
  explicit operator bool() const { return impl_ != nullptr; }
  operator std::shared_ptr<Module>() const { return impl_; }  // NOLINT

  template <class... Args>
  auto operator()(Args&&... args) const {
    return checked()->forward(std::forward<Args>(args)...);
  }

 private:
  Impl* checked() const {
    SMELT_CHECK(impl_ != nullptr,
                "nn: use of an empty module holder (constructed from nullptr); assign a module "
                "to it first");
    return impl_.get();
  }
  std::shared_ptr<Impl> impl_;
};

template <class Impl>
std::ostream& operator<<(std::ostream& os, const ModuleHolder<Impl>& m) {
  return os << *m;
}

}  // namespace smelt::nn
