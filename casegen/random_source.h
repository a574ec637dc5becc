// A third source of choices for build_case: a seeded pseudo-random stream with RapidCheck's
// habits (favourite edge values two times in three, sized ranges scaled by a size), for
// `rpa gen --seed` and the campaign, where no RapidCheck run drives the picks.
#pragma once

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <vector>

namespace rpa::props {

// The size at which sized ranges reach their bounds, as for RapidCheck (jax_rc_case.h).
inline constexpr int kFullSize = 400;

// hi scaled by (size + 8) / kFullSize, rounded up: size 0 still draws a few tokens.
inline int64_t sized_bound(int64_t lo, int64_t hi, int size) {
  const int64_t grown = std::min(std::max(size, 0) + 8, kFullSize);
  return lo + ((hi - lo) * grown + kFullSize - 1) / kFullSize;
}

// splitmix64: a fixed, portable stream (std:: distributions differ between libraries).
inline uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

class RandomSource {
 public:
  static constexpr bool kEncodes = false;
  RandomSource(uint64_t seed, int size) : state_(seed), size_(size) {}

  void num(int64_t& f, int64_t lo, int64_t hi, std::initializer_list<int64_t> favourites) {
    f = pick(lo, hi, favourites);
  }
  void sized(int64_t& f, int64_t lo, int64_t hi, std::initializer_list<int64_t> favourites) {
    f = pick(lo, sized_bound(lo, hi, size_), favourites);
  }

 private:
  uint64_t next() { return splitmix64(state_); }
  int64_t pick(int64_t lo, int64_t hi, std::initializer_list<int64_t> favourites) {
    if (hi <= lo) return lo;
    std::vector<int64_t> edges;
    for (int64_t v : favourites) {
      if (v >= lo && v <= hi) edges.push_back(v);
    }
    if (!edges.empty() && next() % 3 != 0) return edges[next() % edges.size()];
    const uint64_t span = static_cast<uint64_t>(hi) - static_cast<uint64_t>(lo);
    const uint64_t r = span == UINT64_MAX ? next() : next() % (span + 1);
    return static_cast<int64_t>(static_cast<uint64_t>(lo) + r);
  }

  uint64_t state_;
  int size_;
};

}  // namespace rpa::props
