// safetensors round trips and every class of corrupt file.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/tensor_impl.h"
#include "smelt/io.h"

using namespace smelt;

namespace {

std::string temp_path(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() /
             ("smelt_test_io_" + std::to_string(static_cast<long>(::getpid())));
  std::filesystem::create_directories(dir);
  return (dir / name).string();
}

// A contiguous tensor whose bytes are a deterministic pattern valid for its dtype.
Tensor patterned(const Shape& shape, DType dtype) {
  Tensor t = detail::make_empty(shape, dtype, Device());
  auto* p = static_cast<uint8_t*>(t.data_ptr());
  size_t n = static_cast<size_t>(t.numel()) * itemsize(dtype);
  for (size_t i = 0; i < n; ++i)
    p[i] =
        dtype == DType::Bool ? static_cast<uint8_t>(i % 3 == 0) : static_cast<uint8_t>(i * 37 + 11);
  return t;
}

std::vector<uint8_t> bytes_of(const Tensor& t) {
  const auto* p = static_cast<const uint8_t*>(t.data_ptr());
  return std::vector<uint8_t>(p, p + t.numel() * t.element_size());
}

void write_raw(const std::string& path, const std::string& header, const std::string& data,
               uint64_t header_len_override = 0) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  uint64_t n = header_len_override ? header_len_override : header.size();
  for (int i = 0; i < 8; ++i) f.put(static_cast<char>(n >> (8 * i)));
  f << header << data;
}

// Runs load_safetensors on `path`, expecting Error whose message contains every `needle`.
void expect_load_error(const std::string& path, std::initializer_list<std::string> needles) {
  try {
    load_safetensors(path);
    ADD_FAILURE() << "no error for " << path;
  } catch (const Error& e) {
    std::string msg = e.what();
    for (const auto& n : needles) EXPECT_NE(msg.find(n), std::string::npos) << msg;
  }
}

}  // namespace

TEST(IO, RoundTripEveryDType) {
  const DType all[] = {DType::Bool,    DType::UInt8,  DType::Int8,    DType::Int16,
                       DType::Int32,   DType::Int64,  DType::Float16, DType::BFloat16,
                       DType::Float32, DType::Float64};
  std::map<std::string, Tensor> in;
  for (DType t : all) in[std::string(dtype_name(t))] = patterned({3, 5}, t);
  in["scalar"] = patterned({}, DType::Float32);
  in["empty"] = patterned({0, 4}, DType::Int32);
  std::string path = temp_path("every_dtype.safetensors");
  save_safetensors(path, in, {{"format", "pt"}});
  auto out = load_safetensors(path);
  ASSERT_EQ(out.size(), in.size());
  for (const auto& [name, t] : in) {
    ASSERT_TRUE(out.count(name)) << name;
    const Tensor& u = out[name];
    EXPECT_EQ(u.dtype(), t.dtype()) << name;
    EXPECT_EQ(u.sizes(), t.sizes()) << name;
    EXPECT_TRUE(u.is_contiguous()) << name;
    if (t.numel() > 0) {
      EXPECT_EQ(bytes_of(u), bytes_of(t)) << name;
    }
  }
}

TEST(IO, NonContiguousSaveWritesLogicalOrder) {
  Tensor base = detail::make_empty({2, 3}, DType::Float32, Device());
  float* p = static_cast<float*>(base.data_ptr());
  for (int i = 0; i < 6; ++i) p[i] = static_cast<float>(i);
  // transpose: [3, 2] with strides [1, 3]
  Tensor tr = detail::make_view(base, {3, 2}, {1, 3}, 0);
  // a strided slice: column 1 of base -> [2] with stride 3, offset 1
  Tensor col = detail::make_view(base, {2}, {3}, 1);
  std::string path = temp_path("strided.safetensors");
  save_safetensors(path, {{"tr", tr}, {"col", col}});
  auto out = load_safetensors(path);
  const float* q = static_cast<const float*>(out["tr"].data_ptr());
  const float want_tr[] = {0, 3, 1, 4, 2, 5};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(q[i], want_tr[i]);
  const float* c = static_cast<const float*>(out["col"].data_ptr());
  EXPECT_EQ(c[0], 1.0f);
  EXPECT_EQ(c[1], 4.0f);
  EXPECT_EQ(out["col"].sizes(), Shape({2}));
}

TEST(IO, LoadsPythonStyleHeader) {
  // As written by the Python library: padded header, metadata, offsets in any order.
  std::string path = temp_path("py.safetensors");
  std::string header =
      R"({"__metadata__":{"format":"pt"},"b":{"dtype":"I16","shape":[2],"data_offsets":[0,4]},)"
      R"("a":{"dtype":"U8","shape":[],"data_offsets":[4,5]}})";
  header += "   ";
  std::string data = {'\x01', '\x00', '\xff', '\xff', '\x07'};
  write_raw(path, header, data);
  auto out = load_safetensors(path);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out["b"].dtype(), DType::Int16);
  EXPECT_EQ(static_cast<const int16_t*>(out["b"].data_ptr())[0], 1);
  EXPECT_EQ(static_cast<const int16_t*>(out["b"].data_ptr())[1], -1);
  EXPECT_EQ(out["a"].dim(), 0);
  EXPECT_EQ(*static_cast<const uint8_t*>(out["a"].data_ptr()), 7);
}

TEST(IO, MissingFile) {
  std::string path = temp_path("does_not_exist.safetensors");
  expect_load_error(path, {"load_safetensors", path});
}

TEST(IO, TruncatedFiles) {
  std::string path = temp_path("short.safetensors");
  {
    std::ofstream f(path, std::ios::binary);
    f << "abc";
  }
  expect_load_error(path, {"load_safetensors", path, "truncated"});

  // header length larger than the file
  write_raw(path, R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", "", 1000);
  expect_load_error(path, {"header length", path});

  // header length absurdly large (would overflow a naive 8 + n)
  write_raw(path, "{}", "", ~0ull);
  expect_load_error(path, {"header length", path});

  // data section shorter than the tensor
  write_raw(path, R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", "12345678");
  expect_load_error(path, {path, "'a'"});
}

TEST(IO, CorruptHeaders) {
  std::string path = temp_path("corrupt.safetensors");
  write_raw(path, "{not json", "");
  expect_load_error(path, {"not valid JSON", path});

  write_raw(path, "[1, 2]", "");
  expect_load_error(path, {"not a JSON object"});

  write_raw(path, R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[4,0]}})", "12345678");
  expect_load_error(path, {"'w'", "data_offsets"});

  write_raw(path, R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", "12345678");
  expect_load_error(path, {"'w'", "needs 8"});

  write_raw(path, R"({"w":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", "12345678");
  expect_load_error(path, {"'w'", "shape"});

  write_raw(path,
            R"({"w":{"dtype":"F32","shape":[4294967296,4294967296,16],"data_offsets":[0,8]}})",
            "12345678");
  expect_load_error(path, {"'w'", "shape"});

  write_raw(path, R"({"w":{"dtype":"F32","data_offsets":[0,8]}})", "12345678");
  expect_load_error(path, {"'w'", "shape"});

  write_raw(path, R"({"w":7})", "");
  expect_load_error(path, {"'w'"});

  write_raw(path, R"({"m":{"dtype":"BOOL","shape":[2],"data_offsets":[0,2]}})",
            std::string("\x01\x02", 2));
  expect_load_error(path, {"'m'", "BOOL"});
}

TEST(IO, UnsupportedDTypeNamesFileAndTensor) {
  std::string path = temp_path("c64.safetensors");
  write_raw(path, R"({"z":{"dtype":"C64","shape":[1],"data_offsets":[0,8]}})", "12345678");
  expect_load_error(path, {path, "'z'", "C64"});
}

TEST(IO, SaveErrors) {
  Tensor t = patterned({2}, DType::Float32);
  EXPECT_THROW(save_safetensors("/nonexistent_dir_smelt/x.safetensors", {{"t", t}}), Error);
  EXPECT_THROW(save_safetensors(temp_path("bad.safetensors"), {{"__metadata__", t}}), Error);
  EXPECT_THROW(save_safetensors(temp_path("bad.safetensors"), {{"u", Tensor()}}), Error);
}
