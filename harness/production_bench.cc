#include "harness/production_bench.h"

#include <algorithm>
#include <array>

#include "casegen/generate.h"
#include "casegen/production.h"
#include "harness/input_families.h"

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
  fuzz::family_of(call.dialect).time_production(s, threads, progress, t);
  return t;
}

}  // namespace rpa::bench
