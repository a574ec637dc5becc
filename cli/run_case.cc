#include "cli/run_case.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>

#include "kernel/paged_kv_view.h"
#include "kernel/tiled_kernel.h"
#include "reference/dense_reference.h"

namespace rpa {

std::string run_options_error(const CliArgs& a) {
  if (a.impl != "reference" && a.impl != "kernel") {
    return a.impl.empty() ? "run needs --impl reference or --impl kernel"
                          : "--impl takes reference or kernel";
  }
  if (a.literal && a.impl != "kernel") return "--schedule literal needs --impl kernel";
  if (a.semantics && a.impl != "reference") {
    return "--semantics chooses the dense reference's rounding points: it needs --impl reference";
  }
  return "";
}

std::optional<Rejection> run_rejection(const Case& c, const CliArgs& a) {
  // The literal schedule says what the Pallas kernel computes: in jax mode it needs no
  // defined output, only an input the Pallas kernel runs on.
  const bool jax_literal = a.literal && a.validate.mode == Mode::kJax;
  return jax_literal ? literal_jax_rejection(c, a) : compute_rejection(c, a);
}

RunOutcome run_case(const Case& c, const CliArgs& a) {
  // RunOutcome has no cache: a v3 case goes through v3_run_case (cli/v3_commands.h).
  if (is_v3(c.dialect)) {
    throw std::invalid_argument("run_case computes jax cases; a " +
                                std::string(dialect_name(c.dialect)) +
                                " case goes through v3_run_case (cli/v3_commands.h)");
  }
  RunOutcome r;
  r.rejection = run_rejection(c, a);
  if (r.rejection) return r;
  r.out = a.impl == "kernel"
              ? tiled_attention(c.inputs, c.params, kernel_options(a))
              : dense_reference(c.inputs, c.params, a.reference_semantics()).out;
  return r;
}

RunReport run_report(const Case& c, const CliArgs& a) {
  RunReport r;
  r.rows = std::clamp<int64_t>(PagedKvView(c.inputs).total_q_tokens(), 0, c.inputs.q.dim(0));
  if (a.impl == "kernel") {
    const KernelOptions options = kernel_options(a);
    r.plan = plan_kernel(c.inputs, c.params, options.target, options.untuned_blocks);
  }
  return r;
}

}  // namespace rpa
