// rpa campaign's jax cases (cli/jax_campaign.h): the generators' cases, valid and with named
// mutations, each mode's verdict against the spec model (casegen/jax_spec_model.h), the raw
// call of a strict-valid case with bytes changed (fuzz_raw_inputs' checks), and the tiled
// kernel against the dense reference in both semantics; the production profile's jax calls
// through the same checks; and a finding's case or raw bytes written next to the report.
#include "cli/jax_campaign.h"

#include <algorithm>
#include <cmath>
#include <exception>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "casefile/case_file.h"
#include "cli/campaign_run.h"
#include "core/jax_kv_view.h"
#include "core/paged_kv_view.h"
#include "casegen/jax_raw_call.h"
#include "harness/jax_raw_check.h"
#include "kernel/jax_kernel.h"
#include "oracle/compare.h"
#include "oracle/jax_tolerance.h"
#include "oracle/tolerance.h"
#include "casegen/jax_case_codec.h"
#include "casegen/jax_build_case.h"
#include "casegen/jax_materialize.h"
#include "casegen/jax_spec_model.h"
#include "casegen/jax_production.h"
#include "casegen/production.h"
#include "casegen/random_source.h"
#include "reference/jax_reference.h"
#include "service/check_case.h"
#include "validation/jax_validate.h"

namespace rpa {
namespace {

// Case i: even ones valid, odd ones with one or two mutations; sizes cycle 0..max_size as
// in a RapidCheck run.
props::CaseSpec case_spec(uint64_t seed, int64_t i, int max_size) {
  props::BuildOptions options;
  options.min_mutations = i % 2 == 0 ? 0 : 1;
  options.max_mutations = i % 2 == 0 ? 0 : 2;
  props::RandomSource source(case_seed(seed, i), static_cast<int>(i % (max_size + 1)));
  return props::build_case(source, options);
}

// fuzz_raw_inputs' decoder and checks in process: the raw form (casegen/jax_raw_call.h) of a valid
// case with one to four bytes changed, three times in four among the bytes before q's and
// kv_pages' contents (shapes, dtypes, parameters, index arrays: what validation reads).
void run_raw_call(const props::Materialized& m, uint64_t seed, int64_t i, Stats& st) {
  std::optional<std::vector<uint8_t>> bytes = fuzz::encode_raw_call({m.inputs, m.params});
  if (!bytes || bytes->empty()) return;  // over the raw element budget
  const uint64_t data = static_cast<uint64_t>(m.inputs.q.nbytes() + m.inputs.kv_pages.nbytes());
  const uint64_t head = bytes->size() > data ? bytes->size() - data : bytes->size();
  uint64_t state = seed;
  const uint64_t changes = 1 + props::splitmix64(state) % 4;
  for (uint64_t k = 0; k < changes; ++k) {
    const uint64_t span = props::splitmix64(state) % 4 != 0 ? head : bytes->size();
    (*bytes)[props::splitmix64(state) % span] = static_cast<uint8_t>(props::splitmix64(state));
  }
  ++st.raw_calls;
  try {
    const fuzz::RawCheck r = fuzz::check_raw_call(fuzz::decode_raw_call(*bytes));
    st.raw_strict_accepted += r.strict_accepts ? 1 : 0;
    st.raw_ran += r.ran ? 1 : 0;
    if (r.problem) record(st, {i, "raw call", *r.problem, "", props::to_hex(*bytes)});
  } catch (const std::exception& e) {
    record(st, {i, "raw call", std::string("exception: ") + e.what(), "", props::to_hex(*bytes)});
  }
}

// The hex that replays a finding: the production recipe's when the case came from one (its
// expansion is past the generators' codecs), else the spec's own.
std::string replay_hex(const props::CaseSpec& spec, const std::string& production_hex) {
  return production_hex.empty() ? props::spec_hex(spec) : production_hex;
}

// Threads alternate 1 and 2 over the valid cases.
void run_case(const props::CaseSpec& spec, const std::string& production_hex, int64_t i,
              DotPasses passes, Stats& st) {
  ++st.cases;
  st.mutated += spec.mutations.empty() ? 0 : 1;
  const props::Materialized m = props::materialize(spec);

  bool strict_valid = false;
  for (int k = 0; k < 2; ++k) {
    const Mode mode = kModes[k];
    const std::optional<Failure> want = props::expected_failure(m, mode);
    const std::optional<Failure> got = validate(m.inputs, m.params, {.mode = mode});
    ++st.validation_checks;
    ++st.verdicts[k][got ? std::string(rule_info(got->rule).name) : "valid"];
    if (got != want) {
      record(st, {i, "validation (" + std::string(mode_name(mode)) + ")",
                  "spec model: " + props::verdict_text(want) +
                      " | validate: " + props::verdict_text(got),
                  replay_hex(spec, production_hex), ""});
    }
    if (mode == Mode::kStrict) strict_valid = !got && !want;
  }
  if (!strict_valid) return;

  run_raw_call(m, case_seed(static_cast<uint64_t>(spec.data_seed), i), i, st);
  const Tensor out =
      tiled_attention(m.inputs, m.params, {.threads = static_cast<int>(i / 2 % 2) + 1});
  ++st.kernel_checks;
  const std::string pair =
      std::string(dtype_name(spec.q_dtype)) + "/" + std::string(dtype_name(spec.kv_dtype));
  ++st.pair_checks[pair];
  const auto [kernel_ref, reference_ref] =
      dense_reference_both(m.inputs, m.params, most_logit_error(passes));
  for (const ReferenceResult* r : {&kernel_ref, &reference_ref}) {
    const ReferenceResult& ref = *r;
    const Semantics semantics = ref.semantics;
    const Comparison c = compare_outputs(out, ref.out, kv_view(m.inputs),
                                         tolerance_for_case(m.inputs, m.params, ref, passes));
    const bool kernel = semantics == Semantics::kKernel;
    double& worst = (kernel ? st.worst_budget : st.worst_budget_reference)[pair];
    worst = std::max(worst, c.max_budget_used);
    if (kernel) {
      ++st.budget_histogram[pair][budget_bin(c.agree() ? c.max_budget_used : INFINITY)];
      if (c.agree() && c.bias.biased()) {
        ++st.biased[pair];
        record(st, {i, "kernel vs reference (bias)", bias_line(c), replay_hex(spec, production_hex), ""});
      }
    }
    if (kernel && std::isfinite(c.min_detectable_key_weight)) {
      st.key_weights[pair].push_back(c.min_detectable_key_weight);
    }
    if (kernel && std::isfinite(c.discrimination)) {
      double& weakest = st.worst_discrimination[pair];
      weakest = std::max(weakest, c.discrimination);
      if (!c.rejects_zero()) ++st.could_not_reject_zero;
    }
    if (!c.agree()) {
      record(st, {i, "kernel vs reference (" + semantics_label(semantics) + ")",
                  describe_mismatch(c), replay_hex(spec, production_hex), ""});
    }
  }
}

}  // namespace

// The jax cases keep their own numbering (even valid, odd mutated): every fourth case of the
// run is a v3 case (cli/campaign_command.cc's mix), so case i is the jax dialect's
// (i - (i + 1) / 4)-th.
void jax_campaign_case(Dialect, uint64_t seed, int64_t i, int max_size, DotPasses passes,
                       Stats& st, std::string& replay, std::string&) {
  const props::CaseSpec spec = case_spec(seed, i - (i + 1) / 4, max_size);
  replay = props::spec_hex(spec);
  run_case(spec, "", i, passes, st);
}

void jax_campaign_production(const props::ProductionSpec& spec, const std::string& hex,
                             int64_t i, DotPasses passes, Stats& st) {
  run_case(props::production_case(spec), hex, i, passes, st);
}

std::optional<std::string> jax_write_finding_file(const Finding& f,
                                                  const std::filesystem::path& dir,
                                                  const std::string& stem) {
  if (!f.raw.empty()) {
    const std::optional<std::vector<uint8_t>> bytes = props::from_hex(f.raw);
    std::ofstream file(dir / (stem + ".bin"), std::ios::binary);
    if (bytes && file.write(reinterpret_cast<const char*>(bytes->data()),
                            static_cast<std::streamsize>(bytes->size()))) {
      return stem + ".bin";
    }
    return "";
  }
  const std::optional<props::CaseSpec> spec = props::spec_from_hex(f.spec);
  if (!spec) return std::nullopt;
  const props::Materialized m = props::materialize(*spec);
  std::string error;
  Case c;
  c.inputs = m.inputs;
  c.params = m.params;
  if (write_case_file((dir / (stem + ".npz")).string(), c, &error)) return stem + ".npz";
  return "";
}

}  // namespace rpa
