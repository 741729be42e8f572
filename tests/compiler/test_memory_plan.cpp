// The memory plan of a compiled graph's run (compiler/runtime/executor.h):
// with `release_early`, large intermediates get memory of their own, freed
// after their last reader, where that lowers the run's peak; small ones and
// mode reduce-overhead's plans keep one arena; the arguments each step reads
// last, for a run that owns them.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <utility>

#include "compiler/codegen/generate.h"
#include "compiler/codegen/printer.h"
#include "compiler/compile_test_util.h"
#include "compiler/runtime/executor.h"
#include "smelt/smelt.h"

using namespace smelt;
using namespace smelt::compiler;
using smelt_test::schedule_of;
using smelt_test::trace_graph;

namespace {
class MemoryPlanTest : public smelt_test::CompilerTest {};

/// Three chained products: y1 = x @ x, y2 = y1 @ x, the result y2 @ x.
Tensor chain(const Tensor& x) { return matmul(matmul(matmul(x, x), x), x); }

int own_count(const MemoryPlan& mp) {
  int n = 0;
  for (bool o : mp.own) n += o ? 1 : 0;
  return n;
}
}  // namespace

TEST_F(MemoryPlanTest, LargeIntermediatesAreFreedAfterTheirLastReader) {
  constexpr int64_t kBytes = 256 * 256 * 4;  // each [256, 256] float32 buffer
  static_assert(kBytes >= kOwnMemoryBytes);
  Graph after;
  const Schedule s = schedule_of(trace_graph(chain, randn({256, 256})), {}, {}, &after);
  ASSERT_EQ(s.steps.size(), 3u);
  // One arena: y1 and y2 are alive together at the second step (its input and
  // output), so the arena holds both for the whole run, and the result comes
  // on top.
  const MemoryPlan arena = plan_memory(after, s);
  EXPECT_EQ(own_count(arena), 0);
  EXPECT_EQ(arena.arena_bytes, 2 * kBytes) << arena.str(after);
  EXPECT_EQ(arena.peak_bytes, 3 * kBytes);
  EXPECT_EQ(arena.peak_bytes_one_arena, arena.peak_bytes);
  // Memory of their own: y1 is freed after the second step, before the result
  // is allocated; at most two buffers are alive at once.
  const MemoryPlan early = plan_memory(after, s, /*release_early=*/true);
  EXPECT_EQ(own_count(early), 2) << early.str(after);
  EXPECT_EQ(early.arena_bytes, 0);
  EXPECT_EQ(early.peak_bytes, 2 * kBytes);
  EXPECT_EQ(early.peak_bytes_one_arena, 3 * kBytes);
  ASSERT_EQ(early.release_after.size(), 3u);
  EXPECT_EQ(early.release_after[0].size(), 0u);
  ASSERT_EQ(early.release_after[1].size(), 1u);  // y1, read last by the second product
  EXPECT_EQ(early.release_after[1][0], s.steps[0].writes[0]);
  ASSERT_EQ(early.release_after[2].size(), 1u);  // y2
  EXPECT_EQ(early.release_after[2][0], s.steps[1].writes[0]);
  EXPECT_NE(early.str(after).find("memory of its own, freed after step 1"), std::string::npos)
      << early.str(after);
  // The argument x is read by every product: the last one is done with it.
  EXPECT_EQ(early.inputs_done_after[2], std::vector<int>{0});
  EXPECT_TRUE(early.inputs_done_after[0].empty());
}

TEST_F(MemoryPlanTest, SmallIntermediatesStayInTheArena) {
  Graph after;
  const Schedule s = schedule_of(trace_graph(chain, randn({16, 16})), {}, {}, &after);
  const MemoryPlan early = plan_memory(after, s, /*release_early=*/true);
  EXPECT_EQ(own_count(early), 0) << early.str(after);
  EXPECT_EQ(early.arena_bytes, 2 * 16 * 16 * 4);
}

TEST_F(MemoryPlanTest, ArgumentsAResultNeedsAreKept) {
  // x is returned as it is: a run that owns its arguments keeps it to the end.
  Graph after;
  const Schedule s = schedule_of(
      trace_graph([](const Tensor& x, const Tensor& y) { return std::make_tuple(x, matmul(x, y)); },
                  randn({256, 256}), randn({256, 256})),
      {}, {}, &after);
  const MemoryPlan mp = plan_memory(after, s, true);
  ASSERT_FALSE(mp.inputs_done_after.empty());
  for (const auto& done : mp.inputs_done_after)
    for (int a : done) EXPECT_EQ(a, 1) << "only y is dropped early";
  EXPECT_EQ(mp.inputs_done_after.back(), std::vector<int>{1});
}

TEST_F(MemoryPlanTest, OneArenaHoldsWhatIsAliveAtOnceNotEveryHoleLeftBehind) {
  // y1 = x @ w1 [64, 64], y2 = y1 @ w2 [64, 128], y3 = y2 @ w3 [64, 192], the
  // result y3 @ w4. At most two intermediates are alive together (a step's
  // input and output): y2 and y3 at the third step, 32 + 48 KiB. Placed in
  // step order into freed blocks, y3 found only y1's 16 KiB hole free and
  // went on top (96 KiB); largest first, y1 reuses y3's memory.
  Graph after;
  const Schedule s = schedule_of(
      trace_graph(
          [](const Tensor& x, const Tensor& w1, const Tensor& w2, const Tensor& w3,
             const Tensor& w4) { return matmul(matmul(matmul(matmul(x, w1), w2), w3), w4); },
          randn({64, 64}), randn({64, 64}), randn({64, 128}), randn({128, 192}), randn({192, 8})),
      {}, {}, &after);
  ASSERT_EQ(s.steps.size(), 4u);
  const MemoryPlan mp = plan_memory(after, s);
  EXPECT_EQ(own_count(mp), 0);
  EXPECT_EQ(mp.arena_bytes, (64 * 128 + 64 * 192) * 4) << mp.str(after);
  EXPECT_EQ(mp.reused, 1) << mp.str(after);
  // Buffers alive at the same step never share memory.
  const int y1 = s.steps[0].writes[0], y2 = s.steps[1].writes[0], y3 = s.steps[2].writes[0];
  auto apart = [&](int a, int b) {
    const int64_t a0 = mp.offset[a], a1 = a0 + after.buffers[a].extent * 4;
    const int64_t b0 = mp.offset[b], b1 = b0 + after.buffers[b].extent * 4;
    return a1 <= b0 || b1 <= a0;
  };
  EXPECT_TRUE(apart(y1, y2));
  EXPECT_TRUE(apart(y2, y3));
  EXPECT_FALSE(apart(y1, y3)) << mp.str(after);
  // Compiled, the chain gives eager's values.
  const Tensor x = randn({64, 64}), w1 = randn({64, 64}), w2 = randn({64, 128}) * 0.1,
               w3 = randn({128, 192}) * 0.1, w4 = randn({192, 8});
  auto f = [](const Tensor& x, const Tensor& w1, const Tensor& w2, const Tensor& w3,
              const Tensor& w4) { return matmul(matmul(matmul(matmul(x, w1), w2), w3), w4); };
  CompileOptions ro;
  ro.mode = "reduce-overhead";  // one arena on every device
  auto cf = compile(f, ro);
  for (int call = 0; call < 2; ++call)
    smelt_test::expect_close(smelt_test::vals(cf(x, w1, w2, w3, w4)),
                             smelt_test::vals(f(x, w1, w2, w3, w4)), 1e-5);
}

TEST_F(MemoryPlanTest, BuffersAliveTogetherNeverShareBytesInRandomSchedules) {
  // Random schedules (steps writing several buffers, buffers written by
  // several steps or never read, steps reading what they write, escaping
  // results), both plans: any two arena buffers whose lifetimes (first step
  // touching one to the last, both included) overlap take disjoint bytes, at
  // 64-byte-aligned offsets inside the arena.
  std::mt19937 gen(1);
  int checked = 0;
  for (int trial = 0; trial < 500; ++trial) {
    Graph g;
    Schedule s;
    const int nin = 2, nbuf = 3 + static_cast<int>(gen() % 30);
    const int nsteps = 1 + static_cast<int>(gen() % 25);
    for (int i = 0; i < nbuf; ++i) {
      Buffer b;
      b.kind = i < nin ? BufferKind::Input : BufferKind::Node;
      b.input_index = i < nin ? i : -1;
      b.extent = 1 + static_cast<int64_t>(gen() % 300);
      b.sizes = {b.extent};
      g.add_buffer(std::move(b));  // (a copy: GCC 13's false -Warray-bounds on the sizes vector)
    }
    s.steps.resize(static_cast<size_t>(nsteps));
    std::vector<bool> written(static_cast<size_t>(nbuf), false);
    for (Step& st : s.steps) {
      for (int k = 1 + static_cast<int>(gen() % 3); k > 0; --k)
        st.writes.push_back(nin + static_cast<int>(gen() % (nbuf - nin)));
      for (int k = static_cast<int>(gen() % 4); k > 0; --k) {
        const int b = static_cast<int>(gen() % nbuf);
        if (b < nin || written[static_cast<size_t>(b)]) st.reads.push_back(b);
      }
      for (int b : st.writes) written[static_cast<size_t>(b)] = true;
    }
    s.materialized.assign(static_cast<size_t>(nbuf), true);
    if (gen() % 2) {
      Operand o;
      o.buf = nin + static_cast<int>(gen() % (nbuf - nin));
      o.sizes = {1};
      o.strides = {1};
      g.outputs.push_back(o);
    }
    const MemoryPlan mp = plan_memory(g, s, gen() % 2 == 1);
    std::vector<int> first(static_cast<size_t>(nbuf), -1), last(static_cast<size_t>(nbuf), -1);
    for (int i = 0; i < nsteps; ++i) {
      std::vector<int> touched = s.steps[static_cast<size_t>(i)].reads;
      for (int b : s.steps[static_cast<size_t>(i)].writes) touched.push_back(b);
      for (int b : touched) {
        if (first[static_cast<size_t>(b)] < 0) first[static_cast<size_t>(b)] = i;
        last[static_cast<size_t>(b)] = i;
      }
    }
    for (int a = 0; a < nbuf; ++a) {
      const int64_t oa = mp.offset[static_cast<size_t>(a)];
      if (oa < 0) continue;
      const int64_t ea = oa + g.buffers[static_cast<size_t>(a)].extent * 4;
      EXPECT_EQ(oa % 64, 0);
      EXPECT_LE(ea, mp.arena_bytes);
      for (int b = a + 1; b < nbuf; ++b) {
        const int64_t ob = mp.offset[static_cast<size_t>(b)];
        if (ob < 0) continue;
        const int64_t eb = ob + g.buffers[static_cast<size_t>(b)].extent * 4;
        const bool together = first[static_cast<size_t>(a)] <= last[static_cast<size_t>(b)] &&
                              first[static_cast<size_t>(b)] <= last[static_cast<size_t>(a)];
        EXPECT_FALSE(together && oa < eb && ob < ea)
            << "trial " << trial << ": buffers " << a << " and " << b << "\n"
            << mp.str(g);
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 10000);  // the schedules do put many buffers in the arena
}

namespace {
/// y1 = x @ w1, then a pointwise kernel computes `mid` from y1 (y1 read
/// there last), and the result is mid @ w2.
template <class Mid>
auto gemm_pointwise_gemm(Mid mid) {
  return [mid](const Tensor& x, const Tensor& w1, const Tensor& w2) {
    return matmul(mid(matmul(x, w1)), w2);
  };
}
}  // namespace

TEST_F(MemoryPlanTest, APointwiseKernelWritesIntoTheMemoryOfTheBufferItReadsLast) {
  // exp(y1) * 2 is one pointwise kernel reading y1 for the last time: its
  // result takes y1's memory (Inductor's in-place reuse), so the arena holds
  // one [64, 64] buffer instead of two.
  const auto f = gemm_pointwise_gemm([](const Tensor& y) { return exp(y) * 2.0; });
  const Tensor x = randn({64, 64}) * 0.1, w1 = randn({64, 64}) * 0.1, w2 = randn({64, 8});
  Graph after;
  const Schedule s = schedule_of(trace_graph(f, x, w1, w2), {}, {}, &after);
  ASSERT_EQ(s.steps.size(), 3u);
  const int y1 = s.steps[0].writes[0], e = s.steps[1].writes[0];
  EXPECT_EQ(s.steps[1].kernel_kind, "poi");
  EXPECT_EQ(s.steps[1].in_place, (std::vector<std::pair<int, int>>{{y1, e}}));
  const MemoryPlan mp = plan_memory(after, s);
  EXPECT_EQ(mp.in_place[e], y1);
  EXPECT_EQ(mp.arena_bytes, 64 * 64 * 4) << mp.str(after);
  EXPECT_NE(mp.str(after).find("written into the memory of"), std::string::npos);
  // The result's pointer is declared from the read buffer's (one object to
  // the C++ compiler, which still vectorizes); the read one is not const.
  Schedule built = s;
  generate_kernels(after, built, CppDialect());
  const std::string& src = built.steps[1].source;
  const std::string in = fmt::format("in_{}", after.buffers[y1].name());
  EXPECT_NE(src.find(fmt::format("float* __restrict__ {} = static_cast<float*>(args[0]);", in)),
            std::string::npos)
      << src;
  EXPECT_NE(src.find(fmt::format("= reinterpret_cast<float*>({});", in)), std::string::npos) << src;
  // Large buffers with memory of their own (exp after each of two GEMMs,
  // then a third GEMM): each exp takes its GEMM's memory, which is freed
  // after the exp's last reader, so at most two [256, 256] buffers are alive
  // (one arena would hold two for the whole run, and the result on top).
  const auto chain = [](const Tensor& x, const Tensor& w1, const Tensor& w2, const Tensor& w3) {
    return matmul(exp(matmul(exp(matmul(x, w1)), w2)), w3);
  };
  const Tensor bx = randn({256, 256}) * 0.05, bw1 = randn({256, 256}) * 0.05,
               bw2 = randn({256, 256}) * 0.05, bw3 = randn({256, 256}) * 0.05;
  const Schedule big = schedule_of(trace_graph(chain, bx, bw1, bw2, bw3), {}, {}, &after);
  ASSERT_EQ(big.steps.size(), 5u);
  const int a = big.steps[0].writes[0], ea = big.steps[1].writes[0];
  const int b = big.steps[2].writes[0], eb = big.steps[3].writes[0];
  const MemoryPlan early = plan_memory(after, big, /*release_early=*/true);
  constexpr int64_t kBig = 256 * 256 * 4;
  EXPECT_EQ(early.in_place[ea], a) << early.str(after);
  EXPECT_EQ(early.in_place[eb], b);
  EXPECT_TRUE(early.own[a] && early.own[b]) << early.str(after);
  EXPECT_FALSE(early.own[ea] || early.own[eb]);
  EXPECT_EQ(early.release_after[2], std::vector<int>{a}) << early.str(after);
  EXPECT_EQ(early.release_after[4], std::vector<int>{b});
  EXPECT_TRUE(early.release_after[1].empty() && early.release_after[3].empty());
  EXPECT_EQ(early.peak_bytes, 2 * kBig) << early.str(after);
  EXPECT_EQ(early.peak_bytes_one_arena, 3 * kBig);
  smelt_test::expect_close(smelt_test::vals(compile(chain)(bx, bw1, bw2, bw3)),
                           smelt_test::vals(chain(bx, bw1, bw2, bw3)), 1e-5);
  // Compiled (one arena, and large buffers with memory of their own), eager's values.
  for (const char* mode : {"default", "reduce-overhead"}) {
    CompileOptions o;
    o.mode = mode;
    auto cf = compile(f, o);
    for (int call = 0; call < 2; ++call)
      smelt_test::expect_close(smelt_test::vals(cf(x, w1, w2)), smelt_test::vals(f(x, w1, w2)),
                               1e-5);
    const Tensor bx = randn({256, 256}) * 0.05, bw1 = randn({256, 256}) * 0.05,
                 bw2 = randn({256, 8});
    smelt_test::expect_close(smelt_test::vals(cf(bx, bw1, bw2)), smelt_test::vals(f(bx, bw1, bw2)),
                             1e-5);
  }
}

TEST_F(MemoryPlanTest, NoInPlaceWriteWhereTheKernelReadsElsewhereOrTheBufferLivesOn) {
  const Tensor x = randn({64, 64}) * 0.1, w1 = randn({64, 64}) * 0.1, w2 = randn({64, 8});
  const auto in_place_writes = [&](auto f) {
    const Schedule s = schedule_of(trace_graph(f, x, w1, w2));
    size_t n = 0;
    for (const Step& st : s.steps) n += st.in_place.size();
    smelt_test::expect_close(smelt_test::vals(compile(f)(x, w1, w2)),
                             smelt_test::vals(f(x, w1, w2)), 1e-5);
    return n;
  };
  // Read transposed: element (i, j) of the result needs y1's (j, i), which
  // another thread may have overwritten.
  EXPECT_EQ(in_place_writes(gemm_pointwise_gemm([](const Tensor& y) { return exp(y.t()); })), 0u);
  // Read through a broadcast row: every row of the result reads y1's first.
  EXPECT_EQ(in_place_writes(gemm_pointwise_gemm([](const Tensor& y) {
              return exp(y) + y.narrow(0, 0, 1).expand({64, 64});
            })),
            0u);
  // y1 is read again by a later step.
  EXPECT_EQ(in_place_writes([](const Tensor& x, const Tensor& w1, const Tensor& w2) {
              const Tensor y = matmul(x, w1);
              return matmul(y, matmul(exp(y), w2));  // y's product needs exp(y)'s first
            }),
            0u);
  // Another element size: a float64 result over float32 memory would
  // overwrite elements not yet read.
  EXPECT_EQ(in_place_writes([](const Tensor& x, const Tensor& w1, const Tensor& w2) {
              return matmul(exp(matmul(x, w1).to(DType::Float64)), w2.to(DType::Float64));
            }),
            0u);
  // Another dtype of the same size: a horizontal kernel computes y + k and,
  // last, k * 0 (int32), which does not read y: the C++ compiler may move
  // that int32 store above the float load of y's element (strict aliasing).
  {
    const Tensor k = (randn({64, 64}) * 10).to(DType::Int32);
    const auto f = [](const Tensor& x, const Tensor& w1, const Tensor& k) {
      const Tensor y = matmul(x, w1);
      const Tensor a = y + k;
      const Tensor b = k * 0;  // traced after a: the kernel's last store
      return std::make_tuple(matmul(a, x), stack({b, b}));
    };
    const Schedule s = schedule_of(trace_graph(f, x, w1, k));
    size_t n = 0;
    for (const Step& st : s.steps) n += st.in_place.size();
    EXPECT_EQ(n, 0u);
    const auto [a, b] = compile(f)(x, w1, k);
    const auto [ea, eb] = f(x, w1, k);
    smelt_test::expect_close(smelt_test::vals(a), smelt_test::vals(ea), 1e-5);
    EXPECT_EQ(smelt_test::vals(b), smelt_test::vals(eb));
  }
  // The control: an elementwise kernel over the whole buffer in order.
  EXPECT_EQ(in_place_writes(gemm_pointwise_gemm([](const Tensor& y) { return exp(y); })), 1u);
}
