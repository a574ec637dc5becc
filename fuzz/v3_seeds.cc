// The tpu-inference v3 family's part of the seed writer (fuzz/seed_family.h): its seeds of
// fuzz_validate, fuzz_differential and fuzz_raw_inputs (tagged: generated cases of both v3
// dialects encoded with the targets' own decoders, harness/v3_target_inputs.h,
// casegen/v3_raw_call.h, every v3 mutation that applies, the kernel-schedule rules' calls,
// raw calls made invalid by one keyword or array), its production calls' mutations, its round
// trips, and what the fuzz_validate corpus must reach of it (every v3 mutation).
#include <cmath>
#include <cstdint>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "casegen/random_source.h"
#include "casegen/v3_build_case.h"
#include "casegen/v3_materialize.h"
#include "casegen/v3_mutation.h"
#include "casegen/v3_production.h"
#include "casegen/v3_raw_call.h"
#include "casegen/v3_spec_model.h"
#include "fuzz/seed_family.h"
#include "harness/target_inputs.h"
#include "harness/v3_target_inputs.h"

namespace {

using namespace rpa;
using fuzz::round_trip_failed;
using fuzz::Seeds;

bool v3_claims(std::span<const uint8_t> bytes) { return fuzz::v3_payload(bytes).has_value(); }

void v3_validate_seeds(Seeds& seeds) {
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
}

void v3_differential_seeds(Seeds& seeds) {
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
}

void v3_raw_seeds(Seeds& seeds) {
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
}

bool v3_validate_round_trips(const std::vector<uint8_t>& bytes) {
  if (const auto v3 = fuzz::v3_payload(bytes)) {
    const fuzz::V3ValidateInput v = fuzz::decode_v3_validate(*v3);
    const fuzz::V3ValidateInput w =
        fuzz::decode_v3_validate(*fuzz::v3_payload(fuzz::encode_v3_validate(v)));
    // and the decoder gives only mutation lists the spec model takes (v3_mutations_compose).
    return w.spec == v.spec && w.mutations == v.mutations &&
           props::v3_mutations_compose(v.spec, v.mutations);
  }
  return false;  // not a v3 input: the family claims none such
}

bool v3_differential_round_trips(const std::vector<uint8_t>& bytes) {
  if (const auto v3 = fuzz::v3_payload(bytes)) {
    const fuzz::V3DifferentialInput d = fuzz::decode_v3_differential(*v3);
    const fuzz::V3DifferentialInput e =
        fuzz::decode_v3_differential(*fuzz::v3_payload(fuzz::encode_v3_differential(d)));
    return e.threads == d.threads && e.spec == d.spec;
  }
  return false;  // not a v3 input: the family claims none such
}

bool v3_raw_round_trips(const std::vector<uint8_t>& bytes) {
  if (const auto v3 = fuzz::v3_payload(bytes)) {
    const fuzz::V3RawCall c = fuzz::decode_v3_raw_call(*v3);
    const std::optional<std::vector<uint8_t>> once = fuzz::encode_v3_raw_call(c);
    if (!once) return false;
    const fuzz::V3RawCall back = fuzz::decode_v3_raw_call(*once);
    return back.dialect == c.dialect && back.inputs == c.inputs &&
           fuzz::encode_v3_raw_call(back) == once;
  }
  return false;  // not a v3 input: the family claims none such
}

bool v3_owns(Dialect d) { return is_v3(d); }

// A production call's seed: its first v3 mutation, and a second that composes with it.
std::vector<uint8_t> v3_production_seed(const props::ProductionSpec& spec, int count,
                                        const std::string& name) {
  fuzz::V3ProductionInput v{spec, {}};
  if (count > 0) {
    const props::V3CaseSpec c = props::production_v3_case(spec);
    const props::V3Mutation a{fuzz::v3_mutation_choices(c, {}).front(), 1};
    v.mutations = {a};
    if (count > 1) v.mutations.push_back({fuzz::v3_mutation_choices(c, {a}).back(), 1});
  }
  std::vector<uint8_t> bytes = fuzz::encode_v3_production(v);
  const fuzz::V3ProductionInput back = fuzz::decode_v3_production(*fuzz::production_payload(bytes));
  if (back.spec != v.spec || back.mutations != v.mutations) round_trip_failed(name);
  return bytes;
}

bool v3_production_round_trips(std::span<const uint8_t> payload) {
  const fuzz::V3ProductionInput v = fuzz::decode_v3_production(payload);
  const fuzz::V3ProductionInput w =
      fuzz::decode_v3_production(*fuzz::production_payload(fuzz::encode_v3_production(v)));
  return w.spec == v.spec && w.mutations == v.mutations &&
         props::v3_mutations_compose(props::production_v3_case(v.spec), v.mutations);
}

// What the fuzz_validate corpus's v3 inputs reach, decoded as the target decodes them.
std::set<props::V3MutationKind> v3_mutations;

void v3_reach(const std::vector<uint8_t>& bytes) {
  if (const auto v3 = fuzz::v3_payload(bytes)) {
    for (const props::V3Mutation& mu : fuzz::decode_v3_validate(*v3).mutations) {
      v3_mutations.insert(mu.kind);
    }
  }
}

void v3_reached(const fuzz::Verdict& verdict) {
  for (props::V3MutationKind k : props::all_v3_mutation_kinds()) {
    verdict(v3_mutations.contains(k), "fuzz_validate corpus: no v3 input has mutation " +
                                          std::string(props::v3_mutation_name(k)));
  }
}

const fuzz::SeedFamily kV3Seeds{
    .claims = v3_claims,
    .validate_seeds = v3_validate_seeds,
    .differential_seeds = v3_differential_seeds,
    .raw_seeds = v3_raw_seeds,
    .validate_round_trips = v3_validate_round_trips,
    .differential_round_trips = v3_differential_round_trips,
    .raw_round_trips = v3_raw_round_trips,
    .owns = v3_owns,
    .production_seed = v3_production_seed,
    .production_round_trips = v3_production_round_trips,
    .reach = v3_reach,
    .reached = v3_reached,
    .value_classes = nullptr,
};
const fuzz::RegisterSeedFamily kRegistered(kV3Seeds);

}  // namespace
