// What identifies one `rpa campaign` run besides its tallies (cli/campaign_stats.h): the
// seed, the profile and options that decide which cases it checks and how, its bounds
// (seconds or cases, and the shard of the case indices it took), and where and when it ran.
// The summary, the report page and the state file (cli/campaign_state.h) read it, and `rpa
// merge` checks that shards agree on the part that makes them one campaign.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "oracle/dot_precision.h"

namespace rpa {

// `--shard I/N`: the run checks the case indices i with i % N == I, so N runs with I = 0..N-1
// check disjoint cases that together are every index (a job array's N jobs).
struct Shard {
  int64_t index = 0;
  int64_t count = 1;

  bool operator==(const Shard&) const = default;
  bool whole() const { return count == 1; }
  // Case index of the shard's k-th case.
  int64_t case_index(int64_t k) const { return index + k * count; }
  // How many of the indices 0..cases-1 are the shard's.
  int64_t cases_of(int64_t cases) const {
    return cases > index ? (cases - index + count - 1) / count : 0;
  }
};

inline constexpr int64_t kMaxShards = 4096;

// "I/N" with N in 1..kMaxShards and I in 0..N-1, decimal, nothing else; nullopt otherwise.
std::optional<Shard> parse_shard(std::string_view text);
std::string shard_text(const Shard& s);  // "I/N"

struct CampaignRun {
  uint64_t seed = 0;
  uint64_t seconds_asked = 0;  // --seconds; 0 when --cases bounds the run
  double seconds = 0.0;        // taken (merged: the longest shard's)
  int workers = 1;             // threads drawing cases (merged: the shards' sum)
  std::string machine;         // CPU model and core count
  std::string started;         // UTC, ISO 8601
  bool production = false;     // --profile production
  DotPasses dot_passes = DotPasses::kSix;
  uint64_t cases_asked = 0;  // --cases; 0 when --seconds bounds the run
  Shard shard;
};

// The seed case i of a run of `seed` is drawn from (each dialect's cases and the production
// profile's): what case i is depends on the run's seed and i alone.
inline uint64_t case_seed(uint64_t seed, int64_t i) {
  return seed * 0x9e3779b97f4a7c15ULL + static_cast<uint64_t>(i) * 0xbf58476d1ce4e5b9ULL;
}

}  // namespace rpa
