// One ragged paged attention case: the inputs, the parameters, and optionally an output
// to check and the oracle's own answer.
#pragma once

#include <optional>

#include "kernel/inputs.h"
#include "kernel/params.h"
#include "kernel/tensor.h"

namespace rpa {

struct Case {
  Inputs inputs;
  Params params;
  std::optional<Tensor> out;       // a kernel's output to be checked, q's shape and dtype
  std::optional<Tensor> expected;  // the oracle's answer, q's shape and dtype

  bool operator==(const Case&) const = default;
};

}  // namespace rpa
