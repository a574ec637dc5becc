// Validation of a ragged paged attention call (DESIGN.md sections 3 and 4).
#pragma once

#include <optional>
#include <vector>

#include "core/jax_inputs.h"
#include "core/jax_params.h"
#include "validation/jax_rule.h"
#include "validation/mode.h"
#include "validation/target_profile.h"

namespace rpa {

// The first failing rule in table order, or nullopt when the call is valid in the mode.
// Expected rejections are values, never exceptions; nothing here reads q or kv_pages data.
std::optional<Failure> validate(const Inputs& in, const Params& params,
                                const ValidateOptions& options = {});

// Every failing rule in table order. A rule whose inputs a failed rule makes meaningless
// (e.g. every shape rule after q_rank) is not evaluated, so it cannot appear.
std::vector<Failure> validate_all(const Inputs& in, const Params& params,
                                  const ValidateOptions& options = {});

}  // namespace rpa
