#include "casegen/generate.h"

#include <algorithm>
#include <optional>
#include <string>
#include <string_view>

#include "casegen/random_source.h"

namespace rpa::props {

std::optional<Profile> named_profile(std::string_view name) {
  for (Profile p : kProfiles) {
    if (profile_name(p) == name) return p;
  }
  return std::nullopt;
}

std::string unknown_profile(const std::string& name) {
  if (name == kProductionProfile) {
    return "profile production is a recipe of its own: it takes no size or head_dim";
  }
  if (name == kLongTierProfile) {
    return "profile long32k takes the v3 dialects (JAX's kernel: profile long, kv_len up to 8192)";
  }
  return "profile takes decode, prefill, mixed, long, long32k, edge or production (got '" + name +
         "')";
}

void narrow(int64_t& field, int64_t bound) {
  if (bound > 0) field = std::min(field, bound);
}

ProductionSpec seeded_production_spec(uint64_t seed, Dialect d) {
  RandomSource source(seed, kFullSize);
  return build_production(source, d);
}

}  // namespace rpa::props
