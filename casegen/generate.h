// The generators as callers outside RapidCheck name them: `rpa gen --seed` and rpa.gen()
// (a profile, a size, a seed), and the Hypothesis strategies of the Python package (bytes
// through ByteSource, the fuzzers' decoder). The names every dialect shares live here: the
// request, the bounds, the profile names and the production profile's seeded recipe; each
// dialect family turns them into its build options (casegen/jax_generate.h,
// casegen/v3_generate.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/dialect.h"
#include "casegen/batch_mix.h"
#include "casegen/production.h"

namespace rpa::props {

// What to draw. profile: "" (any batch mix), "decode", "prefill", "mixed", "long" (the
// long-context generator), "long32k" (v3 only: the long tier) or "edge" (one or two named
// mutations); "production" is drawn by
// seeded_production_spec, not through these options; head_dim fixes the head
// dimension (the Pallas kernel on the CPU traces multiples of 128 only).
struct GenRequest {
  std::string profile;
  std::optional<int64_t> head_dim;
};

// Bounds a caller may narrow the strategies' cases to (0: the generator's own bound).
struct DecodeBounds {
  int64_t max_seqs = 0;
  int64_t max_kv_len = 0;
  int64_t max_head_dim = 0;
  int64_t max_page_size = 0;
  // v3: windows and page tables at the integer edges (V3BuildOptions::integer_edges).
  bool integer_edges = false;
  // jax: q and KV may be one value everywhere (BuildOptions::flat_data; the campaign: false).
  bool flat_data = true;
};

// The largest head_dim a request may fix, of every dialect's generators (rpa gen --head-dim;
// jax: kMaxHeadDim, v3: kV3MaxHeadDim).
inline constexpr int64_t kGenMaxHeadDim = 256;

// The v3 dialects' long tier (v3_long_tier_options): kv_len 32768 to 65536 in a call or two;
// no size scales it. Bounds narrow it only from 32768 up.
inline constexpr std::string_view kLongTierProfile = "long32k";

// The production profile, of every dialect (casegen/production.h): a recipe from the
// seed, sized by its own bounds (no size, no head_dim: the model fixes it).
inline constexpr std::string_view kProductionProfile = "production";
ProductionSpec seeded_production_spec(uint64_t seed, Dialect d);

// What every family's options share (casegen/generate.cc): the batch mix `name` names, if
// any; the error for a profile no family knows; a bound of DecodeBounds (0: none) applied to
// an option.
std::optional<Profile> named_profile(std::string_view name);
std::string unknown_profile(const std::string& name);
void narrow(int64_t& field, int64_t bound);

}  // namespace rpa::props
