// `smelt bench <workload> --device cuda --codegen-only` (bench_codegen.h): the
// CUDA program of a workload without a GPU, by the path the CudaCodegen tests
// take (tests/compiler/test_cuda_codegen.cpp): the workload's function is
// traced over CPU tensors standing for the GPU's (the same sizes, strides and
// dtypes; uninitialized, since a trace reads no values), exactly as
// smelt::compile traces (arguments and a module's parameters and buffers
// become graph inputs, its other captured tensors constants); the graph
// passes run with the compile options, then fusion and code generation for
// Target::Cuda, whose kernel layouts depend on the target and the shapes,
// not on where the traced tensors live. NVRTC (no GPU or driver needed)
// compiles each translation unit as smelt::compile would split them, for
// the architecture asked for. Nothing is launched, so no time is measured.
#include "bench_codegen.h"

#include <fmt/format.h>

#include <chrono>

#include "compiler/codegen/cuda_dialect.h"
#include "compiler/codegen/generate.h"
#include "compiler/fusion/scheduler.h"
#include "compiler/logs.h"
#include "compiler/passes/passes.h"
#include "compiler/runtime/units.h"
#include "compiler/trace/tracer.h"
#include "smelt/error.h"

#ifdef SMELT_WITH_CUDA
#include "backend/cuda/nvrtc.h"
#endif

namespace smelt::cli {

using namespace smelt::compiler;

namespace {

/// `fn` traced as smelt::compile traces it (compile.cpp, stage 1).
[[maybe_unused]] Graph trace(
    const std::function<std::vector<Tensor>(const std::vector<Tensor>&)>& fn,
    const std::vector<Tensor>& inputs, const std::vector<nn::NamedTensor>& params) {
  GraphBuilder gb;
  gb.set_num_args(static_cast<int>(inputs.size()));
  try {
    std::vector<Tensor> tracers;
    for (size_t i = 0; i < inputs.size(); ++i)
      tracers.push_back(gb.add_input(inputs[i], static_cast<int>(i)));
    for (size_t i = 0; i < params.size(); ++i) gb.add_param(params[i].tensor, static_cast<int>(i));
    std::vector<Tensor> outs;
    {
      TraceScope scope(&gb);
      outs = fn(tracers);
    }
    gb.finish(outs);
  } catch (...) {
    gb.restore_grads();
    gb.abort();
    throw;
  }
  gb.restore_grads();
  gb.restore_params();
  return std::move(gb.graph);
}

std::vector<std::string> buffer_names(const Graph& g, const std::vector<int>& ids) {
  std::vector<std::string> names;
  for (int b : ids) names.push_back(g.buffers[static_cast<size_t>(b)].name());
  return names;
}

/// One step of the schedule: a kernel with its launch, or the op an extern
/// (GEMM) or fallback step runs.
[[maybe_unused]] nlohmann::json step_json(const Graph& g, const Step& st) {
  nlohmann::json j;
  j["name"] = st.name;
  j["reads"] = buffer_names(g, st.reads);
  j["writes"] = buffer_names(g, st.writes);
  if (st.kind == Step::Kind::Kernel) {
    j["kind"] = "kernel";
    j["grid"] = std::max<int64_t>(1, st.config.grid);  // as the executor launches it
    j["block"] = std::max(1, st.config.block_size);
    j["config"] = st.config.str();
    return j;
  }
  j["kind"] = st.kind == Step::Kind::Extern ? "extern" : "fallback";
  j["op"] = g.nodes[static_cast<size_t>(st.node)].op;
  if (st.kind == Step::Kind::Extern) {
    std::vector<std::string> epilogue;
    if (st.bias >= 0) epilogue.push_back("bias");
    if (!st.activation.empty()) epilogue.push_back(st.activation);
    if (st.residual >= 0) epilogue.push_back("residual add");
    j["epilogue"] = epilogue;
  }
  return j;
}

}  // namespace

nlohmann::json cuda_codegen(
    const std::string& workload,
    const std::function<std::vector<Tensor>(const std::vector<Tensor>&)>& fn,
    const std::vector<Tensor>& inputs, const std::vector<nn::NamedTensor>& params,
    const CompileOptions& opts, int arch) {
#ifndef SMELT_WITH_CUDA
  (void)workload, (void)fn, (void)inputs, (void)params, (void)opts, (void)arch;
  throw Error(
      "smelt bench --codegen-only: this smelt was built without CUDA (no NVRTC to compile the "
      "generated code); configure with the CUDA toolkit installed (-DSMELT_CUDA=ON)");
#else
  using clock = std::chrono::steady_clock;
  auto ms_since = [](clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(clock::now() - t0).count();
  };
  const clock::time_point t0 = clock::now();
  Graph captured = trace(fn, inputs, params);
  if (log_enabled("graph")) log_artifact("graph", "captured graph", captured.str());
  PassOptions passes{opts.dce, opts.cse, opts.decompose, opts.fold_constants};
  passes.planned_for = DeviceType::CUDA;  // the placeholders live on the CPU
  Graph g = run_passes(std::move(captured), passes);
  const CudaDialect dialect;
  Schedule s = schedule(g, FusionOptions{opts.fuse, opts.gemm_epilogue, opts.round_intermediates},
                        dialect.target());
  generate_kernels(g, s, dialect);
  const std::vector<KernelUnit> units =
      split_units(s, dialect.preamble(), build_parallelism(), kCudaUnitLines);
  const double codegen_ms = ms_since(t0);
  if (log_enabled("fusion")) {
    std::string body;
    for (auto& d : s.decisions) body += "  " + d + "\n";
    log_artifact("fusion", "fusion decisions", body);
  }
  nlohmann::json j;
  j["workload"] = workload;
  j["device"] = "cuda";
  j["codegen_only"] = true;
  j["mode"] = opts.mode;
  j["steps"] = nlohmann::json::array();
  std::vector<std::string> names;
  std::string kernels;
  int n_kernels = 0;
  for (const Step& st : s.steps) {
    j["steps"].push_back(step_json(g, st));
    names.push_back(st.name);
    if (st.kind != Step::Kind::Kernel) continue;
    ++n_kernels;
    kernels += "\n" + st.source;
  }
  j["kernel_names"] = names;
  j["compiled_kernels"] = static_cast<int>(s.steps.size());
  j["generated_kernels"] = n_kernels;
  j["codegen_ms"] = codegen_ms;
  if (log_enabled("output_code"))
    log_artifact("output_code",
                 fmt::format("generated CUDA code of {} (not run: --codegen-only); kernels "
                             "include the embedded scalar_ops.h / reduce_ops.h",
                             workload),
                 kernels);
  // NVRTC, unit by unit, as smelt::compile's toolchain would for a device of
  // compute capability arch / 10 . arch % 10.
  bool cubin = false;
  const std::vector<std::string> options = cuda::impl::nvrtc_options(arch / 10, arch % 10, &cubin);
  const clock::time_point t1 = clock::now();
  size_t binary_bytes = 0;
  for (size_t u = 0; u < units.size(); ++u)
    binary_bytes += cuda::impl::nvrtc_compile(
                        units[u].source, fmt::format("{}_unit{}.cu", workload, u), options, cubin)
                        .size();
  j["nvrtc_ms"] = ms_since(t1);
  j["nvrtc_version"] = cuda::impl::nvrtc_version();
  j["nvrtc_options"] = options;
  j["arch"] = options.front().substr(options.front().find('=') + 1);
  j["binary"] = cubin ? "cubin" : "ptx";
  j["binary_bytes"] = binary_bytes;
  j["units"] = units.size();
  return j;
#endif
}

void print_cuda_codegen(const nlohmann::json& r) {
  std::puts(fmt::format("{} ({}, {}): the CUDA program smelt::compile builds on a GPU, "
                        "generated here without one (traced at the GPU sizes; nothing runs)",
                        r["workload"].get<std::string>(), r.value("description", ""),
                        r.value("dtype", ""))
                .c_str());
  int i = 0;
  for (const auto& st : r["steps"]) {
    std::string what = st["name"].get<std::string>();
    if (st["kind"] == "kernel")
      what += fmt::format(" <<<grid {}, block {}>>> [{}]", st["grid"].get<int64_t>(),
                          st["block"].get<int>(), st["config"].get<std::string>());
    else if (st["kind"] == "extern")
      what += fmt::format(" [{} through cuBLASLt{}{}]", st["op"].get<std::string>(),
                          st["epilogue"].empty() ? "" : ", epilogue: ",
                          fmt::join(st["epilogue"].get<std::vector<std::string>>(), ", "));
    else
      what += fmt::format(" [{} run eagerly]", st["op"].get<std::string>());
    std::puts(fmt::format("  {:>2}: {}({}) -> {}", i++, what,
                          fmt::join(st["reads"].get<std::vector<std::string>>(), ", "),
                          fmt::join(st["writes"].get<std::vector<std::string>>(), ", "))
                  .c_str());
  }
  const std::string summary = fmt::format(
      "  {} steps, {} generated kernels in {} translation units ({:.0f} ms to trace, "
      "fuse and generate)",
      r["compiled_kernels"].get<int>(), r["generated_kernels"].get<int>(), r["units"].get<size_t>(),
      r["codegen_ms"].get<double>());
  if (r["units"].get<size_t>() == 0)
    std::puts((summary + "; nothing for NVRTC to compile").c_str());
  else
    std::puts(fmt::format("{}; NVRTC {} compiled them for {} in {:.0f} ms: {} bytes of {}", summary,
                          r["nvrtc_version"].get<std::string>(), r["arch"].get<std::string>(),
                          r["nvrtc_ms"].get<double>(), r["binary_bytes"].get<size_t>(),
                          r["binary"] == "cubin" ? "CUBIN" : "PTX")
                  .c_str());
  if (r.value("mode", "").rfind("max-autotune", 0) == 0)
    std::puts(
        "  (max-autotune times candidate layouts on the GPU at the first call: these are "
        "the heuristic's layouts it starts from)");
  std::puts(
      "  (SMELT_LOGS=output_code prints the kernels' source, SMELT_LOGS=fusion the fusion "
      "decisions)");
}

}  // namespace smelt::cli
