#include "harness/jax_validation_check.h"

#include <vector>

#include "casegen/jax_spec_model.h"

namespace rpa::fuzz {

ValidationCheck check_validation(const Inputs& in, const Params& params,
                                 const ValidateOptions& options) {
  ValidationCheck c;
  c.verdict = validate(in, params, options);
  const std::vector<Failure> all = validate_all(in, params, options);
  const std::optional<Failure> first =
      all.empty() ? std::nullopt : std::optional<Failure>(all.front());
  if (first != c.verdict) {
    c.problem = std::string(mode_name(options.mode)) + " mode, " +
                std::string(options.target.name) + ": validate says " +
                props::verdict_text(c.verdict) + ", validate_all lists first " +
                props::verdict_text(first);
  }
  return c;
}

}  // namespace rpa::fuzz
