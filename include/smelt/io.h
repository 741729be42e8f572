// smelt/io.h — reading and writing tensors in the safetensors format
// (https://github.com/huggingface/safetensors: 8-byte little-endian header
// length, a JSON header {name: {dtype, shape, data_offsets}}, then raw
// little-endian data), so weights exported from PyTorch load directly.
#pragma once
#include <map>
#include <string>

#include "smelt/tensor.h"

namespace smelt {

/// Every tensor in the file, by name: contiguous tensors on `device` that own
/// their memory (read one at a time through host memory and moved there).
/// dtypes F64, F32, F16, BF16, I64, I32, I16, I8, U8, BOOL.
/// Throws Error for a missing/truncated/corrupt file or an unsupported dtype,
/// naming the file and the tensor.
std::map<std::string, Tensor> load_safetensors(const std::string& path, Device device = Device());

/// Writes `tensors` (any strides and devices; written contiguous) and optional
/// string `metadata` (the "__metadata__" entry). Throws Error if the file
/// cannot be written.
void save_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                      const std::map<std::string, std::string>& metadata = {});

}  // namespace smelt
