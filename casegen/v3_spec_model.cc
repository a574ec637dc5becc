#include "casegen/v3_spec_model.h"

#include <sstream>

#include "casegen/v3_build_case.h"
#include "validation/v3_validate.h"

namespace rpa::props {

V3MutatedCase mutate_v3(const V3CaseSpec& spec, std::span<const V3Mutation> mutations,
                        Contents contents) {
  V3MutatedCase m{materialize_v3(spec, contents), {}};
  for (const V3Mutation& mutation : mutations) {
    apply_v3_mutation(mutation, spec, m.call, m.declared);
  }
  return m;
}

std::optional<V3Failure> expected_v3_failure(std::span<const V3Declared> declared, Mode mode) {
  const V3Declared* first = nullptr;
  for (const V3Declared& d : declared) {
    if (d.mode == mode && (first == nullptr || d.rank < first->rank)) first = &d;
  }
  if (first == nullptr) return std::nullopt;
  return first->failure;
}

std::optional<V3Failure> expected_v3_failure(const V3CaseSpec& spec,
                                             std::span<const V3Mutation> mutations, Mode mode) {
  return expected_v3_failure(mutate_v3(spec, mutations).declared, mode);
}

std::string v3_verdict_text(const std::optional<V3Failure>& f) {
  return f ? std::string(v3_rule_info(f->rule).name) + ": " + f->message : "valid";
}

std::string describe_v3_mutations(std::span<const V3Mutation> mutations) {
  if (mutations.empty()) return "none";
  std::string s;
  for (const V3Mutation& m : mutations) {
    if (!s.empty()) s += ", ";
    s += std::string(v3_mutation_name(m.kind)) + "(" + std::to_string(m.arg) + ")";
  }
  return s;
}

namespace {

std::string case_report(const V3CaseSpec& spec, std::span<const V3Mutation> mutations) {
  std::ostringstream report;
  report << describe(spec) << "\n  replay: ";
  if (v3_spec_encodes(spec)) {
    report << "rpa gen --dialect " << dialect_name(spec.dialect) << " --spec " << v3_spec_hex(spec)
           << " -o case.npz";
  } else {
    report << "past the v3 codec's bounds (a production call: its prod: hex replays it)";
  }
  report << "\n  mutations: " << describe_v3_mutations(mutations) << "\n";
  return report.str();
}

}  // namespace

bool check_v3_validation(const V3CaseSpec& spec, std::span<const V3Mutation> mutations,
                         std::string* why, Contents contents) {
  if (!v3_mutations_compose(spec, mutations)) {
    if (why != nullptr) {
      *why = case_report(spec, mutations) + "  the mutations do not compose on this case";
    }
    return false;
  }
  return check_v3_mutated(spec, mutations, mutate_v3(spec, mutations, contents), why);
}

bool check_v3_mutated(const V3CaseSpec& spec, std::span<const V3Mutation> mutations,
                      const V3MutatedCase& m, std::string* why) {
  std::ostringstream report;  // the modes' lines; the case's only on a failure
  bool ok = true;
  for (Mode mode : {Mode::kJax, Mode::kStrict}) {
    const std::optional<V3Failure> want = expected_v3_failure(m.declared, mode);
    const std::optional<V3Failure> got =
        v3_validate(spec.dialect, m.call.inputs, m.call.params, mode);
    const std::vector<V3Failure> all =
        v3_validate_all(spec.dialect, m.call.inputs, m.call.params, mode);
    const std::optional<V3Failure> all_first =
        all.empty() ? std::nullopt : std::optional<V3Failure>(all.front());
    const char* name = mode == Mode::kJax ? "native" : "strict";
    if (got != want || all_first != got) {
      ok = false;
      report << "  " << name << " mode: spec model says " << v3_verdict_text(want)
             << "\n    v3_validate says " << v3_verdict_text(got) << "\n    v3_validate_all starts "
             << v3_verdict_text(all_first) << "\n";
    }
  }
  if (!ok && why != nullptr) *why = case_report(spec, mutations) + report.str();
  return ok;
}

}  // namespace rpa::props
