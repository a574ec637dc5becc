// The check fuzz_validate and fuzz_raw_inputs both make on every call: validate()'s verdict
// is the first failure validate_all() lists (kernel/validate.h promises it).
#pragma once

#include <optional>
#include <string>

#include "kernel/inputs.h"
#include "kernel/params.h"
#include "kernel/rule.h"
#include "kernel/validate.h"

namespace rpa::fuzz {

struct ValidationCheck {
  std::optional<Failure> verdict;      // validate()'s
  std::optional<std::string> problem;  // one line, when validate_all() lists another first
};

ValidationCheck check_validation(const Inputs& in, const Params& params,
                                 const ValidateOptions& options);

}  // namespace rpa::fuzz
