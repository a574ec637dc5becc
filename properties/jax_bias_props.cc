// The bias verdict (oracle/bias.h) both ways, on the property generators' bfloat16 cases:
// the tiled kernel is never found biased, and a planted truncation of its final cast (round
// toward zero instead of to nearest even: inside every tolerance, which a property checks)
// is found on the default budget.
//
// The planted kernel: the tiled kernel run with q widened to float32 (exact: the same
// values, so the same products, logits, weights and float32 accumulation, without scales,
// which would round K_eff and V_eff to q's dtype), its float32 output then cast to bfloat16
// by truncation. Cast to nearest even instead, the same output is the control.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "core/jax_kv_view.h"
#include "core/paged_kv_view.h"
#include "kernel/jax_kernel.h"
#include "oracle/compare.h"
#include "oracle/jax_tolerance.h"
#include "oracle/tolerance.h"
#include "casegen/jax_materialize.h"
#include "properties/jax_rc_case.h"
#include "reference/jax_reference.h"
#include "validation/jax_validate.h"

namespace rpa::props {
namespace {

// A generated case with q in bfloat16 and no k_scale or v_scale, strict-valid both so and
// with q widened to float32 (wide: what the planted kernel runs; its larger q blocks may
// exceed a small vmem_limit_bytes).
struct Bf16Case {
  Materialized m;
  Inputs wide;
};

Bf16Case bfloat16_case() {
  // Changed inside the generator, so that a counterexample prints (and replays) as run.
  const CaseSpec spec = *rc::gen::map(gen_valid_case(), [](CaseSpec s) {
    s.q_dtype = DType::kBFloat16;
    s.params.k_scale.reset();
    s.params.v_scale.reset();
    return s;
  });
  Bf16Case c{materialize(spec), {}};
  c.wide = c.m.inputs;
  c.wide.q = Tensor(DType::kFloat32, c.m.inputs.q.shape());
  for (int64_t i = 0; i < c.wide.q.numel(); ++i) c.wide.q.set_float(i, c.m.inputs.q.float_at(i));
  RC_PRE(!validate(c.m.inputs, c.m.params, {.mode = Mode::kStrict}).has_value());
  RC_PRE(!validate(c.wide, c.m.params, {.mode = Mode::kStrict}).has_value());
  return c;
}

// The kernel's float32 output before its final cast.
Tensor float32_output(const Bf16Case& c) { return tiled_attention(c.wide, c.m.params, {}); }

// f cast to bfloat16: to nearest even, or truncated (toward zero; NaN stays NaN).
Tensor to_bfloat16(const Tensor& f, bool truncate) {
  Tensor out(DType::kBFloat16, f.shape());
  for (int64_t i = 0; i < f.numel(); ++i) {
    const double v = f.float_at(i);
    if (!truncate || std::isnan(v)) {
      out.set_float(i, v);
      continue;
    }
    const auto bits = static_cast<uint16_t>(std::bit_cast<uint32_t>(static_cast<float>(v)) >> 16);
    std::memcpy(out.data() + 2 * i, &bits, 2);
  }
  return out;
}

Comparison against_reference(const Materialized& m, const Tensor& got) {
  const ReferenceResult ref = dense_reference(m.inputs, m.params, Semantics::kKernel);
  return compare_outputs(got, ref.out, kv_view(m.inputs), tolerance_for_case(m.inputs, m.params, ref));
}

void log_bias(const char* what, const Comparison& c) {
  RC_LOG() << what << ": mean " << c.bias.mean_signed() << " ulp (SE " << c.bias.se_signed()
           << "), toward zero " << -c.bias.mean_magnitude() << " (SE " << c.bias.se_magnitude()
           << "), " << c.bias.elements << " elements in " << c.bias.units << " units, "
           << c.bias.exact_share() << " exact\n";
}

// The unmodified kernel, and its float32 output cast to nearest even, agree and are never
// biased.
RC_GTEST_PROP(Bias, UnmodifiedKernelIsNeverBiased, ()) {
  const Bf16Case c = bfloat16_case();
  const Materialized& m = c.m;
  const Comparison kernel = against_reference(m, tiled_attention(m.inputs, m.params, {}));
  log_bias("kernel", kernel);
  RC_ASSERT(kernel.agree());
  RC_ASSERT(!kernel.bias.biased());
  const Comparison nearest = against_reference(m, to_bfloat16(float32_output(c), false));
  log_bias("float32 output cast to nearest even", nearest);
  RC_ASSERT(nearest.agree());
  RC_ASSERT(!nearest.bias.biased());
  RC_CLASSIFY(kernel.bias.units >= 75, "75 or more (row, head) units");
}

// The planted truncation stays inside the tolerance on every case: only the bias verdict can
// see it.
RC_GTEST_PROP(Bias, PlantedTruncationStaysInsideTheTolerance, ()) {
  const Bf16Case c = bfloat16_case();
  const Comparison cmp = against_reference(c.m, to_bfloat16(float32_output(c), true));
  log_bias("truncated", cmp);
  RC_ASSERT(cmp.agree());
}

// RapidCheck's default budget (RC_PARAMS honoured) of such cases finds the truncation biased:
// the run itself must pass (no exception, not too many discards), and count at least one
// case that agrees and is flagged. (A run that fails is reported as such, not as found.)
TEST(Bias, PlantedTruncationIsFlaggedOnTheDefaultBudget) {
  int64_t cases = 0, flagged = 0, powered = 0;
  const bool ran = rc::check("a truncated final cast, judged", [&] {
    const Bf16Case c = bfloat16_case();
    const Comparison cmp = against_reference(c.m, to_bfloat16(float32_output(c), true));
    ++cases;
    if (cmp.bias.units >= 75) ++powered;
    if (cmp.agree() && cmp.bias.biased()) ++flagged;
  });
  EXPECT_TRUE(ran) << "the run itself failed (an exception, or too many discards)";
  EXPECT_GT(flagged, 0) << "the truncation was never flagged in " << cases << " cases";
  std::printf("truncation flagged biased in %lld of %lld cases (%lld with 75 or more (row, "
              "head) units)\n",
              static_cast<long long>(flagged), static_cast<long long>(cases),
              static_cast<long long>(powered));
}

}  // namespace
}  // namespace rpa::props
