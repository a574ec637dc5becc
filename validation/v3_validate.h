// Validation of a tpu-inference v3 call (DESIGN.md sections 3 and 16) in the dialect's
// native mode (Mode::kJax: tpu-inference 0.32.0's own verdict and message text, for JAX-array
// arguments as vLLM passes them) or strict mode (the definition).
#pragma once

#include <optional>
#include <vector>

#include "core/dialect.h"
#include "core/v3_inputs.h"
#include "core/v3_params.h"
#include "validation/mode.h"
#include "validation/v3_rule.h"

namespace rpa {

// The first failing rule in check order, or nullopt when the call is valid in the mode.
// Total: any rank, dtype or size gives a verdict; nothing here reads q or KV data. d must be
// a v3 dialect (kJax is rejected as keyword_not_in_dialect).
std::optional<V3Failure> v3_validate(Dialect d, const V3Inputs& in, const V3Params& p, Mode m);

// Every failing rule in check order. A rule whose inputs an earlier failure makes
// meaningless (every shape rule after qkv_rank, say) is not evaluated.
std::vector<V3Failure> v3_validate_all(Dialect d, const V3Inputs& in, const V3Params& p, Mode m);

}  // namespace rpa
