// The v3 generator's integer edges (V3BuildOptions::integer_edges, issue 46): calls as short as
// the others whose windows bring the longest sequence's last key + window to the wrap of
// kernel.py's positions, and whose page tables sit at kernel.py's int16 switch. Every such call
// is strict-valid (so the campaign's strict calls may sit on the edge), both sides of each edge
// are drawn, and the codec, which does not take the option, still decodes what it did.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "casegen/generate.h"
#include "casegen/v3_generate.h"
#include "casegen/v3_build_case.h"
#include "casegen/v3_materialize.h"
#include "validation/v3_validate.h"

namespace rpa::props {
namespace {

TEST(V3IntegerEdges, EdgeCallsAreStrictValidAndReachBothSidesOfEachEdge) {
  V3BuildOptions o;
  o.max_seqs = 4;
  o.max_kv_len = 64;
  o.max_q_len = 64;
  o.integer_edges = true;
  std::mt19937_64 rng(46);
  int int16_at = 0, int16_below = 0, int32_at = 0, table_at = 0, table_past = 0, drawn = 0;
  for (int k = 0; k < 3000; ++k) {
    std::vector<uint8_t> bytes(256 + rng() % 768);
    for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
    const V3CaseSpec s = decode_v3_strategy(bytes, o, true, {}).spec;
    const V3Materialized m = materialize_v3(s, Contents::kZeros);
    const std::optional<V3Failure> f = v3_validate(s.dialect, m.inputs, m.params, Mode::kStrict);
    ASSERT_FALSE(f) << describe(s) << "\n" << f->message;
    ++drawn;
    const int64_t span = s.pages_per_seq() * s.page_size;
    if (s.dialect == Dialect::kTpuInferenceV3 && s.q_dtype == DType::kBFloat16) {
      table_at += span <= 32767 && span + s.page_size > 32767;
      table_past += span > 32767 && span - s.page_size <= 32767;
    }
    if (!s.params.sliding_window || s.seqs.empty()) continue;
    const int64_t top = s.max_kv_len() - 1 + *s.params.sliding_window;
    const bool int16 = s.dialect == Dialect::kTpuInferenceV3 && s.q_dtype == DType::kBFloat16 &&
                       span <= 32767;
    if (int16) {
      EXPECT_LE(top, 32767) << describe(s);
      int16_at += top == 32767;
      int16_below += top > 32767 - 17 && top < 32767;
    } else {
      EXPECT_LE(top, 2147483647) << describe(s);
      int32_at += top == 2147483647;
    }
  }
  EXPECT_EQ(drawn, 3000);
  EXPECT_GT(int16_at, 0);
  EXPECT_GT(int16_below, 0);
  EXPECT_GT(int32_at, 0);
  EXPECT_GT(table_at, 0);
  EXPECT_GT(table_past, 0);
}

// Without the option (the codec, the properties, the Hypothesis strategies) no window passes
// kV3MaxSlidingWindow and no page table grows past two spare slots.
TEST(V3IntegerEdges, OffWithoutTheOption) {
  std::mt19937_64 rng(7);
  for (int k = 0; k < 500; ++k) {
    std::vector<uint8_t> bytes(512);
    for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
    const V3CaseSpec s = decode_v3_case(bytes);
    EXPECT_LE(s.params.sliding_window.value_or(1), kV3MaxSlidingWindow);
    EXPECT_LE(s.extra_page_slots, 2);
    EXPECT_TRUE(v3_spec_encodes(s));
  }
}

}  // namespace
}  // namespace rpa::props
