// fuzz_validate: bytes -> CaseSpec with 0-2 named mutations (ByteSource, the properties'
// decoder) -> both validation modes against the spec model, rule and exact message; and
// validate()'s verdict is the first failure validate_all() lists. Caps: target_inputs.h.
// An input tagged v3 (target_inputs.h: kV3Tag) is a generated tpu-inference v3 case (either
// dialect) with 0-2 named v3 mutations instead, checked by the v3 spec model's entry point
// (casegen/v3_spec_model.h: check_v3_validation, both modes' rule and exact message, and
// v3_validate_all's first failure), materialized with zeros as the jax cases are. An input
// tagged production (kProductionTag) is a production call of any dialect
// (casegen/production.h) with 0-2 named mutations, materialized with zeros, its bound
// checked (check_held_bytes), and checked the same way.
#include <cstdint>
#include <span>

#include "harness/input_families.h"
#include "harness/target_inputs.h"
#include "harness/targets.h"

int rpa::fuzz::fuzz_validate(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> bytes(data, size);
  if (const auto production = production_payload(bytes)) {
    family_of(production_dialect(*production)).production(*production);
    return 0;
  }
  const FamilyInput in = input_family(bytes);
  in.family->validate(in.payload);
  return 0;
}
