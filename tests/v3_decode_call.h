// Decode calls laid out by hand for the schedule tolerance's tests (v3_compare_test,
// v3_schedule_bound_test): one query row per sequence over consecutive pages of 16 slots, K
// and V set lane by lane, and deterministic data on every standard library.
#pragma once

#include <cmath>
#include <cstdint>

#include "oracle/v3_compare.h"
#include "tests/v3_builder.h"

namespace rpa::test {

// A 32-bit LCG.
struct Lcg {
  uint32_t x;
  double uniform() {  // [0, 1), 24 bits
    x = x * 1664525u + 1013904223u;
    return static_cast<double>(x >> 8) * 0x1p-24;
  }
  double normal() {  // Irwin-Hall: mean 0, standard deviation 1
    double s = 0.0;
    for (int i = 0; i < 12; ++i) s += uniform();
    return s - 6.0;
  }
};

struct Call {
  V3Builder b;
  V3Inputs in;
  V3Params p;
};

// Decode rows, one per sequence, on consecutive pages of 16 slots; cache, new keys and values
// 0, q 0; one kv head; KV blocks of `block` tokens (kernel.py's d_block_sizes, hd64's pages per
// block; 0: kernel.py's defaults for the generation it runs on).
inline Call decode_call(Dialect d, DType q, DType kv, int64_t head_dim, int64_t hq, int64_t seqs,
                        int32_t kv_len, int64_t block) {
  Call c;
  V3Builder& b = c.b;
  b.dialect = d;
  b.q = q;
  b.kv = kv;
  b.hq = hq;
  b.hkv = 1;
  b.d = head_dim;
  b.page_size = 16;
  b.pps = (kv_len + 15) / 16;
  b.pages = 1 + seqs * b.pps;
  b.max_seqs = seqs;
  b.tokens = seqs;
  b.fill = 0.0f;
  for (int64_t s = 0; s < seqs; ++s) b.seqs.push_back({1, kv_len});
  c.in = b.build();
  c.in.distribution.set_int(0, static_cast<int32_t>(seqs));
  c.in.distribution.set_int(1, static_cast<int32_t>(seqs));
  if (d == Dialect::kTpuInferenceV3Hd64) {
    c.p.num_kv_pages_per_block = block / 16;
    c.p.num_queries_per_block = 1;
  } else if (block > 0) {
    c.p.d_block_sizes = V3BlockSizes{1, block, 1, block};
  }
  return c;
}
inline Call decode_call(Dialect d, DType dtype, int64_t head_dim, int64_t hq, int64_t seqs,
                        int32_t kv_len, int64_t block) {
  return decode_call(d, dtype, dtype, head_dim, hq, seqs, kv_len, block);
}

// Lane `lane` of K or V of sequence s's key t: in the cache, or the new token's.
inline void set_kv(Call& c, int64_t s, int64_t t, bool value, int64_t lane, double x) {
  const int64_t kv_len = c.b.seqs[static_cast<size_t>(s)].kv_len;
  if (t + 1 < kv_len) {
    c.in.kv_cache.set_float(at(c.b, 1 + s * c.b.pps + t / 16, t % 16, 0, value, lane), x);
  } else {
    (value ? c.in.values : c.in.keys).set_float(s * c.b.d + lane, x);
  }
}

// Whether every output element of `out` lies in the literal run's enclosure (a value that is
// not finite: the literal's own).
inline bool inside(const V3LiteralRun& lit, const Tensor& out) {
  for (int64_t e = 0; e < out.numel(); ++e) {
    const double x = out.float_at(e), w = lit.result.out.float_at(e);
    const double lo = lit.enclosure.lo[static_cast<size_t>(e)], hi = lit.enclosure.hi[static_cast<size_t>(e)];
    if (!std::isfinite(w) || std::isnan(lo)) {
      if (!(std::isnan(x) && std::isnan(w)) && x != w) return false;
      continue;
    }
    if (!(x >= lo && x <= hi)) return false;
  }
  return true;
}

}  // namespace rpa::test
