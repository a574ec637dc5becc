#include "service/jax_run_case.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>

#include "core/jax_kv_view.h"
#include "core/paged_kv_view.h"
#include "kernel/jax_kernel.h"
#include "reference/jax_reference.h"

namespace rpa {

RuleReport rule_report(const Failure& f, Mode mode) {
  const RuleInfo& info = rule_info(f.rule);
  return {info.name, f.message, mode == Mode::kJax && info.jax_crash, "JAX"};
}

std::optional<Rejection> compute_rejection(const Case& c, const CaseOptions& args,
                                           bool needs_definition) {
  const Mode mode = args.validate.mode;
  if (std::optional<Failure> f = validate(c.inputs, c.params, args.validate)) {
    return Rejection{"rejected in " + std::string(mode_name(mode)) + " mode by " +
                         rule_line(rule_report(*f, mode)),
                     f, mode};
  }
  if (mode == Mode::kStrict || !needs_definition) return std::nullopt;
  ValidateOptions strict = args.validate;
  strict.mode = Mode::kStrict;
  if (std::optional<Failure> f = validate(c.inputs, c.params, strict)) {
    return Rejection{"accepted in " + std::string(mode_name(mode)) +
                         " mode, but the output is undefined: rejected in strict mode by " +
                         rule_line(rule_report(*f, Mode::kStrict)),
                     f, Mode::kStrict};
  }
  return std::nullopt;
}

std::optional<Rejection> literal_jax_rejection(const Case& c, const CaseOptions& args) {
  if (std::optional<Rejection> r = compute_rejection(c, args, /*needs_definition=*/false)) {
    return r;
  }
  const DType qt = c.inputs.q.dtype(), kt = c.inputs.kv_pages.dtype();
  if (is_kernel_q_dtype(qt) && (is_kernel_kv_dtype(kt) || is_pallas_extra_kv_dtype(kt))) {
    return std::nullopt;
  }
  return Rejection{"the literal schedule computes q in float32 or bfloat16 and KV in float32, "
                   "bfloat16, float8, float16 or integers up to 32 bits (got q " +
                       std::string(dtype_name(qt)) + ", kv_pages " +
                       std::string(dtype_name(kt)) + ")",
                   std::nullopt, args.validate.mode};
}

KernelOptions kernel_options(const CaseOptions& args) {
  return KernelOptions{.threads = args.threads,
                       .target = args.validate.target,
                       .literal_schedule = args.literal,
                       .untuned_blocks = args.literal && args.validate.mode == Mode::kJax};
}

std::optional<Rejection> run_rejection(const Case& c, const CaseOptions& a) {
  // The literal schedule says what the Pallas kernel computes: in jax mode it needs no
  // defined output, only an input the Pallas kernel runs on.
  const bool jax_literal = a.literal && a.validate.mode == Mode::kJax;
  return jax_literal ? literal_jax_rejection(c, a) : compute_rejection(c, a);
}

RunOutcome run_case(const Case& c, const CaseOptions& a) {
  // RunOutcome has no cache: a v3 case goes through v3_run_case (service/v3_run_case.h).
  if (is_v3(c.dialect)) {
    throw std::invalid_argument("run_case computes jax cases; a " +
                                std::string(dialect_name(c.dialect)) +
                                " case goes through v3_run_case (service/v3_run_case.h)");
  }
  RunOutcome r;
  r.rejection = run_rejection(c, a);
  if (r.rejection) return r;
  r.out = a.impl == "kernel"
              ? tiled_attention(c.inputs, c.params, kernel_options(a))
              : dense_reference(c.inputs, c.params, a.reference_semantics()).out;
  return r;
}

RunReport run_report(const Case& c, const CaseOptions& a) {
  RunReport r;
  r.rows = std::clamp<int64_t>(kv_view(c.inputs).total_q_tokens(), 0, c.inputs.q.dim(0));
  if (a.impl == "kernel") {
    const KernelOptions options = kernel_options(a);
    r.plan = plan_kernel(c.inputs, c.params, options.target, options.untuned_blocks);
  }
  return r;
}

}  // namespace rpa
