// Neural-network functional ops: input validation and output metadata. The
// composite ops (linear, softmax, log_softmax, layer_norm, rms_norm,
// batch_norm, cross_entropy, nll_loss, binary_cross_entropy_with_logits,
// mse_loss, scaled_dot_product_attention) compute
// through their one decomposition (src/ops/decompositions.cpp) via
// run_composite; embedding is a movement op with its own kernel; dropout draws
// from the global generator (a graph break under tracing).
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "backend/backend.h"
#include "core/tensor_impl.h"
#include "ops/decompose.h"
#include "ops/dispatch.h"
#include "ops/index_check.h"
#include "ops/random_ops.h"
#include "smelt/ops.h"

namespace smelt {

namespace {

using detail::Attrs;
using detail::OutMeta;

std::string S(const Tensor& t) { return detail::shape_str(t.sizes()); }
std::string S(const Shape& s) { return detail::shape_str(s); }
std::string_view D(const Tensor& t) { return dtype_name(t.dtype()); }

Tensor composite1(const char* op, const std::vector<Tensor>& inputs, const Attrs& attrs,
                  const OutMeta& out) {
  return detail::run_composite(op, inputs, attrs, {out})[0];
}

/// Broadcast of two shapes, or nullopt when incompatible.
std::optional<Shape> try_broadcast(const Shape& a, const Shape& b) {
  const size_t n = std::max(a.size(), b.size());
  Shape out(n, 1);
  for (size_t i = 0; i < n; ++i) {
    const int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1) return std::nullopt;
    out[i] = da == 1 ? db : da;
  }
  return out;
}

/// True when `from` broadcasts to exactly `to`.
bool broadcasts_to(const Shape& from, const Shape& to) {
  auto b = try_broadcast(from, to);
  return b && *b == to;
}

void check_defined(const char* op, const Tensor& t, const char* name) {
  SMELT_CHECK(t.defined(), "{}: {} is an undefined tensor", op, name);
}

void check_floating(const char* op, const Tensor& t, const char* name) {
  SMELT_CHECK(is_floating(t.dtype()),
              "{}: {} must be a floating tensor, got {} (shape {}); convert it with "
              ".to(smelt::float32)",
              op, name, D(t), S(t));
}

void check_reduction(const char* op, const std::string& reduction) {
  SMELT_CHECK(reduction == "none" || reduction == "mean" || reduction == "sum",
              "{}: reduction must be \"none\", \"mean\" or \"sum\", got \"{}\"", op, reduction);
}

Tensor softmax_like(const char* op, const Tensor& x, int64_t dim, std::optional<DType> dtype) {
  check_defined(op, x, "input");
  const DType out = dtype.value_or(x.dtype());
  SMELT_CHECK(is_floating(out),
              "{}: needs a floating result dtype, but input has dtype {} (shape {}); pass "
              "dtype=smelt::float32 or convert the input",
              op, D(x), S(x));
  const int64_t d = detail::wrap_dim(dim, std::max<int64_t>(1, x.dim()), op);
  Attrs attrs{{"dim", d}, {"dtype", out}};
  return composite1(op, {x}, attrs, {x.sizes(), out, x.device()});
}

/// Trailing-dims check shared by layer_norm and rms_norm.
void check_normalized(const char* op, const Tensor& x, const Shape& ns,
                      const std::optional<Tensor>& weight, const std::optional<Tensor>& bias) {
  check_defined(op, x, "input");
  check_floating(op, x, "input");
  SMELT_CHECK(!ns.empty(),
              "{}: normalized_shape must have at least one dim (input shape {}); pass the "
              "trailing dims to normalize, e.g. {{{}}}",
              op, S(x), x.dim() > 0 ? x.size(-1) : 1);
  const int64_t nd = static_cast<int64_t>(ns.size());
  bool ok = x.dim() >= nd;
  for (int64_t i = 0; ok && i < nd; ++i) ok = x.size(x.dim() - nd + i) == ns[i];
  SMELT_CHECK(ok,
              "{}: given normalized_shape={}, expected input with shape [*, {}], but got input "
              "of shape {}; normalized_shape must equal the input's trailing dims",
              op, S(ns), S(ns).substr(1, S(ns).size() - 2), S(x));
  for (auto [t, name] : {std::pair{&weight, "weight"}, std::pair{&bias, "bias"}}) {
    if (!t->has_value()) continue;
    const Tensor& w = **t;
    check_defined(op, w, name);
    check_floating(op, w, name);
    SMELT_CHECK(w.sizes() == ns,
                "{}: {} has shape {} but normalized_shape is {}; it must have exactly the "
                "normalized shape",
                op, name, S(w), S(ns));
    SMELT_CHECK(w.device() == x.device(), "{}: {} is on {} but input is on {}", op, name,
                w.device().str(), x.device().str());
  }
}

/// The batch shape of class-score input [C], [N, C] or [N, C, d1, ...] (input's
/// shape without its class dim), after checking that the input has a class dim.
Shape class_batch(const char* op, const Tensor& input) {
  SMELT_CHECK(input.dim() >= 1,
              "{}: input must be [C], [N, C] or [N, C, d1, ...] class scores, got a 0-dim tensor",
              op);
  Shape batch = input.sizes();
  batch.erase(batch.begin() + (input.dim() == 1 ? 0 : 1));
  return batch;
}

/// Class-index targets of `input` (int64, the batch shape, each in [0, C) or
/// ignore_index; values checked eagerly).
void check_class_targets(const char* op, const Tensor& input, const Tensor& target,
                         int64_t ignore_index) {
  const Shape batch = class_batch(op, input);
  const int64_t C = input.size(input.dim() == 1 ? 0 : 1);
  SMELT_CHECK(target.dtype() == DType::Int64,
              "{}: class-index targets must be int64, got {} (shape {}); convert them with "
              ".to(smelt::int64)",
              op, D(target), S(target));
  SMELT_CHECK(target.sizes() == batch, "{}: input of shape {} expects a target of shape {}, got {}",
              op, S(input), S(batch), S(target));
  // On CUDA the targets are not read here (a wait for the device on every
  // call): the gather that picks each target's log-probability checks its
  // index in the kernel, and a target outside [0, C) that is not ignore_index
  // raises gather's out-of-bounds error at the next synchronization.
  if (target.is_tracer() || target.device().is_cuda()) return;
  for (int64_t t : target.to_vector<int64_t>())
    SMELT_CHECK(t == ignore_index || (t >= 0 && t < C),
                "{}: target {} is out of bounds for {} classes (input shape {}); targets must be "
                "in [0, {}) or equal ignore_index ({})",
                op, t, C, S(input), C, ignore_index);
}

double finfo_eps(DType t) {
  switch (t) {
    case DType::Float16:
      return 0.0009765625;  // 2^-10
    case DType::BFloat16:
      return 0.0078125;  // 2^-7
    case DType::Float64:
      return std::numeric_limits<double>::epsilon();
    default:
      return std::numeric_limits<float>::epsilon();
  }
}

}  // namespace

// ----------------------------------------------------------------- linear ---

Tensor linear(const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias) {
  check_defined("linear", x, "input");
  check_defined("linear", weight, "weight");
  SMELT_CHECK(weight.dim() == 1 || weight.dim() == 2,
              "linear: weight must be 2-D [out_features, in_features] (or 1-D), got shape {}",
              S(weight));
  SMELT_CHECK(x.dim() >= 1, "linear: input must be at least 1-D, got shape {}", S(x));
  const int64_t in = weight.size(-1);
  SMELT_CHECK(x.size(-1) == in,
              "linear: input shape {} and weight shape {} cannot be multiplied: the input's last "
              "dim ({}) must equal in_features ({}); weight is [out_features, in_features]",
              S(x), S(weight), x.size(-1), in);
  SMELT_CHECK(x.dtype() == weight.dtype(),
              "linear: input ({}) and weight ({}) must have the same dtype; convert one with "
              ".to(...)",
              D(x), D(weight));
  SMELT_CHECK(x.dtype() != DType::Bool, "linear: bool tensors are not supported");
  SMELT_CHECK(weight.device() == x.device(),
              "linear: Expected all tensors to be on the same device, but found at least two "
              "devices, {} (input) and {} (weight); move them with .to(device)",
              x.device().str(), weight.device().str());
  Shape out(x.sizes().begin(), x.sizes().end() - 1);
  if (weight.dim() == 2) out.push_back(weight.size(0));
  std::vector<Tensor> inputs{x, weight};
  if (bias) {
    check_defined("linear", *bias, "bias");
    SMELT_CHECK(bias->dtype() == x.dtype(),
                "linear: bias dtype {} differs from input dtype {}; convert it with .to(...)",
                D(*bias), D(x));
    // A 0-d CPU bias is a scalar the broadcasting add takes on any device.
    SMELT_CHECK(bias->device() == x.device() || (bias->dim() == 0 && bias->device().is_cpu()),
                "linear: Expected all tensors to be on the same device, but found at least two "
                "devices, {} (input) and {} (bias); move them with .to(device)",
                x.device().str(), bias->device().str());
    SMELT_CHECK(broadcasts_to(bias->sizes(), out),
                "linear: bias of shape {} does not broadcast to the output shape {}; bias must "
                "be [out_features]",
                S(*bias), S(out));
    inputs.push_back(*bias);
  }
  return composite1("linear", inputs, {{"has_bias", bias.has_value()}},
                    {out, x.dtype(), x.device()});
}

// ---------------------------------------------------------------- softmax ---

Tensor softmax(const Tensor& x, int64_t dim, std::optional<DType> dtype) {
  return softmax_like("softmax", x, dim, dtype);
}

Tensor log_softmax(const Tensor& x, int64_t dim, std::optional<DType> dtype) {
  return softmax_like("log_softmax", x, dim, dtype);
}

// ------------------------------------------------------------ norm layers ---

Tensor layer_norm(const Tensor& x, const Shape& normalized_shape,
                  const std::optional<Tensor>& weight, const std::optional<Tensor>& bias,
                  double eps) {
  check_normalized("layer_norm", x, normalized_shape, weight, bias);
  std::vector<Tensor> inputs{x};
  if (weight) inputs.push_back(*weight);
  if (bias) inputs.push_back(*bias);
  Attrs attrs{{"normalized_shape", normalized_shape},
              {"eps", eps},
              {"has_weight", weight.has_value()},
              {"has_bias", bias.has_value()}};
  return composite1("layer_norm", inputs, attrs, {x.sizes(), x.dtype(), x.device()});
}

Tensor rms_norm(const Tensor& x, const Shape& normalized_shape, const std::optional<Tensor>& weight,
                std::optional<double> eps) {
  check_normalized("rms_norm", x, normalized_shape, weight, std::nullopt);
  std::vector<Tensor> inputs{x};
  if (weight) inputs.push_back(*weight);
  Attrs attrs{{"normalized_shape", normalized_shape},
              {"eps", eps.value_or(finfo_eps(x.dtype()))},
              {"has_weight", weight.has_value()}};
  return composite1("rms_norm", inputs, attrs, {x.sizes(), x.dtype(), x.device()});
}

Tensor batch_norm(const Tensor& x, const std::optional<Tensor>& running_mean,
                  const std::optional<Tensor>& running_var, const std::optional<Tensor>& weight,
                  const std::optional<Tensor>& bias, bool training, double momentum, double eps) {
  const char* op = "batch_norm";
  check_defined(op, x, "input");
  check_floating(op, x, "input");
  SMELT_CHECK(x.dim() >= 2,
              "batch_norm: input must be [N, C, *] (at least 2-D), got shape {}; add a batch dim "
              "with unsqueeze(0)",
              S(x));
  const int64_t C = x.size(1);
  SMELT_CHECK(training || (running_mean && running_var),
              "batch_norm: running_mean and running_var must be given in evaluation mode "
              "(training=false); pass them or set training=true");
  if (training) {
    const int64_t per_channel = x.numel() / std::max<int64_t>(1, C);
    SMELT_CHECK(per_channel > 1 || x.numel() == 0,
                "batch_norm: expected more than 1 value per channel when training, got input of "
                "shape {}; use a larger batch or training=false",
                S(x));
  }
  const std::pair<const std::optional<Tensor>*, const char*> params[] = {
      {&running_mean, "running_mean"},
      {&running_var, "running_var"},
      {&weight, "weight"},
      {&bias, "bias"}};
  std::vector<Tensor> inputs{x};
  for (auto [t, name] : params) {
    if (!t->has_value()) continue;
    const Tensor& p = **t;
    check_defined(op, p, name);
    check_floating(op, p, name);
    SMELT_CHECK(p.dim() == 1 && p.size(0) == C,
                "batch_norm: {} must have shape [{}] (the channel dim of input {}), got {}", name,
                C, S(x), S(p));
    SMELT_CHECK(p.device() == x.device(), "batch_norm: {} is on {} but input is on {}", name,
                p.device().str(), x.device().str());
    inputs.push_back(p);
  }
  Attrs attrs{{"training", training},
              {"momentum", momentum},
              {"eps", eps},
              {"has_running_mean", running_mean.has_value()},
              {"has_running_var", running_var.has_value()},
              {"has_weight", weight.has_value()},
              {"has_bias", bias.has_value()}};
  return composite1(op, inputs, attrs, {x.sizes(), x.dtype(), x.device()});
}

// ---------------------------------------------------------------- dropout ---

Tensor dropout(const Tensor& x, double p, bool training) {
  check_defined("dropout", x, "input");
  SMELT_CHECK(p >= 0.0 && p <= 1.0, "dropout: probability has to be between 0 and 1, but got {}",
              p);
  // As PyTorch: no-op cases return the input itself (no random draw).
  if (!training || p == 0.0 || x.numel() == 0) return x;
  check_floating("dropout", x, "input");
  detail::note_random("dropout");
  if (p == 1.0) return mul(x, scalar_tensor(0, x.dtype()));  // NaN stays NaN, as PyTorch
  // noise = bernoulli(1 - p) / (1 - p) in x's dtype; out = x * noise.
  Tensor noise =
      div(to_dtype(detail::bernoulli_mask(x.sizes(), 1.0 - p, x.device()), x.dtype()), 1.0 - p);
  return mul(x, noise);
}

// -------------------------------------------------------------- embedding ---

Tensor embedding(const Tensor& weight, const Tensor& indices) {
  check_defined("embedding", weight, "weight");
  check_defined("embedding", indices, "indices");
  SMELT_CHECK(weight.dim() == 2,
              "embedding: weight must be 2-D [num_embeddings, embedding_dim], got shape {}",
              S(weight));
  SMELT_CHECK(indices.dtype() == DType::Int64 || indices.dtype() == DType::Int32,
              "embedding: indices must be int64 or int32, got {} (shape {}); convert them with "
              ".to(smelt::int64)",
              D(indices), S(indices));
  const int64_t V = weight.size(0), Dm = weight.size(1);
  Shape out = indices.sizes();
  out.push_back(Dm);
  return detail::run_op1(
      "embedding", {weight, indices}, {}, {out, weight.dtype(), weight.device()},
      [=](const std::vector<Tensor>& outs) {
        detail::check_indices(indices, V, [&](int64_t i) {
          return fmt::format(
              "embedding: index {} is out of range for a weight of {} rows (shape {}); indices "
              "must be in [0, {})",
              i, V, S(weight), V);
        });
        // Rows indices of weight, in order: an index_select over dim 0 into the
        // output viewed as [indices.numel(), Dm].
        const int64_t n = indices.numel();
        Tensor rows = detail::make_view(outs[0], {n, Dm}, {Dm, 1}, 0);
        backend::backend(weight.device()).index_select(rows, weight, 0, indices);
      });
}

// ----------------------------------------------------------------- losses ---

Tensor cross_entropy(const Tensor& input, const Tensor& target, int64_t ignore_index,
                     const std::string& reduction, double label_smoothing) {
  const char* op = "cross_entropy";
  check_defined(op, input, "input");
  check_defined(op, target, "target");
  check_floating(op, input, "input");
  check_reduction(op, reduction);
  SMELT_CHECK(label_smoothing >= 0.0 && label_smoothing <= 1.0,
              "cross_entropy: label_smoothing must be between 0.0 and 1.0, got {}",
              label_smoothing);
  const Shape batch = class_batch(op, input);
  const bool probs = is_floating(target.dtype());
  if (probs) {
    SMELT_CHECK(target.sizes() == input.sizes(),
                "cross_entropy: class-probability targets must have the input's shape {}, got {}",
                S(input), S(target));
    SMELT_CHECK(target.dtype() == input.dtype(),
                "cross_entropy: probability target dtype {} differs from input dtype {}", D(target),
                D(input));
  } else {
    check_class_targets(op, input, target, ignore_index);
  }
  const Shape out = reduction == "none" ? batch : Shape{};
  Attrs attrs{{"ignore_index", ignore_index},
              {"reduction", reduction},
              {"label_smoothing", label_smoothing}};
  return composite1(op, {input, target}, attrs, {out, input.dtype(), input.device()});
}

Tensor nll_loss(const Tensor& input, const Tensor& target, const std::optional<Tensor>& weight,
                int64_t ignore_index, const std::string& reduction) {
  const char* op = "nll_loss";
  check_defined(op, input, "input");
  check_defined(op, target, "target");
  check_floating(op, input, "input");
  check_reduction(op, reduction);
  check_class_targets(op, input, target, ignore_index);
  std::vector<Tensor> inputs{input, target};
  if (weight) {
    const int64_t C = input.size(input.dim() == 1 ? 0 : 1);
    check_defined(op, *weight, "weight");
    SMELT_CHECK(weight->dim() == 1 && weight->size(0) == C && weight->dtype() == input.dtype(),
                "nll_loss: weight must be a [{}] tensor of the input's dtype {} (one weight per "
                "class), got {} {}",
                C, D(input), D(*weight), S(*weight));
    inputs.push_back(*weight);
  }
  const Shape out = reduction == "none" ? class_batch(op, input) : Shape{};
  Attrs attrs{
      {"ignore_index", ignore_index}, {"reduction", reduction}, {"has_weight", weight.has_value()}};
  return composite1(op, inputs, attrs, {out, input.dtype(), input.device()});
}

Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target,
                                        const std::optional<Tensor>& weight,
                                        const std::string& reduction,
                                        const std::optional<Tensor>& pos_weight) {
  const char* op = "binary_cross_entropy_with_logits";
  check_defined(op, input, "input");
  check_defined(op, target, "target");
  check_floating(op, input, "input");
  check_floating(op, target, "target");
  check_reduction(op, reduction);
  SMELT_CHECK(target.sizes() == input.sizes(),
              "binary_cross_entropy_with_logits: Target size ({}) must be the same as input size "
              "({})",
              S(target), S(input));
  std::vector<Tensor> inputs{input, target};
  for (auto [t, name] : {std::pair{&weight, "weight"}, std::pair{&pos_weight, "pos_weight"}}) {
    if (!t->has_value()) continue;
    const Tensor& w = **t;
    check_defined(op, w, name);
    check_floating(op, w, name);
    SMELT_CHECK(broadcasts_to(w.sizes(), input.sizes()),
                "binary_cross_entropy_with_logits: {} of shape {} does not broadcast to the "
                "input's shape {}",
                name, S(w), S(input));
    inputs.push_back(w);
  }
  const DType dt = promote_types(input.dtype(), target.dtype());
  const Shape out = reduction == "none" ? input.sizes() : Shape{};
  Attrs attrs{{"reduction", reduction},
              {"has_weight", weight.has_value()},
              {"has_pos_weight", pos_weight.has_value()}};
  return composite1(op, inputs, attrs, {out, dt, input.device()});
}

Tensor mse_loss(const Tensor& input, const Tensor& target, const std::string& reduction) {
  const char* op = "mse_loss";
  check_defined(op, input, "input");
  check_defined(op, target, "target");
  check_floating(op, input, "input");
  check_floating(op, target, "target");
  check_reduction(op, reduction);
  auto shape = try_broadcast(input.sizes(), target.sizes());
  SMELT_CHECK(shape.has_value(),
              "mse_loss: input shape {} and target shape {} cannot be broadcast; give them the "
              "same shape",
              S(input), S(target));
  const DType dt = promote_types(input.dtype(), target.dtype());
  const Shape out = reduction == "none" ? *shape : Shape{};
  return composite1(op, {input, target}, {{"reduction", reduction}}, {out, dt, input.device()});
}

// -------------------------------------------------------------- attention ---

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const std::optional<Tensor>& attn_mask, double dropout_p,
                                    bool is_causal, std::optional<double> scale) {
  const char* op = "scaled_dot_product_attention";
  check_defined(op, q, "query");
  check_defined(op, k, "key");
  check_defined(op, v, "value");
  check_floating(op, q, "query");
  SMELT_CHECK(q.dtype() == k.dtype() && q.dtype() == v.dtype(),
              "scaled_dot_product_attention: query, key and value must have the same dtype, got "
              "{}, {} and {}",
              D(q), D(k), D(v));
  SMELT_CHECK(q.dim() >= 2 && k.dim() >= 2 && v.dim() >= 2,
              "scaled_dot_product_attention: query {}, key {} and value {} must be at least 2-D "
              "[..., L, E]",
              S(q), S(k), S(v));
  const int64_t L = q.size(-2), E = q.size(-1), Sk = k.size(-2), Ev = v.size(-1);
  SMELT_CHECK(k.size(-1) == E && v.size(-2) == Sk,
              "scaled_dot_product_attention: shapes query {}, key {}, value {} do not fit: need "
              "query [..., L, E], key [..., S, E], value [..., S, Ev]",
              S(q), S(k), S(v));
  SMELT_CHECK(dropout_p >= 0.0 && dropout_p <= 1.0,
              "scaled_dot_product_attention: dropout_p must be in [0, 1], got {}", dropout_p);
  SMELT_CHECK(!(is_causal && attn_mask.has_value()),
              "scaled_dot_product_attention: explicit attn_mask should not be set when "
              "is_causal=true; pass one or the other");
  const Shape qb(q.sizes().begin(), q.sizes().end() - 2);
  const Shape kb(k.sizes().begin(), k.sizes().end() - 2);
  const Shape vb(v.sizes().begin(), v.sizes().end() - 2);
  auto b1 = try_broadcast(qb, kb);
  auto b2 = b1 ? try_broadcast(*b1, vb) : std::nullopt;
  SMELT_CHECK(b2.has_value(),
              "scaled_dot_product_attention: batch dims of query {}, key {} and value {} cannot "
              "be broadcast",
              S(q), S(k), S(v));
  Shape score_shape = *b2;
  score_shape.push_back(L);
  score_shape.push_back(Sk);
  std::vector<Tensor> inputs{q, k, v};
  if (attn_mask) {
    const Tensor& m = *attn_mask;
    check_defined(op, m, "attn_mask");
    SMELT_CHECK(m.dtype() == DType::Bool || m.dtype() == q.dtype(),
                "scaled_dot_product_attention: attn_mask must be bool (true = attend) or the "
                "query's dtype {} (added to the scores), got {}",
                D(q), D(m));
    auto mb = try_broadcast(m.sizes(), score_shape);
    SMELT_CHECK(mb.has_value(),
                "scaled_dot_product_attention: attn_mask of shape {} does not broadcast to the "
                "attention scores' shape {}",
                S(m), S(score_shape));
    score_shape = *mb;
    inputs.push_back(m);
  }
  Shape out(score_shape.begin(), score_shape.end() - 2);
  out.push_back(L);
  out.push_back(Ev);
  const double sc = scale.value_or(1.0 / std::sqrt(static_cast<double>(E)));
  if (dropout_p > 0.0) detail::note_random(op);
  Attrs attrs{{"has_attn_mask", attn_mask.has_value()},
              {"dropout_p", dropout_p},
              {"is_causal", is_causal},
              {"scale", sc}};
  return composite1(op, inputs, attrs, {out, q.dtype(), q.device()});
}

}  // namespace smelt
