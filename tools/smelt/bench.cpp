// `smelt bench <workload> [--device cuda]`: runs a workload eagerly and
// compiled on the same seeded inputs, checks they agree, and reports times,
// kernel counts, bytes moved, achieved bandwidth, errors and compile times
// (cold: none of the graph's kernels cached; warm: a fresh compile() loading the kernels from
// the disk cache). On a GPU the workloads are larger (pointwise 2^26,
// softmax 8192x8192, layer_norm 16384x4096, GEMMs 8192^3 in bfloat16 unless
// --dtype says otherwise) and timed with CUDA events over many calls. Each
// row is printed as its workload finishes; bench_columns_help() says what the
// columns mean. The GEMM workloads (gemm, linear-gelu, linear-gelu-erf) also
// report TFLOP/s, and compiled linear-gelu's time over compiled gemm's: what
// the epilogue costs on top of the product.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>

#include "backend/backend.h"
#include "bench_codegen.h"
#include "commands.h"
#include "core/tensor_impl.h"
#include "nn/models.h"
#include "smelt/autograd.h"
#include "smelt/compile.h"
#include "smelt/cuda.h"
#include "smelt/io.h"
#include "smelt/memory.h"
#include "smelt/nn.h"
#include "smelt/ops.h"
#include "smelt/optim.h"

namespace smelt::cli {

namespace {

using Fn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

/// The peaks the share columns use on CUDA unless --peak-gbps / --peak-tflops
/// say otherwise, measured on the H200 the GPU benchmarks run on: a device
/// copy moves 4.3 TB/s (read + write), and bfloat16/float16 GEMMs reach 780
/// TFLOP/s dense (no sparsity). Other dtypes' FLOP rates have no default.
constexpr double kH200CopyGBps = 4300;
constexpr double kH200DenseHalfTFlops = 780;

/// A fresh smelt::compile of a workload: the call and its statistics.
struct CompiledFn {
  Fn call;
  std::function<CompileStats()> stats;
};

struct Workload {
  std::string name;
  std::string description;
  std::vector<Tensor> inputs;
  Fn eager;                                            // the function, run eagerly
  std::function<CompiledFn(CompileOptions)> compiled;  // a fresh smelt::compile of it
  int64_t items = 0;            // units of work per call (sentences), for a throughput
  std::string items_unit = "";  // "sentences"
  double flops = 0;  // floating-point operations per call (GEMMs: 2 m n k; 0: not counted)
  std::function<nlohmann::json()> extra = nullptr;  // more facts for the report
  /// A training workload (each call is a step that changes the weights): puts
  /// the weights and optimizer back to their initial state, so that eager and
  /// compiled runs are compared from the same start, over `check_steps` steps.
  std::function<void()> reset = nullptr;
  int check_steps = 1;
  /// Tensors a call updates in place besides its results (batch_norm's
  /// running stats): compared with eager's after the check run too.
  std::function<std::vector<Tensor>()> state = nullptr;
  /// A module workload (smelt::compile of the module): its parameters and
  /// buffers, the graph inputs `--codegen-only` traces them as.
  std::function<std::vector<nn::NamedTensor>()> params = nullptr;
};

double now_ms() {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// Median wall time of `f` over `iters` runs (after one warm-up); iters 0 =
/// automatic. On a GPU: the mean over `iters` back-to-back calls between two
/// CUDA events (launches overlap as in a real loop), after a warm-up.
double time_ms(const std::function<void()>& f, int iters, Device device) {
  f();
  if (device.is_cuda()) {
    backend::Backend& be = backend::backend(device);
    const backend::Stream s = be.current_stream(device);
    be.synchronize(s);
    if (iters <= 0) {
      const double t0 = now_ms();
      f();
      be.synchronize(s);
      const double one = std::max(now_ms() - t0, 1e-3);
      iters = static_cast<int>(std::clamp(300.0 / one, 5.0, 500.0));
    }
    backend::Event start = be.create_event(true), end = be.create_event(true);
    be.record(start, s);
    for (int i = 0; i < iters; ++i) f();
    be.record(end, s);
    be.event_synchronize(end);
    const double ms = be.elapsed_ms(start, end) / iters;
    be.destroy_event(start);
    be.destroy_event(end);
    return ms;
  }
  if (iters <= 0) {
    double t0 = now_ms();
    f();
    double one = std::max(now_ms() - t0, 1e-3);
    iters = static_cast<int>(std::clamp(400.0 / one, 3.0, 50.0));
  }
  std::vector<double> t;
  for (int i = 0; i < iters; ++i) {
    double t0 = now_ms();
    f();
    t.push_back(now_ms() - t0);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

template <class F>
std::function<CompiledFn(CompileOptions)> compiler_of(F f) {
  return [f](CompileOptions o) -> CompiledFn {
    auto c = std::make_shared<decltype(smelt::compile(f, o))>(smelt::compile(f, o));
    Fn call = [c](const std::vector<Tensor>& in) -> std::vector<Tensor> {
      if constexpr (std::is_invocable_v<F, const Tensor&>) {
        return detail::ResultPack<std::decay_t<decltype((*c)(in[0]))>>::pack((*c)(in[0]));
      } else {
        return detail::ResultPack<std::decay_t<decltype((*c)(in[0], in[1], in[2]))>>::pack(
            (*c)(in[0], in[1], in[2]));
      }
    };
    return {call, [c] { return c->stats(); }};
  };
}

/// One training step of the seed MLP (bench/torch_compare.py's train-mlp): at
/// PyTorch's initial weights and on its input (shared/data/seed_mlp.safetensors)
/// with the labels (7 i) % 10 of training.safetensors' seed_mlp reference:
/// zero_grad, forward, cross_entropy, backward and SGD (lr 0.01); the step
/// returns the loss. Each call trains on (the weights move from call to call,
/// eagerly and compiled alike); the first loss is checked against PyTorch's.
/// `aot` false ("train-mlp"): the whole step is compiled (one graph);
/// true ("train-aot"): only the model is (smelt::compile(model)), the loss,
/// backward() and step() run eagerly around it, the model's backward being
/// the compiled backward graph of its compiled forward.
Workload train_mlp_workload(DType dt, Device device, bool aot) {
  namespace nn = smelt::nn;
  const std::string shared = SMELT_SHARED_DIR;
  auto data = models::SharedData::load(shared, "seed_mlp");
  auto model = models::load_seed_mlp(data);
  model->to(dt);
  model->to(device);
  Tensor x = data.at("input").to(dt).to(device);
  const int64_t n = x.size(0);
  std::vector<int64_t> labels(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) labels[static_cast<size_t>(i)] = (7 * i) % 10;
  Tensor y = from_vector(labels, {n}).to(device);
  nn::StateDict init;
  for (const auto& [name, p] : model->named_parameters()) init[name] = p.detach().clone();
  auto opt = std::make_shared<optim::SGD>(model->parameters(), optim::SGDOptions(0.01));
  // The step over any callable model (the module, or it compiled).
  auto step_with = [opt](auto& m, const Tensor& x, const Tensor& y) {
    EnableGradGuard grad;  // `smelt bench` runs under NoGradGuard
    opt->zero_grad();
    Tensor loss = cross_entropy(m(x), y);
    loss.backward();
    opt->step();
    return loss;
  };
  auto step = [model, step_with](const Tensor& x, const Tensor& y) {
    auto m = model;
    return step_with(m, x, y);
  };
  std::function<CompiledFn(CompileOptions)> compiled;
  if (aot) {
    compiled = [model, step_with](CompileOptions o) -> CompiledFn {
      auto c = std::make_shared<decltype(smelt::compile(model, o))>(smelt::compile(model, o));
      return {[c, step_with](const std::vector<Tensor>& in) {
                return std::vector<Tensor>{step_with(*c, in[0], in[1])};
              },
              [c] { return c->stats(); }};
    };
  } else {
    compiled = [step](CompileOptions o) -> CompiledFn {
      auto c = std::make_shared<decltype(smelt::compile(step, o))>(smelt::compile(step, o));
      return {
          [c](const std::vector<Tensor>& in) { return std::vector<Tensor>{(*c)(in[0], in[1])}; },
          [c] { return c->stats(); }};
    };
  }
  Workload w{
      aot ? "train-aot" : "train-mlp",
      aot ? "seed MLP training step, the model compiled (its forward and backward graphs), "
            "cross_entropy, backward() and SGD eager, batch 256"
          : "seed MLP training step (forward, cross_entropy, backward, SGD), batch 256",
      {x, y},
      [step](const std::vector<Tensor>& in) { return std::vector<Tensor>{step(in[0], in[1])}; },
      compiled};
  w.reset = [model, opt, init] {
    model->load_state_dict(init);
    opt->zero_grad();
  };
  w.check_steps = 3;
  w.extra = [step, model, init, opt, x, y, shared, dt] {
    // The first step's loss, from PyTorch's initial weights, against PyTorch's
    // (which training.safetensors holds for float32 and float64).
    if (dt != DType::Float32 && dt != DType::Float64) return nlohmann::json::object();
    model->load_state_dict(init);
    opt->zero_grad();
    const double got = step(x, y).item<double>();
    const std::string tag = dt == DType::Float64 ? "f64" : "f32";
    const double want =
        models::SharedData::load(shared, "training").at("seed_mlp/" + tag + "/loss").item<double>();
    return nlohmann::json{{"first_loss", got},
                          {"torch_first_loss", want},
                          {"first_loss_rel_err", std::abs(got - want) / std::abs(want)}};
  };
  return w;
}

/// The workloads' inputs: seeded randn made on the device (the same numbers
/// on every device), or, for the workload `file_for` names, the tensors
/// t0, t1, ... of `file` (non-empty) in the order the workload draws them.
/// `placeholders` (`--codegen-only`): uninitialized tensors of the right
/// shape and dtype, which are only traced (never read).
class Inputs {
 public:
  Inputs(DType dt, Device device, const std::string& file, std::string file_for,
         bool placeholders = false)
      : dt_(dt), device_(device), file_for_(std::move(file_for)), placeholders_(placeholders) {
    if (!file.empty()) file_ = load_safetensors(file, device);
  }
  /// The workload whose inputs are drawn next.
  void begin(const std::string& workload) {
    from_file_ = !file_.empty() && workload == file_for_;
    next_ = 0;
  }
  Tensor next(const Shape& s) {
    if (placeholders_) return empty(s, TensorOptions(dt_).device(device_));
    if (!from_file_) return randn(s, TensorOptions().device(device_)).to(dt_);
    const std::string key = fmt::format("t{}", next_++);
    auto it = file_.find(key);
    SMELT_CHECK(it != file_.end(), "smelt bench --inputs: the file has no tensor '{}'", key);
    SMELT_CHECK(it->second.sizes() == s, "smelt bench --inputs: '{}' has shape {}, expected {}",
                key, detail::shape_str(it->second.sizes()), detail::shape_str(s));
    return it->second.to(dt_);
  }
  /// Loads the tensors named `prefix` + a state_dict key into `m`, if the file has them.
  void weights(nn::Module& m, const std::string& prefix) {
    if (!from_file_) return;
    nn::StateDict sd;
    for (auto& [k, t] : file_)
      if (k.rfind(prefix, 0) == 0)  // counters (num_batches_tracked) keep their integer dtype
        sd[k.substr(prefix.size())] = is_floating(t.dtype()) ? t.to(dt_) : t;
    if (!sd.empty()) m.load_state_dict(sd);
  }

 private:
  DType dt_;
  Device device_;
  std::string file_for_;
  bool placeholders_;
  std::map<std::string, Tensor> file_;
  bool from_file_ = false;
  int next_ = 0;
};

/// The workloads at `dt` on `device`; the one named `inputs_for` reads its
/// inputs from `inputs_file` when that is not empty (`smelt bench --inputs`).
/// `placeholders` (`--codegen-only`): the sizes of `device`, but every tensor
/// on the CPU and the inputs uninitialized (they are traced, not run).
std::vector<Workload> workloads(DType dt, Device device, const std::string& inputs_file,
                                const std::string& inputs_for, bool placeholders) {
  std::vector<Workload> w;
  manual_seed(0);
  const bool gpu = device.is_cuda();
  if (placeholders) device = kCPU;
  Inputs inputs(dt, device, inputs_file, inputs_for, placeholders);
  auto randn_on = [&](const Shape& s) { return inputs.next(s); };
  {
    inputs.begin("pointwise");
    const int64_t n = gpu ? int64_t{1} << 26 : int64_t{1} << 24;
    Tensor x = randn_on({n}), wt = randn_on({n}), b = randn_on({n});
    auto f = [](const Tensor& x, const Tensor& w, const Tensor& b) { return sigmoid(x * w + b); };
    w.push_back(
        {"pointwise",
         fmt::format("sigmoid(x * w + b), 2^{} elements", gpu ? 26 : 24),
         {x, wt, b},
         [f](const std::vector<Tensor>& in) { return std::vector<Tensor>{f(in[0], in[1], in[2])}; },
         compiler_of(f)});
  }
  {
    inputs.begin("softmax");
    const int64_t n = gpu ? 8192 : 4096;
    Tensor x = randn_on({n, n});
    auto f = [](const Tensor& x) {
      Tensor e = exp(x - amax(x, {-1}, true));
      return e / sum(e, {-1}, true);
    };
    w.push_back({"softmax",
                 fmt::format("exp(x - amax(x)) / sum(...), {}x{}", n, n),
                 {x},
                 [f](const std::vector<Tensor>& in) { return std::vector<Tensor>{f(in[0])}; },
                 compiler_of(f)});
  }
  {
    inputs.begin("layernorm");
    const int64_t rows = gpu ? 16384 : 8192, cols = gpu ? 4096 : 2048;
    Tensor x = randn_on({rows, cols}), g = randn_on({cols}), b = randn_on({cols});
    auto f = [g, b, cols](const Tensor& x) { return layer_norm(x, {cols}, g, b, 1e-5); };
    w.push_back({"layernorm",
                 fmt::format("layer_norm over {}x{} with weight and bias", rows, cols),
                 {x},
                 [f](const std::vector<Tensor>& in) { return std::vector<Tensor>{f(in[0])}; },
                 compiler_of(f)});
  }
  {
    inputs.begin("mlp");
    namespace nn = smelt::nn;
    auto model = nn::Sequential(nn::Linear(1024, 1024), nn::GELU(), nn::Linear(1024, 512),
                                nn::GELU(), nn::Linear(512, 10));
    model->to(dt);
    model->to(device);
    inputs.weights(*model, "mlp.");
    Tensor x = randn_on({256, 1024});
    w.push_back(
        {"mlp",
         "seed MLP 1024-1024-512-10 with GELU, batch 256",
         {x},
         [model](const std::vector<Tensor>& in) { return std::vector<Tensor>{model(in[0])}; },
         compiler_of(model)});
    w.back().params = [model] { return detail::module_state(*model); };
  }
  {
    inputs.begin("horizontal");
    Tensor x = randn_on({gpu ? int64_t{1} << 26 : int64_t{1} << 24});
    auto f = [](const Tensor& x) { return std::make_tuple(sin(x), cos(x)); };
    w.push_back({"horizontal",
                 fmt::format("sin(x) and cos(x) of one input, 2^{} elements", gpu ? 26 : 24),
                 {x},
                 [f](const std::vector<Tensor>& in) {
                   auto [s, c] = f(in[0]);
                   return std::vector<Tensor>{s, c};
                 },
                 compiler_of(f)});
  }
  {
    // One linear layer's GEMM, x [n, n] @ W^T (W [n, n], PyTorch's layout),
    // alone and with its bias and GELU: the epilogue's cost is the ratio of
    // their times. tanh-GELU is cuBLASLt's epilogue on a GPU (float16 /
    // bfloat16 with --no-round-intermediates: one call); the exact erf GELU
    // runs as a pointwise kernel after the GEMM.
    inputs.begin("gemm");  // (not from the previous workload's --inputs file)
    const int64_t n = gpu ? 8192 : 1024;
    Tensor x = randn_on({n, n}), wt = randn_on({n, n}), b = randn_on({n});
    const double flops = 2.0 * static_cast<double>(n) * static_cast<double>(n) * n;
    auto mm = [](const Tensor& x, const Tensor& w, const Tensor&) { return matmul(x, w.t()); };
    auto lg = [](const Tensor& x, const Tensor& w, const Tensor& b) {
      return gelu(linear(x, w, b), "tanh");
    };
    auto lge = [](const Tensor& x, const Tensor& w, const Tensor& b) {
      return gelu(linear(x, w, b));
    };
    auto pack = [](auto f) {
      return [f](const std::vector<Tensor>& in) {
        return std::vector<Tensor>{f(in[0], in[1], in[2])};
      };
    };
    w.push_back({"gemm",
                 fmt::format("x @ W^T, {0}x{0} by {0}x{0}", n),
                 {x, wt, b},
                 pack(mm),
                 compiler_of(mm)});
    w.push_back({"linear-gelu",
                 fmt::format("gelu(x @ W^T + b, approximate='tanh'), {0}x{0} by {0}x{0}", n),
                 {x, wt, b},
                 pack(lg),
                 compiler_of(lg)});
    w.push_back({"linear-gelu-erf",
                 fmt::format("gelu(x @ W^T + b) (exact erf), {0}x{0} by {0}x{0}", n),
                 {x, wt, b},
                 pack(lge),
                 compiler_of(lge)});
    for (size_t i = w.size() - 3; i < w.size(); ++i) w[i].flops = flops;
  }
  return w;
}

/// Training-mode batch_norm and relu (bench/torch_compare.py's batchnorm-relu):
/// nn::Sequential(nn::BatchNorm2d(C) in train() mode, nn::ReLU()) over
/// [N, C, 56, 56] (N 64, C 256 on a GPU; 8, 64 on the CPU), momentum 0.1,
/// weight 1 + 0.1 randn and bias 0.1 randn (seeded; or "bn." + the state_dict
/// of --inputs). Each call normalizes with the batch's statistics and updates
/// running_mean / running_var in place (the compiled graph writes them back):
/// the check runs two calls from the initial running stats and compares the
/// stats too. `gpu`: the GPU sizes; `device`: where the tensors are.
Workload batchnorm_relu_workload(DType dt, Device device, bool gpu, Inputs& inputs) {
  inputs.begin("batchnorm-relu");
  const int64_t N = gpu ? 64 : 8, C = gpu ? 256 : 64, H = 56, W = 56;
  manual_seed(0);
  nn::BatchNorm2d bn(C);  // eps 1e-5, momentum 0.1
  {
    NoGradGuard no_grad;
    bn->weight.copy_(add(mul(randn({C}), 0.1), 1.0));
    bn->bias.copy_(mul(randn({C}), 0.1));
  }
  auto model = nn::Sequential(bn, nn::ReLU());
  model->to(dt);
  model->to(device);
  inputs.weights(*model, "bn.");
  model->train();
  Tensor x = inputs.next({N, C, H, W});
  nn::StateDict init;
  for (const auto& t : detail::module_state(*model)) init[t.name] = t.tensor.detach().clone();
  Workload w{
      "batchnorm-relu",
      fmt::format("relu(batch_norm(x)) in training mode (running stats updated), {}x{}x{}x{}", N, C,
                  H, W),
      {x},
      [model](const std::vector<Tensor>& in) { return std::vector<Tensor>{model(in[0])}; },
      compiler_of(model)};
  w.reset = [model, init] { model->load_state_dict(init); };
  w.check_steps = 2;
  w.state = [bn] { return std::vector<Tensor>{bn->running_mean, bn->running_var}; };
  w.params = [model] { return detail::module_state(*model); };
  return w;
}

/// FLOPs of one GPT-2 block forward over [B, T, C]: the four linear layers
/// (C -> 3C, C -> C, C -> 4C, 4C -> C: 12 C^2 multiply-adds per token) and
/// attention's two products (q k^T and p v, each T x T x C per batch),
/// counted dense as smelt computes them (a causal kernel could skip half).
double gpt2_block_flops(int64_t B, int64_t T, int64_t C) {
  const double b = static_cast<double>(B), t = static_cast<double>(T), c = static_cast<double>(C);
  return 2 * b * t * 12 * c * c + 4 * b * t * t * c;
}

/// One GPT-2 block forward (models::GPT2Block, the architecture of
/// shared/data/gpt2_block.safetensors: pre-LayerNorm, causal attention,
/// tanh-GELU MLP 4C, residuals) at GPT-2 small's width, C 768 and 12 heads,
/// over [B, T, C] (B 8, T 1024 on a GPU; 1, 128 on the CPU), with its default
/// initialization (seeded; or "gpt2." + the state_dict of --inputs). Reports
/// TFLOP/s (gpt2_block_flops); the extra facts add the shared block (C 64)
/// run the same way against PyTorch's stored output.
Workload gpt2_block_workload(DType dt, Device device, bool gpu, Inputs& inputs, bool placeholders) {
  inputs.begin("gpt2-block");
  const int64_t B = gpu ? 8 : 1, T = gpu ? 1024 : 128, C = 768, heads = 12;
  manual_seed(0);
  models::GPT2Block model(C, heads);
  model->to(dt);
  model->to(device);
  inputs.weights(*model, "gpt2.");
  Tensor x = inputs.next({B, T, C});
  Workload w{"gpt2-block",
             fmt::format("GPT-2 block forward (C {}, {} heads, causal), batch {} x {} tokens", C,
                         heads, B, T),
             {x},
             [model](const std::vector<Tensor>& in) { return std::vector<Tensor>{model(in[0])}; },
             compiler_of(model),
             B * T,
             "tokens"};
  w.params = [model] { return detail::module_state(*model); };
  w.flops = gpt2_block_flops(B, T, C);
  if (placeholders) return w;
  w.extra = [dt, device] {
    // The shared block (PyTorch's weights and input, C 64) compiled at this
    // dtype on this device against PyTorch's float32 output.
    auto data = models::SharedData::load(SMELT_SHARED_DIR, "gpt2_block");
    auto block = models::load_gpt2_block(data);
    block->to(dt);
    block->to(device);
    auto c = smelt::compile(block);
    const Tensor got = c(data.at("input").to(dt).to(device)).cpu();
    return nlohmann::json{
        {"shared_block_rel_err", models::compare(got, data.at("output")).rel_err()}};
  };
  return w;
}

/// all-MiniLM-L6-v2 (fetched on first use; or the model in `model_dir`) on a batch of 32 sequences
/// of 128 tokens ([CLS], random word pieces, [SEP]; no padding): encoder, mean pooling and
/// normalization, as SentenceEncoder::forward, on `device`. The report adds the kernels of one
/// encoder layer compiled alone.
Workload minilm_workload(DType dt, Device device, const std::string& model_dir) {
  constexpr int64_t B = 32, T = 128;
  auto enc = std::make_shared<nn::SentenceEncoder>(load_sentence_encoder(model_dir));
  enc->model->to(dt);
  enc->model->to(device);
  manual_seed(0);
  Tensor ids = randint(1000, enc->model->config.vocab_size, {B, T});
  ids.select(1, 0).fill_(*enc->tokenizer.token_to_id("[CLS]"));
  ids.select(1, T - 1).fill_(*enc->tokenizer.token_to_id("[SEP]"));
  ids = ids.to(device);
  Tensor mask = ones({B, T}, TensorOptions(DType::Int64).device(device)),
         types = zeros({B, T}, TensorOptions(DType::Int64).device(device));
  auto pack = [](std::tuple<Tensor, Tensor> r) {
    return std::vector<Tensor>{std::get<0>(r), std::get<1>(r)};
  };
  Workload w{"minilm",
             fmt::format("all-MiniLM-L6-v2 sentence embeddings, batch {} x {} tokens", B, T),
             {ids, mask, types},
             [enc, pack](const std::vector<Tensor>& in) {
               return pack(enc->forward({in[0], in[1], in[2]}));
             },
             [enc, pack](CompileOptions o) -> CompiledFn {
               auto c = std::make_shared<nn::SentenceEncoder>(*enc);  // shares the model
               c->set_compiled(true, o);
               return {[c, pack](const std::vector<Tensor>& in) {
                         return pack(c->forward({in[0], in[1], in[2]}));
                       },
                       [c] { return c->compile_stats(); }};
             },
             B,
             "sentences"};
  w.extra = [enc, dt, device] {  // B and T are constants: no capture
    // One encoder layer alone: its hidden state and key mask as arguments.
    auto layer = enc->model->encoder->layer->at<nn::BertLayerImpl>(0);
    Tensor h = randn({B, T, enc->model->config.hidden_size}).to(dt).to(device);
    Tensor keep = ones({B, 1, 1, T}, TensorOptions(DType::Bool).device(device));
    // The layer's weights as module parameters (as SentenceEncoder compiles
    // them), not captured tensors: concat_linear may fold them.
    auto c = smelt::compile(
        layer, [layer](const Tensor& x, const Tensor& m) { return layer->forward(x, m); });
    c(h, keep);
    nlohmann::json j;
    j["layer_kernels"] = c.stats().kernels;
    j["layer_kernel_names"] = c.stats().kernel_names;
    j["layer_eager_ops"] = c.stats().eager_ops;
    return j;
  };
  return w;
}

/// `nodes` adds y = y + k of a 0-dim k to a float32 [16] y: a graph of that
/// many nodes, for the compile time of long chains (each add rounds, so the
/// compiled result must equal eager's bit for bit).
Workload chain_workload(DType dt, int64_t nodes) {
  manual_seed(0);
  Tensor y = randn({16}).to(dt), k = randn({}).to(dt);
  auto f = [nodes](const Tensor& y0, const Tensor& k) {
    Tensor y = y0;
    for (int64_t i = 0; i < nodes; ++i) y = y + k;
    return y;
  };
  return {"chain",
          fmt::format("y = y + k, {} times (y [16], k 0-dim)", nodes),
          {y, k},
          [f](const std::vector<Tensor>& in) { return std::vector<Tensor>{f(in[0], in[1])}; },
          [f](CompileOptions o) -> CompiledFn {
            auto c = std::make_shared<decltype(smelt::compile(f, o))>(smelt::compile(f, o));
            return {[c](const std::vector<Tensor>& in) {
                      return std::vector<Tensor>{(*c)(in[0], in[1])};
                    },
                    [c] { return c->stats(); }};
          }};
}

nlohmann::json phases_json(const CompileStats::Phases& p) {
  return {{"trace_ms", p.trace_ms},     {"passes_ms", p.passes_ms}, {"fuse_ms", p.fuse_ms},
          {"codegen_ms", p.codegen_ms}, {"cxx_ms", p.cxx_ms},       {"load_ms", p.load_ms}};
}

struct Errors {
  double abs = 0, rel = 0;
};
/// Largest absolute and relative difference of `a` from `b` (infinite where
/// one is NaN and the other not), computed on their device.
Errors compare(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  Errors e;
  for (size_t k = 0; k < a.size(); ++k) {
    const Tensor x = a[k].to(DType::Float64), y = b[k].to(DType::Float64);
    if (x.numel() == 0) continue;
    if (ne(isnan(x), isnan(y)).any().item().to_double() != 0) return {INFINITY, INFINITY};
    const Tensor d = where(isnan(x), 0.0, abs(x - y));
    e.abs = std::max(e.abs, amax(d).item().to_double());
    e.rel = std::max(e.rel,
                     amax(d / clamp(abs(x), std::optional<Scalar>(1e-6), std::optional<Scalar>()))
                         .item()
                         .to_double());
  }
  return e;
}

/// True for the workloads whose work is one large GEMM.
bool is_gemm_workload(const std::string& name) {
  return name == "gemm" || name == "linear-gelu" || name == "linear-gelu-erf";
}

/// --dtype, or the workload's default: bfloat16 for the GEMMs and the GPT-2
/// block on a GPU (tensor cores), float32 otherwise.
std::string dtype_of(const std::string& name, const BenchOptions& opts) {
  if (!opts.dtype.empty()) return opts.dtype;
  const bool tensor_cores = is_gemm_workload(name) || name == "gpt2-block";
  return tensor_cores && Device(opts.device).is_cuda() ? "bfloat16" : "float32";
}

/// The workload `name` at the options' dtype and device (with
/// `placeholders`: its GPU sizes, traced from uninitialized CPU tensors).
/// The pretrained model, the training steps (shared/data) and the workloads
/// of their own functions are only made when asked for.
std::vector<Workload> make_workloads(const std::string& name, const BenchOptions& opts,
                                     bool placeholders) {
  const DType dt = dtype_from_name(dtype_of(name, opts));
  const Device device(opts.device);
  const bool gpu = device.is_cuda();
  const Device where = placeholders ? kCPU : device;
  if (name == "minilm") return {minilm_workload(dt, where, opts.model)};
  // The training steps read shared/data: made only when asked for, so that
  // the other workloads run where that folder is not (an installed smelt).
  if (name == "train-mlp" || name == "train-aot")
    return {train_mlp_workload(dt, where, /*aot=*/name == "train-aot")};
  if (name == "chain") return {chain_workload(dt, opts.nodes)};
  if (name == "batchnorm-relu" || name == "gpt2-block") {
    Inputs inputs(dt, where, opts.inputs, name, placeholders);
    if (name == "batchnorm-relu") return {batchnorm_relu_workload(dt, where, gpu, inputs)};
    return {gpt2_block_workload(dt, where, gpu, inputs, placeholders)};
  }
  return workloads(dt, device, opts.inputs, name, placeholders);
}

/// The hardware's peak for the share columns: the option, else on CUDA the
/// H200's (kH200CopyGBps, kH200DenseHalfTFlops), else 0 (no share reported).
double peak_gbps(const BenchOptions& opts) {
  if (opts.peak_gbps > 0) return opts.peak_gbps;
  return Device(opts.device).is_cuda() ? kH200CopyGBps : 0.0;
}
double peak_tflops(const std::string& name, const BenchOptions& opts) {
  if (opts.peak_tflops > 0) return opts.peak_tflops;
  const DType dt = dtype_from_name(dtype_of(name, opts));
  const bool half = dt == DType::BFloat16 || dt == DType::Float16;
  return Device(opts.device).is_cuda() && half ? kH200DenseHalfTFlops : 0.0;
}

/// The achieved rates' share of the peak: of GB/s for every workload, of
/// TFLOP/s where it counts its FLOPs (fields gbps_share, tflops_share, ...).
nlohmann::json rates_json(const Workload& w, const nlohmann::json& j, const BenchOptions& opts) {
  nlohmann::json r = nlohmann::json::object();
  const double gbps = peak_gbps(opts), tflops = peak_tflops(w.name, opts);
  if (gbps > 0) {
    r["peak_gbps"] = gbps;
    r["gbps_share_eager"] = j["gbps_eager"].get<double>() / gbps;
    r["gbps_share"] = j["gbps_compiled"].get<double>() / gbps;
  }
  if (w.flops > 0) {
    r["flops"] = w.flops;
    if (tflops > 0) {
      r["peak_tflops"] = tflops;
      r["tflops_share_eager"] = j["tflops_eager"].get<double>() / tflops;
      r["tflops_share"] = j["tflops_compiled"].get<double>() / tflops;
    }
  }
  return r;
}

}  // namespace

nlohmann::json bench_one(const std::string& name, const BenchOptions& opts) {
  const std::string dtype = dtype_of(name, opts);
  const Device device(opts.device);
  for (auto& w : make_workloads(name, opts, opts.codegen_only)) {
    if (w.name != name) continue;
    CompileOptions co;
    co.mode = opts.mode;
    co.round_intermediates = opts.round_intermediates;
    co.concat_linear = opts.concat_linear;
    if (opts.codegen_only) {
      nlohmann::json j =
          cuda_codegen(name, w.eager, w.inputs,
                       w.params ? w.params() : std::vector<nn::NamedTensor>{}, co, opts.cuda_arch);
      j["description"] = w.description;
      j["dtype"] = dtype;
      return j;
    }
    // Cold compile: an empty, private kernel cache (or the one asked for, kept).
    const bool keep = !opts.cache_dir.empty();
    std::string dir =
        keep ? opts.cache_dir
             : fmt::format("{}/smelt-bench-{}-{}", std::filesystem::temp_directory_path().string(),
                           getpid(), name);
    if (!keep) std::filesystem::remove_all(dir);
    const char* old = std::getenv("SMELT_CACHE_DIR");
    std::string saved = old ? old : "";
    setenv("SMELT_CACHE_DIR", dir.c_str(), 1);
    // The CPU toolchain's shared files (the math functions' object, the
    // precompiled preamble) are built once per kernel cache, by its first
    // graph: a one-op graph builds them here, so that cold_ms is what one
    // more graph costs; toolchain_setup_ms is what they cost once.
    double setup_ms = 0.0;
    if (!keep && !device.is_cuda()) {
      const auto t0 = std::chrono::steady_clock::now();
      auto one_op = smelt::compile([](const Tensor& x) { return x + 1; });
      (void)one_op(zeros({8}));
      setup_ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    }
    // The first `check_steps` calls from the initial state (a training workload:
    // steps), whose last result is compared with eager's.
    auto check_run = [&](const Fn& f) {
      if (w.reset) w.reset();
      std::vector<Tensor> r;
      for (int i = 0; i < w.check_steps; ++i) r = f(w.inputs);
      if (w.state)
        for (const Tensor& t : w.state()) r.push_back(t.clone());
      return r;
    };
    // Compile times: trace, passes, codegen and build/load, without the run.
    CompiledFn cold = w.compiled(co);
    std::vector<Tensor> got = check_run(cold.call);
    const CompileStats cold_stats = cold.stats();
    double cold_ms = cold.stats().last_compile_ms;
    CompileStats::Phases cold_phases = cold.stats().last_compile_phases;
    bool cold_hit = cold.stats().last_cache_hit;
    CompiledFn warm = w.compiled(co);
    warm.call(w.inputs);
    CompileStats st = warm.stats();
    double warm_ms = st.last_compile_ms;
    if (old)
      setenv("SMELT_CACHE_DIR", saved.c_str(), 1);
    else
      unsetenv("SMELT_CACHE_DIR");
    if (!keep) std::filesystem::remove_all(dir);
    std::vector<Tensor> want = check_run(w.eager);
    Errors err = compare(want, got);
    const size_t n_state = w.state ? w.state().size() : 0;
    const Errors state_err =
        compare(std::vector<Tensor>(want.end() - static_cast<std::ptrdiff_t>(n_state), want.end()),
                std::vector<Tensor>(got.end() - static_cast<std::ptrdiff_t>(n_state), got.end()));
    if (!opts.save_outputs.empty()) {
      std::map<std::string, Tensor> out;
      for (size_t k = 0; k < want.size(); ++k) {
        out[fmt::format("eager{}", k)] = want[k].cpu();
        out[fmt::format("compiled{}", k)] = got[k].cpu();
      }
      save_safetensors(opts.save_outputs, out);
    }
    double eager_ms = time_ms([&] { w.eager(w.inputs); }, opts.iters, device);
    double comp_ms = time_ms([&] { warm.call(w.inputs); }, opts.iters, device);
    // Peak memory of one call: what it allocates on top of what was alive
    // when it started (weights, inputs and the other workloads' tensors), at
    // its highest point (intermediates, results, gradients, the compiled
    // graph's arena).
    auto peak_of = [&](const Fn& f) {
      const int64_t before = memory_allocated(device);
      reset_peak_memory_stats(device);
      f(w.inputs);
      return max_memory_allocated(device) - before;
    };
    const int64_t peak_eager = peak_of(w.eager), peak_compiled = peak_of(warm.call);
    nlohmann::json j;
    j["workload"] = name;
    j["description"] = w.description;
    j["device"] = opts.device;
    j["dtype"] = dtype;
    j["mode"] = opts.mode;
    j["matmul_precision"] = opts.matmul_precision;
    j["eager_ms"] = eager_ms;
    j["compiled_ms"] = comp_ms;
    j["speedup"] = eager_ms / comp_ms;
    j["max_abs_err"] = err.abs;
    j["max_rel_err"] = err.rel;
    if (n_state > 0) {  // included in max_*_err; here alone
      j["state_max_abs_err"] = state_err.abs;
      j["state_max_rel_err"] = state_err.rel;
    }
    j["compile_ms_cold"] = cold_ms;
    j["toolchain_setup_ms"] = setup_ms;
    j["compile_ms_warm"] = warm_ms;
    j["warm_cache_hit"] = st.last_cache_hit;
    j["cold_cache_hit"] = cold_hit;
    j["compile_phases_cold"] = phases_json(cold_phases);
    j["compile_phases_warm"] = phases_json(st.last_compile_phases);
    j["eager_kernels"] = st.eager_ops;
    j["compiled_kernels"] = st.kernels;
    j["bytes_eager"] = st.bytes_eager;
    j["bytes_compiled"] = st.bytes_compiled;
    // Achieved bandwidth: the bytes each call must move over its time (GB/s).
    j["gbps_eager"] = static_cast<double>(st.bytes_eager) / eager_ms / 1e6;
    j["gbps_compiled"] = static_cast<double>(st.bytes_compiled) / comp_ms / 1e6;
    j["kernel_names"] = st.kernel_names;
    if (!st.backward_kernel_names.empty()) {
      // A compiled forward with a compiled backward (train-aot).
      j["backward_kernel_names"] = st.backward_kernel_names;
      j["saved_tensors"] = st.saved_tensors;
      j["saved_bytes"] = st.saved_bytes;
      j["saved_bytes_without_recompute"] = st.saved_bytes_without_recompute;
      j["recomputed_ops"] = st.recomputed_ops;
    }
    j["peak_bytes_eager"] = peak_eager;
    j["peak_bytes_compiled"] = peak_compiled;
    if (w.flops > 0) {
      j["tflops_eager"] = w.flops / eager_ms / 1e9;
      j["tflops_compiled"] = w.flops / comp_ms / 1e9;
    }
    // reduce-overhead / max-autotune on CUDA: the CUDA graphs of the timed
    // calls, and the autotuning of the cold and the warm compile.
    const CompileStats timed = warm.stats();
    j["cudagraph_captures"] = timed.cudagraph_captures;
    // What a copy of one call's results costs (reduce-overhead returns the
    // CUDA graph's static outputs without one).
    {
      const std::vector<Tensor> results = warm.call(w.inputs);
      j["clone_results_ms"] = time_ms(
          [&] {
            for (const Tensor& r : results) r.clone();
          },
          opts.iters, device);
    }
    j["cudagraph_replays"] = timed.cudagraph_replays;
    j["cudagraph_uncaptured_runs"] = timed.cudagraph_uncaptured_runs;
    j["cudagraph_static_bytes"] = timed.cudagraph_static_bytes;
    j["cudagraph_skip_reason"] = timed.cudagraph_skip_reason;
    j["autotune_ms_cold"] = cold_stats.autotune_ms;
    j["autotune_tuned_cold"] = cold_stats.autotune_tuned;
    j["autotune_changed_cold"] = cold_stats.autotune_changed;
    j["autotune_candidates_cold"] = cold_stats.autotune_candidates;
    j["autotune_cache_hits_warm"] = st.autotune_cache_hits;
    j["autotune_tuned_warm"] = st.autotune_tuned;
    if (w.items > 0) {
      j["items_unit"] = w.items_unit;
      j["items_per_s_eager"] = static_cast<double>(w.items) / eager_ms * 1e3;
      j["items_per_s_compiled"] = static_cast<double>(w.items) / comp_ms * 1e3;
    }
    j.update(rates_json(w, j, opts));
    if (w.extra) j.update(w.extra());
    return j;
  }
  SMELT_INTERNAL_ASSERT(false, "smelt bench: workload '{}' has no definition", name);
}

namespace {

void print_header() {
  std::puts(fmt::format(
                "{:<15} {:>9} {:>9} {:>7} {:>6} {:>6} {:>11} {:>11} {:>8} {:>9} {:>9} {:>9} {:>8}",
                "workload", "eager_ms", "comp_ms", "speedup", "k_eag", "k_comp", "bytes_eager",
                "bytes_comp", "GB/s", "max_abs", "max_rel", "cold_ms", "warm_ms")
                .c_str());
}

void print_row(const nlohmann::json& j) {
  std::puts(fmt::format("{:<15} {:>9.3f} {:>9.3f} {:>6.2f}x {:>6} {:>6} {:>11} {:>11} {:>8.1f} "
                        "{:>9.2e} {:>9.2e} {:>9.1f} {:>8.1f}",
                        j["workload"].get<std::string>(), j["eager_ms"].get<double>(),
                        j["compiled_ms"].get<double>(), j["speedup"].get<double>(),
                        j["eager_kernels"].get<int>(), j["compiled_kernels"].get<int>(),
                        j["bytes_eager"].get<int64_t>(), j["bytes_compiled"].get<int64_t>(),
                        j["gbps_compiled"].get<double>(), j["max_abs_err"].get<double>(),
                        j["max_rel_err"].get<double>(), j["compile_ms_cold"].get<double>(),
                        j["compile_ms_warm"].get<double>())
                .c_str());
}

void print_kernels(const std::vector<nlohmann::json>& rows) {
  const nlohmann::json* gemm = nullptr;
  for (auto& j : rows)
    if (j["workload"] == "gemm") gemm = &j;
  for (auto& j : rows) {
    if (j.contains("tflops_eager")) {
      std::string ratio;
      if (gemm && &j != gemm)
        ratio = fmt::format(" ({:.3f}x compiled gemm's time)",
                            j["compiled_ms"].get<double>() / (*gemm)["compiled_ms"].get<double>());
      std::puts(fmt::format("  {:<15} {:.3g} TFLOP/s eager, {:.3g} compiled{} ({})",
                            j["workload"].get<std::string>(), j["tflops_eager"].get<double>(),
                            j["tflops_compiled"].get<double>(), ratio,
                            j["dtype"].get<std::string>())
                    .c_str());
    }
    if (j.contains("items_per_s_eager"))
      std::puts(fmt::format("  {:<15} {:.1f} {} eager, {:.1f} compiled",
                            j["workload"].get<std::string>(), j["items_per_s_eager"].get<double>(),
                            j["items_unit"].get<std::string>() + "/s",
                            j["items_per_s_compiled"].get<double>())
                    .c_str());
    if (j.contains("first_loss"))
      std::puts(fmt::format("  {:<15} first loss {:.7f}, PyTorch's {:.7f} (relative difference "
                            "{:.1e}; the same initial weights and batch)",
                            j["workload"].get<std::string>(), j["first_loss"].get<double>(),
                            j["torch_first_loss"].get<double>(),
                            j["first_loss_rel_err"].get<double>())
                    .c_str());
    if (j.contains("layer_kernels")) {
      std::string names;
      for (auto& n : j["layer_kernel_names"])
        names += (names.empty() ? "" : ", ") + n.get<std::string>();
      std::puts(fmt::format("  {:<15} one encoder layer: {} kernels ({} eager ops): {}",
                            j["workload"].get<std::string>(), j["layer_kernels"].get<int>(),
                            j["layer_eager_ops"].get<int>(), names)
                    .c_str());
    }
  }
  for (auto& j : rows) {
    if (j.contains("state_max_abs_err"))
      std::puts(fmt::format("  {:<15} state the calls update in place (running stats): max "
                            "abs difference from eager {:.2e}",
                            j["workload"].get<std::string>(), j["state_max_abs_err"].get<double>())
                    .c_str());
    if (j.contains("shared_block_rel_err"))
      std::puts(fmt::format("  {:<15} the shared GPT-2 block (C 64, PyTorch's weights) compiled "
                            "here: relative difference from PyTorch's output {:.1e}",
                            j["workload"].get<std::string>(),
                            j["shared_block_rel_err"].get<double>())
                    .c_str());
    std::vector<std::string> rates;
    if (j.contains("tflops_share"))
      rates.push_back(fmt::format("{:.1f}% of {:.0f} TFLOP/s compiled, {:.1f}% eager",
                                  100 * j["tflops_share"].get<double>(),
                                  j["peak_tflops"].get<double>(),
                                  100 * j["tflops_share_eager"].get<double>()));
    if (j.contains("gbps_share"))
      rates.push_back(
          fmt::format("{:.0f} GB/s compiled, {:.0f} eager ({:.1f}% and {:.1f}% of {:.0f} GB/s)",
                      j["gbps_compiled"].get<double>(), j["gbps_eager"].get<double>(),
                      100 * j["gbps_share"].get<double>(),
                      100 * j["gbps_share_eager"].get<double>(), j["peak_gbps"].get<double>()));
    if (!rates.empty())
      std::puts(fmt::format("  {:<15} {}", j["workload"].get<std::string>(), fmt::join(rates, "; "))
                    .c_str());
  }
  for (auto& j : rows)
    std::puts(fmt::format("  {:<15} peak memory a call adds: eager {:.1f} MiB, compiled {:.1f} MiB",
                          j["workload"].get<std::string>(),
                          j["peak_bytes_eager"].get<int64_t>() / 1048576.0,
                          j["peak_bytes_compiled"].get<int64_t>() / 1048576.0)
                  .c_str());
  for (auto& j : rows)
    for (const char* which : {"cold", "warm"}) {
      const auto& p = j[fmt::format("compile_phases_{}", which)];
      std::puts(
          fmt::format("  {:<15} {} compile{}: trace {:.1f}, passes {:.1f}, lower+fuse {:.1f}, "
                      "codegen {:.1f}, C++ compiler {:.1f}, load {:.1f} ms",
                      j["workload"].get<std::string>(), which,
                      std::string(which) == "cold" && j["cold_cache_hit"].get<bool>()
                          ? " (the kernels were in the cache)"
                          : "",
                      p["trace_ms"].get<double>(), p["passes_ms"].get<double>(),
                      p["fuse_ms"].get<double>(), p["codegen_ms"].get<double>(),
                      p["cxx_ms"].get<double>(), p["load_ms"].get<double>())
              .c_str());
      if (std::string(which) == "cold" && j["toolchain_setup_ms"].get<double>() > 0)
        std::puts(fmt::format("  {:<15} before it, once per kernel cache: the toolchain's shared "
                              "files (math functions, precompiled preamble) with a one-op graph, "
                              "{:.1f} ms",
                              j["workload"].get<std::string>(),
                              j["toolchain_setup_ms"].get<double>())
                      .c_str());
    }
  for (auto& j : rows) {
    std::string names;
    for (auto& n : j["kernel_names"]) names += (names.empty() ? "" : ", ") + n.get<std::string>();
    std::puts(fmt::format("  {:<15} kernels: {}", j["workload"].get<std::string>(), names).c_str());
    if (!j.contains("backward_kernel_names")) continue;
    names.clear();
    for (auto& n : j["backward_kernel_names"])
      names += (names.empty() ? "" : ", ") + n.get<std::string>();
    std::puts(fmt::format("  {:<15} backward kernels: {}", j["workload"].get<std::string>(), names)
                  .c_str());
    std::puts(fmt::format("  {:<15} saved for backward: {} tensors, {:.2f} MiB ({:.2f} MiB "
                          "without recompute; {} ops recomputed)",
                          j["workload"].get<std::string>(), j["saved_tensors"].get<int>(),
                          j["saved_bytes"].get<int64_t>() / 1048576.0,
                          j["saved_bytes_without_recompute"].get<int64_t>() / 1048576.0,
                          j["recomputed_ops"].get<int>())
                  .c_str());
  }
}

const std::vector<std::string> kWorkloads = {
    "pointwise",  "softmax",        "layernorm",  "mlp",  "train-mlp",   "train-aot",
    "horizontal", "batchnorm-relu", "gpt2-block", "gemm", "linear-gelu", "linear-gelu-erf"};

}  // namespace

const char* bench_columns_help() {
  return "Columns (one row per workload, printed as soon as it finishes):\n"
         "  eager_ms, comp_ms        median wall time of one call, eager and compiled (ms)\n"
         "  speedup                  eager_ms / comp_ms\n"
         "  k_eag, k_comp            kernels launched per call: eager (one per primitive op) and\n"
         "                           compiled\n"
         "  bytes_eager, bytes_comp  bytes read and written per call, estimated from the graph\n"
         "  GB/s                     bytes_comp / comp_ms: the compiled call's achieved bandwidth\n"
         "  max_abs, max_rel         largest absolute and relative difference of the compiled\n"
         "                           result from eager\n"
         "  cold_ms                  first compile of the graph with none of its kernels in the\n"
         "                           cache (trace, passes, codegen, C++ build), in ms; on the CPU\n"
         "                           the toolchain's shared files (math functions, precompiled\n"
         "                           preamble) are built before it, once (printed below)\n"
         "  warm_ms                  a fresh compile (a new compiled object, same process) whose\n"
         "                           plan and kernels load from the disk cache, in ms\n"
         "Below the table: items per second where a workload counts them (minilm: sentences/s),\n"
         "TFLOP/s where a workload counts its FLOPs (the GEMMs: 2 m n k per call; gpt2-block)\n"
         "and the GEMMs' compiled time over compiled gemm's when gemm ran too (linear-gelu:\n"
         "what the bias and GELU add), the share of the peak of the achieved GB/s and TFLOP/s\n"
         "(--peak-gbps, --peak-tflops; on CUDA by default the H200's, measured: 4300 GB/s\n"
         "copy, 780 TFLOP/s bfloat16/float16 dense), where each compile's time went (trace,\n"
         "passes, lower+fuse, codegen, the C++ compiler, load) and the kernels of each\n"
         "compiled workload.\n"
         "--codegen-only (with --device cuda; no GPU needed): the workload's CUDA program at the\n"
         "GPU sizes, generated and compiled by NVRTC, one line per step (kernel names, launch\n"
         "configs); SMELT_LOGS=output_code adds the source. Nothing runs.";
}

int cmd_bench(const BenchOptions& opts) {
  NoGradGuard no_grad;  // the workloads are inference (module parameters require grad)
  SMELT_CHECK(opts.device == "cpu" || opts.device.rfind("cuda", 0) == 0,
              "smelt bench: --device must be cpu, cuda or cuda:N, got '{}'", opts.device);
  const Device device(opts.device);
  if (opts.workload == "ops" || opts.workload == "op-shapes") {
    SMELT_CHECK(device.is_cpu(), "smelt bench: the {} workload runs on the CPU only; drop --device",
                opts.workload);
    return cmd_bench_ops(opts);
  }
  SMELT_CHECK(!opts.codegen_only || device.is_cuda(),
              "smelt bench: --codegen-only generates the CUDA program; add --device cuda");
  if (device.is_cuda() && !opts.codegen_only)
    (void)zeros({1}, TensorOptions().device(device));  // Error without a GPU
  set_float32_matmul_precision(opts.matmul_precision);
  SMELT_CHECK(opts.dtype.empty() || is_floating(dtype_from_name(opts.dtype)),
              "smelt bench: --dtype must be a floating dtype, got {}", opts.dtype);
  std::vector<std::string> names;  // a comma-separated list, e.g. "gemm,linear-gelu"
  for (size_t at = 0; at <= opts.workload.size();) {
    const size_t end = std::min(opts.workload.find(',', at), opts.workload.size());
    names.push_back(opts.workload.substr(at, end - at));
    at = end + 1;
  }
  if (opts.workload == "all") names = kWorkloads;  // every one but chain and minilm
  for (auto& n : names)                            // refuse a bad name before minutes of work
    SMELT_CHECK(n == "minilm" || n == "chain" ||
                    std::find(kWorkloads.begin(), kWorkloads.end(), n) != kWorkloads.end(),
                "smelt bench: unknown workload '{}'; use pointwise, softmax, layernorm, mlp, "
                "train-mlp, train-aot, horizontal, batchnorm-relu, gpt2-block, gemm, linear-gelu, "
                "linear-gelu-erf, chain, minilm, ops, op-shapes or all",
                n);
  for (auto& n : names)
    SMELT_CHECK(device.is_cpu() || n != "chain",
                "smelt bench: the {} workload runs on the CPU only; drop --device", n);
  std::vector<nlohmann::json> rows;
  if (!opts.json && !opts.codegen_only) print_header();
  for (auto& n : names) {
    rows.push_back(bench_one(n, opts));
    if (opts.codegen_only && !opts.json)
      print_cuda_codegen(rows.back());
    else if (opts.json)
      std::puts(rows.back().dump().c_str());
    else
      print_row(rows.back());
    std::fflush(stdout);  // each row as it finishes, also into a pipe
  }
  if (!opts.json && !opts.codegen_only) print_kernels(rows);
  return 0;
}

}  // namespace smelt::cli
