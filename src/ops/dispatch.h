// The single entry through which every op that computes runs: when any input is
// a tracer it records a graph node (smelt::compile is tracing), otherwise it
// allocates the outputs and runs the eager kernel. Views never come here (they
// only make new TensorImpls over the same storage, tracer or not); mutations go
// through copy_ (run_copy), the one write primitive.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "core/tensor_impl.h"
#include "smelt/scalar.h"
#include "smelt/tensor.h"

namespace smelt::detail {

/// A non-owning reference to a callable (C++26's std::function_ref): run_op
/// calls its kernel before it returns, so the lambda an op passes needs no copy
/// (a std::function holding a lambda of more than two captures takes a heap
/// block on every op). Never keep one beyond the call it is passed to.
template <class Sig>
class FunctionRef;
template <class R, class... A>
class FunctionRef<R(A...)> {
 public:
  template <class F,
            class = std::enable_if_t<!std::is_same_v<std::remove_cvref_t<F>, FunctionRef> &&
                                     std::is_invocable_r_v<R, F&, A...>>>
  FunctionRef(F&& f) noexcept  // implicit, as std::function's
      : obj_(const_cast<void*>(static_cast<const void*>(std::addressof(f)))),
        call_([](void* o, A... a) -> R {
          return (*static_cast<std::remove_reference_t<F>*>(o))(std::forward<A>(a)...);
        }) {}
  R operator()(A... a) const { return call_(obj_, std::forward<A>(a)...); }

 private:
  void* obj_;
  R (*call_)(void*, A...);
};

using AttrValue =
    std::variant<bool, int64_t, double, std::string, std::vector<int64_t>, DType, Scalar>;

/// Named op arguments that are not tensors (dims, alpha, eps, modes...).
struct Attrs {
  std::vector<std::pair<std::string, AttrValue>> items;
  Attrs() = default;
  Attrs(std::initializer_list<std::pair<std::string, AttrValue>> l) : items(l) {}
  void set(const std::string& k, AttrValue v);
  bool has(const std::string& k) const;
  const AttrValue& get(const std::string& k) const;  // internal error if absent
  template <class T>
  const T& as(const std::string& k) const {
    return std::get<T>(get(k));
  }
  std::string str() const;  // "dim=[1], keepdim=true"
};

/// Shape/dtype/device of one output.
struct OutMeta {
  Shape sizes;
  DType dtype;
  Device device;
};

/// Implemented by the compiler's tracer; installed per thread while tracing.
class TraceContext {
 public:
  virtual ~TraceContext() = default;
  /// Records `op` over `inputs` (tracers, constants or wrapped numbers) and
  /// returns tracer tensors for `outs`.
  virtual std::vector<Tensor> record(const std::string& op, const std::vector<Tensor>& inputs,
                                     const Attrs& attrs, const std::vector<OutMeta>& outs) = 0;
  /// Records dst.copy_(src) (dst may be a view of a tracer or a constant).
  virtual void record_copy(const Tensor& dst, const Tensor& src) = 0;
  /// Records that `dst` now holds `src`, a result that nothing else will read
  /// (an optimizer step's new parameter): the tracer may give `dst` src's
  /// buffer instead of recording a copy.
  virtual void record_assign(const Tensor& dst, const Tensor& src) { record_copy(dst, src); }
  /// Called by ops that draw random numbers; tracing graph-breaks on them today.
  virtual void record_random(const std::string& op) = 0;
  /// True when an op over these real (non-tracer) tensors must still be
  /// recorded: the compiler lifts tensors captured from outside the traced
  /// function, so that later in-place updates of them are seen at every call.
  virtual bool captures(const std::vector<Tensor>& inputs) const { return false; }

  // ---- host state a training step reads and changes (compiled training) ----
  /// The function is about to read (`write` false: Tensor::grad(), an
  /// accumulation) or to replace (`write` true: zero_grad, AccumulateGrad) the
  /// .grad of `leaf`. The tracer guards the .grad the function finds on entry
  /// when it reads it first, and makes the .grad it leaves a result of the graph.
  virtual void note_grad(const Tensor& leaf, bool write) {}
  /// The function ran a backward pass (autograd::backward or autograd::grad).
  virtual void note_backward() {}
  /// References to `t`'s storage the trace itself holds (its binding of a
  /// tracer's buffer): they do not make `t`'s memory visible to anything else.
  virtual long own_storage_refs(const Tensor& t) const { return 0; }
  /// Host state the recorded graph depends on (an optimizer's options and which
  /// of its state tensors exist): `check` returns "" while the graph still
  /// applies, else why not; it runs before every call of the compiled graph
  /// (a failed check recompiles).
  virtual void add_guard(std::function<std::string()> check) {}
  /// Undoes a host-side effect of the trace (state an optimizer created) when
  /// the graph is not used: the call then runs eagerly and makes it again.
  virtual void on_abort(std::function<void()> undo) {}
};

TraceContext* trace_context();
/// Installs `ctx` for this thread (nullptr to stop); returns the previous one.
TraceContext* set_trace_context(TraceContext* ctx);

/// Implemented by src/autograd (a layer above ops): how ops record history.
/// Autograd installs it before any tensor can require grad, so ops reach it
/// only when grad_needed() holds.
class GradRecorder {
 public:
  virtual ~GradRecorder() = default;
  /// Records op `op` (an op-table name) over `inputs` with `attrs`, which produced
  /// `outputs`: a backward node with the op's derivative, or, for an op that is
  /// not differentiable, outputs marked as such.
  virtual void record(const std::string& op, const std::vector<Tensor>& inputs, const Attrs& attrs,
                      const std::vector<Tensor>& outputs) = 0;
  /// Before an in-place write of `src` into `dst` (copy_, which every in-place op
  /// ends in): raises for a leaf that requires grad (or a view of one).
  virtual void before_write(const Tensor& dst, const Tensor& src) = 0;
  /// After it (the version already bumped): `dst` (or its base) takes the write
  /// into its history.
  virtual void after_write(const Tensor& dst, const Tensor& src) = 0;
};
GradRecorder* grad_recorder();
void set_grad_recorder(GradRecorder* r);

/// True when an op over `inputs` must record history: grad mode is on and an
/// input requires grad. The whole cost of autograd for inference.
bool grad_needed(const std::vector<Tensor>& inputs);
bool grad_needed(const Tensor& input);

/// Runs `compute` (ops whose derivative is their own table entry but whose
/// eager code is written over other ops: composites, logsumexp): when
/// grad_needed(inputs) it runs with grad mode off and one node of `op` is
/// recorded over inputs -> results; otherwise it simply runs.
std::vector<Tensor> run_differentiable(const std::string& op, const std::vector<Tensor>& inputs,
                                       const Attrs& attrs,
                                       const FunctionRef<std::vector<Tensor>()>& compute);

/// Records view op `op` (an op-table name) that made `out` from `x`, with the
/// attrs `make_attrs()` returns (built only when history is recorded); returns `out`.
template <class F>
Tensor record_view(const char* op, const Tensor& x, Tensor out, F&& make_attrs) {
  if (grad_needed(x)) grad_recorder()->record(op, {x}, make_attrs(), {out});
  return out;
}

inline bool is_tracer(const Tensor& t) { return t.defined() && t.is_tracer(); }
bool any_tracer(const std::vector<Tensor>& ts);

using Kernel = FunctionRef<void(const std::vector<Tensor>& outs)>;

/// Runs one op. `inputs` are the tensors the op reads (after its own
/// validation); `outs` the metadata computed by its shape/dtype rule; `kernel`
/// fills freshly allocated contiguous outputs.
std::vector<Tensor> run_op(const std::string& op, const std::vector<Tensor>& inputs,
                           const Attrs& attrs, const std::vector<OutMeta>& outs,
                           const Kernel& kernel);
Tensor run_op1(const std::string& op, const std::vector<Tensor>& inputs, const Attrs& attrs,
               const OutMeta& out, const Kernel& kernel);

/// Eager or traced dst.copy_(src) (src already validated/broadcastable).
void run_copy(const Tensor& dst, const Tensor& src, const std::function<void()>& eager_copy);

/// Draw point for random ops: graph-breaks when tracing.
void note_random(const std::string& op);

}  // namespace smelt::detail
