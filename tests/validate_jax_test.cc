// JAX's own validation tests, ported, and the behaviour of validate_all and the rule table.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <set>
#include <string>

#include "tests/inputs_builder.h"
#include "validation/jax_validate.h"

namespace rpa {
namespace {

using testing::InputsSpec;

// The shapes of tests/pallas/tpu_ragged_paged_attention_test.py's validation tests:
// seq_lens [(192, 328), (128, 180), (64, 255)], heads (32, 8), head_dim 128, page_size 16,
// max_num_batched_tokens 512, max_num_seq 8, float32. JAX allocates 1000 pages; validation
// never reads them, so 49 (what the three sequences use) keep the test small.
Inputs jax_test_inputs() {
  InputsSpec s;
  s.seqs = {{192, 328}, {128, 180}, {64, 255}};
  s.num_q_heads = 32;
  s.num_kv_heads = 8;
  s.head_dim = 128;
  s.page_size = 16;
  s.pages_per_seq = 21;  // cdiv(328, 16)
  s.max_num_seqs = 8;
  s.max_num_batched_tokens = 512;
  s.total_num_pages = 49;
  return testing::build_inputs(s);
}

TEST(JaxPortedTests, RaggedPagedAttentionIsValid) {
  const Inputs in = jax_test_inputs();
  EXPECT_FALSE(validate(in, Params{}, {.mode = Mode::kJax}).has_value());
  EXPECT_FALSE(validate(in, Params{}, {.mode = Mode::kStrict}).has_value());
}

TEST(JaxPortedTests, SlidingWindowShouldBePositive) {
  const Inputs in = jax_test_inputs();
  for (int64_t w : {0, -1}) {
    Params p;
    p.sliding_window = w;
    const auto f = validate(in, p, {.mode = Mode::kJax});
    ASSERT_TRUE(f.has_value()) << "sliding_window=" << w;
    EXPECT_EQ(f->rule, RuleId::sliding_window_nonpositive);
    EXPECT_NE(f->message.find("must be positive"), std::string::npos);  // JAX's regex
    EXPECT_EQ(f->message, "sliding_window=" + std::to_string(w) + " must be positive.");
  }
}

TEST(JaxPortedTests, SoftCapCannotBeZero) {
  const Inputs in = jax_test_inputs();
  Params p;
  p.soft_cap = 0.0;
  const auto f = validate(in, p, {.mode = Mode::kJax});
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->rule, RuleId::soft_cap_zero);
  EXPECT_NE(f->message.find("must not be 0.0"), std::string::npos);  // JAX's regex
}

// JAX's static checks run in a fixed order: the first failure wins even when later ones
// also fail.
TEST(JaxOrder, FirstFailureInTableOrder) {
  Inputs in = jax_test_inputs();
  Params p;
  p.soft_cap = 0.0;
  p.sliding_window = 0;
  p.vmem_limit_bytes = 0;
  const auto f = validate(in, p, {.mode = Mode::kJax});
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->rule, RuleId::sliding_window_nonpositive);
}

TEST(ValidateAll, ListsEveryEvaluableFailureInOrder) {
  Inputs in = jax_test_inputs();
  Params p;
  p.soft_cap = -0.0;
  p.sliding_window = 0;
  p.vmem_limit_bytes = -5;
  in.num_seqs.set_int(0, 9);
  const std::vector<Failure> all = validate_all(in, p, {.mode = Mode::kJax});
  ASSERT_EQ(all.size(), 4u);
  EXPECT_EQ(all[0],
            (Failure{RuleId::sliding_window_nonpositive, "sliding_window=0 must be positive."}));
  EXPECT_EQ(all[1], (Failure{RuleId::soft_cap_zero, "soft_cap=-0.0 must not be 0.0."}));
  EXPECT_EQ(all[2],
            (Failure{RuleId::vmem_limit_nonpositive, "vmem_limit_bytes=-5 must be positive."}));
  EXPECT_EQ(all[3], (Failure{RuleId::num_seqs_too_large,
                             "num_seqs[0]=9 must be less or equal to max_num_seqs=8"}));
  // validate() returns the first of them.
  EXPECT_EQ(validate(in, p, {.mode = Mode::kJax}), all.front());
}

TEST(ValidateAll, RankFailureStopsShapeDependentRules) {
  Inputs in = jax_test_inputs();
  in.q = Tensor(DType::kFloat32, {512, 32});
  Params p;
  p.soft_cap = 0.0;
  const std::vector<Failure> all = validate_all(in, p, {.mode = Mode::kStrict});
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].rule, RuleId::q_rank);
}

TEST(ValidateAll, StrictCollectsParameterAndSequenceFailures) {
  Inputs in = jax_test_inputs();
  Params p;
  p.mask_value = -INFINITY;
  p.num_queries_per_block = 16;
  in.page_indices.set_int(0, 4000);
  const std::vector<Failure> all = validate_all(in, p, {.mode = Mode::kStrict});
  std::vector<RuleId> ids;
  for (const Failure& f : all) ids.push_back(f.rule);
  EXPECT_EQ(ids, (std::vector<RuleId>{RuleId::mask_value_nonfinite, RuleId::block_sizes_partial,
                                      RuleId::page_index_out_of_range}));
}

// Found by fuzz_raw_inputs (corpus/fuzz/fuzz_raw_inputs/regression-int32_block_rule_negative_bkv):
// validate_all went on past a rejected num_kv_pages_per_block of INT64_MIN and multiplied it
// by page_size in the int32 block rule, a signed overflow.
TEST(Regression, ValidateAllNegativeKvBlockSkipsInt32BlockRule) {
  const Inputs in = jax_test_inputs();
  Params p;
  p.num_kv_pages_per_block = std::numeric_limits<int64_t>::min();
  p.num_queries_per_block = 16;
  const std::vector<Failure> all = validate_all(in, p, {.mode = Mode::kStrict});
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].rule, RuleId::kv_pages_per_block_nonpositive);
  EXPECT_EQ(all[0].message, "num_kv_pages_per_block=-9223372036854775808 must be positive.");
}

TEST(RuleTable, IdsAreUniqueAndEveryRuleHasAModeAndAReason) {
  std::set<std::string_view> names;
  size_t index = 0;
  for (const RuleInfo& r : rule_table()) {
    EXPECT_EQ(static_cast<size_t>(r.id), index++);
    EXPECT_TRUE(names.insert(r.name).second) << r.name;
    EXPECT_TRUE(r.in_jax || r.in_strict) << r.name;
    EXPECT_FALSE(r.reason.empty()) << r.name;
    EXPECT_TRUE(!r.jax_crash || r.in_jax) << r.name << ": a JAX crash must be reported in jax mode";
    for (char ch : r.name)
      EXPECT_TRUE((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '_') << r.name;
  }
  EXPECT_EQ(rule_info(RuleId::soft_cap_zero).name, "soft_cap_zero");
}

}  // namespace
}  // namespace rpa
