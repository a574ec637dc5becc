// The families of fuzz inputs (harness/targets.h), one per dialect family: the byte format an
// input of the family has and what each fuzz target checks of one (issue 48: the targets go
// through this interface instead of naming the dialects). An input opens with its family's
// two-byte tag (harness/target_inputs.h); the jax family's inputs have none. A production call
// (kProductionTag) names its dialect and goes to the family that owns it. Each family fills one
// entry in its own file (harness/jax_family.cc, harness/v3_family.cc); input_families.cc, the
// one harness/ file that names them all, lists them.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string_view>
#include <vector>

#include "core/dialect.h"
#include "harness/production_bench.h"
#include "harness/raw_check.h"
#include "harness/target_inputs.h"

namespace rpa::fuzz {

struct InputFamily {
  std::string_view name;
  // The two bytes that open the family's inputs; empty: the untagged family (at most one).
  std::vector<uint8_t> tag;
  // Whether a production call of dialect d is the family's.
  bool (*owns)(Dialect d) = nullptr;
  // What fuzz_validate, fuzz_differential and fuzz_raw_inputs check of one input (the bytes
  // after the tag); the first two abort on a problem, raw returns it.
  void (*validate)(std::span<const uint8_t> payload) = nullptr;
  void (*differential)(std::span<const uint8_t> payload) = nullptr;
  RawCheck (*raw)(std::span<const uint8_t> payload) = nullptr;
  // fuzz_validate's check of a production call of a dialect the family owns (the payload after
  // kProductionTag, which opens with the dialect: production_dialect); decodes the call and
  // its mutations in the family's format (harness/jax_target_inputs.h,
  // harness/v3_target_inputs.h); aborts.
  void (*production)(std::span<const uint8_t> payload) = nullptr;

  // --- rpa bench's production calls (harness/production_bench.h; issue 48) ---
  // Times a production call of a dialect the family owns (harness/jax_production_bench.h,
  // harness/v3_production_bench.h): materialize, validate, the reference and each kernel, one
  // stage each appended to t.stages, every kernel's output checked; the tiled kernel on
  // `threads` (0: every core), `progress` (if set) called before each stage with its name.
  // Throws std::logic_error if validation rejects the call.
  void (*time_production)(const props::ProductionSpec& s, int threads,
                          const std::function<void(std::string_view)>& progress,
                          bench::ProductionTiming& t) = nullptr;
};

// Every registered family, the untagged one last.
std::span<const InputFamily* const> input_families();

// The family an input belongs to (by its tag, else the untagged family) and its payload.
struct FamilyInput {
  const InputFamily* family;
  std::span<const uint8_t> payload;
};
FamilyInput input_family(std::span<const uint8_t> bytes);

// The family that owns the dialect's production calls.
const InputFamily& family_of(Dialect d);

}  // namespace rpa::fuzz
