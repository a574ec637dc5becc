#include "cli/run_case.h"

#include <utility>

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

RunOutcome run_case(const Case& c, const CliArgs& a) {
  // The literal schedule says what the Pallas kernel computes: in jax mode it needs no
  // defined output, only an input the Pallas kernel runs on.
  const bool jax_literal = a.literal && a.validate.mode == Mode::kJax;
  RunOutcome r;
  r.rejection = jax_literal ? literal_jax_rejection(c, a) : compute_rejection(c, a);
  if (r.rejection) return r;
  r.out = a.impl == "kernel"
              ? tiled_attention(c.inputs, c.params, kernel_options(a))
              : dense_reference(c.inputs, c.params, a.reference_semantics()).out;
  return r;
}

}  // namespace rpa
