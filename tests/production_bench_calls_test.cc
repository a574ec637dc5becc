// The fixed calls of `rpa bench --preset production` (harness/production_bench.h) keep the roles their
// names and docs/properties.md give them: a recipe change (a seed drawing another call) must
// fail here, not leave a "long" call that is no longer long. The v3 cache's bytes were once
// under-counted, and fixing that changed what kernel.py's seed 200 drew: 86848 tokens, not
// 131072; v3-long became seed 256.
#include <gtest/gtest.h>

#include <string>
#include <string_view>

#include "harness/production_bench.h"
#include "casegen/generate.h"
#include "casegen/production.h"

namespace rpa::bench {
namespace {

TEST(ProductionBenchCalls, EachCallIsTheWorstCaseItsNameSays) {
  int long_calls = 0, serving_calls = 0, edge_calls = 0;
  for (const ProductionBenchCall& c : production_bench_calls()) {
    const props::ProductionSpec s = props::seeded_production_spec(c.seed, c.dialect);
    SCOPED_TRACE(std::string(c.name) + "\n" + props::describe(s));
    const std::string_view prefix = c.dialect == Dialect::kJax                ? "jax-"
                                    : c.dialect == Dialect::kTpuInferenceV3 ? "v3-"
                                                                             : "hd64-";
    EXPECT_TRUE(c.name.starts_with(prefix));
    EXPECT_LE(s.memory_bytes(), props::kProductionMemoryBytes);
    EXPECT_LE(s.macs(), props::kProductionMacs);
    if (c.name.ends_with("-long")) {
      EXPECT_EQ(s.max_kv_len(), 131072);
      ++long_calls;
    } else if (c.name.ends_with("-serving")) {
      EXPECT_EQ(s.max_num_seqs, props::kProductionMaxSeqs);
      EXPECT_GE(static_cast<double>(s.macs()), 0.95 * static_cast<double>(props::kProductionMacs));
      ++serving_calls;
    } else if (c.name == "v3-int16-edge") {
      EXPECT_TRUE(props::production_int16_positions(s));
      EXPECT_EQ(s.pages_per_seq() * s.page_size, 32752);
      ++edge_calls;
    } else {
      ADD_FAILURE() << "a call of no known role: " << c.name;
    }
  }
  EXPECT_EQ(long_calls, 3);
  EXPECT_EQ(serving_calls, 3);
  EXPECT_EQ(edge_calls, 1);
}

}  // namespace
}  // namespace rpa::bench
