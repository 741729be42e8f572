// `smelt bench <workload> --device cuda --codegen-only`: the CUDA program
// smelt::compile would build for a workload, generated and compiled by NVRTC
// on a machine without a GPU (bench_codegen.cpp says how).
#pragma once
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "smelt/compile.h"
#include "smelt/nn/module.h"
#include "smelt/tensor.h"

namespace smelt::cli {

/// Traces `fn` over `inputs` (CPU tensors of the GPU sizes; their values are
/// never read) with `params` (a compiled module's parameters and buffers,
/// graph inputs as smelt::compile makes them; empty for a function), runs the
/// passes of `opts`, fuses and generates code for CUDA, and compiles every
/// translation unit with NVRTC for compute capability `arch` / 10 . `arch` %
/// 10. Nothing is launched (max-autotune's timing of candidate layouts, which
/// needs the GPU, does not happen: the layouts are the heuristic's). Returns
/// the report: "steps" (each kernel's name,
/// grid, block and KernelConfig; each GEMM or eager fallback's op, reads and
/// writes), "kernel_names", "units", "nvrtc_ms", "binary_bytes", "arch".
/// With SMELT_LOGS=output_code the kernels' source goes to stderr (and with
/// fusion, the fusion decisions). Error when this smelt was built without
/// CUDA (no NVRTC), when the trace breaks (the function would run eagerly),
/// or with NVRTC's log when a unit does not compile.
nlohmann::json cuda_codegen(
    const std::string& workload,
    const std::function<std::vector<Tensor>(const std::vector<Tensor>&)>& fn,
    const std::vector<Tensor>& inputs, const std::vector<nn::NamedTensor>& params,
    const CompileOptions& opts, int arch);

/// The report of cuda_codegen as text: one line per step, then NVRTC's result.
void print_cuda_codegen(const nlohmann::json& report);

}  // namespace smelt::cli
