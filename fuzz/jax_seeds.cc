// The jax family's part of the seed writer (fuzz/seed_family.h): its seeds of fuzz_validate,
// fuzz_differential and fuzz_raw_inputs (generated cases encoded with the targets' own
// decoders, harness/jax_target_inputs.h, casegen/jax_raw_call.h: valid cases, every named
// mutation in each of its variants, and JAX's test scenarios in small form), its production
// calls' mutations, its round trips, and what the fuzz_validate corpus must reach of it (every
// rule in every mode, every mutation and every value class of the edge parameters).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "casegen/jax_build_case.h"
#include "casegen/jax_case_codec.h"
#include "casegen/jax_materialize.h"
#include "casegen/jax_mutation.h"
#include "casegen/jax_production.h"
#include "casegen/jax_raw_call.h"
#include "casegen/jax_spec_model.h"
#include "casegen/random_source.h"
#include "fuzz/seed_family.h"
#include "harness/jax_target_inputs.h"
#include "harness/target_inputs.h"
#include "validation/jax_rule.h"
#include "validation/jax_validate.h"
#include "validation/target_profile.h"

namespace {

using namespace rpa;
using fuzz::round_trip_failed;
using fuzz::Seeds;
using props::BuildOptions;
using props::CaseSpec;

CaseSpec random_case(uint64_t seed, BuildOptions options, int size = 100) {
  options.max_mutations = 0;
  props::RandomSource source(seed, size);
  return props::build_case(source, options);
}

// One of JAX's test scenarios (ragged_paged_attention_test.py) in small form: its (q_len,
// kv_len) mix scaled down, pages in order as the test lays them out, no padding slots.
struct Scenario {
  const char* name;
  std::vector<props::SeqSpec> seqs;
  int64_t num_kv_heads, q_per_kv, head_dim, page_size;
  DType kv_dtype = DType::kFloat32;
  Params params = {};
};

// Clamps a scenario into the options' bounds; the result is a spec build_case could draw.
CaseSpec scenario_case(const Scenario& sc, const BuildOptions& o) {
  CaseSpec s;
  s.profile = props::Profile::kMixed;
  s.q_dtype = DType::kFloat32;
  s.kv_dtype = sc.kv_dtype;
  s.num_kv_heads = sc.num_kv_heads;
  s.q_per_kv = sc.q_per_kv;
  s.head_dim = std::min(sc.head_dim, o.max_head_dim);
  s.page_size = std::min(sc.page_size, o.max_page_size);
  for (props::SeqSpec q : sc.seqs) {
    if (s.num_seqs() == o.max_seqs) break;
    q.kv_len = std::min(q.kv_len, o.max_kv_len);
    q.q_len = std::min(q.q_len, q.kv_len);
    s.seqs.push_back(q);
  }
  s.max_num_seqs = std::max<int64_t>(s.num_seqs(), 1);
  s.pages_per_seq = std::max<int64_t>(1, props::pages_for(s.max_kv_len(), s.page_size));
  int64_t next = 0;
  s.page_indices.assign(static_cast<size_t>(s.max_num_seqs * s.pages_per_seq), 0);
  for (int64_t i = 0; i < s.max_num_seqs; ++i) {
    for (int64_t j = 0; j < props::read_page_entries(s, i); ++j) {
      s.page_indices[static_cast<size_t>(i * s.pages_per_seq + j)] = next++;
    }
  }
  s.num_pages = std::max<int64_t>(next, 1);
  s.max_num_batched_tokens = s.total_q_len();
  s.params = sc.params;
  return s;
}

std::vector<Scenario> jax_scenarios() {
  Params window_cap;
  window_cap.sliding_window = 8;
  window_cap.soft_cap = 10.0;
  Params blocks;
  blocks.num_kv_pages_per_block = 2;
  blocks.num_queries_per_block = 8;
  Params fp8;
  fp8.k_scale = 0.5;
  fp8.v_scale = 0.5;
  return {
      // test_ragged_paged_attention_basic: [(192, 328), (128, 180), (64, 255)], heads (32, 8)
      {"jax_basic", {{12, 20}, {8, 11}, {4, 16}}, 2, 4, 128, 16},
      // decode only
      {"jax_decode", {{1, 18}, {1, 12}, {1, 37}, {1, 64}}, 2, 4, 128, 16},
      // prefill only
      {"jax_prefill", {{5, 18}, {15, 29}, {30, 37}, {40, 64}}, 2, 4, 128, 16},
      // test_ragged_paged_attention_mixed: decode and prefill rows in one batch
      {"jax_mixed",
       {{3, 64}, {5, 18}, {1, 29}, {20, 29}, {1, 22}, {1, 64}, {16, 20}, {30, 46}},
       2,
       4,
       128,
       16},
      {"jax_sliding_window_soft_cap",
       {{12, 20}, {1, 11}, {4, 16}},
       2,
       4,
       128,
       16,
       DType::kFloat32,
       window_cap},
      {"jax_block_sizes", {{12, 20}, {8, 11}, {1, 16}}, 2, 4, 128, 16, DType::kFloat32, blocks},
      {"jax_float8_kv_scales", {{12, 20}, {1, 11}}, 2, 4, 128, 16, DType::kFloat8E4M3FN, fp8},
  };
}

// The verdict pair a mutated case gets, to keep one seed per distinct outcome.
std::string outcome(const CaseSpec& spec) {
  const props::Materialized m = props::materialize(spec, props::Contents::kZeros);
  return props::verdict_text(props::expected_failure(m, Mode::kStrict)) + " | " +
         props::verdict_text(props::expected_failure(m, Mode::kJax));
}

void jax_validate_seeds(Seeds& seeds) {
  const BuildOptions o = fuzz::validate_options();
  auto add = [&](const std::string& name, const CaseSpec& spec) {
    seeds[name] = props::encode_case(spec, o);
    if (props::decode_case(seeds[name], o) != spec) round_trip_failed(name);
  };
  for (uint64_t seed = 1; seed <= 4; ++seed)
    add("valid-" + std::to_string(seed), random_case(seed, o));
  for (const Scenario& sc : jax_scenarios()) add(sc.name, scenario_case(sc, o));
  // Every mutation in each variant that changes the outcome (args 0..15 cover every
  // mutation's variant count), on three base cases, the third at head_dim 128, where jax
  // mode meets the Pallas kernel's program rules (the kernel traces no other head_dim up to
  // the target's bound); then a shape mutation with a parameter one.
  // Its seed is the first whose case has rows in several sequences, so that every
  // mutation applies.
  BuildOptions traced = o;
  traced.min_head_dim = 128;
  uint64_t traced_seed = 1;
  while (!props::mutation_applies(props::MutationKind::stale_kv_block,
                                  random_case(traced_seed, traced)) ||
         !props::mutation_applies(props::MutationKind::rows_not_computed,
                                  random_case(traced_seed, traced))) {
    ++traced_seed;
  }
  const std::pair<std::string, CaseSpec> bases[] = {{"1", random_case(1, o)},
                                                    {"2", random_case(2, o)},
                                                    {"d128", random_case(traced_seed, traced)}};
  for (auto [tag, base] : bases) {
    for (props::MutationKind kind : props::all_mutation_kinds()) {
      if (!props::mutation_applies(kind, base)) continue;
      std::set<std::string> seen;
      for (int64_t arg = 0; arg < 16; ++arg) {
        base.mutations = {{kind, arg}};
        if (!seen.insert(outcome(base)).second) continue;
        add(std::string(props::mutation_name(kind)) + "-" + tag + "-" + std::to_string(arg), base);
      }
    }
  }
  CaseSpec base = random_case(3, o);
  const std::pair<props::MutationKind, props::MutationKind> pairs[] = {
      {props::MutationKind::kv_heads_zero, props::MutationKind::soft_cap_zero},
      {props::MutationKind::q_len_exceeds_kv_len, props::MutationKind::vmem_limit_nonpositive},
      {props::MutationKind::page_index_out_of_range, props::MutationKind::mask_value_nonfinite},
      {props::MutationKind::num_seqs_negative, props::MutationKind::kv_pages_per_block_bad},
      {props::MutationKind::head_dim_mismatch, props::MutationKind::sliding_window_nonpositive},
  };
  for (const auto& [a, b] : pairs) {
    if (!props::mutation_applies(a, base) || !props::mutation_applies(b, base)) continue;
    base.mutations = {{a, 1}, {b, 1}};
    add(std::string(props::mutation_name(a)) + "+" + std::string(props::mutation_name(b)), base);
  }
}

void jax_differential_seeds(Seeds& seeds) {
  const BuildOptions o = fuzz::differential_options();
  for (uint64_t seed = 1; seed <= 24; ++seed) {
    const fuzz::DifferentialInput d{.threads = static_cast<int64_t>(seed % 2 + 1),
                                    .literal = static_cast<int64_t>(seed / 2 % 2),
                                    .spec = random_case(seed, o, static_cast<int>(seed * 16))};
    seeds["valid-" + std::to_string(seed)] = fuzz::encode_differential(d);
  }
  for (const Scenario& sc : jax_scenarios()) {
    const fuzz::DifferentialInput d{.threads = 2, .literal = 0, .spec = scenario_case(sc, o)};
    seeds[sc.name] = fuzz::encode_differential(d);
    if (fuzz::decode_differential(seeds[sc.name]).spec != d.spec) round_trip_failed(sc.name);
  }
}

// Generated cases as raw calls: valid ones, and every mutation (variant 0) of a small case.
void jax_raw_seeds(Seeds& seeds) {
  BuildOptions small = fuzz::differential_options();
  small.max_seqs = 3;
  small.max_kv_len = 16;
  small.max_head_dim = 8;
  small.max_page_size = 4;
  auto add = [&](const std::string& name, const CaseSpec& spec) {
    const props::Materialized m = props::materialize(spec);
    const std::optional<std::vector<uint8_t>> bytes = fuzz::encode_raw_call({m.inputs, m.params});
    // Over the raw element budget, or longer than the target's max_len (4096, in
    // corpus/fuzz/fuzz_raw_inputs.options), which libFuzzer would cut the seed to.
    if (!bytes || bytes->size() > 4096) return;
    if (fuzz::decode_raw_call(*bytes).inputs != m.inputs) round_trip_failed(name);
    seeds[name] = *bytes;
  };
  for (uint64_t seed = 1; seed <= 8; ++seed)
    add("valid-" + std::to_string(seed), random_case(seed, small));
  for (const Scenario& sc : jax_scenarios()) add(sc.name, scenario_case(sc, small));
  CaseSpec base = random_case(5, small);
  for (props::MutationKind kind : props::all_mutation_kinds()) {
    if (!props::mutation_applies(kind, base)) continue;
    base.mutations = {{kind, 0}};
    add(std::string(props::mutation_name(kind)), base);
  }
}

bool jax_validate_round_trips(const std::vector<uint8_t>& bytes) {
  const BuildOptions o = fuzz::validate_options();
  const CaseSpec spec = props::decode_case(bytes, o);
  return props::decode_case(props::encode_case(spec, o), o) == spec;
}

bool jax_differential_round_trips(const std::vector<uint8_t>& bytes) {
  const fuzz::DifferentialInput d = fuzz::decode_differential(bytes);
  const fuzz::DifferentialInput e = fuzz::decode_differential(fuzz::encode_differential(d));
  return e.threads == d.threads && e.literal == d.literal && e.spec == d.spec;
}

bool jax_raw_round_trips(const std::vector<uint8_t>& bytes) {
  const fuzz::RawCall c = fuzz::decode_raw_call(bytes);
  const std::optional<std::vector<uint8_t>> once = fuzz::encode_raw_call(c);
  if (!once) return false;
  const fuzz::RawCall back = fuzz::decode_raw_call(*once);
  // Parameters compare through their encoding, so that NaN equals NaN.
  return back.inputs == c.inputs && fuzz::encode_raw_call(back) == once;
}

bool jax_owns(Dialect d) { return d == Dialect::kJax; }

// A production call's seed: the first two mutations that apply to the call, of two groups.
std::vector<uint8_t> jax_production_seed(const props::ProductionSpec& spec, int count,
                                         const std::string& name) {
  fuzz::JaxProductionInput v{spec, {}};
  if (count > 0) {
    CaseSpec c = props::production_case(spec);
    for (props::MutationKind k : props::all_mutation_kinds()) {
      if (!props::mutation_applies(k, c)) continue;
      if (c.mutations.empty() || props::mutation_group(c.mutations[0].kind) != props::mutation_group(k)) {
        c.mutations.push_back({k, 1});
        if (c.mutations.size() == 2) break;
      }
    }
    v.mutations = count == 1 ? std::vector<props::MutationSpec>{c.mutations[0]} : c.mutations;
  }
  std::vector<uint8_t> bytes = fuzz::encode_jax_production(v);
  const fuzz::JaxProductionInput back =
      fuzz::decode_jax_production(*fuzz::production_payload(bytes));
  if (back.spec != v.spec || back.mutations != v.mutations) round_trip_failed(name);
  return bytes;
}

bool jax_production_round_trips(std::span<const uint8_t> payload) {
  const fuzz::JaxProductionInput v = fuzz::decode_jax_production(payload);
  const fuzz::JaxProductionInput w =
      fuzz::decode_jax_production(*fuzz::production_payload(fuzz::encode_jax_production(v)));
  return w.spec == v.spec && w.mutations == v.mutations;
}

// The value classes DESIGN.md section 9 and the fuzzing issue name, as they appear in a
// materialized case's parameters.
std::set<std::string> value_classes(const Params& p) {
  std::set<std::string> c;
  const int64_t capacity = default_target_profile().vmem_capacity_bytes;
  if (const auto& v = p.vmem_limit_bytes) {
    if (*v == 0) c.insert("vmem_limit_bytes 0");
    if (*v < 0) c.insert("vmem_limit_bytes negative");
    if (*v == 1) c.insert("vmem_limit_bytes 1");
    if (*v > capacity) c.insert("vmem_limit_bytes over capacity");
  }
  if (const auto& s = p.soft_cap) {
    if (*s == 0.0 && !std::signbit(*s)) c.insert("soft_cap 0.0");
    if (*s == 0.0 && std::signbit(*s)) c.insert("soft_cap -0.0");
    if (*s == 1e-50) c.insert("soft_cap 1e-50");
    if (std::isnan(*s)) c.insert("soft_cap NaN");
    if (std::isinf(*s)) c.insert("soft_cap inf");
  }
  if (const auto& b = p.num_kv_pages_per_block) {
    if (*b == 0) c.insert("num_kv_pages_per_block 0");
    if (*b < 0) c.insert("num_kv_pages_per_block negative");
    if (*b >= int64_t{1} << 40) c.insert("num_kv_pages_per_block 2^40");
  }
  return c;
}

const char* const kValueClasses[] = {"vmem_limit_bytes 0",
                                     "vmem_limit_bytes negative",
                                     "vmem_limit_bytes 1",
                                     "vmem_limit_bytes over capacity",
                                     "soft_cap 0.0",
                                     "soft_cap -0.0",
                                     "soft_cap 1e-50",
                                     "soft_cap NaN",
                                     "soft_cap inf",
                                     "num_kv_pages_per_block 0",
                                     "num_kv_pages_per_block negative",
                                     "num_kv_pages_per_block 2^40",
                                     "num_kv_pages_per_block pages_per_seq + 1"};

// What the fuzz_validate corpus's jax inputs reach, decoded as the target decodes them.
std::set<std::pair<RuleId, Mode>> expected, reported;
std::set<std::string> classes;
std::set<props::MutationKind> mutations;

void jax_reach(const std::vector<uint8_t>& bytes) {
  const CaseSpec spec = props::decode_case(bytes, fuzz::validate_options());
  const props::Materialized m = props::materialize(spec, props::Contents::kZeros);
  for (const props::MutationSpec& mu : spec.mutations) mutations.insert(mu.kind);
  for (Mode mode : {Mode::kStrict, Mode::kJax}) {
    if (const auto f = props::expected_failure(m, mode)) expected.insert({f->rule, mode});
    if (const auto f = validate(m.inputs, m.params, {.mode = mode}))
      reported.insert({f->rule, mode});
  }
  classes.merge(value_classes(m.params));
  const auto& b = m.params.num_kv_pages_per_block;
  if (b && m.inputs.page_indices.rank() == 2 && *b == m.inputs.page_indices.dim(1) + 1) {
    classes.insert("num_kv_pages_per_block pages_per_seq + 1");
  }
}

void jax_reached(const fuzz::Verdict& verdict) {
  for (const RuleInfo& rule : rule_table()) {
    for (Mode mode : {Mode::kStrict, Mode::kJax}) {
      if (!rule.in(mode)) continue;
      const std::string what = std::string(rule.name) + " in " + std::string(mode_name(mode));
      verdict(expected.contains({rule.id, mode}),
              "fuzz_validate corpus: spec model never reports " + what);
      verdict(reported.contains({rule.id, mode}),
              "fuzz_validate corpus: validate never reports " + what);
    }
  }
  for (props::MutationKind kind : props::all_mutation_kinds()) {
    verdict(mutations.contains(kind), std::string("fuzz_validate corpus: no seed with mutation ") +
                                          std::string(props::mutation_name(kind)));
  }
  for (const char* c : kValueClasses) {
    verdict(classes.contains(c), std::string("fuzz_validate corpus: no seed with ") + c);
  }
}

size_t jax_value_classes() { return classes.size(); }

const fuzz::SeedFamily kJaxSeeds{
    .claims = nullptr,  // untagged: every input no other family claims
    .validate_seeds = jax_validate_seeds,
    .differential_seeds = jax_differential_seeds,
    .raw_seeds = jax_raw_seeds,
    .validate_round_trips = jax_validate_round_trips,
    .differential_round_trips = jax_differential_round_trips,
    .raw_round_trips = jax_raw_round_trips,
    .owns = jax_owns,
    .production_seed = jax_production_seed,
    .production_round_trips = jax_production_round_trips,
    .reach = jax_reach,
    .reached = jax_reached,
    .value_classes = jax_value_classes,
};
const fuzz::RegisterSeedFamily kRegistered(kJaxSeeds);

}  // namespace
