// `smelt bench <workload> [--device cuda]`: runs a workload eagerly and
// compiled on the same seeded inputs, checks they agree, and reports times,
// kernel counts, bytes moved, achieved bandwidth, errors and compile times
// (cold: empty kernel cache; warm: a fresh compile() loading the kernels from
// the disk cache). On a GPU the workloads are larger (pointwise 2^26,
// softmax 8192x8192, layer_norm 16384x4096) and timed with CUDA events over
// many calls. Each row is printed as its workload finishes;
// bench_columns_help() says what the columns mean.
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
#include "commands.h"
#include "core/tensor_impl.h"
#include "nn/models.h"
#include "smelt/autograd.h"
#include "smelt/compile.h"
#include "smelt/io.h"
#include "smelt/memory.h"
#include "smelt/nn.h"
#include "smelt/ops.h"
#include "smelt/optim.h"

namespace smelt::cli {

namespace {

using Fn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

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
  std::function<nlohmann::json()> extra = nullptr;  // more facts for the report
  /// A training workload (each call is a step that changes the weights): puts
  /// the weights and optimizer back to their initial state, so that eager and
  /// compiled runs are compared from the same start, over `check_steps` steps.
  std::function<void()> reset = nullptr;
  int check_steps = 1;
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
/// on every device), or the tensors of `file` (non-empty) in order.
class Inputs {
 public:
  Inputs(DType dt, Device device, const std::string& file) : dt_(dt), device_(device) {
    if (!file.empty()) file_ = load_safetensors(file, device);
  }
  Tensor next(const Shape& s) {
    if (file_.empty()) return randn(s, TensorOptions().device(device_)).to(dt_);
    const std::string key = fmt::format("t{}", next_++);
    auto it = file_.find(key);
    SMELT_CHECK(it != file_.end(), "smelt bench --inputs: the file has no tensor '{}'", key);
    SMELT_CHECK(it->second.sizes() == s, "smelt bench --inputs: '{}' has shape {}, expected {}",
                key, detail::shape_str(it->second.sizes()), detail::shape_str(s));
    return it->second.to(dt_);
  }
  /// Loads the tensors named `prefix` + a state_dict key into `m`, if the file has them.
  void weights(nn::Module& m, const std::string& prefix) {
    nn::StateDict sd;
    for (auto& [k, t] : file_)
      if (k.rfind(prefix, 0) == 0) sd[k.substr(prefix.size())] = t.to(dt_);
    if (!sd.empty()) m.load_state_dict(sd);
  }

 private:
  DType dt_;
  Device device_;
  std::map<std::string, Tensor> file_;
  int next_ = 0;
};

std::vector<Workload> workloads(DType dt, Device device, const std::string& inputs_file) {
  std::vector<Workload> w;
  manual_seed(0);
  const bool gpu = device.is_cuda();
  Inputs inputs(dt, device, inputs_file);
  auto randn_on = [&](const Shape& s) { return inputs.next(s); };
  {
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
         [model](CompileOptions o) -> CompiledFn {
           auto c = std::make_shared<decltype(smelt::compile(model, o))>(smelt::compile(model, o));
           return {[c](const std::vector<Tensor>& in) { return std::vector<Tensor>{(*c)(in[0])}; },
                   [c] { return c->stats(); }};
         }});
  }
  w.push_back(train_mlp_workload(dt, device, /*aot=*/false));
  w.push_back(train_mlp_workload(dt, device, /*aot=*/true));
  {
    Tensor x = randn_on({gpu ? int64_t{1} << 26 : int64_t{1} << 22});
    auto f = [](const Tensor& x) { return std::make_tuple(sin(x), cos(x)); };
    w.push_back({"horizontal",
                 fmt::format("sin(x) and cos(x) of one input, 2^{} elements", gpu ? 26 : 22),
                 {x},
                 [f](const std::vector<Tensor>& in) {
                   auto [s, c] = f(in[0]);
                   return std::vector<Tensor>{s, c};
                 },
                 compiler_of(f)});
  }
  return w;
}

/// all-MiniLM-L6-v2 (fetched on first use; or the model in `model_dir`) on a batch of 32 sequences
/// of 128 tokens ([CLS], random word pieces, [SEP]; no padding): encoder, mean pooling and
/// normalization, as SentenceEncoder::forward. The report adds the kernels of one encoder layer
/// compiled alone.
Workload minilm_workload(DType dt, const std::string& model_dir) {
  constexpr int64_t B = 32, T = 128;
  auto enc = std::make_shared<nn::SentenceEncoder>(load_sentence_encoder(model_dir));
  enc->model->to(dt);
  manual_seed(0);
  Tensor ids = randint(1000, enc->model->config.vocab_size, {B, T});
  ids.select(1, 0).fill_(*enc->tokenizer.token_to_id("[CLS]"));
  ids.select(1, T - 1).fill_(*enc->tokenizer.token_to_id("[SEP]"));
  Tensor mask = ones({B, T}, DType::Int64), types = zeros({B, T}, DType::Int64);
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
  w.extra = [enc, dt] {  // B and T are constants: no capture
    // One encoder layer alone: its hidden state and key mask as arguments.
    auto layer = enc->model->encoder->layer->at<nn::BertLayerImpl>(0);
    Tensor h = randn({B, T, enc->model->config.hidden_size}).to(dt);
    Tensor keep = ones({B, 1, 1, T}, DType::Bool);
    auto c =
        smelt::compile([layer](const Tensor& x, const Tensor& m) { return layer->forward(x, m); });
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

}  // namespace

nlohmann::json bench_one(const std::string& name, const BenchOptions& opts) {
  const DType dt = dtype_from_name(opts.dtype);
  const Device device(opts.device);
  // The pretrained model is loaded only when asked for.
  for (auto& w : name == "minilm"  ? std::vector<Workload>{minilm_workload(dt, opts.model)}
                 : name == "chain" ? std::vector<Workload>{chain_workload(dt, opts.nodes)}
                                   : workloads(dt, device, opts.inputs)) {
    if (w.name != name) continue;
    CompileOptions co;
    co.mode = opts.mode;
    co.round_intermediates = opts.round_intermediates;
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
    // The first `check_steps` calls from the initial state (a training workload:
    // steps), whose last result is compared with eager's.
    auto check_run = [&](const Fn& f) {
      if (w.reset) w.reset();
      std::vector<Tensor> r;
      for (int i = 0; i < w.check_steps; ++i) r = f(w.inputs);
      return r;
    };
    // Compile times: trace, passes, codegen and build/load, without the run.
    CompiledFn cold = w.compiled(co);
    std::vector<Tensor> got = check_run(cold.call);
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
    j["dtype"] = opts.dtype;
    j["mode"] = opts.mode;
    j["eager_ms"] = eager_ms;
    j["compiled_ms"] = comp_ms;
    j["speedup"] = eager_ms / comp_ms;
    j["max_abs_err"] = err.abs;
    j["max_rel_err"] = err.rel;
    j["compile_ms_cold"] = cold_ms;
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
    if (w.items > 0) {
      j["items_unit"] = w.items_unit;
      j["items_per_s_eager"] = static_cast<double>(w.items) / eager_ms * 1e3;
      j["items_per_s_compiled"] = static_cast<double>(w.items) / comp_ms * 1e3;
    }
    if (w.extra) j.update(w.extra());
    return j;
  }
  SMELT_INTERNAL_ASSERT(false, "smelt bench: workload '{}' has no definition", name);
}

namespace {

void print_header() {
  std::puts(fmt::format(
                "{:<11} {:>9} {:>9} {:>7} {:>6} {:>6} {:>11} {:>11} {:>8} {:>9} {:>9} {:>9} {:>8}",
                "workload", "eager_ms", "comp_ms", "speedup", "k_eag", "k_comp", "bytes_eager",
                "bytes_comp", "GB/s", "max_abs", "max_rel", "cold_ms", "warm_ms")
                .c_str());
}

void print_row(const nlohmann::json& j) {
  std::puts(fmt::format("{:<11} {:>9.3f} {:>9.3f} {:>6.2f}x {:>6} {:>6} {:>11} {:>11} {:>8.1f} "
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
  for (auto& j : rows) {
    if (j.contains("items_per_s_eager"))
      std::puts(fmt::format("  {:<11} {:.1f} {} eager, {:.1f} compiled",
                            j["workload"].get<std::string>(), j["items_per_s_eager"].get<double>(),
                            j["items_unit"].get<std::string>() + "/s",
                            j["items_per_s_compiled"].get<double>())
                    .c_str());
    if (j.contains("first_loss"))
      std::puts(fmt::format("  {:<11} first loss {:.7f}, PyTorch's {:.7f} (relative difference "
                            "{:.1e}; the same initial weights and batch)",
                            j["workload"].get<std::string>(), j["first_loss"].get<double>(),
                            j["torch_first_loss"].get<double>(),
                            j["first_loss_rel_err"].get<double>())
                    .c_str());
    if (j.contains("layer_kernels")) {
      std::string names;
      for (auto& n : j["layer_kernel_names"])
        names += (names.empty() ? "" : ", ") + n.get<std::string>();
      std::puts(fmt::format("  {:<11} one encoder layer: {} kernels ({} eager ops): {}",
                            j["workload"].get<std::string>(), j["layer_kernels"].get<int>(),
                            j["layer_eager_ops"].get<int>(), names)
                    .c_str());
    }
  }
  for (auto& j : rows)
    std::puts(fmt::format("  {:<11} peak memory a call adds: eager {:.1f} MiB, compiled {:.1f} MiB",
                          j["workload"].get<std::string>(),
                          j["peak_bytes_eager"].get<int64_t>() / 1048576.0,
                          j["peak_bytes_compiled"].get<int64_t>() / 1048576.0)
                  .c_str());
  for (auto& j : rows)
    for (const char* which : {"cold", "warm"}) {
      const auto& p = j[fmt::format("compile_phases_{}", which)];
      std::puts(
          fmt::format("  {:<11} {} compile{}: trace {:.1f}, passes {:.1f}, lower+fuse {:.1f}, "
                      "codegen {:.1f}, C++ compiler {:.1f}, load {:.1f} ms",
                      j["workload"].get<std::string>(), which,
                      std::string(which) == "cold" && j["cold_cache_hit"].get<bool>()
                          ? " (the kernels were in the cache)"
                          : "",
                      p["trace_ms"].get<double>(), p["passes_ms"].get<double>(),
                      p["fuse_ms"].get<double>(), p["codegen_ms"].get<double>(),
                      p["cxx_ms"].get<double>(), p["load_ms"].get<double>())
              .c_str());
    }
  for (auto& j : rows) {
    std::string names;
    for (auto& n : j["kernel_names"]) names += (names.empty() ? "" : ", ") + n.get<std::string>();
    std::puts(fmt::format("  {:<11} kernels: {}", j["workload"].get<std::string>(), names).c_str());
    if (!j.contains("backward_kernel_names")) continue;
    names.clear();
    for (auto& n : j["backward_kernel_names"])
      names += (names.empty() ? "" : ", ") + n.get<std::string>();
    std::puts(fmt::format("  {:<11} backward kernels: {}", j["workload"].get<std::string>(), names)
                  .c_str());
    std::puts(fmt::format("  {:<11} saved for backward: {} tensors, {:.2f} MiB ({:.2f} MiB "
                          "without recompute; {} ops recomputed)",
                          j["workload"].get<std::string>(), j["saved_tensors"].get<int>(),
                          j["saved_bytes"].get<int64_t>() / 1048576.0,
                          j["saved_bytes_without_recompute"].get<int64_t>() / 1048576.0,
                          j["recomputed_ops"].get<int>())
                  .c_str());
  }
}

const std::vector<std::string> kWorkloads = {"pointwise", "softmax",   "layernorm", "mlp",
                                             "train-mlp", "train-aot", "horizontal"};

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
         "  cold_ms                  first compile with an empty kernel cache (trace, passes,\n"
         "                           codegen, C++ build), in ms\n"
         "  warm_ms                  a fresh compile (a new compiled object, same process) whose\n"
         "                           plan and kernels load from the disk cache, in ms\n"
         "Below the table: items per second where a workload counts them (minilm: sentences/s),\n"
         "where each compile's time went (trace, passes, lower+fuse, codegen, the C++ compiler,\n"
         "load) and the kernels of each compiled workload.";
}

int cmd_bench(const BenchOptions& opts) {
  NoGradGuard no_grad;  // the workloads are inference (module parameters require grad)
  SMELT_CHECK(opts.device == "cpu" || opts.device.rfind("cuda", 0) == 0,
              "smelt bench: --device must be cpu, cuda or cuda:N, got '{}'", opts.device);
  const Device device(opts.device);
  if (device.is_cuda()) (void)zeros({1}, TensorOptions().device(device));  // Error without a GPU
  SMELT_CHECK(device.is_cpu() || (opts.workload != "minilm" && opts.workload != "chain"),
              "smelt bench: the {} workload runs on the CPU only; drop --device", opts.workload);
  SMELT_CHECK(is_floating(dtype_from_name(opts.dtype)),
              "smelt bench: --dtype must be a floating dtype, got {}", opts.dtype);
  std::vector<std::string> names = {opts.workload};
  if (opts.workload == "all") names = kWorkloads;  // every one but minilm
  for (auto& n : names)                            // refuse a bad name before minutes of work
    SMELT_CHECK(n == "minilm" || n == "chain" ||
                    std::find(kWorkloads.begin(), kWorkloads.end(), n) != kWorkloads.end(),
                "smelt bench: unknown workload '{}'; use pointwise, softmax, layernorm, mlp, "
                "train-mlp, train-aot, horizontal, chain, minilm or all",
                n);
  std::vector<nlohmann::json> rows;
  if (!opts.json) print_header();
  for (auto& n : names) {
    rows.push_back(bench_one(n, opts));
    if (opts.json)
      std::puts(rows.back().dump().c_str());
    else
      print_row(rows.back());
    std::fflush(stdout);  // each row as it finishes, also into a pipe
  }
  if (!opts.json) print_kernels(rows);
  return 0;
}

}  // namespace smelt::cli
