// Which rounding points the dense reference follows (docs/oracle.md; DESIGN.md section 2
// describes the `reference` one). Both take K_eff / V_eff, logits, mask, soft cap and softmax
// as the definition does; they differ after the softmax:
// - kReference: JAX's ref_ragged_paged_attention, step for step: p rounded to V_eff's dtype,
//   p.V rounded to V_eff's dtype, then cast to q's dtype (float8 V rounds p to float8).
// - kKernel: what JAX's Pallas kernel computes: p kept unrounded, p.V accumulated unrounded
//   over V_eff's exact values, one rounding to q's dtype at the end.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace rpa {

// The least relative logit error a tolerance of any dialect may assume per unit of B_t
// (oracle/jax_tolerance.cc: float32 accumulation, 2^-21), and so the B_t past which a soft cap
// bounds the error.
// Any tolerance that uses spread must assume a relative logit error between it and the
// result's most_logit_error: by default kMostLogitError (2^-21 + 2^-22, a TPU's six-pass
// float32 dots, rounded up); fewer passes need more (oracle/dot_precision.h).
inline constexpr double kLeastLogitError = 0x1p-21;
inline constexpr double kMostLogitError = 0x1p-20;
inline constexpr double kCappedLogitScale = 2.0 / kLeastLogitError;

enum class Semantics : uint8_t { kKernel, kReference };

// "kernel" / "reference", as `--semantics` takes them.
std::string_view semantics_name(Semantics s);
std::optional<Semantics> parse_semantics(std::string_view name);
// "kernel semantics" / "reference semantics", as reports name them.
std::string semantics_label(Semantics s);

}  // namespace rpa
