// The scalar parameters of ragged paged attention (DESIGN.md section 2), as JAX names them.
#pragma once

#include <cstdint>
#include <optional>

namespace rpa {

// -0.7 * float32 max, as JAX's DEFAULT_MASK_VALUE (computed in double).
inline constexpr double kDefaultMaskValue = -0.7 * 3.4028234663852886e38;

// The largest mask value for which the tiled kernel's zero-padded KV slots (logit exactly
// mask_value) weigh exactly 0 in float32 against any logit of magnitude below 1e29: strict
// validation's bound, and the kernel's condition for leaving them out.
inline constexpr double kMaxExactMaskValue = -1e30;

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
