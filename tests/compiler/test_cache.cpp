// The on-disk kernel cache (SMELT_CACHE_DIR): warm hits make no compiler run,
// corrupt binaries are detected and rebuilt, the directory is private and
// smelt never changes the mode of one it did not create, a missing or broken
// compiler degrades to eager, a bad SMELT_COMPILE_TIMEOUT is an error, and
// concurrent builds are safe.
#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
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
  // The kernel library, the math object it links and the precompiled
  // preamble it includes (both once per cache).
  EXPECT_EQ(compiler_invocations(), before + 3);
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
  EXPECT_EQ(files_with_suffix(d, ".o").size(), 1u);  // the math functions, linked into it
  EXPECT_EQ(files_with_suffix(d, ".cpp").size(), 2u);
  // The preamble every unit includes, and its precompiled form beside it.
  EXPECT_EQ(files_with_suffix(d, ".h").size(), 1u);
  EXPECT_EQ(files_with_suffix(d, ".h.gch").size(), 1u);
}

// Every kernel library links the math object and includes the precompiled
// preamble, both built once per cache: a second, different function costs one
// compiler run, not three.
TEST_F(Cache, MathObjectIsBuiltOncePerCache) {
  std::string d = fresh("mathobj");
  ScopedEnv dir("SMELT_CACHE_DIR", d);
  Tensor x = randn({40}), y = randn({40});
  int before = compiler_invocations();
  auto f1 = compile(cache_fn);
  f1(x, y);
  auto g = [](const Tensor& x) { return exp(x) * 0.40625; };  // a source of its own
  auto f2 = compile(g);
  EXPECT_TRUE(same(f2(x), g(x)));
  EXPECT_EQ(compiler_invocations(), before + 4);
  EXPECT_EQ(files_with_suffix(d, ".o").size(), 1u);
  EXPECT_EQ(files_with_suffix(d, ".so").size(), 2u);
  EXPECT_EQ(files_with_suffix(d, ".h.gch").size(), 1u);
}

// A unit compiled through the precompiled preamble is the unit compiled whole:
// a cache whose preamble header was removed (or never built) still builds and
// gives the same values.
TEST_F(Cache, UnitsBuildWithAndWithoutThePrecompiledPreamble) {
  Tensor x = randn({40}), y = randn({40});
  auto g = [](const Tensor& x, const Tensor& y) { return atan2(x, y) * 0.59375 - tanh(x); };
  std::string d1 = fresh("pch1");
  Tensor with_pch;
  {
    ScopedEnv dir("SMELT_CACHE_DIR", d1);
    auto f = compile(g);
    with_pch = f(x, y);
  }
  ASSERT_EQ(files_with_suffix(d1, ".h.gch").size(), 1u);
  // Another cache whose preamble header cannot be written: a directory where it goes.
  std::string d2 = fresh("pch2");
  ::mkdir(d2.c_str(), 0700);
  for (const std::string& h : files_with_suffix(d1, ".h")) {
    const std::string name = h.substr(h.rfind('/'));
    ASSERT_EQ(::mkdir((d2 + name).c_str(), 0700), 0);
    ASSERT_EQ(::mkdir((d2 + name + ".gch").c_str(), 0700), 0);
  }
  ScopedEnv dir("SMELT_CACHE_DIR", d2);
  auto f = compile(g);
  EXPECT_TRUE(same(f(x, y), with_pch));
  EXPECT_TRUE(close(with_pch, g(x, y), 1e-6));
  EXPECT_EQ(files_with_suffix(d2, ".so").size(), 1u);
}

TEST_F(Cache, MissingParentsAreCreated) {
  std::string top = fresh("parents");
  std::string d = top + "/a/b/kernels";
  ScopedEnv dir("SMELT_CACHE_DIR", d);
  Tensor x = randn({40}), y = randn({40});
  auto f = compile(cache_fn);
  EXPECT_TRUE(close(f(x, y), cache_fn(x, y), 1e-6));
  EXPECT_EQ(f.stats().eager_calls, 0);
  EXPECT_EQ(smelt_test::mode_of(top + "/a"), 0700);
  EXPECT_EQ(smelt_test::mode_of(d), 0700);
  EXPECT_EQ(files_with_suffix(d, ".so").size(), 1u);
}

// A shared sticky directory (as /tmp) keeps its mode; the cache goes into a
// private subdirectory smelt-<uid> that smelt creates.
TEST_F(Cache, SharedStickyDirectoryIsNeverChmodded) {
  std::string d = fresh("sticky");
  ASSERT_EQ(::mkdir(d.c_str(), 0700), 0);
  ASSERT_EQ(::chmod(d.c_str(), 01777), 0);
  ScopedEnv dir("SMELT_CACHE_DIR", d);
  Tensor x = randn({40}), y = randn({40});
  auto f = compile(cache_fn);
  EXPECT_TRUE(close(f(x, y), cache_fn(x, y), 1e-6));
  EXPECT_EQ(f.stats().eager_calls, 0);
  struct stat st {};
  ASSERT_EQ(::stat(d.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 01777u)
      << "smelt changed the mode of a directory it did not create";
  std::string sub = d + "/smelt-" + std::to_string(::geteuid());
  EXPECT_EQ(smelt_test::mode_of(sub), 0700);
  EXPECT_EQ(files_with_suffix(sub, ".so").size(), 1u);
  EXPECT_EQ(compiler::cache_dir(), sub);
}

// Writable by others without the sticky bit: refused (warning, eager), not chmod-ed.
TEST_F(Cache, WorldWritableDirectoryIsRefusedNotChmodded) {
  std::string d = fresh("open");
  ASSERT_EQ(::mkdir(d.c_str(), 0700), 0);
  ASSERT_EQ(::chmod(d.c_str(), 0777), 0);
  ScopedEnv dir("SMELT_CACHE_DIR", d);
  Tensor x = randn({40}), y = randn({40});
  auto f = compile(cache_fn);
  testing::internal::CaptureStderr();
  Tensor r = f(x, y);
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_TRUE(same(r, cache_fn(x, y)));
  EXPECT_EQ(f.stats().eager_calls, 1);
  EXPECT_NE(err.find("smelt::compile warning: smelt::compile: the kernel cache directory " + d +
                     " is writable by other users and has no sticky bit"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("set SMELT_CACHE_DIR to a directory of your own"), std::string::npos) << err;
  EXPECT_EQ(smelt_test::mode_of(d), 0777);
  EXPECT_TRUE(files_with_suffix(d, ".so").empty());
}

TEST_F(Cache, FileAsCacheDirIsNotADirectory) {
  std::string f_path = fresh("file");
  { std::ofstream(f_path) << "not a directory"; }
  ScopedEnv dir("SMELT_CACHE_DIR", f_path);
  try {
    compiler::cache_dir();
    FAIL() << "a file was accepted as the cache directory";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "smelt::compile: the kernel cache directory " + f_path +
                  " is not a directory; set SMELT_CACHE_DIR to a directory of your own");
  }
  Tensor x = randn({40}), y = randn({40});
  auto f = compile(cache_fn);
  testing::internal::CaptureStderr();
  Tensor r = f(x, y);
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_TRUE(same(r, cache_fn(x, y)));
  EXPECT_NE(err.find("is not a directory"), std::string::npos) << err;
}

// A "compiler" that succeeds without writing anything: warning, eager, no stray files.
TEST_F(Cache, CompilerWithoutOutputFallsBackToEager) {
  std::string d = fresh("true");
  ScopedEnv dir("SMELT_CACHE_DIR", d);
  ScopedEnv cxx("SMELT_CXX", std::string("/bin/true"));
  Tensor x = randn({40}), y = randn({40});
  auto f = compile(cache_fn);
  testing::internal::CaptureStderr();
  Tensor r = f(x, y);
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_TRUE(same(r, cache_fn(x, y)));
  EXPECT_EQ(f.stats().eager_calls, 1);
  EXPECT_NE(err.find("smelt::compile warning: smelt::compile: the C++ compiler '/bin/true' exited "
                     "successfully but wrote no output"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("this function runs eagerly"), std::string::npos) << err;
  EXPECT_TRUE(files_with_suffix(d, ".so").empty());
  std::vector<std::string> stray;
  for (auto& e : std::filesystem::directory_iterator(d))
    if (e.path().filename().string().find(".tmp.") != std::string::npos)
      stray.push_back(e.path().string());
  EXPECT_TRUE(stray.empty()) << stray.front();
  EXPECT_TRUE(same(f(x, y), cache_fn(x, y)));  // later calls keep working
}

TEST_F(Cache, InvalidCompileTimeoutIsAnError) {
  ScopedEnv dir("SMELT_CACHE_DIR", fresh("timeout"));
  Tensor x = randn({40}), y = randn({40});
  for (std::string bad : {"abc", "0", "-5", "10s", "1e9", "99999999999999999999"}) {
    ScopedEnv t("SMELT_COMPILE_TIMEOUT", bad);
    auto f = compile(cache_fn);
    try {
      f(x, y);
      ADD_FAILURE() << "SMELT_COMPILE_TIMEOUT=" << bad << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()),
                "smelt::compile: SMELT_COMPILE_TIMEOUT='" + bad +
                    "' is not a number of seconds; set it to a whole number from 1 to 86400 (or "
                    "unset it for the default, 300)");
    }
  }
  ScopedEnv ok("SMELT_COMPILE_TIMEOUT", std::string("120"));
  auto f = compile(cache_fn);
  EXPECT_TRUE(close(f(x, y), cache_fn(x, y), 1e-6));
  EXPECT_EQ(f.stats().eager_calls, 0);
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
