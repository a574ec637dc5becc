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

enum class Semantics : uint8_t { kKernel, kReference };

// "kernel" / "reference", as `--semantics` takes them.
std::string_view semantics_name(Semantics s);
std::optional<Semantics> parse_semantics(std::string_view name);
// "kernel semantics" / "reference semantics", as reports name them.
std::string semantics_label(Semantics s);

}  // namespace rpa
