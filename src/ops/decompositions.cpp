// The decompositions of composite ops: each composite is defined once, here, as
// plain tensor code over primitive ops (see decompose.h). Eagerly they compute;
// called with tracer tensors (the compiler's decompose pass) they record the
// primitives. Inputs: the op's tensors in order, absent optional tensors left
// out (attrs has_weight / has_bias / ... say which are present).
//
// Precision follows PyTorch: float16 / bfloat16 inputs are computed in float32
// and rounded once at the end (softmax, norms, attention); softmax subtracts
// the row max before exp. Run eagerly over contiguous rows, softmax,
// log_softmax and layer_norm may be taken whole by a backend's fused kernel
// (Backend::fused_softmax / fused_layer_norm: the same formulas in one pass).
#include <cmath>
#include <limits>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend/backend.h"
#include "core/tensor_impl.h"
#include "ops/decompose.h"
#include "ops/pointwise.h"
#include "smelt/autograd.h"
#include "smelt/ops.h"

namespace smelt::detail {

namespace {

/// float16 / bfloat16 -> float32 (PyTorch's opmath); other dtypes unchanged.
Tensor upcast(const Tensor& x) {
  const DType c = opmath_type(x.dtype());
  return c == x.dtype() ? x : to_dtype(x, c);
}
Tensor cast(const Tensor& x, DType t) { return x.dtype() == t ? x : to_dtype(x, t); }

/// Picks the optional inputs in order according to the has_<name> attrs.
struct OptionalInputs {
  const std::vector<Tensor>& inputs;
  const Attrs& attrs;
  size_t next;
  Tensor take(const char* has) {
    if (!attrs.as<bool>(has)) return Tensor();
    SMELT_INTERNAL_ASSERT(next < inputs.size(), "decomposition: missing input for {}", has);
    return inputs[next++];
  }
};

std::vector<int64_t> trailing_dims(int64_t ndim, int64_t count) {
  std::vector<int64_t> dims;
  for (int64_t d = ndim - count; d < ndim; ++d) dims.push_back(d);
  return dims;
}

// ---------------------------------------------------------------------------

std::vector<Tensor> linear_decomp(const std::vector<Tensor>& in, const Attrs& attrs) {
  const Tensor wt = in[1].t();
  if (!attrs.as<bool>("has_bias")) return {matmul(in[0], wt)};
  const Tensor& b = in[2];
  // Eagerly, a [out] bias is the GEMM's epilogue (one kernel, one rounding);
  // traced, matmul + add marked as linear's bias, which fusion takes as a
  // GEMM with its epilogue (rounded once in float16 / bfloat16 too; a 1-D
  // input as one row, since the scheduler folds only into 2-D GEMMs). Any
  // other bias is matmul, then add, traced or not: two roundings.
  const bool epilogue = in[1].dim() == 2 && b.dim() == 1 && b.is_contiguous() &&
                        b.size(0) == in[1].size(0) && b.device() == in[0].device();
  if (!epilogue) return {add(matmul(in[0], wt), b)};
  const TraceContext* ctx = trace_context();
  if (!any_tracer(in) && !(ctx && ctx->captures(in)) && !grad_needed(in))
    return {linear_bias_epilogue(in[0], wt, b)};
  if (in[0].dim() == 1) return {add_gemm_bias(matmul(in[0].unsqueeze(0), wt), b).squeeze(0)};
  return {add_gemm_bias(matmul(in[0], wt), b)};
}

/// True when a decomposition runs eagerly on `x` over a contiguous row layout
/// (last dim), where a backend's fused kernel may take the whole op.
bool fusable_rows(const Tensor& x) {
  return !is_tracer(x) && x.dim() >= 1 && x.numel() > 0 && x.is_contiguous() &&
         is_floating(x.dtype());
}

/// softmax / log_softmax of x (fusable_rows) over its last dim by the
/// backend's fused kernel, or an undefined tensor when it takes no such case.
/// A backend that refuses a float16 / bfloat16 x is offered its float32
/// upcast (the decomposition's own first step), rounded once at the end as the
/// decomposition rounds.
Tensor fused_softmax(const Tensor& x, bool log) {
  const char* op = log ? "log_softmax" : "softmax";
  backend::Backend& be = backend::backend(x.device());
  Tensor y = make_empty(x.sizes(), x.dtype(), x.device(), op);
  if (be.fused_softmax(x, log, y)) return y;
  const Tensor xc = upcast(x);
  if (xc.dtype() == x.dtype()) return Tensor();
  Tensor yc = make_empty(xc.sizes(), xc.dtype(), xc.device(), op);
  return be.fused_softmax(xc, log, yc) ? cast(yc, x.dtype()) : Tensor();
}

/// A fused norm kernel's parameter (weight, bias, statistics) as the kernel
/// takes it: absent, or real, contiguous and on x's device.
bool fused_param_fits(const Tensor& p, const Tensor& x) {
  return !p.defined() || (!is_tracer(p) && p.is_contiguous() && p.device() == x.device());
}

/// layer_norm of x (fusable_rows) over its last n elements by the backend's
/// fused kernel, or an undefined tensor when it takes no such case. A backend
/// that refuses x, or a weight / bias of another dtype, is offered x upcast to
/// opmath with a weight / bias whose dtype promotes into opmath converted to
/// it: the decomposition's products convert them so.
Tensor fused_layer_norm(const Tensor& x, int64_t n, const Tensor& w, const Tensor& b, double eps) {
  auto fits = [&](const Tensor& p) { return fused_param_fits(p, x); };
  if (!fits(w) || !fits(b)) return Tensor();
  backend::Backend& be = backend::backend(x.device());
  auto of_dtype = [](const Tensor& p, DType t) { return !p.defined() || p.dtype() == t; };
  const bool as_is = of_dtype(w, x.dtype()) && of_dtype(b, x.dtype());
  if (as_is) {
    Tensor y = make_empty(x.sizes(), x.dtype(), x.device(), "layer_norm");
    if (be.fused_layer_norm(x, n, w, b, eps, y)) return y;
  }
  const Tensor xc = upcast(x);
  const DType c = xc.dtype();
  auto into_c = [&](const Tensor& p) { return !p.defined() || promote_types(c, p.dtype()) == c; };
  if ((as_is && c == x.dtype()) || !into_c(w) || !into_c(b)) return Tensor();
  auto to_c = [&](const Tensor& p) { return p.defined() ? cast(p, c) : p; };
  Tensor yc = make_empty(xc.sizes(), c, xc.device(), "layer_norm");
  return be.fused_layer_norm(xc, n, to_c(w), to_c(b), eps, yc) ? cast(yc, x.dtype()) : Tensor();
}

/// batch_norm's normalization of x (eager, contiguous, at least 3-D) by the
/// backend's fused kernel, or an undefined tensor when it takes no such case:
/// statistics of the compute dtype `c`, weight and bias of x's dtype, nothing
/// that records autograd history (batch_norm is differentiated through its
/// decomposition).
Tensor fused_batch_norm_apply(const Tensor& x, DType c, const Tensor& mean, const Tensor& var,
                              const Tensor& w, const Tensor& b, double eps) {
  if (!fusable_rows(x) || x.dim() < 3 || !mean.defined() || !var.defined()) return Tensor();
  const int64_t channels = x.size(1);
  auto fits = [&](const Tensor& p, DType t) {
    return fused_param_fits(p, x) && (!p.defined() || (p.dtype() == t && p.numel() == channels));
  };
  if (!fits(mean, c) || !fits(var, c) || !fits(w, x.dtype()) || !fits(b, x.dtype()) ||
      grad_needed({x, mean, var, w, b}))
    return Tensor();
  Tensor y = make_empty(x.sizes(), x.dtype(), x.device(), "batch_norm");
  return backend::backend(x.device()).fused_batch_norm_apply(x, mean, var, w, b, eps, y) ? y
                                                                                         : Tensor();
}

std::vector<Tensor> softmax_common(const std::vector<Tensor>& in, const Attrs& attrs, bool log) {
  const DType out = attrs.as<DType>("dtype");
  const int64_t dim = attrs.as<int64_t>("dim");
  Tensor x = cast(in[0], out);  // PyTorch casts to `dtype` before the op
  if (fusable_rows(x) && dim == x.dim() - 1)
    if (Tensor y = fused_softmax(x, log); y.defined()) return {y};
  const bool scalar = x.dim() == 0;
  if (scalar) x = x.reshape({1});
  Tensor xc = upcast(x);
  Tensor y;
  if (xc.size(dim) == 0) {
    y = clone(xc);
  } else {
    Tensor shifted = sub(xc, amax(xc, {dim}, true));
    if (log) {
      y = sub(shifted, smelt::log(sum(exp(shifted), {dim}, true)));
    } else {
      Tensor e = exp(shifted);
      y = div(e, sum(e, {dim}, true));
    }
  }
  if (scalar) y = y.reshape({});
  return {cast(y, out)};
}

std::vector<Tensor> layer_norm_decomp(const std::vector<Tensor>& in, const Attrs& attrs) {
  const Tensor& x = in[0];
  OptionalInputs opt{in, attrs, 1};
  Tensor w = opt.take("has_weight"), b = opt.take("has_bias");
  const auto& ns = attrs.as<std::vector<int64_t>>("normalized_shape");
  const std::vector<int64_t> dims = trailing_dims(x.dim(), static_cast<int64_t>(ns.size()));
  if (fusable_rows(x))
    if (Tensor y = fused_layer_norm(x, shape_numel(ns), w, b, attrs.as<double>("eps")); y.defined())
      return {y};
  Tensor xc = upcast(x);
  auto [var, mean] = var_mean(xc, dims, /*correction=*/0, /*keepdim=*/true);
  Tensor y = mul(sub(xc, mean), rsqrt(add(var, Scalar(attrs.as<double>("eps")))));
  if (w.defined()) y = mul(y, w);
  if (b.defined()) y = add(y, b);
  return {cast(y, x.dtype())};
}

std::vector<Tensor> rms_norm_decomp(const std::vector<Tensor>& in, const Attrs& attrs) {
  const Tensor& x = in[0];
  OptionalInputs opt{in, attrs, 1};
  Tensor w = opt.take("has_weight");
  const auto& ns = attrs.as<std::vector<int64_t>>("normalized_shape");
  const std::vector<int64_t> dims = trailing_dims(x.dim(), static_cast<int64_t>(ns.size()));
  Tensor xc = upcast(x);
  Tensor ms = mean(mul(xc, xc), dims, /*keepdim=*/true);
  Tensor y = mul(xc, rsqrt(add(ms, Scalar(attrs.as<double>("eps")))));
  if (w.defined()) y = mul(y, w);
  return {cast(y, x.dtype())};
}

std::vector<Tensor> batch_norm_decomp(const std::vector<Tensor>& in, const Attrs& attrs) {
  const Tensor& x = in[0];
  OptionalInputs opt{in, attrs, 1};
  Tensor rm = opt.take("has_running_mean"), rv = opt.take("has_running_var");
  Tensor w = opt.take("has_weight"), b = opt.take("has_bias");
  const bool training = attrs.as<bool>("training");
  const double momentum = attrs.as<double>("momentum");
  const double eps = attrs.as<double>("eps");
  const int64_t C = x.size(1);
  std::vector<int64_t> dims{0};
  Shape bshape(x.dim(), 1);
  bshape[1] = C;
  for (int64_t d = 2; d < x.dim(); ++d) dims.push_back(d);
  Tensor xc = upcast(x);
  Tensor mu, var;
  if (training) {
    std::tie(var, mu) = var_mean(xc, dims, /*correction=*/0, /*keepdim=*/false);
    const int64_t n = C > 0 ? x.numel() / C : 0;
    // Running stats are updated in place: running = (1 - momentum) * running + momentum * stat,
    // with the unbiased (n - 1) variance, as PyTorch.
    // Not part of the differentiated computation (PyTorch updates them outside autograd).
    NoGradGuard no_grad;
    if (rm.defined()) rm.copy_(add(mul(rm, Scalar(1.0 - momentum)), mul(mu, Scalar(momentum))));
    if (rv.defined() && n > 1) {
      Tensor unbiased = mul(var, Scalar(static_cast<double>(n) / static_cast<double>(n - 1)));
      rv.copy_(add(mul(rv, Scalar(1.0 - momentum)), mul(unbiased, Scalar(momentum))));
    }
  } else {
    mu = rm;
    var = rv;
  }
  if (Tensor y = fused_batch_norm_apply(x, xc.dtype(), mu, var, w, b, eps); y.defined()) return {y};
  Tensor y = mul(sub(xc, mu.reshape(bshape)), rsqrt(add(var.reshape(bshape), Scalar(eps))));
  if (w.defined()) y = mul(y, w.reshape(bshape));
  if (b.defined()) y = add(y, b.reshape(bshape));
  return {cast(y, x.dtype())};
}

/// -logp[target] along `cdim` for each batch element, 0 where the target is
/// ignore_index; `keep` marks the counted targets, `safe` is target with the
/// ignored ones replaced by class 0.
struct PickedNll {
  Tensor nll, keep, safe;
};
PickedNll picked_nll(const Tensor& logp, const Tensor& target, int64_t ignore_index, int64_t cdim) {
  Tensor keep = ne(target, wrap_scalar(Scalar(ignore_index)));
  Tensor safe = where(keep, target, Scalar(int64_t{0}));
  Tensor picked = gather(logp, cdim, unsqueeze(safe, cdim)).squeeze(cdim);
  return {where(keep, neg(picked), Scalar(0.0)), keep, safe};
}

/// The mean, sum or none reduction of per-element losses (mean: the sum divided by
/// `count`, or mean() when `count` is undefined).
Tensor reduce_loss(const Tensor& loss, const std::string& reduction, const Tensor& count) {
  if (reduction == "none") return loss;
  if (reduction == "sum") return sum(loss);
  return count.defined() ? div(sum(loss), count) : mean(loss);
}

std::vector<Tensor> cross_entropy_decomp(const std::vector<Tensor>& in, const Attrs& attrs) {
  const Tensor& input = in[0];
  const Tensor& target = in[1];
  const int64_t ignore_index = attrs.as<int64_t>("ignore_index");
  const std::string& reduction = attrs.as<std::string>("reduction");
  const double ls = attrs.as<double>("label_smoothing");
  const int64_t cdim = input.dim() == 1 ? 0 : 1;
  const int64_t C = input.size(cdim);
  Tensor logp = log_softmax(input, cdim);
  if (is_floating(target.dtype())) {
    // Class probabilities: loss = -sum_c logp_c * ((1 - ls) * p_c + ls / C).
    Tensor tgt = ls > 0 ? add(mul(target, Scalar(1.0 - ls)), Scalar(ls / C)) : target;
    Tensor loss = neg(sum(mul(logp, tgt), {cdim}));
    if (reduction == "none") return {loss};
    if (reduction == "sum") return {sum(loss)};
    return {div(sum(loss), Scalar(static_cast<double>(C > 0 ? input.numel() / C : 0)))};
  }
  auto [nll, keep, safe] = picked_nll(logp, target, ignore_index, cdim);
  Tensor smooth;
  if (ls > 0) smooth = where(keep, neg(sum(logp, {cdim})), Scalar(0.0));
  auto combine = [&](const Tensor& a, const Tensor& s) {
    return ls > 0 ? add(mul(a, Scalar(1.0 - ls)), mul(s, Scalar(ls / C))) : a;
  };
  if (reduction == "none") return {combine(nll, smooth)};
  if (reduction == "sum") return {combine(sum(nll), ls > 0 ? sum(smooth) : Tensor())};
  // mean over the targets that are not ignored (NaN when all are, as PyTorch).
  Tensor count = to_dtype(sum(keep), input.dtype());
  return {combine(div(sum(nll), count), ls > 0 ? div(sum(smooth), count) : Tensor())};
}

std::vector<Tensor> nll_loss_decomp(const std::vector<Tensor>& in, const Attrs& attrs) {
  const Tensor& input = in[0];
  const int64_t cdim = input.dim() == 1 ? 0 : 1;
  auto [nll, keep, safe] = picked_nll(input, in[1], attrs.as<int64_t>("ignore_index"), cdim);
  const std::string& reduction = attrs.as<std::string>("reduction");
  if (!attrs.as<bool>("has_weight"))
    return {reduce_loss(nll, reduction, to_dtype(sum(keep), input.dtype()))};
  // Each target weighted by its class's weight (0 where ignored); the mean divides
  // by the summed weights.
  Tensor w = reshape(index_select(in[2], 0, reshape(safe, {-1})), safe.sizes());
  w = where(keep, w, Scalar(0.0));
  return {reduce_loss(mul(nll, w), reduction, sum(w))};
}

std::vector<Tensor> bce_with_logits_decomp(const std::vector<Tensor>& in, const Attrs& attrs) {
  // PyTorch's binary_cross_entropy_with_logits: (1 - t) x - w_p log_sigmoid(x), with
  // log_sigmoid(x) = min(x, 0) - log1p(exp(-|x|)) (stable for any x).
  const Tensor& x = in[0];
  const Tensor& t = in[1];
  OptionalInputs opt{in, attrs, 2};
  Tensor w = opt.take("has_weight"), pos_weight = opt.take("has_pos_weight");
  Tensor log_sig = sub(minimum(x, wrap_scalar(Scalar(0.0))), log1p(exp(neg(abs(x)))));
  if (pos_weight.defined())
    log_sig = mul(log_sig, add(mul(sub(pos_weight, Scalar(1.0)), t), Scalar(1.0)));
  Tensor loss = sub(mul(sub(wrap_scalar(Scalar(1.0)), t), x), log_sig);
  if (w.defined()) loss = mul(loss, w);
  return {reduce_loss(loss, attrs.as<std::string>("reduction"), Tensor())};
}

std::vector<Tensor> mse_loss_decomp(const std::vector<Tensor>& in, const Attrs& attrs) {
  Tensor d = sub(in[0], in[1]);
  Tensor sq = mul(d, d);
  const std::string& reduction = attrs.as<std::string>("reduction");
  if (reduction == "none") return {sq};
  if (reduction == "sum") return {sum(sq)};
  return {mean(sq)};
}

/// True when the backend of q may run sdpa as one fused kernel: q, k and v
/// all 4-D, no dropout, a kernel for q's dtype and head dim
/// (Backend::has_fused_attention: CUDA float16 / bfloat16 / float32, CPU float32; it
/// may still decline a call for its layout or mask).
bool fused_sdpa_case(const std::vector<Tensor>& in, const Attrs& attrs) {
  return attrs.as<double>("dropout_p") == 0 && in[0].dim() == 4 && in[1].dim() == 4 &&
         in[2].dim() == 4 &&
         backend::backend(in[0].device())
             .has_fused_attention(in[0].dtype(), in[0].size(3), attrs.as<bool>("has_attn_mask"));
}

/// sdpa by the backend's fused kernel into out[0] ([B, H, L, Ev], q's
/// dtype) where fused_sdpa_case holds; false where the backend declines.
bool sdpa_into(const std::vector<Tensor>& in, const Attrs& attrs, const std::vector<Tensor>& out) {
  if (!fused_sdpa_case(in, attrs)) return false;
  const Tensor mask = attrs.as<bool>("has_attn_mask") ? in[3] : Tensor();
  return backend::backend(in[0].device())
      .fused_attention(in[0], in[1], in[2], mask, attrs.as<bool>("is_causal"),
                       attrs.as<double>("scale"), out[0]);
}

/// k or v of rank 2 or 3 whose batch dims broadcast against 4-D q's [B, H]
/// (aligned from the right), as a [B, H, S, D] view; unchanged otherwise.
Tensor heads_like_q(const Tensor& t, const Tensor& q) {
  if (q.dim() != 4 || t.dim() < 2 || t.dim() >= 4) return t;
  const Shape want{q.size(0), q.size(1), t.size(-2), t.size(-1)};
  for (int64_t d = 0; d + 2 < t.dim(); ++d) {
    const int64_t n = t.size(d), target = want[static_cast<size_t>(4 - t.dim() + d)];
    if (n != 1 && n != target) return t;
  }
  return t.expand(want);
}

std::vector<Tensor> sdpa_decomp(const std::vector<Tensor>& in, const Attrs& attrs) {
  // The scores and the softmax run in float32 (float64 stays float64). For
  // float16 / bfloat16 inputs the probabilities are rounded to the input dtype
  // before the product with v, as PyTorch's fused CUDA kernels (flash and
  // memory-efficient attention) do: that product is then a half-precision
  // GEMM accumulated in float32, rounded once. q k^T of upcast operands is
  // exact products summed in float32, which the compiler runs as one
  // half-precision GEMM with a float32 result (a cast prologue).
  const DType dt = in[0].dtype();
  const bool half = dt == DType::Float16 || dt == DType::BFloat16;
  const double scale = attrs.as<double>("scale");
  // Eagerly: the backend's fused kernel where it has one (CUDA:
  // FlashAttention-2 in half precision; CPU: attention.h in float32), the
  // scores never stored; k and v of a lower rank than q as broadcast views.
  const TraceContext* ctx = trace_context();
  if (!any_tracer(in) && !(ctx && ctx->captures(in)) && !grad_needed(in)) {
    std::vector<Tensor> args = in;
    args[1] = heads_like_q(in[1], in[0]);
    args[2] = heads_like_q(in[2], in[0]);
    if (fused_sdpa_case(args, attrs)) {
      const Tensor& x = in[0];
      Tensor out = make_empty({x.size(0), x.size(1), x.size(2), in[2].size(-1)}, dt, x.device(),
                              "scaled_dot_product_attention");
      if (sdpa_into(args, attrs, {out})) return {out};
    }
  }
  Tensor q = upcast(in[0]), k = upcast(in[1]);
  const double inf = std::numeric_limits<double>::infinity();
  // With head dim 0 the scores are zeros, and stay so (PyTorch's math path
  // scales q and k, both empty, by sqrt(scale)): not 0 * 1/sqrt(0) = NaN.
  Tensor scores = matmul(q, k.transpose(-2, -1));
  if (q.size(-1) > 0) scores = mul(scores, Scalar(scale));
  if (attrs.as<bool>("is_causal")) {
    const int64_t L = q.size(-2), S = k.size(-2);
    Tensor keep = tril(ones({L, S}, TensorOptions(DType::Bool).device(q.device())));
    scores = where(keep, scores, Scalar(-inf));
  }
  if (attrs.as<bool>("has_attn_mask")) {
    const Tensor& mask = in[3];
    scores =
        mask.dtype() == DType::Bool ? where(mask, scores, Scalar(-inf)) : add(scores, upcast(mask));
  }
  Tensor attn = softmax(scores, -1);
  // A query row whose every key is masked attends to nothing: zeros, as
  // PyTorch's math path (_safe_softmax) gives since 2.5, not softmax's NaN.
  // Such a row's max is -inf (a NaN max, as a NaN score's all(eq) test, keeps
  // softmax's NaN): the max softmax's decomposition takes (merged with it by
  // CSE), not another pass over the scores.
  if (attrs.as<bool>("has_attn_mask") || attrs.as<bool>("is_causal")) {
    Tensor ninf = wrap_scalar(Scalar(-inf));
    const int64_t last = scores.dim() - 1;
    Tensor none_kept = scores.size(last) > 0 ? eq(amax(scores, {last}, /*keepdim=*/true), ninf)
                                             : all(eq(scores, ninf), {last}, /*keepdim=*/true);
    attn = where(none_kept, Scalar(0.0), attn);
  }
  const double p = attrs.as<double>("dropout_p");
  if (p > 0) attn = dropout(attn, p, /*training=*/true);
  if (half) return {matmul(cast(attn, dt), in[2])};  // q, k and v share a dtype
  return {cast(matmul(attn, upcast(in[2])), dt)};
}

}  // namespace

const Decomposition* find_decomposition(const std::string& op) {
  static const std::unordered_map<std::string, Decomposition> table = {
      {"linear", linear_decomp},
      {"softmax", [](const std::vector<Tensor>& in,
                     const Attrs& a) { return softmax_common(in, a, /*log=*/false); }},
      {"log_softmax", [](const std::vector<Tensor>& in,
                         const Attrs& a) { return softmax_common(in, a, /*log=*/true); }},
      {"layer_norm", layer_norm_decomp},
      {"rms_norm", rms_norm_decomp},
      {"batch_norm", batch_norm_decomp},
      {"cross_entropy", cross_entropy_decomp},
      {"nll_loss", nll_loss_decomp},
      {"binary_cross_entropy_with_logits", bce_with_logits_decomp},
      {"mse_loss", mse_loss_decomp},
      {"scaled_dot_product_attention", sdpa_decomp},
  };
  auto it = table.find(op);
  return it == table.end() ? nullptr : &it->second;
}

WriteInto find_write_into(const std::string& op) {
  return op == "scaled_dot_product_attention" ? sdpa_into : nullptr;
}

}  // namespace smelt::detail
