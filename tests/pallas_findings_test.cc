// The findings where JAX's Pallas kernel leaves the definition (corpus/findings, written by
// tools/make_findings.py with the Pallas kernel's own output, TPU interpret mode, as
// `expected`): the literal schedule reproduces `expected` within the schedule tolerance,
// and the dense reference differs from it in exactly the rows and heads the finding names
// (worked out by hand below from the Pallas program, schedule/jax_program.h).
#include <cmath>
#include <cstdint>
#include <ostream>
#include <stdexcept>
#include <set>
#include <string>
#include <utility>

#include <gtest/gtest.h>

#include "casefile/case_file.h"
#include "core/jax_kv_view.h"
#include "core/paged_kv_view.h"
#include "kernel/jax_kernel.h"
#include "oracle/compare.h"
#include "oracle/jax_tolerance.h"
#include "oracle/tolerance.h"
#include "reference/jax_reference.h"
#include "validation/jax_validate.h"

namespace rpa {
namespace {

struct Finding {
  std::string name;
  std::set<int64_t> rows;   // q rows where the Pallas kernel's answer is not the definition's
  std::set<int64_t> heads;  // and the query heads
  // Every one of them differs beyond the tolerance (a wrong KV block, a stale accumulator);
  // false: they may (a weight of exp(mask_value - m) can be below the tolerance).
  bool all_differ = true;
};

void PrintTo(const Finding& f, std::ostream* os) { *os << f.name; }

Case load(const std::string& name) {
  CaseReadResult r = read_case_file(std::string(RPA_SOURCE_DIR) + "/corpus/findings/" + name +
                                        ".npz",
                                    CaseReadOptions{});
  if (!r.value) throw std::runtime_error(r.error);
  return std::move(*r.value);
}

class PallasFinding : public ::testing::TestWithParam<Finding> {};

TEST_P(PallasFinding, LiteralScheduleIsThePallasKernelAndNotTheDefinition) {
  const Finding& f = GetParam();
  const Case c = load(f.name);
  ASSERT_TRUE(c.expected.has_value()) << "no Pallas output stored";
  ASSERT_FALSE(validate(c.inputs, c.params, {.mode = Mode::kJax}).has_value());
  ASSERT_TRUE(validate(c.inputs, c.params, {.mode = Mode::kStrict}).has_value());
  const PagedKvView view = kv_view(c.inputs);

  const KernelOptions literal_options{.literal_schedule = true, .untuned_blocks = true};
  const Tensor literal = tiled_attention(c.inputs, c.params, literal_options);
  const KernelPlan plan = plan_kernel(c.inputs, c.params, literal_options.target, true);
  const Comparison same = compare_outputs(*c.expected, literal, view,
                                          schedule_tolerance(c.inputs, c.params, plan));
  EXPECT_TRUE(same.agree()) << describe_mismatch(same);

  const ReferenceResult ref = dense_reference(c.inputs, c.params);
  const Tolerance tol = tolerance_for_case(c.inputs, c.params, ref);
  std::set<int64_t> rows, heads;
  const int64_t d = view.head_dim();
  for (int64_t row = 0; row < view.total_q_tokens(); ++row) {
    for (int64_t h = 0; h < view.num_q_heads(); ++h) {
      for (int64_t col = 0; col < d; ++col) {
        const int64_t at = view.q_offset(row, h) + col;
        const double a = c.expected->float_at(at), b = ref.out.float_at(at);
        if (!(std::fabs(a - b) <= tol.allowed(at, b))) {
          rows.insert(row);
          heads.insert(h);
        }
      }
    }
  }
  EXPECT_FALSE(rows.empty());
  if (f.all_differ) {
    EXPECT_EQ(rows, f.rows);
    EXPECT_EQ(heads, f.heads);
  } else {
    for (int64_t r : rows) EXPECT_TRUE(f.rows.contains(r)) << "row " << r;
    for (int64_t h : heads) EXPECT_TRUE(f.heads.contains(h)) << "head " << h;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Corpus, PallasFinding,
    ::testing::Values(
        // Finding 2: bkv = 4 pages of 4 tokens, so every sequence's one KV block has slots
        // past kv_len (5, 7 and 2 keys of 16), weighted exp(-1 - m) in the softmax's sum:
        // any row, any head, as far as exp(-1 - m) is not negligible (5 of the 6 rows here).
        Finding{"mask_value_small_pads", {0, 1, 2, 3, 4, 5}, {0, 1, 2, 3}, false},
        // Finding 8: sequence 1 is empty; sequence 2 (rows 1..2) reads its prefetched block.
        Finding{"empty_sequence_stale_block", {1, 2}, {0, 1, 2, 3}},
        // Finding 9: 8 q heads in two heads blocks of 4; rows 0..3 end query block 0 and
        // sequence 2 is empty: heads block 1 never computes rows 0..3.
        Finding{"trailing_empty_sequence_skips_rows", {0, 1, 2, 3}, {4, 5, 6, 7}}),
    [](const ::testing::TestParamInfo<Finding>& p) { return p.param.name; });

}  // namespace
}  // namespace rpa
