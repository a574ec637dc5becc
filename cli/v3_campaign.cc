// rpa campaign's cases of tpu-inference's v3 dialects (cli/v3_campaign.h): the v3
// generator's cases, valid and with named mutations (casegen/v3_mutation.h), each mode's
// verdict against the v3 spec model, and a case strict accepts through the tiled kernel
// against the v3 reference; the production profile's v3 calls through the same checks; and a
// finding's case written next to the report.
#include "cli/v3_campaign.h"

#include <cmath>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "casefile/case_file.h"
#include "cli/campaign_run.h"
#include "kernel/v3_kernel.h"
#include "oracle/v3_compare.h"
#include "casegen/generate.h"
#include "casegen/production.h"
#include "casegen/v3_generate.h"
#include "casegen/v3_production.h"
#include "casegen/random_source.h"
#include "casegen/v3_build_case.h"
#include "casegen/v3_case_spec.h"
#include "casegen/v3_materialize.h"
#include "casegen/v3_mutation.h"
#include "casegen/v3_spec_model.h"
#include "reference/v3_reference.h"
#include "service/v3_run_case.h"
#include "validation/v3_validate.h"

namespace rpa {
namespace {

// Up to `count` named v3 mutations (casegen/v3_mutation.h) that compose on spec, drawn from
// seed: an optional shape one, then parameter ones of distinct groups, as the validation
// properties draw them.
std::vector<props::V3Mutation> seeded_v3_mutations(const props::V3CaseSpec& spec, uint64_t seed,
                                                   int count) {
  std::vector<props::V3Mutation> out;
  for (int n = 0; n < count; ++n) {
    std::vector<props::V3MutationKind> kinds;
    for (const props::V3MutationKind k : props::all_v3_mutation_kinds()) {
      std::vector<props::V3Mutation> with = out;
      with.push_back({k, 0});
      if (props::v3_mutations_compose(spec, with)) kinds.push_back(k);
    }
    if (kinds.empty()) break;
    const props::V3MutationKind kind = kinds[props::splitmix64(seed) % kinds.size()];
    out.push_back({kind, static_cast<int64_t>(props::splitmix64(seed) % 256)});
  }
  return out;
}

// A v3 case: the generator's case with its named mutations (none: valid in both modes), each
// mode's verdict against the v3 spec model (casegen/v3_spec_model.h: the rule and message
// the mutations declare, never computed by the validator); a case strict accepts, the
// tiled kernel against the v3 reference in the kernel semantics (v3_compare: the updated cache
// bit for bit, out within the derived tolerance). The reference semantics is not the
// kernel's: its tolerance (oracle/v3_compare.h) bounds tpu-inference's own ref, so the kernel
// is not judged against it here. The check's power (the least dropped key weight caught,
// whether an all-zero output fails) and its error / tolerance are tallied per dialect and
// dtype pair.
// hex: the replay hex of the call (a production recipe's or the spec's; the mutations are
// named in a finding's line).
void run_v3_spec(const props::V3CaseSpec& spec, std::span<const props::V3Mutation> mutations,
                 const std::string& hex, int64_t i, Stats& st) {
  const Dialect d = spec.dialect;
  const std::string name(dialect_name(d));
  ++st.v3_cases[name];  // Stats::cases and validation_checks count the jax dialect's
  if (!mutations.empty()) ++st.v3_mutated[name];
  const props::V3MutatedCase mutated = props::mutate_v3(spec, mutations);
  const props::V3Materialized& m = mutated.call;
  bool strict_valid = false;
  for (int k = 0; k < 2; ++k) {
    const Mode mode = kV3Modes[k];
    const std::optional<V3Failure> want = props::expected_v3_failure(mutated.declared, mode);
    const std::optional<V3Failure> got = v3_validate(d, m.inputs, m.params, mode);
    ++st.v3_verdicts[k][name][got ? std::string(v3_rule_info(got->rule).name) : "valid"];
    if (got != want) {
      record(st, {i, "v3 validation (" + std::string(v3_mode_name(mode)) + ")",
                  name + ", mutations " + props::describe_v3_mutations(mutations) +
                      ": spec model: " + props::v3_verdict_text(want) +
                      " | validate: " + props::v3_verdict_text(got),
                  hex, ""});
    }
    if (mode == Mode::kStrict) strict_valid = !got && !want;
  }
  // The kernel runs on every case strict accepts, a mutation's valid side included (k_scale
  // of the largest float32, finite as strict asks: the rows where a float32 kernel's logits
  // may leave float32's range are left out of the comparison and counted, finding 28).
  if (!strict_valid) return;
  const V3KernelResult k =
      v3_tiled_attention(d, m.inputs, m.params, {.threads = static_cast<int>(i / 4 % 2) + 1});
  const V3ReferenceResult ref = v3_reference(d, m.inputs, m.params, Semantics::kKernel);
  const V3Comparison c = v3_compare(d, m.inputs, m.params, ref, k.out, k.kv_cache);
  ++st.v3_kernel_checks;
  const std::string key = name + " " + std::string(dtype_name(m.inputs.queries.dtype())) + "/" +
                          std::string(dtype_name(m.inputs.kv_cache.dtype()));
  ++st.v3_pair_checks[key];
  keep_v3_worst(st, key, c.max_share, c.tolerance_at_max);
  if (c.past_float32 > 0) {
    ++st.v3_past_float32_checks;
    st.v3_past_float32_pairs += c.past_float32;
  }
  ++st.v3_budget_histogram[key][budget_bin(c.agree() ? c.max_share : INFINITY)];
  // The check's power, as for the jax dialect's kernel-semantics checks, over the unmutated
  // cases: a mutation's valid side (a scale of float32's largest value) can leave a check no
  // power at all (logit errors past any weight: the allowance's cap of 2 max |v|), which says
  // nothing of the checks the generator's calls get.
  if (mutations.empty()) {
    if (std::isfinite(c.min_detectable_key_weight)) {
      st.v3_key_weights[key].push_back(c.min_detectable_key_weight);
    }
    if (c.compared > 0 && !c.rejects_zero) ++st.v3_could_not_reject_zero;
  }
  if (!c.agree()) {
    record(st, {i, "v3 kernel vs reference (kernel semantics)",
                name + (mutations.empty() ? std::string()
                                          : ", mutations " + props::describe_v3_mutations(mutations)) +
                    ": " + describe_v3_comparison(c),
                hex, ""});
  }
}

// The v3 cases alternate valid and mutated per dialect (i / 8 odd: one or two mutations).
// replay, note: set first to the case's replay hex and the mutations it carries, for a finding
// of the caller's (an exception).
void run_v3_case(Dialect d, uint64_t seed, int64_t i, int max_size, Stats& st, std::string& replay,
                 std::string& note) {
  props::V3BuildOptions options;
  options.dialect = d;
  const uint64_t s = case_seed(seed, i);
  const props::V3CaseSpec spec = props::seeded_v3_spec(s, static_cast<int>(i % (max_size + 1)), options);
  const std::vector<props::V3Mutation> mutations =
      (i / 8) % 2 == 0 ? std::vector<props::V3Mutation>{}
                       : seeded_v3_mutations(spec, s ^ 0x5bd1e995u, 1 + static_cast<int>((i / 16) % 2));
  replay = props::v3_spec_hex(spec);
  if (!mutations.empty()) note = " (mutations " + props::describe_v3_mutations(mutations) + ")";
  run_v3_spec(spec, mutations, replay, i, st);
}

}  // namespace

void v3_campaign_case(Dialect d, uint64_t seed, int64_t i, int max_size, DotPasses, Stats& st,
                      std::string& replay, std::string& note) {
  run_v3_case(d, seed, i, max_size, st, replay, note);
}

void v3_campaign_production(const props::ProductionSpec& spec, const std::string& hex,
                            int64_t i, DotPasses, Stats& st) {
  run_v3_spec(props::production_v3_case(spec), {}, hex, i, st);
}

std::optional<std::string> v3_write_finding_file(const Finding& f,
                                                 const std::filesystem::path& dir,
                                                 const std::string& stem) {
  if (!f.spec.starts_with("v3:")) return std::nullopt;
  const std::optional<props::V3CaseSpec> spec = props::v3_spec_from_hex(f.spec);
  if (!spec) return "";
  const props::V3Materialized m = props::materialize_v3(*spec);
  std::string error;
  Case c;
  c.dialect = spec->dialect;
  c.v3_inputs = m.inputs;
  c.v3_params = m.params;
  if (write_case_file((dir / (stem + ".npz")).string(), c, &error)) return stem + ".npz";
  return "";
}

}  // namespace rpa
