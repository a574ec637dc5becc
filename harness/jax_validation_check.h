// The check fuzz_validate and fuzz_raw_inputs both make on every call: validate()'s verdict
// is the first failure validate_all() lists (validation/jax_validate.h promises it).
#pragma once

#include <optional>
#include <string>

#include "core/jax_inputs.h"
#include "core/jax_params.h"
#include "validation/jax_rule.h"
#include "validation/jax_validate.h"

namespace rpa::fuzz {

struct ValidationCheck {
  std::optional<Failure> verdict;      // validate()'s
  std::optional<std::string> problem;  // one line, when validate_all() lists another first
};

ValidationCheck check_validation(const Inputs& in, const Params& params,
                                 const ValidateOptions& options);

}  // namespace rpa::fuzz
