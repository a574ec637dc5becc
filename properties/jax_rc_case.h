// RapidCheck's side of build_case: RcSource turns each choice into a RapidCheck pick, so
// counterexamples shrink pick by pick (shapes first, then contents sized to them), and
// showValue prints a CaseSpec as a bug report with the command that replays it.
#pragma once

#include <rapidcheck.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <numeric>
#include <ostream>
#include <utility>
#include <vector>

#include "casegen/jax_case_codec.h"
#include "casegen/jax_build_case.h"
#include "casegen/jax_case_spec.h"
#include "casegen/random_source.h"

namespace rpa::props {

// Only valid inside a generator run (gen::exec) or a property body.
class RcSource {
 public:
  static constexpr bool kEncodes = false;
  RcSource() : size_(*rc::gen::withSize([](int size) { return rc::gen::just(size); })) {}

  // Uniform in [lo, hi] whatever the size, or two times in three one of the favourites that
  // fall in range.
  void num(int64_t& f, int64_t lo, int64_t hi, std::initializer_list<int64_t> favourites) {
    f = pick(lo, hi, favourites);
  }
  // As num, with hi scaled by RapidCheck's size (0 .. max_size, 100 by default):
  // RC_PARAMS="max_size=400" reaches the full bounds (random_source.h).
  void sized(int64_t& f, int64_t lo, int64_t hi, std::initializer_list<int64_t> favourites) {
    f = pick(lo, sized_bound(lo, hi, size_), favourites);
  }

 private:
  static int64_t pick(int64_t lo, int64_t hi, std::initializer_list<int64_t> favourites) {
    if (hi <= lo) return lo;
    std::vector<int64_t> edges;
    for (int64_t v : favourites) {
      if (v >= lo && v <= hi && std::find(edges.begin(), edges.end(), v) == edges.end()) {
        edges.push_back(v);
      }
    }
    // inRange scales its range with the size; at the nominal size 100 it spans all of it.
    auto uniform = rc::gen::resize(100, rc::gen::inRange<int64_t>(lo, hi + 1));
    if (edges.empty()) return *uniform;
    return *rc::gen::weightedOneOf<int64_t>({{2, rc::gen::elementOf(edges)}, {1, uniform}});
  }

  int size_;
};

inline rc::Gen<CaseSpec> gen_case(BuildOptions options = {}) {
  return rc::gen::exec([options] {
    RcSource source;
    return build_case(source, options);
  });
}

// Valid cases only: every one is accepted by strict validation by construction.
inline rc::Gen<CaseSpec> gen_valid_case(BuildOptions valid = {}) {
  valid.max_mutations = 0;
  return gen_case(valid);
}

// What a batch really holds, for RC_TAG: decode rows (q_len 1), prefill rows (q_len > 1),
// both, or none; and how many sequences.
inline std::string batch_mix(const CaseSpec& spec) {
  bool decode = false, prefill = false;
  for (const SeqSpec& q : spec.seqs) {
    decode = decode || q.q_len == 1;
    prefill = prefill || q.q_len > 1;
  }
  const int64_t n = spec.num_seqs();
  const std::string seqs = n <= 1 ? std::to_string(n) + " seq" : n <= 4 ? "2-4 seqs" : "5+ seqs";
  return std::string(decode && prefill ? "decode+prefill"
                     : decode          ? "decode only"
                     : prefill         ? "prefill only"
                                       : "no rows") +
         ", " + seqs;
}

// Found by RapidCheck (argument-dependent lookup) when it prints a counterexample.
// A permutation of 0 .. n-1 drawn by RapidCheck (shrinks towards the identity); only inside
// a property body.
inline std::vector<int64_t> gen_permutation(int64_t n, const char* name) {
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  for (int64_t i = n - 1; i > 0; --i) {
    const int64_t j = *rc::gen::inRange<int64_t>(0, i + 1).as(name);
    std::swap(order[static_cast<size_t>(i)], order[static_cast<size_t>(j)]);
  }
  return order;
}

inline void showValue(const CaseSpec& spec, std::ostream& os) {
  os << describe(spec) << "\n  replay: rpa gen --spec " << spec_hex(spec)
     << " -o case.npz, then rpa check case.npz (kernel properties) or"
     << " rpa validate case.npz --mode strict|jax (validation properties)";
}

}  // namespace rpa::props
