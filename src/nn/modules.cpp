// nn layers: containers, Linear, activations, normalizations, Embedding, Dropout.
#include "smelt/nn/modules.h"

#include <fmt/format.h>

#include <cmath>

#include "core/tensor_impl.h"
#include "smelt/nn/init.h"
#include "smelt/ops.h"

namespace smelt::nn {

namespace {
const char* py_bool(bool b) { return b ? "True" : "False"; }

std::string shape_tuple(const Shape& s) {
  std::string r = "(";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + (s.size() == 1 ? ",)" : ")");
}

std::shared_ptr<Module> child_at(const Module& m, int64_t i, const char* op) {
  const auto& ch = m.named_children();
  const auto n = static_cast<int64_t>(ch.size());
  SMELT_CHECK(i >= -n && i < n, "{}: index {} is out of range for a container of {} modules", op, i,
              n);
  return ch[static_cast<size_t>(i < 0 ? i + n : i)].second;
}
}  // namespace

// ---- containers -------------------------------------------------------------------

void SequentialImpl::push_back(std::shared_ptr<Module> module) {
  add_child(std::to_string(size()), std::move(module));
}

std::shared_ptr<Module> SequentialImpl::operator[](int64_t i) const {
  return child_at(*this, i, "Sequential[]");
}

Tensor SequentialImpl::forward(const Tensor& x) {
  Tensor y = x;
  for (const auto& [n, m] : named_children()) y = m->forward(y);
  return y;
}

void ModuleListImpl::push_back(std::shared_ptr<Module> module) {
  add_child(std::to_string(size()), std::move(module));
}

std::shared_ptr<Module> ModuleListImpl::operator[](int64_t i) const {
  return child_at(*this, i, "ModuleList[]");
}

// ---- Linear -------------------------------------------------------------------------

LinearImpl::LinearImpl(int64_t in_features, int64_t out_features, bool with_bias, DType dtype)
    : Module("Linear"), in_features(in_features), out_features(out_features) {
  SMELT_CHECK(in_features >= 0 && out_features >= 0,
              "Linear: in_features ({}) and out_features ({}) must be non-negative", in_features,
              out_features);
  SMELT_CHECK(is_floating(dtype), "Linear: dtype must be floating, got {}", dtype_name(dtype));
  register_parameter("weight", weight, empty({out_features, in_features}, dtype));
  if (with_bias) register_parameter("bias", bias, empty({out_features}, dtype));
  reset_parameters();
}

void LinearImpl::reset_parameters() {
  // kaiming_uniform_(weight, a=sqrt(5)) == U(-1/sqrt(in), 1/sqrt(in)).
  init::kaiming_uniform_(weight, std::sqrt(5.0));
  if (bias.defined()) {
    double bound = in_features > 0 ? 1.0 / std::sqrt(static_cast<double>(in_features)) : 0.0;
    init::uniform_(bias, -bound, bound);
  }
}

Tensor LinearImpl::forward(const Tensor& x) {
  return linear(x, weight, bias.defined() ? std::optional<Tensor>(bias) : std::nullopt);
}

std::string LinearImpl::extra_repr() const {
  return fmt::format("in_features={}, out_features={}, bias={}", in_features, out_features,
                     py_bool(bias.defined()));
}

// ---- simple activations ---------------------------------------------------------------

Tensor FlattenImpl::forward(const Tensor& x) { return flatten(x, start_dim, end_dim); }
std::string FlattenImpl::extra_repr() const {
  return fmt::format("start_dim={}, end_dim={}", start_dim, end_dim);
}

Tensor ReLUImpl::forward(const Tensor& x) { return relu(x); }

GELUImpl::GELUImpl(std::string approx) : Module("GELU"), approximate(std::move(approx)) {
  SMELT_CHECK(approximate == "none" || approximate == "tanh",
              "GELU: approximate=\"{}\" is not supported; use \"none\" or \"tanh\"", approximate);
}
Tensor GELUImpl::forward(const Tensor& x) { return gelu(x, approximate); }
std::string GELUImpl::extra_repr() const {
  return approximate == "none" ? "" : fmt::format("approximate='{}'", approximate);
}

Tensor SiLUImpl::forward(const Tensor& x) { return silu(x); }
Tensor SigmoidImpl::forward(const Tensor& x) { return sigmoid(x); }
Tensor TanhImpl::forward(const Tensor& x) { return tanh(x); }

Tensor SoftmaxImpl::forward(const Tensor& x) { return softmax(x, dim); }
std::string SoftmaxImpl::extra_repr() const { return fmt::format("dim={}", dim); }

// ---- normalizations --------------------------------------------------------------------

namespace {
void check_normalized_shape(const Shape& s, const char* op) {
  SMELT_CHECK(!s.empty(), "{}: normalized_shape must have at least one dimension", op);
  for (int64_t d : s)
    SMELT_CHECK(d >= 0, "{}: normalized_shape {} has a negative size", op, detail::shape_str(s));
}
}  // namespace

LayerNormImpl::LayerNormImpl(Shape shape, double eps, bool affine, bool with_bias)
    : Module("LayerNorm"),
      normalized_shape(std::move(shape)),
      eps(eps),
      elementwise_affine(affine) {
  check_normalized_shape(normalized_shape, "LayerNorm");
  if (affine) {
    register_parameter("weight", weight, ones(normalized_shape));
    if (with_bias) register_parameter("bias", bias, zeros(normalized_shape));
  }
}

Tensor LayerNormImpl::forward(const Tensor& x) {
  return layer_norm(x, normalized_shape,
                    weight.defined() ? std::optional<Tensor>(weight) : std::nullopt,
                    bias.defined() ? std::optional<Tensor>(bias) : std::nullopt, eps);
}

std::string LayerNormImpl::extra_repr() const {
  return fmt::format("{}, eps={}, elementwise_affine={}", shape_tuple(normalized_shape), eps,
                     py_bool(elementwise_affine));
}

RMSNormImpl::RMSNormImpl(Shape shape, std::optional<double> eps, bool affine)
    : Module("RMSNorm"), normalized_shape(std::move(shape)), eps(eps), elementwise_affine(affine) {
  check_normalized_shape(normalized_shape, "RMSNorm");
  if (affine) register_parameter("weight", weight, ones(normalized_shape));
}

Tensor RMSNormImpl::forward(const Tensor& x) {
  return rms_norm(x, normalized_shape,
                  weight.defined() ? std::optional<Tensor>(weight) : std::nullopt, eps);
}

std::string RMSNormImpl::extra_repr() const {
  return fmt::format("{}, eps={}, elementwise_affine={}", shape_tuple(normalized_shape),
                     eps ? fmt::format("{}", *eps) : std::string("None"),
                     py_bool(elementwise_affine));
}

BatchNormImpl::BatchNormImpl(const char* name, int64_t num_features, double eps,
                             std::optional<double> momentum, bool affine, bool track_running_stats)
    : Module(name),
      num_features(num_features),
      eps(eps),
      momentum(momentum),
      affine(affine),
      track_running_stats(track_running_stats) {
  SMELT_CHECK(num_features > 0, "{}: num_features must be positive, got {}", name, num_features);
  if (affine) {
    register_parameter("weight", weight, ones({num_features}));
    register_parameter("bias", bias, zeros({num_features}));
  }
  if (track_running_stats) {
    register_buffer("running_mean", running_mean, zeros({num_features}));
    register_buffer("running_var", running_var, ones({num_features}));
    register_buffer("num_batches_tracked", num_batches_tracked, zeros({}, DType::Int64));
  }
}

void BatchNormImpl::reset_running_stats() {
  if (!track_running_stats) return;
  running_mean.zero_();
  running_var.fill_(1);
  num_batches_tracked.zero_();
}

Tensor BatchNormImpl::forward(const Tensor& x) {
  check_input_dim(x);
  SMELT_CHECK(x.size(1) == num_features,
              "{}: expected input with {} channels in dim 1, got input of shape {}", name(),
              num_features, detail::shape_str(x.sizes()));
  // As torch.nn.modules.batchnorm._BatchNorm.forward.
  double factor = momentum.value_or(0.0);
  if (is_training() && track_running_stats) {
    num_batches_tracked.add_(1);
    if (!momentum) factor = 1.0 / static_cast<double>(num_batches_tracked.item<int64_t>());
  }
  const bool bn_training = is_training() || !track_running_stats;
  const bool use_running = !is_training() || track_running_stats;
  auto opt = [](const Tensor& t) { return t.defined() ? std::optional<Tensor>(t) : std::nullopt; };
  return batch_norm(x, use_running ? opt(running_mean) : std::nullopt,
                    use_running ? opt(running_var) : std::nullopt, opt(weight), opt(bias),
                    bn_training, factor, eps);
}

std::string BatchNormImpl::extra_repr() const {
  return fmt::format("{}, eps={}, momentum={}, affine={}, track_running_stats={}", num_features,
                     eps, momentum ? fmt::format("{}", *momentum) : std::string("None"),
                     py_bool(affine), py_bool(track_running_stats));
}

void BatchNorm1dImpl::check_input_dim(const Tensor& x) const {
  SMELT_CHECK(x.dim() == 2 || x.dim() == 3,
              "BatchNorm1d: expected 2D or 3D input [N, C] or [N, C, L] (got {}D input of shape "
              "{}); use BatchNorm2d for images",
              x.dim(), detail::shape_str(x.sizes()));
}

void BatchNorm2dImpl::check_input_dim(const Tensor& x) const {
  SMELT_CHECK(x.dim() == 4,
              "BatchNorm2d: expected 4D input [N, C, H, W] (got {}D input of shape {}); use "
              "BatchNorm1d for [N, C] or [N, C, L]",
              x.dim(), detail::shape_str(x.sizes()));
}

// ---- Embedding, Dropout ---------------------------------------------------------------------

EmbeddingImpl::EmbeddingImpl(int64_t num_embeddings, int64_t embedding_dim, DType dtype)
    : Module("Embedding"), num_embeddings(num_embeddings), embedding_dim(embedding_dim) {
  SMELT_CHECK(num_embeddings >= 0 && embedding_dim >= 0,
              "Embedding: num_embeddings ({}) and embedding_dim ({}) must be non-negative",
              num_embeddings, embedding_dim);
  SMELT_CHECK(is_floating(dtype), "Embedding: dtype must be floating, got {}", dtype_name(dtype));
  register_parameter("weight", weight, empty({num_embeddings, embedding_dim}, dtype));
  init::normal_(weight);
}

Tensor EmbeddingImpl::forward(const Tensor& indices) { return embedding(weight, indices); }

std::string EmbeddingImpl::extra_repr() const {
  return fmt::format("{}, {}", num_embeddings, embedding_dim);
}

DropoutImpl::DropoutImpl(double p) : Module("Dropout"), p(p) {
  SMELT_CHECK(p >= 0.0 && p <= 1.0,
              "Dropout: dropout probability has to be between 0 and 1, but got {}", p);
}

Tensor DropoutImpl::forward(const Tensor& x) { return dropout(x, p, is_training()); }

std::string DropoutImpl::extra_repr() const { return fmt::format("p={}", p); }

}  // namespace smelt::nn
