#include "harness/production_bench.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <optional>
#include <stdexcept>
#include <utility>

#include "core/jax_kv_view.h"
#include "core/paged_kv_view.h"
#include "kernel/jax_kernel.h"
#include "kernel/v3_kernel.h"
#include "oracle/compare.h"
#include "oracle/jax_tolerance.h"
#include "oracle/tolerance.h"
#include "oracle/v3_compare.h"
#include "casegen/generate.h"
#include "casegen/jax_materialize.h"
#include "casegen/production.h"
#include "casegen/v3_production.h"
#include "casegen/jax_production.h"
#include "casegen/v3_materialize.h"
#include "reference/jax_reference.h"
#include "reference/v3_reference.h"
#include "schedule/v3_program.h"
#include "validation/jax_validate.h"
#include "validation/v3_validate.h"

namespace rpa::bench {
namespace {

// Seeds found by scanning seeds 0..1499 of each dialect's recipes (rpa.production_recipe) for
// the longest context, the most slots at the MAC bound, and kernel.py's int16 edge.
constexpr std::array<ProductionBenchCall, 7> kCalls = {{
    {"jax-long", Dialect::kJax, 408,
     "llama-3-70b-tp8, a 131072-token sequence among 43, page_size 256, window 128"},
    {"jax-serving", Dialect::kJax, 496,
     "llama-3.1-405b 128/8 heads, 512 decodes up to 25429 tokens, fp8 cache, soft cap"},
    {"v3-long", Dialect::kTpuInferenceV3, 256,
     "llama-3-70b-tp8, 512 decodes up to 131072 tokens, window 1024"},
    {"v3-serving", Dialect::kTpuInferenceV3, 67,
     "llama-3-70b-tp8 float32, 512 slots: 506 decodes, a 317-row prefill, 5 chunks"},
    {"v3-int16-edge", Dialect::kTpuInferenceV3, 409,
     "390 sequences, pages_per_seq * page_size = 32752: int16 positions on v6 and v7"},
    {"hd64-long", Dialect::kTpuInferenceV3Hd64, 26,
     "gpt-oss-120b-tp4 with sinks, 473 sequences, one of 131072 tokens"},
    {"hd64-serving", Dialect::kTpuInferenceV3Hd64, 67,
     "gpt-oss-20b 64/8 heads float32, 512 slots: 506 decodes, a 203-row prefill, 5 chunks"},
}};

using Clock = std::chrono::steady_clock;

// Runs f, appends a stage with its wall time, and returns what f returned.
template <class F>
auto timed(std::vector<ProductionStage>& stages, std::string name,
           const std::function<void(std::string_view)>& progress, F&& f) {
  if (progress) progress(name);
  const Clock::time_point t0 = Clock::now();
  auto result = f();
  ProductionStage stage;
  stage.name = std::move(name);
  stage.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  stages.push_back(std::move(stage));
  return result;
}

void record(ProductionStage& stage, bool agree, std::string mismatch) {
  stage.checked = true;
  stage.agree = agree;
  if (!agree) stage.mismatch = std::move(mismatch);
}

void time_jax(const props::ProductionSpec& s, int threads,
              const std::function<void(std::string_view)>& progress, ProductionTiming& t) {
  const props::Materialized m =
      timed(t.stages, "materialize", progress, [&] { return props::materialize(props::production_case(s)); });
  const std::optional<Failure> rejected = timed(t.stages, "validate", progress, [&] {
    std::optional<Failure> f = validate(m.inputs, m.params, {.mode = Mode::kStrict});
    return f ? f : validate(m.inputs, m.params, {.mode = Mode::kJax});
  });
  if (rejected) throw std::logic_error("production call rejected: " + rejected->message);
  const ReferenceResult ref = timed(t.stages, "reference", progress,
                                    [&] { return dense_reference(m.inputs, m.params, Semantics::kKernel); });
  const Tolerance tol = tolerance_for_case(m.inputs, m.params, ref);
  const PagedKvView view = kv_view(m.inputs);
  const Tensor tiled = timed(t.stages, "tiled", progress, [&] {
    return tiled_attention(m.inputs, m.params, {.threads = threads});
  });
  const Comparison a = compare_outputs(tiled, ref.out, view, tol);
  record(t.stages.back(), a.agree(), describe_mismatch(a));
  const Tensor literal = timed(t.stages, "literal", progress, [&] {
    return tiled_attention(m.inputs, m.params, {.literal_schedule = true});
  });
  const Comparison b = compare_outputs(literal, ref.out, view, tol);
  record(t.stages.back(), b.agree(), describe_mismatch(b));
}

void time_v3(const props::ProductionSpec& s, int threads,
             const std::function<void(std::string_view)>& progress, ProductionTiming& t) {
  const Dialect d = s.dialect;
  const props::V3Materialized m = timed(t.stages, "materialize", progress,
                                        [&] { return props::materialize_v3(props::production_v3_case(s)); });
  const std::optional<V3Failure> rejected = timed(t.stages, "validate", progress, [&] {
    std::optional<V3Failure> f = v3_validate(d, m.inputs, m.params, Mode::kStrict);
    return f ? f : v3_validate(d, m.inputs, m.params, Mode::kJax);
  });
  if (rejected) throw std::logic_error("production call rejected: " + rejected->message);
  const V3ReferenceResult ref = timed(t.stages, "reference", progress, [&] {
    return v3_reference(d, m.inputs, m.params, Semantics::kKernel);
  });
  const V3KernelResult tiled = timed(t.stages, "tiled", progress, [&] {
    return v3_tiled_attention(d, m.inputs, m.params, {.threads = threads});
  });
  const V3Comparison a = v3_compare(d, m.inputs, m.params, ref, tiled.out, tiled.kv_cache, kRpaTolerance);
  record(t.stages.back(), a.agree(), describe_v3_comparison(a));
  for (int version : {5, 6, 7}) {
    const V3KernelResult lit = timed(t.stages, "literal v" + std::to_string(version), progress, [&] {
      return v3_literal_attention(d, m.inputs, m.params, {.tpu_version = version});
    });
    const V3Comparison b = v3_compare(d, m.inputs, m.params, ref, lit.out, lit.kv_cache);
    record(t.stages.back(), b.agree(), describe_v3_comparison(b));
  }
}

}  // namespace

std::span<const ProductionBenchCall> production_bench_calls() { return kCalls; }

bool ProductionTiming::agree() const {
  return std::all_of(stages.begin(), stages.end(), [](const ProductionStage& s) { return s.agree; });
}

double ProductionTiming::total_seconds() const {
  double sum = 0.0;
  for (const ProductionStage& s : stages) sum += s.seconds;
  return sum;
}

ProductionTiming time_production_call(const ProductionBenchCall& call, int threads,
                                      const std::function<void(std::string_view)>& progress) {
  const props::ProductionSpec s = props::seeded_production_spec(call.seed, call.dialect);
  ProductionTiming t;
  t.call = call;
  t.spec = props::production_spec_hex(s);
  t.description = props::describe(s);
  t.num_seqs = static_cast<int64_t>(s.seqs.size());
  t.rows = s.padded_tokens();
  t.max_kv_len = s.max_kv_len();
  t.macs = s.macs();
  t.memory_bytes = s.memory_bytes();
  if (is_v3(call.dialect)) {
    time_v3(s, threads, progress, t);
  } else {
    time_jax(s, threads, progress, t);
  }
  return t;
}

}  // namespace rpa::bench
