// Checks the v3 kernel properties share (DESIGN.md sections 9 and 16): one materialized case
// run through the tiled kernel and the dense v3 reference, compared the way `rpa check` does
// (oracle/v3_compare.h), and a tally of how much of the tolerance the comparisons used, which
// the property binaries print when they exit.
#pragma once

#include <rapidcheck.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "kernel/v3_kernel.h"
#include "oracle/tolerance.h"
#include "oracle/v3_compare.h"
#include "casegen/v3_materialize.h"
#include "reference/v3_reference.h"
#include "validation/v3_validate.h"

namespace rpa::props {

// The largest share of the tolerance any comparison used, per label; printed at exit.
struct V3ShareTally {
  struct Entry {
    std::string label;
    double max_share = 0.0;
    double sum_share = 0.0;
    long count = 0;
  };
  std::vector<Entry> entries;
  void add(const std::string& label, double share) {
    auto it = std::find_if(entries.begin(), entries.end(),
                           [&](const Entry& e) { return e.label == label; });
    if (it == entries.end()) it = entries.insert(entries.end(), Entry{label});
    it->max_share = std::max(it->max_share, share);
    it->sum_share += share;
    ++it->count;
  }
  ~V3ShareTally() {
    for (const Entry& e : entries) {
      std::fprintf(stderr, "share of tolerance, %s: max %.4g, mean %.4g over %ld comparisons\n",
                   e.label.c_str(), e.max_share,
                   e.count ? e.sum_share / static_cast<double>(e.count) : 0.0, e.count);
    }
  }
};

inline V3ShareTally& v3_share_tally() {
  static V3ShareTally tally;
  return tally;
}

inline bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  const auto n = static_cast<size_t>(a.numel() * dtype_size(a.dtype()));
  return n == 0 || std::memcmp(a.data(), b.data(), n) == 0;
}

// The generated case is strict-valid (the generator's promise).
inline void assert_v3_strict_valid(Dialect d, const V3Inputs& in, const V3Params& p) {
  const std::optional<V3Failure> f = v3_validate(d, in, p, Mode::kStrict);
  if (f) RC_LOG() << "strict: " << v3_rule_info(f->rule).name << ": " << f->message << "\n";
  RC_ASSERT(!f.has_value());
}

// got (out and cache) agrees with the kernel semantics of the reference: the cache bit for
// bit, the output within rpa's float32-accumulator tolerance (and so within the v3 kernel's).
inline V3Comparison assert_v3_agrees(Dialect d, const V3Inputs& in, const V3Params& p,
                                     const V3ReferenceResult& ref, const Tensor& out,
                                     const Tensor& cache, const std::string& label) {
  const V3Comparison c = v3_compare(d, in, p, ref, out, cache, kRpaTolerance);
  RC_LOG() << "kernel vs reference (" << label
           << ", float32 accumulators): " << describe_v3_comparison(c) << "\n";
  v3_share_tally().add(label + " (float32-accumulator tolerance)", c.max_share);
  if (c.max_share > 0.5) {
    // Where more than half the allowance is used: is it the final rounding to q's dtype
    // landing one ulp away (the 2 u_q |want| term's reason), or arithmetic error?
    const std::vector<double> allowed = v3_tolerance(d, in, p, ref, kRpaTolerance);
    for (int64_t e = 0; e < static_cast<int64_t>(allowed.size()); ++e) {
      const double a = allowed[static_cast<size_t>(e)], want = ref.out.float_at(e);
      const double err = std::fabs(out.float_at(e) - want);
      if (a <= 0.0 || err / a < c.max_share || !std::isfinite(want) || want == 0.0) continue;
      const double ulp = std::ldexp(1.0, std::ilogb(want) + 1 - precision_bits(in.queries.dtype()));
      const bool one_ulp = err == ulp || err == ulp / 2;
      RC_CLASSIFY(one_ulp, "over half the tolerance: one ulp of q's dtype");
      RC_CLASSIFY(!one_ulp, "over half the tolerance: arithmetic");
      v3_share_tally().add(label + (one_ulp ? ", over half: one q ulp" : ", over half: arithmetic"),
                           c.max_share);
      break;
    }
  }
  const V3Comparison loose = v3_compare(d, in, p, ref, out, cache);
  v3_share_tally().add(label + " (v3 kernel's tolerance)", loose.max_share);
  RC_ASSERT(c.agree());
  return c;
}

}  // namespace rpa::props
