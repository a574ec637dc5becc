// Properties of the tiled kernel on tpu-inference v3 calls (DESIGN.md sections 9 and 16):
// v3_tiled_attention (the fused KV-cache update, then the default schedule over the packed
// cache) against the dense v3 reference in kernel semantics on generated strict-valid cases
// of both dialects and every batch profile (the cache bit for bit, the output within the
// tolerance rpa's float32 accumulators earn, kRpaTolerance), its determinism, and the
// tolerance's power: slips planted in the kernel's call are caught wherever they move the
// answer past the tolerance.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "kernel/v3_kernel.h"
#include "oracle/v3_compare.h"
#include "properties/v3_kernel_check.h"
#include "casegen/v3_materialize.h"
#include "properties/v3_rc_case.h"
#include "properties/sanitized.h"
#include "reference/v3_reference.h"
#include "schedule/v3_program.h"
#include "validation/v3_validate.h"

namespace rpa::props {
namespace {

void classify(const V3CaseSpec& spec) {
  RC_TAG(dialect_name(spec.dialect), profile_name(spec.profile));
  RC_CLASSIFY(spec.q_dtype == DType::kBFloat16, "bfloat16 q");
  RC_CLASSIFY(spec.kv_dtype != spec.q_dtype, "float8 kv");
}

void check_matches_reference(const V3CaseSpec& spec) {
  classify(spec);
  const V3Materialized m = materialize_v3(spec);
  const Dialect d = spec.dialect;
  assert_v3_strict_valid(d, m.inputs, m.params);
  const int threads = *rc::gen::inRange(1, 3).as("threads");
  const V3ReferenceResult ref = v3_reference(d, m.inputs, m.params, Semantics::kKernel);
  const V3KernelResult got = v3_tiled_attention(d, m.inputs, m.params, {.threads = threads});
  assert_v3_agrees(
      d, m.inputs, m.params, ref, got.out, got.kv_cache,
      std::string(dialect_name(d)) + (spec.q_dtype == DType::kBFloat16 ? " bf16" : " f32"));
}

RC_GTEST_PROP(V3Kernel, MatchesReference, ()) { check_matches_reference(*gen_v3_case()); }

RC_GTEST_PROP(V3Kernel, MatchesReferenceAtLongContext, ()) {
  check_matches_reference(*gen_v3_case(sanitized_long(v3_long_options())));
}

RC_GTEST_PROP(V3Kernel, MatchesReferenceAtTheEdges, ()) {
  check_matches_reference(*gen_v3_case(v3_edge_options()));
}

// Same case, same bits: on repeat and for 1, 2 and 3 threads (tasks follow from the shape,
// every sum has one order), the output and the updated cache alike.
RC_GTEST_PROP(V3Kernel, IsDeterministic, ()) {
  const V3CaseSpec spec = *gen_v3_case();
  classify(spec);
  const V3Materialized m = materialize_v3(spec);
  RC_ASSERT(materialize_v3(spec).inputs == m.inputs);
  const V3KernelResult one = v3_tiled_attention(spec.dialect, m.inputs, m.params, {.threads = 1});
  for (int threads : {1, 2, 3}) {
    const V3KernelResult again =
        v3_tiled_attention(spec.dialect, m.inputs, m.params, {.threads = threads});
    RC_ASSERT(same_bits(again.out, one.out));
    RC_ASSERT(same_bits(again.kv_cache, one.kv_cache));
  }
}

// The literal v3 schedule (schedule/v3_program.h: tpu-inference's program step by step, with
// its out_dtype accumulators) on strict-valid calls of either dialect, on a drawn TPU
// generation (hd64 calls without block sizes get drawn ones; the program needs them): the
// The call's keywords, with hd64's block sizes drawn where it names none (the literal hd64
// schedule needs them; discarded where strict mode rejects the draw).
V3Params with_hd64_blocks(Dialect d, const V3Materialized& m) {
  V3Params p = m.params;
  if (d != Dialect::kTpuInferenceV3Hd64) return p;
  const int64_t pps = m.inputs.page_indices.dim(0) / std::max<int64_t>(m.inputs.kv_lens.dim(0), 1);
  if (!p.num_kv_pages_per_block) {
    p.num_kv_pages_per_block = *rc::gen::inRange<int64_t>(1, std::max<int64_t>(pps, 1) + 1).as("bkv_p");
  }
  if (!p.num_queries_per_block) p.num_queries_per_block = *rc::gen::inRange<int64_t>(1, 17).as("bq");
  if (v3_validate(d, m.inputs, p, Mode::kStrict)) RC_DISCARD("the drawn hd64 blocks are invalid");
  return p;
}

// cache bit for bit and the output within the v3 kernel's tolerance of the definition, and
// every row past the sequences as the aliased q array leaves it: the queries (kernel.py), 0
// (hd64, whose output is the upper 64 lanes of q padded to 128).
RC_GTEST_PROP(V3Literal, MatchesReference, ()) {
  const V3CaseSpec spec = *gen_v3_case();
  classify(spec);
  const V3Materialized m = materialize_v3(spec);
  const Dialect d = spec.dialect;
  assert_v3_strict_valid(d, m.inputs, m.params);
  const V3Params p = with_hd64_blocks(d, m);
  const int version = *rc::gen::inRange(5, 8).as("tpu_version");
  const V3KernelResult got = v3_literal_attention(d, m.inputs, p, {.tpu_version = version});
  const V3ReferenceResult ref = v3_reference(d, m.inputs, p, Semantics::kKernel);
  const V3Comparison c = v3_compare(d, m.inputs, p, ref, got.out, got.kv_cache);
  if (!c.agree()) RC_LOG() << describe_v3_comparison(c) << "\n";
  RC_ASSERT(c.agree());
  v3_share_tally().add(std::string("literal ") + std::string(dialect_name(d)) +
                           (spec.q_dtype == DType::kBFloat16 ? " bf16" : " f32"),
                       c.max_share);
  const int64_t rows = m.inputs.cu_q_lens.int_at(m.inputs.distribution.int_at(2));
  const int64_t width = m.inputs.queries.dim(1) * m.inputs.queries.dim(2);
  const size_t bytes = static_cast<size_t>(dtype_size(m.inputs.queries.dtype()));
  const size_t from = static_cast<size_t>(rows * width) * bytes;
  const size_t rest = static_cast<size_t>(got.out.numel()) * bytes - from;
  if (rest == 0) return;  // (memcmp of no bytes may get null pointers: UBSan)
  const std::vector<std::byte> zeros(rest, std::byte{0});
  const std::byte* want = d == Dialect::kTpuInferenceV3Hd64 ? zeros.data() : m.inputs.queries.data() + from;
  const bool rows_as_left = std::memcmp(got.out.data() + from, want, rest) == 0;
  RC_ASSERT(rows_as_left);
}

// The literal schedule's bound holds every legal run (oracle/v3_compare.h, issue 47): the
// literal lies in its own enclosure, and a second run of the same program that computes what
// another implementation may (its float32 dots and row sums reversed, pairwise or blocked as
// an MXU, exp and tanh up to 2^-21 of themselves off, the multiply-adds fused, kernel.py's row sum in A as
// a float32 sum rounded once) is accepted, on every generated strict-valid call the literal
// schedule runs.
RC_GTEST_PROP(V3Literal, ItsBoundHoldsEverySecondRun, ()) {
  const V3CaseSpec spec = *gen_v3_case();
  classify(spec);
  const V3Materialized m = materialize_v3(spec);
  const Dialect d = spec.dialect;
  assert_v3_strict_valid(d, m.inputs, m.params);
  const V3Params p = with_hd64_blocks(d, m);
  const int version = *rc::gen::inRange(5, 8).as("tpu_version");
  V3SecondRun how;
  how.order = *rc::gen::element(V3DotOrder::kForward, V3DotOrder::kReversed, V3DotOrder::kPairwise,
                                V3DotOrder::kBlocked128, V3DotOrder::kBlocked256)
                   .as("order");
  how.exp_ulps = *rc::gen::inRange(-8, 9).as("exp ulps");
  how.fused = *rc::gen::arbitrary<bool>().as("fused");
  how.row_sum_once = *rc::gen::arbitrary<bool>().as("row sum in float32 once");
  RC_TAG(how.order == V3DotOrder::kForward ? "forward" : "reordered");
  const V3LiteralRun lit = v3_literal_run(d, m.inputs, p, {.tpu_version = version});
  RC_ASSERT(lit.outside == 0);
  const V3KernelResult other = v3_literal_attention(d, m.inputs, p, {.tpu_version = version, .second_run = how});
  const V3Comparison c = v3_compare_literal(d, m.inputs, lit, other.out, other.kv_cache);
  if (!c.agree()) RC_LOG() << describe_v3_comparison(c) << "\n";
  RC_ASSERT(c.agree());
  v3_share_tally().add(std::string("second run under the literal's bound ") + std::string(dialect_name(d)) +
                           (spec.q_dtype == DType::kBFloat16 ? " bf16" : " f32"),
                       c.max_share);
}

// A slip planted in what the kernel is asked to compute.
enum class Slip { kSmScale, kVScale, kOldestKeyDropped };

const char* slip_name(Slip s) {
  switch (s) {
    case Slip::kSmScale:
      return "sm_scale 5% high";
    case Slip::kVScale:
      return "v_scale 5% high";
    case Slip::kOldestKeyDropped:
      return "oldest key dropped";
  }
  return "?";
}

// The slipped keywords, or nullopt where the slip changes nothing the call computes.
std::optional<V3Params> slipped(Slip s, const V3CaseSpec& spec, V3Params p) {
  switch (s) {
    case Slip::kSmScale:
      p.sm_scale *= 1.05;
      return p;
    case Slip::kVScale:
      p.v_scale = p.v_scale.value_or(1.0) * 1.05;
      return p;
    case Slip::kOldestKeyDropped: {
      // A window one token short of what the longest sequence's last row sees: its oldest
      // key (and, in other rows, whatever that window newly cuts) gets weight 0.
      const int64_t span = std::min(spec.max_kv_len(), p.sliding_window.value_or(INT64_MAX));
      if (span < 2) return std::nullopt;
      p.sliding_window = span - 1;
      return p;
    }
  }
  return std::nullopt;
}

// The tolerance can fail: the kernel run with a slip is compared with the reference of the
// call as given. Wherever the slip moves the exact answer by more than twice the allowance
// at some element (so no implementation within the tolerance of the slipped answer is within
// it of the true one), the comparison must reject. How often a slip moves the answer that far,
// and how often each tolerance catches it, is reported in the tags.
RC_GTEST_PROP(V3Tolerance, CanFail, ()) {
  const V3CaseSpec spec = *gen_v3_case();
  const Slip slip = *rc::gen::element(Slip::kSmScale, Slip::kVScale, Slip::kOldestKeyDropped);
  const Dialect d = spec.dialect;
  const V3Materialized m = materialize_v3(spec);
  const std::optional<V3Params> bad = slipped(slip, spec, m.params);
  const std::string tag =
      std::string(slip_name(slip)) + (spec.q_dtype == DType::kBFloat16 ? ", bf16 q" : ", f32 q");
  if (!bad || spec.num_seqs() == 0) {
    RC_TAG(tag, "no effect possible");
    return;
  }
  const V3ReferenceResult ref = v3_reference(d, m.inputs, m.params, Semantics::kKernel);
  const V3ReferenceResult moved = v3_reference(d, m.inputs, *bad, Semantics::kKernel);
  const std::vector<double> allowed = v3_tolerance(d, m.inputs, m.params, ref, kRpaTolerance);
  double move_share = 0.0;
  const int64_t defined = m.inputs.cu_q_lens.int_at(m.inputs.distribution.int_at(2)) *
                          m.inputs.queries.dim(1) * m.inputs.queries.dim(2);
  for (int64_t e = 0; e < defined; ++e) {
    const double diff = std::fabs(moved.out.float_at(e) - ref.out.float_at(e));
    const double a = allowed[static_cast<size_t>(e)];
    if (diff > 0.0) move_share = std::max(move_share, a > 0.0 ? diff / a : INFINITY);
  }
  const V3KernelResult got = v3_tiled_attention(d, m.inputs, *bad, {.threads = 1});
  const V3Comparison tight =
      v3_compare(d, m.inputs, m.params, ref, got.out, got.kv_cache, kRpaTolerance);
  const V3Comparison loose = v3_compare(d, m.inputs, m.params, ref, got.out, got.kv_cache);
  RC_LOG() << slip_name(slip) << ": the exact answer moves by " << move_share
           << " of the tolerance; float32-accumulator tolerance: " << describe_v3_comparison(tight)
           << "; v3 kernel's tolerance: " << describe_v3_comparison(loose) << "\n";
  const char* moved_class = move_share > 2.0   ? "moves > 2x tolerance"
                            : move_share > 0.0 ? "moves <= 2x tolerance"
                                               : "no effect";
  RC_TAG(tag, moved_class, tight.agree() ? "passed" : "caught (f32-acc tol)",
         loose.agree() ? "passed" : "caught (v3 tol)");
  if (move_share > 2.0) RC_ASSERT(!tight.agree());
  // The slip never touches the cache: the fused update is checked bit for bit apart from it.
  RC_ASSERT(tight.cache_equal);
}

}  // namespace
}  // namespace rpa::props
