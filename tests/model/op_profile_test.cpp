// `troupe bench forward --profile`'s op marks (model/op_profile.h): a batched decode step
// of the golden model marks each op as often as MODEL.md's layer schedule says, counted
// here from the config's layer modes (not from the code that places the marks), and a
// thread with no profile bound records nothing. A LLaMA-family step (`troupe bench peer
// --profile`) marks its ops once per layer.
#include "model/op_profile.h"

#include <gtest/gtest.h>

#include <chrono>
#include <vector>

#include "model/llama_model.h"
#include "model/temp_dir.h"
#include "support/golden.h"
#include "support/llama_ref.h"

namespace troupe::testing {
namespace {

using model::LayerMode;
using model::Op;

int64_t layers_in(const model::ModelConfig& c, std::initializer_list<LayerMode> modes) {
  int64_t n = 0;
  for (int64_t l = 0; l < c.num_hidden_layers; ++l)
    for (LayerMode m : modes) n += c.layer_mode[l] == m;
  return n;
}

TEST(OpProfile, ADecodeStepMarksEachOpAsTheLayerScheduleSays) {
  const GoldenModel& g = golden_model();
  const model::ModelConfig& c = g.config;
  std::vector<model::SequenceState> states(2, model::SequenceState::empty(c));
  const std::vector<int32_t> prompt_a{5, 9, 200, 31, 7}, prompt_b{44, 3, 17};
  std::vector<model::SequenceInput> in{{&states[0], prompt_a, false},
                                       {&states[1], prompt_b, false}};
  g.forward->run(in);  // prefill, unprofiled

  model::OpProfile unbound;  // never bound: stays empty
  model::OpProfile p;
  const std::vector<int32_t> next{11, 12};
  in[0].tokens = {&next[0], 1};
  in[1].tokens = {&next[1], 1};
  const auto t0 = std::chrono::steady_clock::now();
  {
    model::ScopedOpProfile bind(p);
    ASSERT_EQ(model::bound_op_profile(), &p);
    g.forward->run(in);
  }
  const std::chrono::duration<double> wall = std::chrono::steady_clock::now() - t0;
  EXPECT_EQ(model::bound_op_profile(), nullptr);

  const int64_t L = c.num_hidden_layers;
  const int64_t expected[model::kOpCount] = {
      1,                                   // embed
      int64_t(c.engram_layer_ids.size()),  // engram
      2 * L,                               // hc mix: attention and ffn sites
      4 * L,                               // premix and expand at both sites
      L,
      L,                                                    // attn query, attn window
      layers_in(c, {LayerMode::Full}),                      // compressor
      layers_in(c, {LayerMode::Full, LayerMode::Reindex}),  // indexer
      L,
      L,
      L,
      L,  // attn gather, core, output, store
      L,
      L,
      L,   // moe gate, shared expert, routed experts
      2,   // head: one per sequence
      0};  // dspark features: these states keep none
  double timed = 0;
  for (int i = 0; i < model::kOpCount; ++i) {
    SCOPED_TRACE(model::op_name(static_cast<Op>(i)));
    EXPECT_EQ(p.calls[i], expected[i]);
    EXPECT_GE(p.seconds[i], 0.0);
    timed += p.seconds[i];
    EXPECT_EQ(unbound.calls[i], 0);
  }
  EXPECT_LE(timed, wall.count());  // disjoint spans inside the step
}

// A dense LLaMA and a Qwen2-MoE (routed experts and a shared expert): one decode step marks
// embed and head once, every op of a layer once per layer, and none of V4.1's own ops.
TEST(OpProfile, ALlamaDecodeStepMarksEachOpOncePerLayer) {
  for (const model::LlamaArch arch : {model::LlamaArch::Llama, model::LlamaArch::Qwen2Moe}) {
    SCOPED_TRACE(model::arch_name(arch));
    test::TempDir dir;
    TinyLlamaSpec spec;
    spec.arch = arch;
    spec.layers = 3;
    if (arch == model::LlamaArch::Qwen2Moe) spec.experts = 4, spec.top_k = 2;
    write_tiny_llama(spec, dir.file("m.gguf"));
    const auto m = model::LlamaModel::load(dir.file("m.gguf"));
    model::LlamaState s = model::LlamaState::empty(m->config);
    m->forward->run(s, std::vector<int32_t>{3, 9, 27}, false);  // prefill, unprofiled
    model::OpProfile p;
    {
      model::ScopedOpProfile bind(p);
      m->forward->run(s, std::vector<int32_t>{5}, false);
    }
    const int64_t L = spec.layers, shared = arch == model::LlamaArch::Qwen2Moe ? L : 0;
    for (int i = 0; i < model::kOpCount; ++i) {
      const Op op = static_cast<Op>(i);
      SCOPED_TRACE(model::op_name(op));
      int64_t want = 0;
      if (op == Op::Embed || op == Op::Head) want = 1;
      if (op == Op::AttnQuery || op == Op::AttnStore || op == Op::AttnCore || op == Op::AttnOutput ||
          op == Op::MoeGate || op == Op::RoutedExperts)
        want = L;
      if (op == Op::SharedExpert) want = shared;
      EXPECT_EQ(p.calls[i], want);
    }
  }
}

// A speculative step's draft (runtime::Executor's drafting in a ScopedDraftOps): with a
// draft profile hung on the bound one, the draft's ops go there and its span's wall time
// to draft_seconds, the target's ops around it stay in the step's; without one, nothing
// changes. clear() keeps the draft profile.
TEST(OpProfile, ADraftSpanCountsItsOpsApart) {
  model::OpProfile step, draft;
  step.draft = &draft;
  {
    model::ScopedOpProfile bind(step);
    { model::ScopedOp op(Op::Head); }
    {
      model::ScopedDraftOps span;
      EXPECT_EQ(model::bound_op_profile(), &draft);
      model::ScopedOp op(Op::RoutedExperts);
    }
    EXPECT_EQ(model::bound_op_profile(), &step);
    { model::ScopedOp op(Op::Head); }
  }
  EXPECT_EQ(step.calls[int(Op::Head)], 2);
  EXPECT_EQ(step.calls[int(Op::RoutedExperts)], 0);
  EXPECT_EQ(draft.calls[int(Op::RoutedExperts)], 1);
  EXPECT_EQ(draft.calls[int(Op::Head)], 0);
  EXPECT_GE(step.draft_seconds, draft.seconds[int(Op::RoutedExperts)]);

  step.clear();
  EXPECT_EQ(step.draft, &draft);
  model::OpProfile plain;  // no draft profile: the span is the step's
  {
    model::ScopedOpProfile bind(plain);
    model::ScopedDraftOps span;
    EXPECT_EQ(model::bound_op_profile(), &plain);
    model::ScopedOp op(Op::RoutedExperts);
  }
  EXPECT_EQ(plain.calls[int(Op::RoutedExperts)], 1);
  EXPECT_EQ(plain.draft_seconds, 0.0);
  {
    model::ScopedDraftOps span;  // nothing bound: nothing recorded, nothing bound
    EXPECT_EQ(model::bound_op_profile(), nullptr);
  }
}

}  // namespace
}  // namespace troupe::testing
