// One ragged paged attention case: the dialect, its inputs and parameters, and optionally
// the results to check and the oracle's own answer (DESIGN.md sections 7 and 16).
#pragma once

#include <optional>

#include "core/dialect.h"
#include "core/jax_inputs.h"
#include "core/jax_params.h"
#include "core/tensor.h"
#include "core/v3_inputs.h"
#include "core/v3_params.h"

namespace rpa {

struct Case {
  Dialect dialect = Dialect::kJax;
  // The jax dialect's call (section 2); empty for the v3 dialects.
  Inputs inputs;
  Params params;
  // A v3 dialect's call (section 16); empty for the jax dialect.
  V3Inputs v3_inputs;
  V3Params v3_params;
  std::optional<Tensor> out;       // a kernel's output to be checked, q's shape and dtype
  std::optional<Tensor> expected;  // the oracle's answer, q's shape and dtype
  // v3 dialects: the updated KV cache a kernel returned, and the oracle's.
  std::optional<Tensor> kv_cache_out;
  std::optional<Tensor> expected_kv_cache;

  bool operator==(const Case&) const = default;
};

}  // namespace rpa
