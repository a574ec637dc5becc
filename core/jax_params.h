// The scalar parameters of ragged paged attention (DESIGN.md section 2), as JAX names them.
#pragma once

#include <cstdint>
#include <optional>

#include "core/attention_math.h"

namespace rpa {

struct Params {
  double sm_scale = 1.0;
  std::optional<int64_t> sliding_window;
  std::optional<double> soft_cap;
  // JAX's signature default is DEFAULT_MASK_VALUE and None also means the default; a case
  // file without a mask_value member leaves this empty.
  std::optional<double> mask_value;
  std::optional<double> k_scale;
  std::optional<double> v_scale;
  // Tuning.
  std::optional<int64_t> num_kv_pages_per_block;
  std::optional<int64_t> num_queries_per_block;
  std::optional<int64_t> vmem_limit_bytes;

  double effective_mask_value() const { return mask_value.value_or(kDefaultMaskValue); }
  bool operator==(const Params&) const = default;
};

}  // namespace rpa
