// smelt/nn/modules.h — the layers, with PyTorch's names, defaults and
// initialization. Each layer is an XxxImpl module plus an `Xxx` holder
// (ModuleHolder<XxxImpl>), so `nn::Linear(4, 8)` is a value you can call.
// Forward passes call the functional ops of smelt/ops.h, so they trace under
// smelt::compile like any other code.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "smelt/nn/module.h"

namespace smelt::nn {

// =============================== containers ==================================

/// Runs its children in order, each on the previous one's output. Children are
/// named "0", "1", ... as in PyTorch.
class SequentialImpl : public Module {
 public:
  SequentialImpl() : Module("Sequential") {}
  template <class... Ms>
  explicit SequentialImpl(Ms&&... modules) : Module("Sequential") {
    (push_back(std::forward<Ms>(modules)), ...);
  }
  /// Appends a module (holder or shared_ptr) named by its position.
  void push_back(std::shared_ptr<Module> module);
  template <class H, class = typename H::ContainedType>
  void push_back(const H& holder) {
    push_back(std::shared_ptr<Module>(holder.ptr()));
  }
  /// The i-th module (negative counts from the end); Error if out of range.
  std::shared_ptr<Module> operator[](int64_t i) const;
  size_t size() const { return named_children().size(); }
  bool empty() const { return size() == 0; }
  Tensor forward(const Tensor& x) override;
};

/// A list of modules registered as children "0", "1", ...; no forward of its own.
class ModuleListImpl : public Module {
 public:
  ModuleListImpl() : Module("ModuleList") {}
  template <class... Ms>
  explicit ModuleListImpl(Ms&&... modules) : Module("ModuleList") {
    (push_back(std::forward<Ms>(modules)), ...);
  }
  void push_back(std::shared_ptr<Module> module);
  template <class H, class = typename H::ContainedType>
  void push_back(const H& holder) {
    push_back(std::shared_ptr<Module>(holder.ptr()));
  }
  std::shared_ptr<Module> operator[](int64_t i) const;
  size_t size() const { return named_children().size(); }
  bool empty() const { return size() == 0; }
  /// The i-th module as its concrete type (Error if it is not an M).
  template <class M>
  std::shared_ptr<M> at(int64_t i) const {
    auto m = std::dynamic_pointer_cast<M>((*this)[i]);
    SMELT_CHECK(m != nullptr, "ModuleList::at: module {} is a {}, not the requested type", i,
                (*this)[i]->name());
    return m;
  }
};

// ================================= layers ====================================
// The Tensor members below (weight, bias, running_mean, ...) are registered as
// slots: assigning a new tensor to one (`lin->weight = randn({3, 6})`) is seen
// by parameters(), state_dict() and smelt::compile's guards. Members left
// undefined (bias=false, affine=false) are not parameters.

/// y = x @ weight^T + bias. weight [out_features, in_features], bias [out_features].
/// Initialization as PyTorch (kaiming_uniform_ with a=sqrt(5)): weight and bias
/// uniform in [-1/sqrt(in_features), 1/sqrt(in_features)] (bias zero-width when
/// in_features is 0). Float32 unless `dtype` is given.
class LinearImpl : public Module {
 public:
  LinearImpl(int64_t in_features, int64_t out_features, bool bias = true,
             DType dtype = DType::Float32);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  /// Re-draws weight and bias from the default initialization.
  void reset_parameters();

  int64_t in_features, out_features;
  Tensor weight;
  Tensor bias;  // undefined when built with bias=false
};

/// Returns its input.
class IdentityImpl : public Module {
 public:
  IdentityImpl() : Module("Identity") {}
  Tensor forward(const Tensor& x) override { return x; }
};

/// flatten(x, start_dim, end_dim) (defaults 1, -1 as nn.Flatten).
class FlattenImpl : public Module {
 public:
  explicit FlattenImpl(int64_t start_dim = 1, int64_t end_dim = -1)
      : Module("Flatten"), start_dim(start_dim), end_dim(end_dim) {}
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  int64_t start_dim, end_dim;
};

class ReLUImpl : public Module {
 public:
  ReLUImpl() : Module("ReLU") {}
  Tensor forward(const Tensor& x) override;
};

/// approximate: "none" (erf form) or "tanh"; Error otherwise.
class GELUImpl : public Module {
 public:
  explicit GELUImpl(std::string approximate = "none");
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  std::string approximate;
};

class SiLUImpl : public Module {
 public:
  SiLUImpl() : Module("SiLU") {}
  Tensor forward(const Tensor& x) override;
};

class SigmoidImpl : public Module {
 public:
  SigmoidImpl() : Module("Sigmoid") {}
  Tensor forward(const Tensor& x) override;
};

class TanhImpl : public Module {
 public:
  TanhImpl() : Module("Tanh") {}
  Tensor forward(const Tensor& x) override;
};

/// softmax(x, dim).
class SoftmaxImpl : public Module {
 public:
  explicit SoftmaxImpl(int64_t dim) : Module("Softmax"), dim(dim) {}
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  int64_t dim;
};

/// layer_norm over the trailing `normalized_shape` dims; weight ones and bias
/// zeros of that shape when elementwise_affine (bias only when `bias`).
class LayerNormImpl : public Module {
 public:
  LayerNormImpl(Shape normalized_shape, double eps = 1e-5, bool elementwise_affine = true,
                bool bias = true);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  Shape normalized_shape;
  double eps;
  bool elementwise_affine;
  Tensor weight, bias;  // undefined when not affine
};

/// rms_norm over the trailing dims; eps defaults to the input dtype's machine
/// epsilon (as torch.nn.RMSNorm with eps=None); weight ones when affine.
class RMSNormImpl : public Module {
 public:
  explicit RMSNormImpl(Shape normalized_shape, std::optional<double> eps = std::nullopt,
                       bool elementwise_affine = true);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  Shape normalized_shape;
  std::optional<double> eps;
  bool elementwise_affine;
  Tensor weight;
};

/// Batch normalization over dim 1 (as PyTorch). Parameters weight (ones) and
/// bias (zeros) when affine; buffers running_mean (zeros), running_var (ones)
/// and num_batches_tracked (int64 0-dim) when track_running_stats. In training
/// mode it normalizes with batch statistics and updates the running stats
/// (momentum, or a cumulative average when momentum is nullopt); in eval mode
/// it uses the running stats. Input rank is checked by the subclasses.
class BatchNormImpl : public Module {
 public:
  BatchNormImpl(const char* name, int64_t num_features, double eps, std::optional<double> momentum,
                bool affine, bool track_running_stats);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  /// running_mean = 0, running_var = 1, num_batches_tracked = 0.
  void reset_running_stats();

  int64_t num_features;
  double eps;
  std::optional<double> momentum;
  bool affine, track_running_stats;
  Tensor weight, bias, running_mean, running_var, num_batches_tracked;

 protected:
  virtual void check_input_dim(const Tensor& x) const = 0;
};

/// Input [N, C] or [N, C, L].
class BatchNorm1dImpl : public BatchNormImpl {
 public:
  explicit BatchNorm1dImpl(int64_t num_features, double eps = 1e-5,
                           std::optional<double> momentum = 0.1, bool affine = true,
                           bool track_running_stats = true)
      : BatchNormImpl("BatchNorm1d", num_features, eps, momentum, affine, track_running_stats) {}

 protected:
  void check_input_dim(const Tensor& x) const override;
};

/// Input [N, C, H, W].
class BatchNorm2dImpl : public BatchNormImpl {
 public:
  explicit BatchNorm2dImpl(int64_t num_features, double eps = 1e-5,
                           std::optional<double> momentum = 0.1, bool affine = true,
                           bool track_running_stats = true)
      : BatchNormImpl("BatchNorm2d", num_features, eps, momentum, affine, track_running_stats) {}

 protected:
  void check_input_dim(const Tensor& x) const override;
};

/// Lookup table: forward(indices) = weight[indices]; weight [num_embeddings,
/// embedding_dim] initialized N(0, 1).
class EmbeddingImpl : public Module {
 public:
  EmbeddingImpl(int64_t num_embeddings, int64_t embedding_dim, DType dtype = DType::Float32);
  Tensor forward(const Tensor& indices) override;
  std::string extra_repr() const override;
  int64_t num_embeddings, embedding_dim;
  Tensor weight;
};

/// dropout(x, p, is_training()): identity in eval mode. p in [0, 1]; Error otherwise.
class DropoutImpl : public Module {
 public:
  explicit DropoutImpl(double p = 0.5);
  Tensor forward(const Tensor& x) override;
  std::string extra_repr() const override;
  double p;
};

// ================================ holders ====================================

/// Declares `Name` as the holder of `NameImpl` (libtorch's TORCH_MODULE); usable
/// in any namespace for user modules.
#define SMELT_MODULE(Name)                                     \
  class Name : public ::smelt::nn::ModuleHolder<Name##Impl> {  \
   public:                                                     \
    using ::smelt::nn::ModuleHolder<Name##Impl>::ModuleHolder; \
  }

SMELT_MODULE(Sequential);
SMELT_MODULE(ModuleList);
SMELT_MODULE(Linear);
SMELT_MODULE(Identity);
SMELT_MODULE(Flatten);
SMELT_MODULE(ReLU);
SMELT_MODULE(GELU);
SMELT_MODULE(SiLU);
SMELT_MODULE(Sigmoid);
SMELT_MODULE(Tanh);
SMELT_MODULE(Softmax);
SMELT_MODULE(LayerNorm);
SMELT_MODULE(RMSNorm);
SMELT_MODULE(BatchNorm1d);
SMELT_MODULE(BatchNorm2d);
SMELT_MODULE(Embedding);
SMELT_MODULE(Dropout);

}  // namespace smelt::nn
