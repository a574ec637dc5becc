// What the production properties of every dialect share (properties/jax_production_props.cc,
// properties/v3_production_props.cc; docs/properties.md, "The production profile"): the run's
// seed, the calls a test draws of a dialect, and the mutations it picks on one.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/dialect.h"
#include "casegen/generate.h"
#include "casegen/production.h"
#include "casegen/random_source.h"
#include "properties/sanitized.h"

namespace rpa::props {

inline int64_t env_count(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtoll(v, nullptr, 10) : fallback;
}

// The run's seeds: RPA_PRODUCTION_SEED, else a fresh one (printed, so a failure replays).
inline uint64_t base_seed() {
  static const uint64_t seed = [] {
    const char* v = std::getenv("RPA_PRODUCTION_SEED");
    if (v && *v) return static_cast<uint64_t>(std::strtoull(v, nullptr, 10));
    std::random_device rd;
    return (static_cast<uint64_t>(rd()) << 32) ^ rd();
  }();
  return seed;
}

// The calls a test checks: RPA_PRODUCTION_CALLS of the dialect, under the sanitizers only
// those of at most 64 MiB (the larger ones are about answers, which the release build checks).
inline std::vector<ProductionSpec> calls(Dialect d) {
  const int64_t n = env_count("RPA_PRODUCTION_CALLS", 1);
  std::vector<ProductionSpec> out;
  uint64_t state = base_seed() ^ (static_cast<uint64_t>(d) + 1) * 0x9e3779b97f4a7c15ULL;
  for (int tries = 0; static_cast<int64_t>(out.size()) < n && tries < 1000; ++tries) {
    const uint64_t seed = splitmix64(state);
    ProductionSpec s = seeded_production_spec(seed, d);
    if (kSanitized && s.memory_bytes() > (int64_t{64} << 20)) continue;
    std::printf("production call: rpa gen --profile production --dialect %s --seed %llu "
                "(RPA_PRODUCTION_SEED=%llu)\n%s\n",
                std::string(dialect_name(d)).c_str(), static_cast<unsigned long long>(seed),
                static_cast<unsigned long long>(base_seed()), describe(s).c_str());
    out.push_back(std::move(s));
  }
  return out;
}

// n distinct picks from `among`, drawn from the seed (a partial shuffle of their indices).
template <class T>
std::vector<T> pick(const std::vector<T>& among, int64_t n, uint64_t seed) {
  std::vector<size_t> order(among.size());
  for (size_t k = 0; k < order.size(); ++k) order[k] = k;
  std::vector<T> out;
  for (size_t k = 0; k < order.size() && static_cast<int64_t>(out.size()) < n; ++k) {
    std::swap(order[k], order[k + static_cast<size_t>(splitmix64(seed) % (order.size() - k))]);
    out.push_back(among[order[k]]);
  }
  return out;
}

}  // namespace rpa::props
