// nn modules: registration and naming, state dicts, modes, init, dtype conversion.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <type_traits>

#include <unistd.h>

#include "smelt/smelt.h"

using namespace smelt;

namespace {

std::vector<std::string> names_of(const std::vector<std::pair<std::string, Tensor>>& v) {
  std::vector<std::string> out;
  for (const auto& [n, t] : v) out.push_back(n);
  return out;
}

// EXPECT that `f` throws smelt::Error whose message contains every string of `parts`.
template <class F>
void expect_error(F f, std::initializer_list<const char*> parts) {
  try {
    f();
    ADD_FAILURE() << "expected smelt::Error";
  } catch (const Error& e) {
    std::string msg = e.what();
    for (const char* p : parts)
      EXPECT_NE(msg.find(p), std::string::npos) << msg << "\n  lacks: " << p;
  }
}

std::string temp_path(const std::string& stem) {
  return (std::filesystem::temp_directory_path() /
          (stem + "_" + std::to_string(::getpid()) + ".safetensors"))
      .string();
}

struct Block : nn::Module {
  nn::LayerNorm ln{nullptr};
  nn::Linear fc{nullptr};
  nn::BatchNorm1d bn{nullptr};
  Tensor scale;
  Block() : Module("Block") {
    scale = register_parameter("scale", ones({3}));
    ln = register_module("ln", nn::LayerNorm(Shape{3}));
    fc = register_module("fc", nn::Linear(3, 3));
    bn = register_module("bn", nn::BatchNorm1d(3));
  }
  Tensor forward(const Tensor& x) override { return bn(fc(ln(x))) * scale; }
};

struct Net : nn::Module {
  std::shared_ptr<Block> block;
  nn::Linear head{nullptr};
  Net() : Module("Net") {
    block = register_module("block", std::make_shared<Block>());
    head = register_module("head", nn::Linear(3, 2, /*bias=*/false));
  }
  Tensor forward(const Tensor& x) override { return head(block->forward(x)); }
};

}  // namespace

// ---- registration and naming ------------------------------------------------------------

TEST(NN, SequentialNamesLikePyTorch) {
  auto model = nn::Sequential(nn::Linear(4, 8), nn::GELU(), nn::Linear(8, 2));
  EXPECT_EQ(model->size(), 3u);
  EXPECT_EQ(names_of(model->named_parameters()),
            (std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias"}));
  EXPECT_EQ(model->parameters().size(), 4u);
  EXPECT_TRUE(model->buffers().empty());
  ASSERT_EQ(model->children().size(), 3u);
  EXPECT_EQ(model->named_children()[1].first, "1");
  EXPECT_EQ(model->named_children()[1].second->name(), "GELU");
  EXPECT_EQ((*model)[-1]->name(), "Linear");
  EXPECT_THROW((*model)[3], Error);
  auto sd = model->state_dict();
  ASSERT_EQ(sd.size(), 4u);
  EXPECT_EQ(sd.at("2.weight").sizes(), (Shape{2, 8}));
  // Handles, not copies.
  auto lin = std::dynamic_pointer_cast<nn::LinearImpl>((*model)[0]);
  ASSERT_NE(lin, nullptr);
  EXPECT_TRUE(sd.at("0.weight").is_same(lin->weight));
  EXPECT_TRUE(model->get_tensor("0.bias").is_same(lin->bias));
  EXPECT_EQ(model->submodule("2").get(), (*model)[2].get());
}

TEST(NN, NestedNamesAndBuffersInStateDictOrder) {
  Net net;
  std::vector<std::string> got;
  std::vector<bool> is_buf;
  for (const auto& nt : net.named_parameters_and_buffers()) {
    got.push_back(nt.name);
    is_buf.push_back(nt.is_buffer);
  }
  // PyTorch order: a module's own parameters, its buffers, then its children.
  EXPECT_EQ(got, (std::vector<std::string>{
                     "block.scale", "block.ln.weight", "block.ln.bias", "block.fc.weight",
                     "block.fc.bias", "block.bn.weight", "block.bn.bias", "block.bn.running_mean",
                     "block.bn.running_var", "block.bn.num_batches_tracked", "head.weight"}));
  EXPECT_EQ(is_buf, (std::vector<bool>{false, false, false, false, false, false, false, true, true,
                                       true, false}));
  EXPECT_EQ(names_of(net.named_buffers()),
            (std::vector<std::string>{"block.bn.running_mean", "block.bn.running_var",
                                      "block.bn.num_batches_tracked"}));
  EXPECT_EQ(net.named_parameters(/*recurse=*/false).size(), 0u);
  EXPECT_EQ(net.block->named_parameters(false).size(), 1u);
  auto mods = net.named_modules();
  ASSERT_EQ(mods.size(), 6u);
  EXPECT_EQ(mods[0].first, "");
  EXPECT_EQ(mods[2].first, "block.ln");
  EXPECT_EQ(mods[5].first, "head");
  EXPECT_EQ(net.get_tensor("block.bn.num_batches_tracked").dtype(), DType::Int64);
  EXPECT_THROW(net.get_tensor("block.nope"), Error);
  EXPECT_THROW(net.submodule("block.x"), Error);
  // Printing.
  std::string s = net.str();
  EXPECT_NE(s.find("(fc): Linear(in_features=3, out_features=3, bias=True)"), std::string::npos)
      << s;
  EXPECT_NE(s.find("(head): Linear(in_features=3, out_features=2, bias=False)"), std::string::npos)
      << s;
}

// The registry reads the members it registered: reassigning one is seen everywhere.
TEST(NN, RegistryFollowsMemberAssignment) {
  static_assert(!std::is_copy_constructible_v<nn::Module> &&
                !std::is_move_constructible_v<nn::Module>);
  nn::Linear lin(6, 3);
  Tensor old_w = lin->weight;
  Tensor w = randn({3, 6});
  lin->weight = w;
  auto params = lin->parameters();
  ASSERT_EQ(params.size(), 2u);
  EXPECT_TRUE(params[0].is_same(w));
  EXPECT_FALSE(params[0].is_same(old_w));
  EXPECT_TRUE(lin->state_dict().at("weight").is_same(w));
  EXPECT_TRUE(lin->get_tensor("weight").is_same(w));
  EXPECT_TRUE(lin->named_parameters_and_buffers()[0].tensor.is_same(w));
  // load_state_dict copies into the NEW tensor, keeping its identity.
  Tensor src = full({3, 6}, 2.5);
  lin->load_state_dict({{"weight", src}, {"bias", zeros({3})}});
  EXPECT_TRUE(lin->weight.is_same(w));
  EXPECT_EQ(w.to_vector<float>(), std::vector<float>(18, 2.5f));
  EXPECT_EQ(old_w.to_vector<float>() == std::vector<float>(18, 2.5f), false);
  // to(dtype) converts the new tensor in place.
  lin->to(DType::Float64);
  EXPECT_TRUE(lin->weight.is_same(w));
  EXPECT_EQ(w.dtype(), DType::Float64);
  EXPECT_EQ(old_w.dtype(), DType::Float32);
  // Set to undefined: skipped everywhere (like a parameter set to None).
  lin->bias = Tensor();
  EXPECT_EQ(names_of(lin->named_parameters()), (std::vector<std::string>{"weight"}));
  EXPECT_THROW(lin->get_tensor("bias"), Error);
  auto r = lin->load_state_dict({{"weight", zeros({3, 6}, DType::Float64)}}, /*strict=*/true);
  EXPECT_TRUE(r.missing_keys.empty());
  lin->bias = zeros({3}, DType::Float64);
  EXPECT_EQ(lin->parameters().size(), 2u);
  // bias=false: the undefined member is not registered, even once assigned.
  nn::Linear nob(2, 2, /*bias=*/false);
  EXPECT_EQ(names_of(nob->named_parameters()), (std::vector<std::string>{"weight"}));
  nob->bias = zeros({2});
  EXPECT_EQ(nob->parameters().size(), 1u);
  // Buffers too, and nested names.
  nn::Sequential seq(nn::Linear(2, 2), nn::BatchNorm1d(2));
  auto bn = std::dynamic_pointer_cast<nn::BatchNorm1dImpl>((*seq)[1]);
  ASSERT_NE(bn, nullptr);
  Tensor rm = full({2}, 7.0);
  bn->running_mean = rm;
  EXPECT_TRUE(seq->state_dict().at("1.running_mean").is_same(rm));
  EXPECT_TRUE(seq->buffers()[0].is_same(rm));
  bn->eval();
  Tensor x = zeros({1, 2});
  EXPECT_NEAR(bn->forward(x).to_vector<float>()[0], -7.0 / std::sqrt(1.0 + 1e-5), 1e-5);
}

TEST(NN, RegistrySlotsInUserModules) {
  struct M : nn::Module {
    Tensor w, b;
    Tensor* owned = nullptr;
    M() : Module("M") {
      Tensor& r = register_parameter("w", w, ones({2}));
      EXPECT_EQ(&r, &w);
      register_buffer("b", b, zeros({2}));
      owned = &register_parameter("v", full({2}, 3.0));  // 2-argument form: held by the module
      expect_error([&] { register_parameter("w2", w, ones({2})); },
                   {"M.register_parameter", "already registered"});
      expect_error([&] { register_buffer("w", b, ones({2})); }, {"\"w\"", "already registered"});
      Tensor unused;
      expect_error([&] { register_parameter("u", unused, Tensor()); }, {"undefined"});
    }
  };
  M m;
  EXPECT_EQ(names_of(m.named_parameters()), (std::vector<std::string>{"w", "v"}));
  EXPECT_EQ(names_of(m.named_buffers()), (std::vector<std::string>{"b"}));
  m.w = full({2}, 5.0);
  EXPECT_TRUE(m.parameters()[0].is_same(m.w));
  // The reference returned by the 2-argument form is the registered handle.
  Tensor v2 = full({4}, 1.0);
  *m.owned = v2;
  EXPECT_TRUE(m.get_tensor("v").is_same(v2));
  // The member slot registered by a failed call was left untouched.
  EXPECT_EQ(m.b.to_vector<float>(), (std::vector<float>{0, 0}));
  // Many 2-argument registrations: earlier references stay valid.
  nn::Module big("Big");
  Tensor& first = big.register_parameter("p0", zeros({1}));
  for (int i = 1; i < 100; ++i) big.register_parameter("p" + std::to_string(i), zeros({1}));
  first = ones({1});
  EXPECT_TRUE(big.get_tensor("p0").is_same(first));
  EXPECT_EQ(big.parameters().size(), 100u);
}

TEST(NN, RegistrationErrors) {
  nn::Module m("M");
  m.register_parameter("w", zeros({2}));
  expect_error([&] { m.register_parameter("w", zeros({2})); }, {"register_parameter", "\"w\""});
  expect_error([&] { m.register_buffer("w", zeros({2})); }, {"already registered"});
  expect_error([&] { m.register_parameter("a.b", zeros({2})); }, {"'.'"});
  expect_error([&] { m.register_parameter("", zeros({2})); }, {"empty"});
  expect_error([&] { m.register_parameter("u", Tensor()); }, {"undefined"});
  expect_error([&] { m.register_module("w", nn::ReLU()); }, {"register_module"});
  expect_error([&] { m.forward(zeros({1})); }, {"M.forward"});
  nn::Linear empty_holder{nullptr};
  EXPECT_TRUE(empty_holder.is_empty());
  expect_error([&] { empty_holder->forward(zeros({1})); }, {"empty module holder"});
  expect_error([] { nn::GELU("fast"); }, {"GELU", "fast"});
  expect_error([] { nn::Dropout(1.5); }, {"Dropout", "1.5"});
  expect_error([] { nn::Linear(-1, 2); }, {"Linear"});
}

TEST(NN, HolderCopiesShareTheModule) {
  nn::Linear a(2, 3);
  nn::Linear b = a;
  EXPECT_EQ(a.get(), b.get());
  EXPECT_TRUE(a->weight.is_same(b->weight));
  nn::ModuleList list(nn::ReLU(), a);
  EXPECT_EQ(list->size(), 2u);
  EXPECT_EQ(list->at<nn::LinearImpl>(1).get(), a.get());
  EXPECT_THROW(list->at<nn::LinearImpl>(0), Error);
  EXPECT_THROW((*list)(zeros({1})), Error);  // ModuleList has no forward
}

// ---- forward ------------------------------------------------------------------------------------

TEST(NN, LinearForwardMatchesReference) {
  NoGradGuard no_grad;  // the weights are set in place
  nn::Linear lin(3, 2);
  lin->weight.copy_(from_vector<float>({1, 2, 3, -1, 0.5f, 0}, {2, 3}));
  lin->bias.copy_(from_vector<float>({0.25f, -2}, {2}));
  Tensor x = from_vector<float>({1, 0, -1, 2, 2, 2}, {2, 3});
  auto y = lin(x).to_vector<float>();
  // Row-by-row: x @ W^T + b.
  std::vector<float> ref = {1 - 3 + 0.25f, -1 - 2, 2 + 4 + 6 + 0.25f, -2 + 1 - 2};
  ASSERT_EQ(y.size(), ref.size());
  for (size_t i = 0; i < y.size(); ++i) EXPECT_FLOAT_EQ(y[i], ref[i]);
  EXPECT_EQ(lin(x).sizes(), (Shape{2, 2}));
  // Batched 3-D input; no bias.
  nn::Linear nb(3, 1, false);
  nb->weight.fill_(1.0);
  EXPECT_FALSE(nb->bias.defined());
  EXPECT_EQ(nb->parameters().size(), 1u);
  Tensor y3 = nb(ones({2, 4, 3}));
  EXPECT_EQ(y3.sizes(), (Shape{2, 4, 1}));
  for (float v : y3.to_vector<float>()) EXPECT_FLOAT_EQ(v, 3.0f);
}

TEST(NN, SeedModelRuns) {
  manual_seed(0);
  auto model = nn::Sequential(nn::Linear(64, 64), nn::GELU(), nn::Linear(64, 32), nn::GELU(),
                              nn::Linear(32, 10));
  Tensor y = model(randn({8, 64}));
  EXPECT_EQ(y.sizes(), (Shape{8, 10}));
  EXPECT_EQ(y.dtype(), DType::Float32);
  for (float v : y.to_vector<float>()) EXPECT_TRUE(std::isfinite(v));
}

// ---- init
// ------------------------------------------------------------------------------------------

TEST(NN, LinearInitBounds) {
  manual_seed(123);
  nn::Linear lin(100, 50);
  const double bound = 1.0 / std::sqrt(100.0);
  for (const Tensor& t : {lin->weight, lin->bias}) {
    auto v = t.to_vector<double>();
    double lo = 1e9, hi = -1e9, mean = 0;
    for (double x : v) {
      lo = std::min(lo, x);
      hi = std::max(hi, x);
      mean += x / static_cast<double>(v.size());
    }
    EXPECT_GE(lo, -bound);
    EXPECT_LE(hi, bound);
    // Uniform over the whole range (5000 / 50 draws).
    EXPECT_LT(lo, -0.8 * bound);
    EXPECT_GT(hi, 0.8 * bound);
    EXPECT_LT(std::fabs(mean), 0.3 * bound);
  }
  // Different draws for a second layer; same draws after re-seeding.
  nn::Linear other(100, 50);
  EXPECT_NE(other->weight.to_vector<float>(), lin->weight.to_vector<float>());
  manual_seed(123);
  nn::Linear again(100, 50);
  EXPECT_EQ(again->weight.to_vector<float>(), lin->weight.to_vector<float>());
  // in_features == 0: empty weight, zero-width bias range.
  nn::Linear zero_in(0, 3);
  EXPECT_EQ(zero_in->weight.sizes(), (Shape{3, 0}));
  for (float v : zero_in->bias.to_vector<float>()) EXPECT_EQ(v, 0.0f);
}

TEST(NN, EmbeddingInitAndLookup) {
  manual_seed(7);
  nn::Embedding emb(1000, 8);
  auto w = emb->weight.to_vector<double>();
  double mean = 0, sq = 0;
  for (double x : w) {
    mean += x / static_cast<double>(w.size());
    sq += x * x / static_cast<double>(w.size());
  }
  EXPECT_LT(std::fabs(mean), 0.05);
  EXPECT_NEAR(sq - mean * mean, 1.0, 0.1);  // N(0, 1)
  Tensor idx = from_vector<int64_t>({3, 999, 3}, {3});
  Tensor out = emb(idx);
  EXPECT_EQ(out.sizes(), (Shape{3, 8}));
  auto o = out.to_vector<float>();
  auto wf = emb->weight.to_vector<float>();
  for (int j = 0; j < 8; ++j) {
    EXPECT_EQ(o[j], wf[3 * 8 + j]);
    EXPECT_EQ(o[8 + j], wf[999 * 8 + j]);
  }
}

TEST(NN, InitErrors) {
  Tensor i = zeros({2, 2}, DType::Int64);
  expect_error([&] { nn::init::uniform_(i); }, {"uniform_", "int64"});
  Tensor f = zeros({3});
  expect_error([&] { nn::init::kaiming_uniform_(f); }, {"fewer than 2"});
  expect_error([&] { nn::init::normal_(f, 0, -1); }, {"normal_"});
}

// ---- state dicts
// ---------------------------------------------------------------------------------

TEST(NN, StateDictSafetensorsRoundTrip) {
  manual_seed(1);
  Net a;
  a.block->bn->running_mean.copy_(from_vector<float>({1, 2, 3}, {3}));
  a.block->bn->num_batches_tracked.fill_(5);
  const std::string path = temp_path("smelt_nn_roundtrip");
  a.save(path);
  manual_seed(2);
  Net b;
  EXPECT_NE(b.block->fc->weight.to_vector<float>(), a.block->fc->weight.to_vector<float>());
  auto r = b.load(path);
  EXPECT_TRUE(r.missing_keys.empty());
  EXPECT_TRUE(r.unexpected_keys.empty());
  auto sa = a.state_dict(), sb = b.state_dict();
  ASSERT_EQ(sa.size(), sb.size());
  for (const auto& [k, t] : sa) {
    ASSERT_TRUE(sb.count(k)) << k;
    EXPECT_EQ(sb.at(k).dtype(), t.dtype()) << k;
    EXPECT_EQ(sb.at(k).sizes(), t.sizes()) << k;
    EXPECT_EQ(sb.at(k).to_vector<double>(), t.to_vector<double>()) << k;
  }
  EXPECT_EQ(b.block->bn->num_batches_tracked.item<int64_t>(), 5);
  std::remove(path.c_str());
  expect_error([&] { b.load(path); }, {path.c_str()});
}

TEST(NN, LoadStateDictPreservesParameterIdentity) {
  nn::Linear lin(2, 2);
  Tensor w = lin->weight;  // handle held elsewhere (an optimizer, the compiler)
  const void* data = w.data_ptr();
  nn::StateDict sd{{"weight", from_vector<float>({1, 2, 3, 4}, {2, 2})},
                   {"bias", from_vector<float>({5, 6}, {2})}};
  lin->load_state_dict(sd);
  EXPECT_TRUE(lin->weight.is_same(w));
  EXPECT_EQ(w.data_ptr(), data);  // copied into the same memory
  EXPECT_EQ(w.to_vector<float>(), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_TRUE(lin->named_parameters()[0].second.is_same(w));
  // The source is not aliased.
  sd.at("weight").fill_(0.0);
  EXPECT_EQ(w.to_vector<float>(), (std::vector<float>{1, 2, 3, 4}));
  // A transposed (non-contiguous) source is copied by value.
  lin->load_state_dict(
      {{"weight", from_vector<float>({1, 2, 3, 4}, {2, 2}).t()}, {"bias", zeros({2})}});
  EXPECT_EQ(w.to_vector<float>(), (std::vector<float>{1, 3, 2, 4}));
}

TEST(NN, LoadStateDictErrorsChangeNothing) {
  nn::Linear lin(2, 3);
  const auto before_w = lin->weight.to_vector<float>();
  const auto before_b = lin->bias.to_vector<float>();
  auto unchanged = [&] {
    EXPECT_EQ(lin->weight.to_vector<float>(), before_w);
    EXPECT_EQ(lin->bias.to_vector<float>(), before_b);
  };
  // Shape mismatch: key and both shapes named (even with strict=false). The valid
  // bias must not be written either.
  expect_error(
      [&] {
        lin->load_state_dict({{"weight", zeros({3, 3})}, {"bias", ones({3})}});
      },
      {"load_state_dict", "\"weight\"", "[3, 3]", "[3, 2]"});
  unchanged();
  expect_error(
      [&] {
        lin->load_state_dict({{"weight", zeros({3, 3})}, {"bias", ones({3})}}, false);
      },
      {"\"weight\""});
  unchanged();
  // dtype mismatch.
  expect_error(
      [&] {
        lin->load_state_dict({{"weight", zeros({3, 2}, DType::Float64)}, {"bias", ones({3})}});
      },
      {"\"weight\"", "float64", "float32"});
  unchanged();
  // Missing and unexpected keys under strict.
  expect_error(
      [&] {
        lin->load_state_dict({{"weight", zeros({3, 2})}});
      },
      {"missing keys", "\"bias\""});
  unchanged();
  expect_error(
      [&] {
        lin->load_state_dict(
            {{"weight", zeros({3, 2})}, {"bias", ones({3})}, {"extra", ones({1})}});
      },
      {"unexpected keys", "\"extra\""});
  unchanged();
  // Not strict: loads what matches and reports the rest.
  auto r = lin->load_state_dict({{"weight", zeros({3, 2})}, {"extra", ones({1})}}, false);
  EXPECT_EQ(r.missing_keys, (std::vector<std::string>{"bias"}));
  EXPECT_EQ(r.unexpected_keys, (std::vector<std::string>{"extra"}));
  EXPECT_EQ(lin->weight.to_vector<float>(), std::vector<float>(6, 0.0f));
  EXPECT_EQ(lin->bias.to_vector<float>(), before_b);
}

// ---- modes
// ---------------------------------------------------------------------------------------

TEST(NN, TrainEvalPropagates) {
  Net net;
  EXPECT_TRUE(net.is_training());
  net.eval();
  EXPECT_FALSE(net.is_training());
  EXPECT_FALSE(net.block->bn->is_training());
  EXPECT_FALSE(net.head->is_training());
  net.train();
  EXPECT_TRUE(net.block->bn->is_training());
}

TEST(NN, DropoutTrainEval) {
  manual_seed(3);
  nn::Dropout drop(0.5);
  Tensor x = ones({4000});
  auto y = drop(x).to_vector<float>();
  int zeros_n = 0;
  for (float v : y) {
    EXPECT_TRUE(v == 0.0f || v == 2.0f) << v;
    zeros_n += v == 0.0f;
  }
  EXPECT_GT(zeros_n, 1700);
  EXPECT_LT(zeros_n, 2300);
  drop->eval();
  EXPECT_EQ(drop(x).to_vector<float>(), x.to_vector<float>());
  nn::Dropout none(0.0);
  EXPECT_EQ(none(x).to_vector<float>(), x.to_vector<float>());
}

TEST(NN, BatchNormTrainEval) {
  nn::BatchNorm1d bn(2, 1e-5, 0.1);
  // Channel 0: 1, 3 (mean 2, biased var 1, unbiased 2); channel 1: 0, 0.
  Tensor x = from_vector<float>({1, 0, 3, 0}, {2, 2});
  auto y = bn(x).to_vector<double>();
  const double inv = 1.0 / std::sqrt(1.0 + 1e-5);
  EXPECT_NEAR(y[0], -inv, 1e-6);
  EXPECT_NEAR(y[2], inv, 1e-6);
  EXPECT_NEAR(y[1], 0.0, 1e-6);
  auto rm = bn->running_mean.to_vector<double>();
  auto rv = bn->running_var.to_vector<double>();
  EXPECT_NEAR(rm[0], 0.1 * 2.0, 1e-6);  // (1 - m) * 0 + m * mean
  EXPECT_NEAR(rm[1], 0.0, 1e-6);
  EXPECT_NEAR(rv[0], 0.9 * 1.0 + 0.1 * 2.0, 1e-6);  // unbiased batch variance
  EXPECT_NEAR(rv[1], 0.9, 1e-6);
  EXPECT_EQ(bn->num_batches_tracked.item<int64_t>(), 1);
  // Eval: running statistics, no update.
  bn->eval();
  auto ye = bn(x).to_vector<double>();
  EXPECT_NEAR(ye[0], (1.0 - 0.2) / std::sqrt(1.1 + 1e-5), 1e-5);
  EXPECT_NEAR(ye[3], 0.0 / std::sqrt(0.9 + 1e-5), 1e-6);
  EXPECT_EQ(bn->num_batches_tracked.item<int64_t>(), 1);
  EXPECT_NEAR(bn->running_mean.to_vector<double>()[0], 0.2, 1e-6);
  // momentum=None: cumulative average.
  nn::BatchNorm1d cum(2, 1e-5, std::nullopt);
  cum(x);
  EXPECT_NEAR(cum->running_mean.to_vector<double>()[0], 2.0, 1e-6);
  // Rank and channel checks.
  expect_error([&] { bn(zeros({2, 2, 2, 2})); }, {"BatchNorm1d", "4D"});
  expect_error([&] { bn(zeros({2, 3})); }, {"BatchNorm1d", "2 channels"});
  nn::BatchNorm2d bn2(3);
  expect_error([&] { bn2(zeros({2, 3})); }, {"BatchNorm2d", "4D"});
  EXPECT_EQ(bn2(randn({2, 3, 4, 4})).sizes(), (Shape{2, 3, 4, 4}));
  nn::BatchNorm1d nostats(2, 1e-5, 0.1, true, false);
  EXPECT_TRUE(nostats->buffers().empty());
  nostats->eval();
  auto yn = nostats(x).to_vector<double>();  // batch statistics even in eval
  EXPECT_NEAR(yn[0], -inv, 1e-6);
}

TEST(NN, NormModulesForward) {
  nn::LayerNorm ln(Shape{4});
  EXPECT_EQ(ln->weight.to_vector<float>(), std::vector<float>(4, 1.0f));
  EXPECT_EQ(ln->bias.to_vector<float>(), std::vector<float>(4, 0.0f));
  Tensor x = from_vector<float>({1, 2, 3, 4}, {1, 4});
  auto y = ln(x).to_vector<double>();
  const double var = 1.25, sd = std::sqrt(var + 1e-5);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(y[i], (i + 1 - 2.5) / sd, 1e-5);
  nn::LayerNorm plain(Shape{4}, 1e-5, false);
  EXPECT_TRUE(plain->parameters().empty());
  nn::RMSNorm rms(Shape{4}, 1e-6);
  auto r = rms(x).to_vector<double>();
  const double rmsv = std::sqrt((1 + 4 + 9 + 16) / 4.0 + 1e-6);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(r[i], (i + 1) / rmsv, 1e-5);
  nn::Softmax sm(1);
  auto s = sm(x).to_vector<double>();
  EXPECT_NEAR(s[0] + s[1] + s[2] + s[3], 1.0, 1e-6);
}

// ---- dtype
// ---------------------------------------------------------------------------------------

TEST(NN, ToDtypeKeepsIdentity) {
  Net net;
  Tensor w = net.block->fc->weight;
  const auto before = w.to_vector<double>();
  net.to(DType::Float64);
  EXPECT_TRUE(net.block->fc->weight.is_same(w));
  EXPECT_EQ(w.dtype(), DType::Float64);
  EXPECT_EQ(w.to_vector<double>(), before);  // float32 -> float64 is exact
  EXPECT_EQ(net.block->bn->running_var.dtype(), DType::Float64);
  EXPECT_EQ(net.block->bn->num_batches_tracked.dtype(), DType::Int64);  // integer buffer kept
  for (const auto& [n, t] : net.named_parameters()) EXPECT_EQ(t.dtype(), DType::Float64) << n;
  net.eval();
  Tensor y = net(ones({2, 3}, DType::Float64));
  EXPECT_EQ(y.dtype(), DType::Float64);
  expect_error([&] { net.to(DType::Int32); }, {"to", "int32"});
  EXPECT_EQ(w.dtype(), DType::Float64);
  net.to(DType::Float32);
  EXPECT_EQ(w.dtype(), DType::Float32);
  net.to(Device("cpu"));
  EXPECT_TRUE(net.block->fc->weight.is_same(w));
}
