// The findings where tpu-inference's kernel.py leaves the definition (corpus/findings/v3_*,
// written by tools/make_v3_findings.py with the kernel's own output and cache, TPU interpret
// mode, as `expected` / `expected_kv_cache`): tpu-inference's validators accept each (native),
// strict rejects it with the finding's rule, the literal v3 schedule reproduces the kernel
// (within the schedule tolerance, the cache bit for bit), and the definition differs from the
// kernel in exactly the rows (and the cache) worked out below from kernel.py's program.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <ostream>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>

#include <gtest/gtest.h>

#include "casefile/case_file.h"
#include "core/v3_cache_layout.h"
#include "kernel/v3_kernel.h"
#include "oracle/v3_compare.h"
#include "reference/v3_reference.h"
#include "schedule/v3_program.h"
#include "tests/v3_decode_call.h"
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

// Finding 28, the bfloat16 half: with a bfloat16 out_dtype, kernel.py holds the row max m in
// bfloat16 and takes exp(s - m) of the float32 logits s; a max that rounds down by more than
// float32's exp range (88.72) gives exp = inf and the row inf / inf = NaN. One decode row, one
// key, q = K = e_0 and sm_scale x: the logit is x exactly. At 2^15 + 88 (rounded down to 2^15
// by 88: exp(88) = 1.7e38) the kernel's row is right; at 2^15 + 89 it is NaN; strict accepts
// both, the definition is finite and 1, a float32 q (m in float32) and hd64 (m in float32)
// are right at both.
TEST(V3Finding28, AMaxRoundedToBfloat16BelowALogitByMoreThanExpsRangeIsNaN) {
  for (const double x : {32768.0 + 88.0, 32768.0 + 89.0, 65536.0 + 88.0, 65536.0 + 89.0,
                         32767.0, 16384.0 + 63.0}) {
    for (const Dialect d : {Dialect::kTpuInferenceV3, Dialect::kTpuInferenceV3Hd64}) {
      for (const DType q : {DType::kBFloat16, DType::kFloat32}) {
        const int64_t dim = d == Dialect::kTpuInferenceV3Hd64 ? 64 : 128;
        test::Call c = test::decode_call(d, q, q, dim, 1, 1, 1, 16);
        c.in.queries.set_float(0, 1.0);
        test::set_kv(c, 0, 0, false, 0, 1.0);
        test::set_kv(c, 0, 0, true, 0, 1.0);
        c.p.sm_scale = x;
        const std::string what = std::string(dialect_name(d)) + " " + std::string(dtype_name(q)) +
                                 " x=" + std::to_string(x);
        ASSERT_FALSE(v3_validate(d, c.in, c.p, Mode::kStrict).has_value()) << what;
        const V3ReferenceResult ref = v3_reference(d, c.in, c.p, Semantics::kKernel);
        EXPECT_EQ(ref.out.float_at(0), 1.0) << what;
        const V3KernelResult lit = v3_literal_attention(d, c.in, c.p, {.tpu_version = 6});
        // x - bfloat16(x) > 88.72: 2^15 + 89 and 2^16 + 89 round down by 89.
        const bool nan = d == Dialect::kTpuInferenceV3 && q == DType::kBFloat16 &&
                         (x == 32768.0 + 89.0 || x == 65536.0 + 89.0);
        EXPECT_EQ(std::isnan(lit.out.float_at(0)), nan) << what << ": " << lit.out.float_at(0);
        const V3Comparison cmp = v3_compare(d, c.in, c.p, ref, lit.out, lit.kv_cache);
        EXPECT_EQ(cmp.agree(), !nan) << what << ": " << describe_v3_comparison(cmp);
        EXPECT_EQ(cmp.past_float32, 0) << what;
        // rpa's tiled kernel holds m in float32: right everywhere.
        const V3KernelResult tiled = v3_tiled_attention(d, c.in, c.p, {.threads = 1});
        const V3Comparison t = v3_compare(d, c.in, c.p, ref, tiled.out, tiled.kv_cache,
                                          {.float32_accumulators = true});
        EXPECT_TRUE(t.agree()) << what << ": " << describe_v3_comparison(t);
      }
    }
  }
}

// Finding 28's corpus case (tools/make_v3_findings.py): bfloat16 kernel.py with k_scale 4096,
// whose logits reach 2^15 and past; the kernel's own output (TPU interpret mode) is NaN in
// some rows (inf in others: a weight of almost e^88.7 times a V past 1 overflows p.V). Strict
// and native accept it; the literal schedule reproduces the kernel; the definition is finite
// and differs in exactly the kernel's rows that are not finite, every one of which has a
// logit of at least 2^15 in magnitude (a smaller max rounds to bfloat16 within exp's range).
TEST(V3Finding28, TheCorpusCaseBreaksExactlyRowsWithALogitPast2To15) {
  const Case c = load("v3_bfloat16_max_logit_nan");
  ASSERT_TRUE(c.expected && c.expected_kv_cache);
  const V3Inputs& in = c.v3_inputs;
  const V3Params& p = c.v3_params;
  ASSERT_FALSE(v3_validate(c.dialect, in, p, Mode::kStrict).has_value());
  ASSERT_FALSE(v3_validate(c.dialect, in, p, Mode::kJax).has_value());
  const V3LiteralRun literal = v3_literal_run(c.dialect, in, p, {.tpu_version = 6}, {});
  const V3Comparison same = v3_compare_literal(c.dialect, in, literal, *c.expected, *c.expected_kv_cache);
  EXPECT_TRUE(same.agree()) << describe_v3_comparison(same);
  const V3ReferenceResult ref = v3_reference(c.dialect, in, p, Semantics::kKernel);
  const std::vector<double> allowed = v3_tolerance(c.dialect, in, p, ref);
  const int64_t hq = in.queries.dim(1), dim = in.queries.dim(2);
  const int64_t defined = in.cu_q_lens.int_at(in.distribution.int_at(2));
  int64_t nan_rows = 0;
  for (int64_t row = 0; row < defined; ++row) {
    for (int64_t h = 0; h < hq; ++h) {
      bool nan = false, differs = false;  // nan: some element is not finite
      for (int64_t col = 0; col < dim; ++col) {
        const int64_t e = (row * hq + h) * dim + col;
        ASSERT_TRUE(std::isfinite(ref.out.float_at(e)));
        nan = nan || !std::isfinite(c.expected->float_at(e));
        differs = differs || !(std::fabs(c.expected->float_at(e) - ref.out.float_at(e)) <=
                               allowed[static_cast<size_t>(e)]);
      }
      EXPECT_EQ(differs, nan) << "row " << row << ", head " << h;
      EXPECT_EQ(ref.row_past_float32[static_cast<size_t>(row * hq + h)], 0);
      if (!nan) continue;
      ++nan_rows;
      // The row's largest |logit| (kernel semantics: q.K times the scales, in double).
      const int64_t seq = ref.row_seq[static_cast<size_t>(row * hq + h)];
      ASSERT_GE(seq, 0);
      double largest = 0.0;
      const int64_t kv_len = in.kv_lens.int_at(seq), q_len = in.cu_q_lens.int_at(seq + 1) - in.cu_q_lens.int_at(seq);
      const int64_t pos = kv_len - q_len + (row - in.cu_q_lens.int_at(seq));
      const V3CacheLayout layout(c.dialect, in.kv_cache.dtype(), in.keys.dim(1), dim);
      const int64_t kh = h / (hq / in.keys.dim(1)), page_size = in.kv_cache.dim(1);
      const int64_t pps = in.page_indices.numel() / in.kv_lens.numel();
      for (int64_t t = 0; t <= pos; ++t) {
        const int64_t page = in.page_indices.int_at(seq * pps + t / page_size);
        const int64_t base = layout.token_offset(page, t % page_size, page_size) + layout.k_offset(kh);
        double dot = 0.0;
        for (int64_t col = 0; col < dim; ++col) {
          dot += in.queries.float_at((row * hq + h) * dim + col) * ref.kv_cache.float_at(base + col);
        }
        largest = std::max(largest, std::fabs(dot * p.sm_scale * p.k_scale.value_or(1.0)));
      }
      EXPECT_GE(largest, 32768.0) << "row " << row << ", head " << h;
    }
  }
  EXPECT_GT(nan_rows, 0);
}

// Finding 28, the float32 half: rows where a float32 kernel's logit may leave float32's range
// are left out of the comparison (V3ReferenceResult::row_past_float32) and counted. One key,
// q = K = 2 e_0, sm_scale 1: the logit is 4 k_scale. k_scale up to float32's largest value / 4
// (the logit just fits; the bound's dot rounding takes 2^-14 of it) is compared and the tiled
// kernel agrees; past it (half the largest value, the largest: a float32 logit of inf, inf -
// inf in the softmax) the row is left out, and the tiled kernel is NaN there while the
// definition is finite. The row's second key (logit 0) changes nothing; the other sequence's
// row, whose logits stay small, is still compared, and a NaN there is still a mismatch.
TEST(V3Finding28, RowsWhoseFloat32LogitsMayOverflowAreLeftOutAndCounted) {
  const double big = static_cast<double>(std::numeric_limits<float>::max());
  for (const Dialect d : {Dialect::kTpuInferenceV3, Dialect::kTpuInferenceV3Hd64}) {
    for (const double k_scale : {big / 8.0, big / 4.0 * (1.0 - 0x1p-14), big / 2.0, big}) {
      const int64_t dim = d == Dialect::kTpuInferenceV3Hd64 ? 64 : 128;
      test::Call c = test::decode_call(d, DType::kFloat32, DType::kFloat32, dim, 1, 2, 2, 16);
      for (int64_t s = 0; s < 2; ++s) {
        test::set_kv(c, s, 1, true, 0, 1.0);
        test::set_kv(c, s, 0, true, 1, 1.0);
      }
      c.in.queries.set_float(0, 2.0);  // sequence 0's row: key 1's logit 4 k_scale
      test::set_kv(c, 0, 1, false, 0, 2.0);
      c.in.queries.set_float(dim + 1, 1e-37);  // sequence 1's row: logits 1e-37 k_scale, 0
      test::set_kv(c, 1, 1, false, 1, 1.0);
      c.p.sm_scale = 1.0;
      c.p.k_scale = k_scale;
      const std::string what = std::string(dialect_name(d)) + " k_scale=" + std::to_string(k_scale);
      ASSERT_FALSE(v3_validate(d, c.in, c.p, Mode::kStrict).has_value()) << what;
      const bool past = k_scale > big / 4.0;
      const V3ReferenceResult ref = v3_reference(d, c.in, c.p, Semantics::kKernel);
      EXPECT_EQ(ref.row_past_float32[0], past ? 1 : 0) << what;
      EXPECT_EQ(ref.row_past_float32[1], 0) << what;
      EXPECT_NEAR(ref.out.float_at(0), 1.0, 1e-6) << what;  // key 1 takes all the weight
      const V3KernelResult tiled = v3_tiled_attention(d, c.in, c.p, {.threads = 1});
      EXPECT_EQ(std::isnan(tiled.out.float_at(0)), past) << what;
      const V3Comparison cmp = v3_compare(d, c.in, c.p, ref, tiled.out, tiled.kv_cache,
                                          {.float32_accumulators = true});
      EXPECT_TRUE(cmp.agree()) << what << ": " << describe_v3_comparison(cmp);
      EXPECT_EQ(cmp.past_float32, past ? 1 : 0) << what;
      EXPECT_EQ(cmp.compared, (past ? 1 : 2) * dim) << what;
      // A NaN on the compared row is still a mismatch.
      Tensor wrong = tiled.out;
      wrong.set_float(dim, std::numeric_limits<float>::quiet_NaN());
      EXPECT_FALSE(v3_compare(d, c.in, c.p, ref, wrong, tiled.kv_cache, {.float32_accumulators = true}).agree())
          << what;
    }
  }
}

}  // namespace
}  // namespace rpa
