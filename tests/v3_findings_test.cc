// The findings where tpu-inference's kernel.py leaves the definition (corpus/findings/v3_*,
// written by tools/make_v3_findings.py with the kernel's own output and cache, TPU interpret
// mode, as `expected` / `expected_kv_cache`): tpu-inference's validators accept each (native),
// strict rejects it with the finding's rule, the literal v3 schedule reproduces the kernel
// (within the schedule tolerance, the cache bit for bit), and the definition differs from the
// kernel in exactly the rows (and the cache) worked out below from kernel.py's program.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <ostream>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>

#include <gtest/gtest.h>

#include "casefile/case_file.h"
#include "oracle/v3_compare.h"
#include "reference/v3_reference.h"
#include "schedule/v3_program.h"
#include "validation/v3_validate.h"

namespace rpa {
namespace {

struct V3Finding {
  std::string name;
  std::string strict_rule;
  std::set<int64_t> rows;  // q rows where the kernel's output is not the definition's
  bool cache_differs;      // and whether its cache is not the definition's
  // false: the rows may differ (a weight of exp(mask_value - m) may be below the tolerance).
  bool all_differ = true;
};

void PrintTo(const V3Finding& f, std::ostream* os) { *os << f.name; }

Case load(const std::string& name) {
  CaseReadResult r = read_case_file(std::string(RPA_SOURCE_DIR) + "/corpus/findings/" + name + ".npz",
                                    CaseReadOptions{});
  if (!r.value) throw std::runtime_error(r.error);
  return std::move(*r.value);
}

class V3KernelFinding : public ::testing::TestWithParam<V3Finding> {};

TEST_P(V3KernelFinding, LiteralScheduleIsTheKernelAndNotTheDefinition) {
  const V3Finding& f = GetParam();
  const Case c = load(f.name);
  ASSERT_TRUE(c.expected && c.expected_kv_cache) << "no kernel output stored";
  const V3Inputs& in = c.v3_inputs;
  const V3Params& p = c.v3_params;
  ASSERT_FALSE(v3_validate(c.dialect, in, p, Mode::kJax).has_value());
  const std::optional<V3Failure> strict = v3_validate(c.dialect, in, p, Mode::kStrict);
  ASSERT_TRUE(strict.has_value());
  EXPECT_EQ(v3_rule_info(strict->rule).name, f.strict_rule);

  const V3LiteralRun literal = v3_literal_run(c.dialect, in, p, {.tpu_version = 6});
  EXPECT_EQ(literal.outside, 0);
  const V3Comparison same = v3_compare_literal(c.dialect, in, literal, *c.expected, *c.expected_kv_cache);
  EXPECT_TRUE(same.agree()) << describe_v3_comparison(same);

  // The definition: the dense reference's kernel semantics, on the rows the sequences define.
  const V3ReferenceResult ref = v3_reference(c.dialect, in, p, Semantics::kKernel);
  const std::vector<double> allowed = v3_tolerance(c.dialect, in, p, ref);
  std::set<int64_t> rows;
  const int64_t width = in.queries.dim(1) * in.queries.dim(2);
  const int64_t defined = in.cu_q_lens.int_at(in.distribution.int_at(2));
  for (int64_t e = 0; e < defined * width; ++e) {
    const double a = c.expected->float_at(e), b = ref.out.float_at(e);
    if (!(std::fabs(a - b) <= allowed[static_cast<size_t>(e)])) rows.insert(e / width);
  }
  if (f.all_differ) {
    EXPECT_EQ(rows, f.rows);
  } else {
    EXPECT_FALSE(rows.empty());
    for (int64_t r : rows) EXPECT_TRUE(f.rows.contains(r)) << "row " << r;
  }
  const V3Comparison cache = v3_compare(c.dialect, in, p, ref, ref.out, *c.expected_kv_cache);
  EXPECT_EQ(!cache.cache_equal, f.cache_differs) << describe_v3_comparison(cache);
}

INSTANTIATE_TEST_SUITE_P(
    Corpus, V3KernelFinding,
    ::testing::Values(
        // Finding 23: the decode row (position 4, window 1) misses the compute block [0, 4).
        V3Finding{"v3_window_masked_block_nan", "masked_block_overflows", {0}, false},
        // Finding 24: sequence 1's new token at position 5 is never written; the output is right
        // (attention reads the new tokens from the KV buffer the fetch filled).
        V3Finding{"v3_window_skips_cache_write", "window_skips_cache_write", {}, true},
        // Finding 25: on v6 the decode row (position 11) under window 32760 loses keys 8..11
        // (k + 32760 wraps past int16's 32767).
        V3Finding{"v3_window_int16_wraps", "window_int16_wraps", {0}, false},
        // Finding 26: float32 q holds int32 positions on every generation: the decode row
        // (position 11) under window 2147483639 loses keys 9..11 (9 + W wraps past int32).
        V3Finding{"v3_window_int32_wraps", "window_int32_wraps", {0}, false},
        // Finding 15: sequence 0 (row 0) is in a prefill range that no pass computes.
        V3Finding{"v3_prefill_without_chunk_rows_unwritten", "prefill_without_chunk_size", {0}, true},
        // Finding 15: the decode pass computes row 0 of sequence 0 (q_len 2) without the causal
        // mask (it sees key 4 past its position 3) and sends row 1 as 0 / 0.
        V3Finding{"v3_decode_two_rows_nan", "decode_q_len_not_one", {0, 1}, false},
        // Finding 19: every row reads NaN scratch past kv_len.
        V3Finding{"v3_skip_kv_mask_reads_scratch", "skip_kv_mask_kv_len", {0, 1, 2, 3}, false},
        // Finding 16: slots past kv_len enter the softmax with logit -1, as far as exp(-1 - m)
        // is not negligible.
        V3Finding{"v3_mask_value_small_pads", "mask_value_too_large", {0, 1, 2, 3}, false, false}),
    [](const ::testing::TestParamInfo<V3Finding>& p) { return p.param.name; });

// Finding 25 around its boundaries, on the corpus case's data (kv_lens 12 and 3, pages_per_seq
// * page_size 12, bfloat16): strict rejects with window_int16_wraps exactly where the literal
// schedule on TPU v6 (int16 mask positions) leaves the definition, and v5 (int32) never does.
// The decode row at position 11 keeps key t iff 11 < int16(t + W): for W <= 32767 every key
// iff 11 + W <= 32767; past int16, with c = W mod 2^16, iff 12 <= c <= 32767 - 11.
TEST(V3Int16Window, StrictRejectsExactlyWhereV6Departs) {
  Case c = load("v3_window_int16_wraps");
  const V3Inputs& in = c.v3_inputs;
  for (int64_t w : {int64_t{1}, int64_t{32756}, int64_t{32757}, int64_t{32760}, int64_t{32767},
                    int64_t{32768}, int64_t{40000}, int64_t{65535}, int64_t{65536},
                    int64_t{65536 + 11}, int64_t{65536 + 12}, int64_t{65536 + 32756},
                    int64_t{65536 + 32757}, int64_t{1} << 20, (int64_t{1} << 20) + 100}) {
    V3Params p = c.v3_params;
    p.sliding_window = w;
    p.sm_scale = 0.08838834764831845;  // 1 / sqrt(128): every key weighs (sm_scale 1 is peaky)
    const std::optional<V3Failure> strict = v3_validate(c.dialect, in, p, Mode::kStrict);
    ASSERT_TRUE(!strict || strict->rule == V3RuleId::window_int16_wraps)
        << "W=" << w << ": " << strict->message;
    ASSERT_FALSE(v3_validate(c.dialect, in, p, Mode::kJax).has_value()) << "W=" << w;
    const V3ReferenceResult ref = v3_reference(c.dialect, in, p, Semantics::kKernel);
    const V3KernelResult v5 = v3_literal_attention(c.dialect, in, p, {.tpu_version = 5});
    const V3KernelResult v6 = v3_literal_attention(c.dialect, in, p, {.tpu_version = 6});
    const V3Comparison cmp = v3_compare(c.dialect, in, p, ref, v5.out, v5.kv_cache);
    EXPECT_TRUE(cmp.agree()) << "W=" << w << " v5: " << describe_v3_comparison(cmp);
    // The same blocks on both generations: only the mask positions differ, so v6 computes
    // v5's bits unless a kept key is masked (losing one key of twelve, W = 32757, stays within
    // the tolerance: the bits still move).
    EXPECT_EQ(v5.out.bytes().size() == v6.out.bytes().size() &&
                  std::equal(v5.out.bytes().begin(), v5.out.bytes().end(), v6.out.bytes().begin()),
              !strict.has_value())
        << "W=" << w;
    EXPECT_TRUE(std::equal(v5.kv_cache.bytes().begin(), v5.kv_cache.bytes().end(),
                           v6.kv_cache.bytes().begin()))
        << "W=" << w;
  }
}

}  // namespace
}  // namespace rpa
