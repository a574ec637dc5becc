#include "service/v3_run_case.h"

#include <cstdio>
#include <stdexcept>
#include <utility>
#include <vector>

#include "kernel/v3_kernel.h"
#include "reference/v3_reference.h"
#include "service/jax_run_case.h"
#include "validation/v3_validate.h"

namespace rpa {

RuleReport rule_report(const V3Failure& f, Mode mode) {
  const V3RuleInfo& info = v3_rule_info(f.rule);
  return {info.name, f.message, mode == Mode::kJax && info.crash, "tpu-inference"};
}

std::string_view v3_mode_name(Mode m) { return m == Mode::kJax ? "native" : "strict"; }

std::optional<V3Rejection> v3_compute_rejection(const Case& c, Mode mode) {
  for (Mode m : {mode, Mode::kStrict}) {
    if (auto f = v3_validate(c.dialect, c.v3_inputs, c.v3_params, m)) {
      return V3Rejection{.failure = std::move(*f), .mode = m};
    }
    if (m == Mode::kStrict) break;
  }
  return std::nullopt;
}

std::string v3_rejection_line(const CaseOptions& a, Dialect d, const V3Rejection& r) {
  return a.path + ": rejected in " + std::string(v3_mode_name(r.mode)) + " mode (" +
         std::string(dialect_name(d)) + ") by " + rule_line(rule_report(r.failure, r.mode));
}

int64_t v3_rows(const Case& c) {
  // Strict validity makes distribution[2] a sequence count and cu_q_lens[k] a row count.
  return c.v3_inputs.cu_q_lens.int_at(c.v3_inputs.distribution.int_at(2));
}

std::string v3_kernel_stop(const V3ProgramError& e) {
  return std::string(v3_program_error_kind_name(e.kind())) + ": " + e.what();
}

std::string v3_kernel_stop_line(std::string_view stop) {
  std::string line = "the literal v3 schedule stops where the kernel does not return (";
  line += stop;
  line += ")";
  return line;
}

V3ProgramOptions v3_program_options(const CaseOptions& a) {
  return V3ProgramOptions{.tpu_version = tpu_generation(a.validate.target)};
}

V3RunOutcome v3_run_case(const Case& c, const CaseOptions& a) {
  V3RunOutcome r;
  if (a.literal) {
    if (auto f = v3_validate(c.dialect, c.v3_inputs, c.v3_params, a.validate.mode)) {
      r.rejection = V3Rejection{.failure = std::move(*f), .mode = a.validate.mode};
      return r;
    }
    try {
      V3KernelResult k = v3_literal_attention(c.dialect, c.v3_inputs, c.v3_params, v3_program_options(a));
      r.out = std::move(k.out);
      r.kv_cache = std::move(k.kv_cache);
    } catch (const V3ProgramError& e) {
      r.kernel_stop = v3_kernel_stop(e);
    } catch (const std::invalid_argument& e) {  // what the literal schedule cannot take
      r.not_applicable = e.what();
    }
    return r;
  }
  r.rejection = v3_compute_rejection(c, a.validate.mode);
  if (r.rejection) return r;
  if (a.impl == "kernel") {
    V3KernelResult k = v3_tiled_attention(c.dialect, c.v3_inputs, c.v3_params, kernel_options(a));
    r.out = std::move(k.out);
    r.kv_cache = std::move(k.kv_cache);
  } else {
    V3ReferenceResult ref =
        v3_reference(c.dialect, c.v3_inputs, c.v3_params, a.reference_semantics());
    r.out = std::move(ref.out);
    r.kv_cache = std::move(ref.kv_cache);
  }
  return r;
}

}  // namespace rpa
