// safetensors reader and writer (format: https://github.com/huggingface/safetensors).
// Layout: u64 little-endian N, N bytes of JSON header, then the data section;
// each header entry {"dtype", "shape", "data_offsets": [begin, end]} points into
// the data section. Everything read from the file is validated before use, so a
// corrupt or hostile file raises Error instead of reading out of bounds.
#include <unistd.h>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "core/tensor_impl.h"
#include "smelt/io.h"

namespace smelt {

static_assert(std::endian::native == std::endian::little,
              "safetensors I/O assumes a little-endian host");

namespace {

// Header larger than this is refused (the reference implementation uses 100 MB).
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;

struct DTypeCode {
  const char* code;
  DType dtype;
};
constexpr DTypeCode kCodes[] = {
    {"F64", DType::Float64},   {"F32", DType::Float32}, {"F16", DType::Float16},
    {"BF16", DType::BFloat16}, {"I64", DType::Int64},   {"I32", DType::Int32},
    {"I16", DType::Int16},     {"I8", DType::Int8},     {"U8", DType::UInt8},
    {"BOOL", DType::Bool},
};

const char* code_of(DType t) {
  for (const auto& c : kCodes)
    if (c.dtype == t) return c.code;
  SMELT_INTERNAL_ASSERT(false, "save_safetensors: no safetensors code for dtype {}", dtype_name(t));
}

bool dtype_of_code(const std::string& code, DType* out) {
  for (const auto& c : kCodes)
    if (code == c.code) {
      *out = c.dtype;
      return true;
    }
  return false;
}

std::string supported_codes() {
  std::string s;
  for (const auto& c : kCodes) {
    if (!s.empty()) s += ", ";
    s += c.code;
  }
  return s;
}

// Reads exactly n bytes at absolute position pos; false on a short read.
bool read_at(std::ifstream& f, uint64_t pos, void* dst, uint64_t n) {
  if (n == 0) return true;
  f.clear();
  f.seekg(static_cast<std::streamoff>(pos));
  f.read(static_cast<char*>(dst), static_cast<std::streamsize>(n));
  return f.gcount() == static_cast<std::streamsize>(n);
}

// Parses one header entry and reads its data. `data_start`/`data_size` delimit
// the data section in the file.
Tensor read_tensor(std::ifstream& f, const std::string& path, const std::string& name,
                   const nlohmann::json& e, uint64_t data_start, uint64_t data_size) {
  auto fail = [&](const std::string& what) -> Error {
    return Error(
        fmt::format("load_safetensors: '{}': tensor '{}': {}; the file is corrupt or "
                    "not a safetensors file, re-export it",
                    path, name, what));
  };
  if (!e.is_object()) throw fail("header entry is not a JSON object");
  auto dt = e.find("dtype");
  auto sh = e.find("shape");
  auto off = e.find("data_offsets");
  if (dt == e.end() || !dt->is_string()) throw fail("missing or non-string \"dtype\"");
  if (sh == e.end() || !sh->is_array()) throw fail("missing or non-array \"shape\"");
  if (off == e.end() || !off->is_array() || off->size() != 2)
    throw fail("\"data_offsets\" must be an array [begin, end]");

  DType dtype;
  const std::string code = dt->get<std::string>();
  if (!dtype_of_code(code, &dtype))
    throw Error(fmt::format(
        "load_safetensors: '{}': tensor '{}' has unsupported dtype {}; smelt reads {} (convert "
        "the tensor to one of these before saving)",
        path, name, code, supported_codes()));

  Shape shape;
  uint64_t numel = 1;
  bool overflow = false;
  for (const auto& d : *sh) {
    if (!d.is_number_unsigned()) throw fail("shape entries must be non-negative integers");
    uint64_t v = d.get<uint64_t>();
    if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) overflow = true;
    if (v != 0 && numel > std::numeric_limits<uint64_t>::max() / v) overflow = true;
    numel *= v;
    shape.push_back(static_cast<int64_t>(v));
  }
  const uint64_t isz = itemsize(dtype);
  if (overflow || numel > std::numeric_limits<uint64_t>::max() / isz || numel * isz > data_size)
    throw fail(fmt::format("shape {} ({}) does not fit in the {}-byte data section",
                           detail::shape_str(shape), code, data_size));

  for (const auto& o : *off)
    if (!o.is_number_unsigned()) throw fail("data_offsets must be non-negative integers");
  const uint64_t begin = (*off)[0].get<uint64_t>(), end = (*off)[1].get<uint64_t>();
  if (begin > end || end > data_size)
    throw fail(fmt::format("data_offsets [{}, {}] are outside the {}-byte data section", begin, end,
                           data_size));
  const uint64_t nbytes = numel * isz;
  if (end - begin != nbytes)
    throw fail(fmt::format("data_offsets [{}, {}] hold {} bytes but shape {} of {} needs {}", begin,
                           end, end - begin, detail::shape_str(shape), code, nbytes));

  Tensor t = detail::make_empty(shape, dtype, Device());
  if (nbytes > 0) {
    if (!read_at(f, data_start + begin, t.data_ptr(), nbytes))
      throw fail("the file ended before the tensor's data (truncated file)");
    if (dtype == DType::Bool) {
      const auto* p = static_cast<const uint8_t*>(t.data_ptr());
      for (uint64_t i = 0; i < nbytes; ++i)
        if (p[i] > 1) throw fail(fmt::format("BOOL byte {} at element {} is not 0 or 1", p[i], i));
    }
  }
  return t;
}

}  // namespace

std::map<std::string, Tensor> load_safetensors(const std::string& path, Device device) {
  std::ifstream f(path, std::ios::binary);
  SMELT_CHECK(f.is_open(), "load_safetensors: cannot open '{}': {}; check the path", path,
              std::strerror(errno));
  f.seekg(0, std::ios::end);
  const std::streamoff end_pos = f.tellg();
  SMELT_CHECK(end_pos >= 0, "load_safetensors: cannot read the size of '{}'", path);
  const uint64_t file_size = static_cast<uint64_t>(end_pos);
  SMELT_CHECK(file_size >= 8,
              "load_safetensors: '{}' is {} bytes, shorter than the 8-byte header length; the "
              "file is truncated or not a safetensors file",
              path, file_size);
  uint8_t len_bytes[8];
  SMELT_CHECK(read_at(f, 0, len_bytes, 8), "load_safetensors: cannot read '{}'", path);
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | len_bytes[i];
  SMELT_CHECK(header_len <= file_size - 8 && header_len <= kMaxHeaderBytes,
              "load_safetensors: '{}': header length {} does not fit in the {}-byte file (limit "
              "{} bytes); the file is truncated or not a safetensors file",
              path, header_len, file_size, kMaxHeaderBytes);
  std::string header(header_len, '\0');
  SMELT_CHECK(read_at(f, 8, header.data(), header_len), "load_safetensors: cannot read '{}'", path);

  nlohmann::json j;
  try {
    j = nlohmann::json::parse(header);
  } catch (const nlohmann::json::exception& e) {
    detail::throw_error(fmt::format(
        "load_safetensors: '{}': the header is not valid JSON ({}); the file is corrupt or not "
        "a safetensors file",
        path, e.what()));
  }
  SMELT_CHECK(j.is_object(), "load_safetensors: '{}': the header is not a JSON object", path);

  const uint64_t data_start = 8 + header_len;
  const uint64_t data_size = file_size - data_start;
  std::map<std::string, Tensor> out;
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key() == "__metadata__") {
      SMELT_CHECK(it->is_object() || it->is_null(),
                  "load_safetensors: '{}': \"__metadata__\" is not a JSON object", path);
      continue;
    }
    // One tensor at a time through host memory, so the file never sits whole on the host.
    out.emplace(it.key(), read_tensor(f, path, it.key(), *it, data_start, data_size).to(device));
  }
  return out;
}

void save_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  // Validate everything before the file is touched.
  std::vector<Tensor> contiguous;
  contiguous.reserve(tensors.size());
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) {
    nlohmann::json m = nlohmann::json::object();
    for (const auto& [k, v] : metadata) m[k] = v;
    header["__metadata__"] = m;
  }
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    SMELT_CHECK(!name.empty() && name != "__metadata__",
                "save_safetensors: invalid tensor name '{}' (empty names and \"__metadata__\" are "
                "reserved); rename it",
                name);
    SMELT_CHECK(t.defined(), "save_safetensors: tensor '{}' is undefined", name);
    SMELT_CHECK(!t.is_tracer(),
                "save_safetensors: tensor '{}' has no data (it is a tracer inside "
                "smelt::compile); save outside the compiled function",
                name);
    Tensor c = t.contiguous().cpu();  // GPU tensors are read back to the host
    const uint64_t nbytes = static_cast<uint64_t>(c.numel()) * c.element_size();
    header[name] = {{"dtype", code_of(t.dtype())},
                    {"shape", t.sizes()},
                    {"data_offsets", {offset, offset + nbytes}}};
    offset += nbytes;
    contiguous.push_back(c);
  }
  std::string h = header.dump();
  while (h.size() % 8 != 0) h.push_back(' ');  // data section 8-byte aligned, as safetensors does

  const std::string tmp = fmt::format("{}.tmp{}", path, static_cast<long>(::getpid()));
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    SMELT_CHECK(f.is_open(),
                "save_safetensors: cannot write '{}': {}; check the directory exists "
                "and is writable",
                path, std::strerror(errno));
    uint8_t len_bytes[8];
    uint64_t n = h.size();
    for (int i = 0; i < 8; ++i) len_bytes[i] = static_cast<uint8_t>(n >> (8 * i));
    f.write(reinterpret_cast<const char*>(len_bytes), 8);
    f.write(h.data(), static_cast<std::streamsize>(h.size()));
    for (const Tensor& c : contiguous) {
      const uint64_t nbytes = static_cast<uint64_t>(c.numel()) * c.element_size();
      if (nbytes > 0)
        f.write(static_cast<const char*>(c.data_ptr()), static_cast<std::streamsize>(nbytes));
    }
    f.flush();
    if (!f.good()) {
      f.close();
      std::remove(tmp.c_str());
      detail::throw_error(fmt::format("save_safetensors: writing '{}' failed (disk full?)", path));
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    std::remove(tmp.c_str());
    detail::throw_error(
        fmt::format("save_safetensors: cannot write '{}': {}", path, std::strerror(err)));
  }
}

}  // namespace smelt
