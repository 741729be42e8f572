// The on-disk kernel cache (SMELT_CACHE_DIR): warm hits make no compiler run,
// corrupt binaries are detected and rebuilt, the directory is private, a
// missing compiler degrades to eager, and concurrent builds are safe.
#include <dirent.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "compiler/compile_test_util.h"
#include "compiler/runtime/kernel_cache.h"

using namespace smelt;
using smelt::compiler::compiler_invocations;
using smelt_test::close;
using smelt_test::same;
using smelt_test::ScopedEnv;

namespace {
class Cache : public smelt_test::CompilerTest {
 protected:
  void TearDown() override {
    CompilerTest::TearDown();
    std::error_code ec;
    for (auto& d : made_) std::filesystem::remove_all(d, ec);  // the fresh caches of this test
  }
  /// A fresh cache directory, removed after the test.
  std::string fresh(const std::string& tag) {
    made_.push_back(smelt_test::fresh_cache_dir(tag));
    return made_.back();
  }

 private:
  std::vector<std::string> made_;
};

std::vector<std::string> files_with_suffix(const std::string& dir, const std::string& suffix) {
  std::vector<std::string> out;
  DIR* d = ::opendir(dir.c_str());
  if (!d) return out;
  while (dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n.size() > suffix.size() && n.compare(n.size() - suffix.size(), suffix.size(), suffix) == 0)
      out.push_back(dir + "/" + n);
  }
  ::closedir(d);
  return out;
}

// A function no other test compiles (its own constants), so its source is new.
Tensor cache_fn(const Tensor& x, const Tensor& y) { return atan2(x, y) * 0.8125 + cos(y); }
}  // namespace

TEST_F(Cache, WarmCacheMakesNoCompilerRun) {
  ScopedEnv dir("SMELT_CACHE_DIR", fresh("warm"));
  Tensor x = randn({40}), y = randn({40});
  int before = compiler_invocations();
  auto f1 = compile(cache_fn);
  EXPECT_TRUE(close(f1(x, y), cache_fn(x, y), 1e-6));
  EXPECT_EQ(compiler_invocations(), before + 1);
  EXPECT_FALSE(f1.stats().last_cache_hit);

  int warm = compiler_invocations();
  auto f2 = compile(cache_fn);
  EXPECT_TRUE(close(f2(x, y), cache_fn(x, y), 1e-6));
  EXPECT_EQ(compiler_invocations(), warm) << "a warm disk cache needs no compiler";
  EXPECT_TRUE(f2.stats().last_cache_hit);
  EXPECT_EQ(f2.stats().compiles, 1);
}

TEST_F(Cache, DirectoryIsCreatedPrivate) {
  std::string d = fresh("mode");
  ScopedEnv dir("SMELT_CACHE_DIR", d);
  ASSERT_EQ(smelt_test::mode_of(d), -1);
  Tensor x = randn({40}), y = randn({40});
  auto f = compile(cache_fn);
  EXPECT_TRUE(close(f(x, y), cache_fn(x, y), 1e-6));
  EXPECT_EQ(smelt_test::mode_of(d), 0700);
  EXPECT_EQ(files_with_suffix(d, ".so").size(), 1u);
  EXPECT_EQ(files_with_suffix(d, ".cpp").size(), 1u);

  // A group/world-writable existing directory is made private again.
  ::chmod(d.c_str(), 0777);
  auto g = compile(cache_fn);
  EXPECT_TRUE(close(g(x, y), cache_fn(x, y), 1e-6));
  EXPECT_EQ(smelt_test::mode_of(d) & 0022, 0);
}

TEST_F(Cache, TruncatedBinaryIsRebuilt) {
  std::string d = fresh("trunc");
  ScopedEnv dir("SMELT_CACHE_DIR", d);
  Tensor x = randn({40}), y = randn({40});
  {
    auto f = compile(cache_fn);
    EXPECT_TRUE(close(f(x, y), cache_fn(x, y), 1e-6));
  }
  auto so = files_with_suffix(d, ".so");
  ASSERT_EQ(so.size(), 1u);
  ASSERT_EQ(::truncate(so[0].c_str(), 100), 0);
  int before = compiler_invocations();
  auto g = compile(cache_fn);
  EXPECT_TRUE(close(g(x, y), cache_fn(x, y), 1e-6));
  EXPECT_EQ(compiler_invocations(), before + 1) << "the corrupt binary is rebuilt";
  EXPECT_FALSE(g.stats().last_cache_hit);
  // The rebuilt entry is a good one: the next compile hits.
  auto h = compile(cache_fn);
  EXPECT_TRUE(close(h(x, y), cache_fn(x, y), 1e-6));
  EXPECT_TRUE(h.stats().last_cache_hit);
}

TEST_F(Cache, OverwrittenBytesAreDetected) {
  std::string d = fresh("bytes");
  ScopedEnv dir("SMELT_CACHE_DIR", d);
  Tensor x = randn({40}), y = randn({40});
  {
    auto f = compile(cache_fn);
    EXPECT_TRUE(close(f(x, y), cache_fn(x, y), 1e-6));
  }
  auto so = files_with_suffix(d, ".so");
  ASSERT_EQ(so.size(), 1u);
  {
    // Same size, garbage in the middle (as a partial write or bit rot would leave it).
    std::fstream io(so[0], std::ios::in | std::ios::out | std::ios::binary);
    ASSERT_TRUE(io);
    io.seekp(0, std::ios::end);
    auto size = static_cast<std::streamoff>(io.tellp());
    ASSERT_GT(size, 2000);
    io.seekp(size / 2);
    std::string junk(512, '\xCC');
    io.write(junk.data(), static_cast<std::streamsize>(junk.size()));
  }
  int before = compiler_invocations();
  auto g = compile(cache_fn);
  EXPECT_TRUE(close(g(x, y), cache_fn(x, y), 1e-6));
  EXPECT_EQ(compiler_invocations(), before + 1);
  EXPECT_FALSE(g.stats().last_cache_hit);
}

TEST_F(Cache, MissingCompilerFallsBackToEager) {
  ScopedEnv dir("SMELT_CACHE_DIR", fresh("nocxx"));
  ScopedEnv cxx("SMELT_CXX", std::string("/nonexistent/g++"));
  Tensor x = randn({40}), y = randn({40});
  auto f = compile(cache_fn);
  testing::internal::CaptureStderr();
  Tensor r;
  try {
    r = f(x, y);
  } catch (const Error& e) {
    // A clear error is acceptable too; it must name the compiler.
    std::string err = testing::internal::GetCapturedStderr();
    EXPECT_NE(std::string(e.what()).find("/nonexistent/g++"), std::string::npos) << e.what();
    return;
  }
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_TRUE(same(r, cache_fn(x, y)));
  EXPECT_GE(f.stats().eager_calls, 1);
  EXPECT_NE(err.find("warning"), std::string::npos) << err;
  EXPECT_NE(err.find("/nonexistent/g++"), std::string::npos) << err;
  // Later calls keep working (eagerly).
  EXPECT_TRUE(same(f(x, y), cache_fn(x, y)));
}

TEST_F(Cache, TwoThreadsTwoCompiledObjects) {
  ScopedEnv dir("SMELT_CACHE_DIR", fresh("threads"));
  auto fn = [](const Tensor& x) { return softmax(x * 1.25, 1) + x; };
  Tensor x = randn({16, 33});
  Tensor ref = fn(x);
  auto f1 = compile(fn);
  auto f2 = compile(fn);
  bool ok1 = true, ok2 = true;
  auto work = [&x, &ref](auto& f, bool& ok) {
    try {
      for (int i = 0; i < 5; ++i) ok = ok && static_cast<bool>(close(f(x), ref, 1e-6));
    } catch (...) {
      ok = false;
    }
  };
  std::thread t1([&] { work(f1, ok1); });
  std::thread t2([&] { work(f2, ok2); });
  t1.join();
  t2.join();
  EXPECT_TRUE(ok1);
  EXPECT_TRUE(ok2);
  EXPECT_EQ(f1.stats().compiles, 1);
  EXPECT_EQ(f2.stats().compiles, 1);
  EXPECT_EQ(f1.stats().eager_calls + f2.stats().eager_calls, 0);
}
