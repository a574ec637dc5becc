// rpa_fuzz_seeds: writes, or checks, the seed corpora of the targets that decode bytes with
// ByteSource (fuzz_validate, fuzz_differential, fuzz_raw_inputs) under corpus/fuzz/.
//
//   rpa_fuzz_seeds write CORPUS_DIR   (re)writes every seed file
//   rpa_fuzz_seeds check CORPUS_DIR   every seed is present with the bytes it would write,
//                                     every input of the three corpora round-trips through
//                                     its decoder and encoder, and the fuzz_validate corpus
//                                     reaches every rule in every mode, every mutation and
//                                     every value class of the edge parameters
//
// Seeds are generated cases encoded with the targets' own decoders (target_inputs.h,
// jax_raw_call.h): valid cases, every named mutation in each of its variants, and JAX's test
// scenarios in small form. Files found there that this tool does not write (regressions,
// inputs fuzz/run.sh merged in) are left alone and checked with the rest.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "casegen/jax_raw_call.h"
#include "harness/target_inputs.h"
#include "casegen/v3_raw_call.h"
#include "casegen/jax_case_codec.h"
#include "casegen/generate.h"
#include "casegen/jax_build_case.h"
#include "casegen/jax_materialize.h"
#include "casegen/jax_spec_model.h"
#include "casegen/production.h"
#include "casegen/random_source.h"
#include "casegen/v3_build_case.h"
#include "casegen/v3_materialize.h"
#include "casegen/v3_mutation.h"
#include "validation/jax_rule.h"
#include "validation/jax_validate.h"
#include "validation/target_profile.h"

namespace {

using namespace rpa;
using props::BuildOptions;
using props::CaseSpec;
namespace fs = std::filesystem;

using Seeds = std::map<std::string, std::vector<uint8_t>>;  // file name -> bytes

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

// A seed that does not decode to what it was written from is a bug here (a scenario no
// source could draw) or in the decoder.
[[noreturn]] void round_trip_failed(const std::string& name) {
  std::fprintf(stderr, "rpa_fuzz_seeds: seed %s does not decode to its case\n", name.c_str());
  std::exit(1);
}

// The verdict pair a mutated case gets, to keep one seed per distinct outcome.
std::string outcome(const CaseSpec& spec) {
  const props::Materialized m = props::materialize(spec, props::Contents::kZeros);
  return props::verdict_text(props::expected_failure(m, Mode::kStrict)) + " | " +
         props::verdict_text(props::expected_failure(m, Mode::kJax));
}

Seeds validate_seeds() {
  const BuildOptions o = fuzz::validate_options();
  Seeds seeds;
  seeds["empty"] = {};
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
  // tpu-inference v3 (tagged): valid cases of both dialects, every v3 mutation that applies
  // on each (argument 0, and 1..3 on the first of each dialect), and a shape mutation with a
  // keyword one.
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    props::V3BuildOptions o3 = fuzz::v3_validate_options();
    o3.dialect = props::kV3GenDialects[seed % 2];
    o3.min_seqs = 1;
    if (seed == 3) o3.head_dim = 128;
    if (seed >= 3) o3.profile = props::Profile::kPrefill;  // reaches the prefill range's rules
    props::V3CaseSpec spec;
    for (uint64_t s = seed; s < seed + 1000; s += 10) {  // the prefill ones: a prefill range
      props::RandomSource source(s, 60);
      spec = props::build_v3_case(source, o3);
      if (seed < 3 || spec.num_prefill > 0) break;
    }
    const std::string prefix = "v3-" + std::to_string(seed) + "-";
    auto add_v3 = [&](const std::string& name, std::vector<props::V3Mutation> ms) {
      const fuzz::V3ValidateInput v{spec, std::move(ms)};
      seeds[name] = fuzz::encode_v3_validate(v);
      const fuzz::V3ValidateInput back = fuzz::decode_v3_validate(*fuzz::v3_payload(seeds[name]));
      if (back.spec != v.spec || back.mutations != v.mutations) round_trip_failed(name);
    };
    add_v3(prefix + "valid", {});
    for (props::V3MutationKind k : fuzz::v3_mutation_choices(spec, {})) {
      for (int64_t arg = 0; arg <= (seed <= 2 ? 3 : 0); ++arg) {
        add_v3(prefix + std::string(props::v3_mutation_name(k)) + "-" + std::to_string(arg),
               {{k, arg}});
      }
    }
    const std::vector<props::V3MutationKind> first = fuzz::v3_mutation_choices(spec, {});
    if (!first.empty()) {
      const props::V3Mutation a{first.front(), 0};
      const std::vector<props::V3MutationKind> second = fuzz::v3_mutation_choices(spec, {a});
      if (!second.empty()) {
        add_v3(prefix + "pair-" + std::string(props::v3_mutation_name(a.kind)) + "-" +
                   std::string(props::v3_mutation_name(second.back())),
               {a, {second.back(), 0}});
      }
    }
  }
  // The kernel-schedule rules (findings 23, 24, 25, 26) need calls the four above need not
  // be: the first generated kernel.py call each of their mutations applies to.
  for (props::V3MutationKind k : {props::V3MutationKind::masked_block_overflows,
                                  props::V3MutationKind::window_skips_cache_write,
                                  props::V3MutationKind::window_int16_wraps,
                                  props::V3MutationKind::window_int32_wraps}) {
    props::V3BuildOptions o3 = fuzz::v3_validate_options();
    o3.dialect = Dialect::kTpuInferenceV3;
    o3.min_seqs = 1;
    for (uint64_t s = 1; s < 4000; ++s) {
      props::RandomSource source(s, 60);
      const props::V3CaseSpec spec = props::build_v3_case(source, o3);
      if (!props::v3_mutation_applies(k, spec)) continue;
      // window_int32_wraps's own call holds int32 positions (else the int16 rule comes first).
      if (k == props::V3MutationKind::window_int32_wraps &&
          props::v3_mutation_applies(props::V3MutationKind::window_int16_wraps, spec))
        continue;
      const std::string name = "v3-" + std::string(props::v3_mutation_name(k)) + "-0";
      const fuzz::V3ValidateInput v{spec, {{k, 0}}};
      seeds[name] = fuzz::encode_v3_validate(v);
      const fuzz::V3ValidateInput back = fuzz::decode_v3_validate(*fuzz::v3_payload(seeds[name]));
      if (back.spec != v.spec || back.mutations != v.mutations) round_trip_failed(name);
      break;
    }
  }
  // Production calls (tagged): per dialect, the first two recipes of at most 16 MiB, the first
  // of at most 64 MiB at each integer edge the dialect has, and the first small one with its
  // first mutation and with two (a jax pair of groups, a v3 pair that composes).
  for (Dialect d : {Dialect::kJax, Dialect::kTpuInferenceV3, Dialect::kTpuInferenceV3Hd64}) {
    const std::string prefix = "prod-" + std::string(dialect_name(d)) + "-";
    auto add_production = [&](const std::string& name, const fuzz::ProductionValidateInput& v) {
      seeds[name] = fuzz::encode_production_validate(v);
      const fuzz::ProductionValidateInput back =
          fuzz::decode_production_validate(*fuzz::production_payload(seeds[name]));
      if (back.spec != v.spec || back.mutations != v.mutations || back.v3_mutations != v.v3_mutations) {
        round_trip_failed(name);
      }
    };
    std::set<props::ProductionEdge> edges;
    int small = 0;
    for (uint64_t seed = 0; seed < 3000; ++seed) {
      const props::ProductionSpec spec = props::seeded_production_spec(seed, d);
      const int64_t bytes = spec.memory_bytes();
      std::string tail = std::to_string(seed);
      tail.insert(tail.begin(), '-');
      if (spec.edge != props::ProductionEdge::kNone && bytes <= (int64_t{64} << 20) &&
          edges.insert(spec.edge).second) {
        add_production(prefix + std::string(props::production_edge_name(spec.edge)) + tail, {spec, {}, {}});
      }
      if (small >= 2 || bytes > (int64_t{16} << 20)) continue;
      add_production(prefix + "valid" + tail, {spec, {}, {}});
      if (small++ > 0) continue;
      if (d == Dialect::kJax) {
        CaseSpec c = props::production_case(spec);
        for (props::MutationKind k : props::all_mutation_kinds()) {
          if (!props::mutation_applies(k, c)) continue;
          if (c.mutations.empty() || props::mutation_group(c.mutations[0].kind) != props::mutation_group(k)) {
            c.mutations.push_back({k, 1});
            if (c.mutations.size() == 2) break;
          }
        }
        add_production(prefix + "mutated" + tail, {spec, {c.mutations[0]}, {}});
        add_production(prefix + "pair" + tail, {spec, c.mutations, {}});
      } else {
        const props::V3CaseSpec c = props::production_v3_case(spec);
        const props::V3Mutation a{fuzz::v3_mutation_choices(c, {}).front(), 1};
        const props::V3Mutation b{fuzz::v3_mutation_choices(c, {a}).back(), 1};
        add_production(prefix + "mutated" + tail, {spec, {}, {a}});
        add_production(prefix + "pair" + tail, {spec, {}, {a, b}});
      }
    }
  }
  return seeds;
}

Seeds differential_seeds() {
  const BuildOptions o = fuzz::differential_options();
  Seeds seeds;
  seeds["empty"] = {};
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
  // tpu-inference v3 (tagged): every dialect x batch profile, at growing sizes.
  for (uint64_t seed = 1; seed <= 24; ++seed) {
    props::V3BuildOptions o3 = fuzz::v3_differential_options();
    o3.dialect = props::kV3GenDialects[seed % 2];
    o3.profile = props::kProfiles[seed / 2 % 3];
    props::RandomSource source(seed, static_cast<int>(seed * 16));
    const fuzz::V3DifferentialInput d{.threads = static_cast<int64_t>(seed / 6 % 2 + 1),
                                      .spec = props::build_v3_case(source, o3)};
    const std::string name = "v3-valid-" + std::to_string(seed);
    seeds[name] = fuzz::encode_v3_differential(d);
    if (fuzz::decode_v3_differential(*fuzz::v3_payload(seeds[name])).spec != d.spec) {
      round_trip_failed(name);
    }
  }
  return seeds;
}

// Generated cases as raw calls: valid ones, and every mutation (variant 0) of a small case.
Seeds raw_seeds() {
  BuildOptions small = fuzz::differential_options();
  small.max_seqs = 3;
  small.max_kv_len = 16;
  small.max_head_dim = 8;
  small.max_page_size = 4;
  Seeds seeds;
  seeds["empty"] = {};
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
  // tpu-inference v3 (tagged): generated valid calls of both dialects as raw calls, and the
  // same with one keyword or array made invalid, so that the fuzzer starts next to the rules.
  auto add_v3 = [&](const std::string& name, const fuzz::V3RawCall& c) {
    const std::optional<std::vector<uint8_t>> bytes = fuzz::encode_v3_raw_call(c);
    if (!bytes || bytes->size() + 2 > 4096) return;
    if (fuzz::decode_v3_raw_call(*bytes).inputs != c.inputs) round_trip_failed(name);
    seeds[name] = fuzz::with_v3_tag(*bytes);
  };
  // The cache's last dimension is head_dim aligned to 128 lanes, so only a few pages of a
  // few tokens fit max_len: the first 12 seeds whose call fits.
  int written = 0;
  for (uint64_t seed = 1; seed <= 400 && written < 12; ++seed) {
    props::V3BuildOptions o3 = fuzz::v3_differential_options();
    o3.dialect = props::kV3GenDialects[seed % 2];
    o3.profile = props::kProfiles[seed / 2 % 3];
    o3.min_seqs = 1;
    o3.max_seqs = 2;
    o3.max_kv_len = 4;
    o3.max_q_len = 2;
    o3.max_head_dim = 4;
    props::RandomSource source(seed, 10);
    const props::V3CaseSpec spec = props::build_v3_case(source, o3);
    const props::V3Materialized m = props::materialize_v3(spec);
    if (m.inputs.kv_cache.nbytes() > 2048) continue;
    ++written;
    const fuzz::V3RawCall valid{spec.dialect, m.inputs, m.params};
    add_v3("v3-valid-" + std::to_string(seed), valid);
    if (written > 4) continue;
    fuzz::V3RawCall c = valid;
    c.params.sm_scale = std::nan("");
    add_v3("v3-nan-sm-scale-" + std::to_string(seed), c);
    c = valid;
    c.params.mask_value = -1e29;
    add_v3("v3-mask-value-above-bound-" + std::to_string(seed), c);
    c = valid;
    if (c.inputs.distribution.numel() == 3)
      c.inputs.distribution.set_int(2, c.inputs.kv_lens.numel() + 1);
    add_v3("v3-distribution-past-num-seqs-" + std::to_string(seed), c);
    c = valid;
    if (c.inputs.kv_lens.numel() > 0) c.inputs.kv_lens.set_int(0, -1);
    add_v3("v3-negative-kv-len-" + std::to_string(seed), c);
  }
  return seeds;
}

// decode(encode(decode(x))) == decode(x): what a target's decoder builds from any bytes, its
// encoder writes as bytes that decode to the same thing.
bool validate_round_trips(const std::vector<uint8_t>& bytes) {
  if (const auto production = fuzz::production_payload(bytes)) {
    const fuzz::ProductionValidateInput v = fuzz::decode_production_validate(*production);
    const fuzz::ProductionValidateInput w =
        fuzz::decode_production_validate(*fuzz::production_payload(fuzz::encode_production_validate(v)));
    const bool composes = v.spec.dialect == Dialect::kJax ||
                          props::v3_mutations_compose(props::production_v3_case(v.spec), v.v3_mutations);
    return w.spec == v.spec && w.mutations == v.mutations && w.v3_mutations == v.v3_mutations &&
           composes;
  }
  if (const auto v3 = fuzz::v3_payload(bytes)) {
    const fuzz::V3ValidateInput v = fuzz::decode_v3_validate(*v3);
    const fuzz::V3ValidateInput w =
        fuzz::decode_v3_validate(*fuzz::v3_payload(fuzz::encode_v3_validate(v)));
    // and the decoder gives only mutation lists the spec model takes (v3_mutations_compose).
    return w.spec == v.spec && w.mutations == v.mutations &&
           props::v3_mutations_compose(v.spec, v.mutations);
  }
  const BuildOptions o = fuzz::validate_options();
  const CaseSpec spec = props::decode_case(bytes, o);
  return props::decode_case(props::encode_case(spec, o), o) == spec;
}

bool differential_round_trips(const std::vector<uint8_t>& bytes) {
  if (const auto v3 = fuzz::v3_payload(bytes)) {
    const fuzz::V3DifferentialInput d = fuzz::decode_v3_differential(*v3);
    const fuzz::V3DifferentialInput e =
        fuzz::decode_v3_differential(*fuzz::v3_payload(fuzz::encode_v3_differential(d)));
    return e.threads == d.threads && e.spec == d.spec;
  }
  const fuzz::DifferentialInput d = fuzz::decode_differential(bytes);
  const fuzz::DifferentialInput e = fuzz::decode_differential(fuzz::encode_differential(d));
  return e.threads == d.threads && e.literal == d.literal && e.spec == d.spec;
}

bool raw_round_trips(const std::vector<uint8_t>& bytes) {
  if (const auto v3 = fuzz::v3_payload(bytes)) {
    const fuzz::V3RawCall c = fuzz::decode_v3_raw_call(*v3);
    const std::optional<std::vector<uint8_t>> once = fuzz::encode_v3_raw_call(c);
    if (!once) return false;
    const fuzz::V3RawCall back = fuzz::decode_v3_raw_call(*once);
    return back.dialect == c.dialect && back.inputs == c.inputs &&
           fuzz::encode_v3_raw_call(back) == once;
  }
  const fuzz::RawCall c = fuzz::decode_raw_call(bytes);
  const std::optional<std::vector<uint8_t>> once = fuzz::encode_raw_call(c);
  if (!once) return false;
  const fuzz::RawCall back = fuzz::decode_raw_call(*once);
  // Parameters compare through their encoding, so that NaN equals NaN.
  return back.inputs == c.inputs && fuzz::encode_raw_call(back) == once;
}

struct Target {
  const char* name;
  Seeds (*seeds)();
  bool (*round_trips)(const std::vector<uint8_t>&);
};

const Target kTargets[] = {
    {"fuzz_validate", validate_seeds, validate_round_trips},
    {"fuzz_differential", differential_seeds, differential_round_trips},
    {"fuzz_raw_inputs", raw_seeds, raw_round_trips},
};

std::vector<uint8_t> read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
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

int check(const fs::path& corpus) {
  int passed = 0, failed = 0;
  auto verdict = [&](bool ok, const std::string& what) {
    ++(ok ? passed : failed);
    if (!ok) std::printf("FAIL %s\n", what.c_str());
  };
  for (const Target& t : kTargets) {
    const fs::path dir = corpus / "fuzz" / t.name;
    int stale = 0;
    for (const auto& [name, bytes] : t.seeds()) {
      std::error_code ec;
      if (!fs::exists(dir / name, ec) || read_file(dir / name) != bytes) {
        ++stale;
        std::printf("  %s/%s: missing or different\n", t.name, name.c_str());
      }
    }
    verdict(stale == 0, std::string(t.name) + ": " + std::to_string(stale) +
                            " seeds missing or stale; run rpa_fuzz_seeds write corpus");
  }

  // The jax seeds never start with the v3 tag (target_inputs.h), so they decode as jax
  // inputs, as every input did before the v3 dialects came.
  for (const Target& t : kTargets) {
    int tagged = 0;
    for (const auto& [name, bytes] : t.seeds()) {
      const bool v3 = name.rfind("v3-", 0) == 0, production = name.rfind("prod-", 0) == 0;
      if ((!v3 && fuzz::v3_payload(bytes)) || (!production && fuzz::production_payload(bytes))) {
        ++tagged;
        std::printf("  %s/%s: starts with another dialect's tag\n", t.name, name.c_str());
      }
    }
    verdict(tagged == 0, std::string(t.name) + ": " + std::to_string(tagged) +
                             " seeds start with another part's tag (v3, production)");
  }

  // Codec symmetry on every input there (seeds, regressions, merged inputs).
  for (const Target& t : kTargets) {
    int asymmetric = 0, inputs = 0;
    for (const auto& entry : fs::directory_iterator(corpus / "fuzz" / t.name)) {
      ++inputs;
      if (!t.round_trips(read_file(entry.path()))) {
        ++asymmetric;
        std::printf("  %s: decode(encode(decode(x))) differs, or (v3) its mutations do not "
                    "compose\n",
                    entry.path().c_str());
      }
    }
    verdict(asymmetric == 0, std::string(t.name) + ": " + std::to_string(asymmetric) + " of " +
                                 std::to_string(inputs) + " inputs do not round-trip");
  }

  // What the fuzz_validate corpus reaches, decoded as the target decodes it.
  std::set<std::pair<RuleId, Mode>> expected, reported;
  std::set<std::string> classes;
  std::set<props::MutationKind> mutations;
  std::set<props::V3MutationKind> v3_mutations;
  std::set<Dialect> production_dialects;
  size_t files = 0;
  for (const auto& entry : fs::directory_iterator(corpus / "fuzz" / "fuzz_validate")) {
    ++files;
    const std::vector<uint8_t> bytes = read_file(entry.path());
    if (const auto production = fuzz::production_payload(bytes)) {
      production_dialects.insert(fuzz::decode_production_validate(*production).spec.dialect);
      continue;
    }
    if (const auto v3 = fuzz::v3_payload(bytes)) {
      for (const props::V3Mutation& mu : fuzz::decode_v3_validate(*v3).mutations) {
        v3_mutations.insert(mu.kind);
      }
      continue;
    }
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
  for (Dialect d : {Dialect::kJax, Dialect::kTpuInferenceV3, Dialect::kTpuInferenceV3Hd64}) {
    verdict(production_dialects.contains(d), "fuzz_validate corpus: no production call of " +
                                                 std::string(dialect_name(d)));
  }
  for (props::V3MutationKind k : props::all_v3_mutation_kinds()) {
    verdict(v3_mutations.contains(k), "fuzz_validate corpus: no v3 input has mutation " +
                                          std::string(props::v3_mutation_name(k)));
  }
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
  std::printf("rpa_fuzz_seeds: %zu fuzz_validate inputs, %zu value classes\n", files,
              classes.size());
  std::printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}

int write(const fs::path& corpus) {
  for (const Target& t : kTargets) {
    const fs::path dir = corpus / "fuzz" / t.name;
    fs::create_directories(dir);
    const Seeds seeds = t.seeds();
    for (const auto& [name, bytes] : seeds) {
      std::ofstream out(dir / name, std::ios::binary);
      out.write(reinterpret_cast<const char*>(bytes.data()),
                static_cast<std::streamsize>(bytes.size()));
      if (!out) {
        std::fprintf(stderr, "rpa_fuzz_seeds: cannot write %s\n", (dir / name).c_str());
        return 1;
      }
    }
    std::printf("%s: %zu seeds\n", t.name, seeds.size());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string usage = "usage: rpa_fuzz_seeds write|check CORPUS_DIR\n";
  if (argc != 3) {
    std::fputs(usage.c_str(), stderr);
    return 64;
  }
  const std::string cmd = argv[1];
  if (cmd == "write") return write(argv[2]);
  if (cmd == "check") return check(argv[2]);
  std::fputs(usage.c_str(), stderr);
  return 64;
}
