// A tpu-inference v3 call laid out by hand for the unit tests (v3_kernel_test,
// v3_program_test): sequences on consecutive pages, and the element offset of any K or V lane
// in the packed cache written out from v3-contract.md section 3e.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "core/v3_cache_layout.h"
#include "core/v3_inputs.h"

namespace rpa::test {

constexpr DType F32 = DType::kFloat32, BF16 = DType::kBFloat16, E4M3 = DType::kFloat8E4M3FN;

struct Seq {
  int32_t q_len, kv_len;
};

// One call laid out by hand: sequences get consecutive pages from page 1 (page 0 stays
// unused), the cache is filled with `fill` (NaN: never to be read), q/keys/values zero.
struct V3Builder {
  Dialect dialect = Dialect::kTpuInferenceV3;
  DType q = F32, kv = F32;
  int64_t hq = 1, hkv = 1, d = 1, page_size = 4, pages = 8, max_seqs = 2, tokens = 4, pps = 3;
  std::vector<Seq> seqs;
  float fill = std::numeric_limits<float>::quiet_NaN();

  V3Inputs build() const {
    V3Inputs in;
    in.queries = Tensor(q, {tokens, hq, d});
    in.keys = Tensor(kv, {tokens, hkv, d});
    in.values = Tensor(kv, {tokens, hkv, d});
    const V3CacheLayout layout(dialect, kv, hkv, d);
    in.kv_cache = Tensor(kv, layout.cache_shape(pages, page_size));
    for (int64_t i = 0; i < in.kv_cache.numel(); ++i) in.kv_cache.set_float(i, fill);
    in.kv_lens = Tensor(DType::kInt32, {max_seqs});
    in.page_indices = Tensor(DType::kInt32, {max_seqs * pps});
    in.cu_q_lens = Tensor(DType::kInt32, {max_seqs + 1});
    in.distribution = Tensor(DType::kInt32, {3});
    int64_t cu = 0, page = 1;
    for (size_t i = 0; i < seqs.size(); ++i) {
      const auto s = static_cast<int64_t>(i);
      in.kv_lens.set_int(s, seqs[i].kv_len);
      for (int64_t j = 0; j * page_size < seqs[i].kv_len; ++j) in.page_indices.set_int(s * pps + j, page++);
      cu += seqs[i].q_len;
      in.cu_q_lens.set_int(s + 1, cu);
    }
    for (int64_t s = static_cast<int64_t>(seqs.size()) + 1; s <= max_seqs; ++s) in.cu_q_lens.set_int(s, cu);
    const auto n = static_cast<int64_t>(seqs.size());
    in.distribution.set_int(0, 0);
    in.distribution.set_int(1, 0);
    in.distribution.set_int(2, n);
    return in;
  }
};

// Element offset in the cache of (page, slot, kv head h, K or V, lane c), written out from
// v3-contract.md section 3e rather than taken from core/v3_cache_layout.h: kernel.py keeps
// align(2 Hkv, P) combined heads of align(D, 128) lanes per token, K of head h at combined
// head 2h and V at 2h + 1; hd64 keeps align(Hkv, P) heads of 128 lanes, [K_h | V_h].
int64_t record_elements(const V3Builder& b) {
  const int64_t p = 32 / dtype_bits(b.kv);
  const auto align = [](int64_t x, int64_t a) { return (x + a - 1) / a * a; };
  return b.dialect == Dialect::kTpuInferenceV3Hd64 ? align(b.hkv, p) * 128
                                                   : align(2 * b.hkv, p) * align(b.d, 128);
}
int64_t at(const V3Builder& b, int64_t page, int64_t slot, int64_t h, bool value, int64_t c) {
  const int64_t token = (page * b.page_size + slot) * record_elements(b);
  if (b.dialect == Dialect::kTpuInferenceV3Hd64) return token + h * 128 + (value ? 64 : 0) + c;
  const int64_t lanes = (b.d + 127) / 128 * 128;
  return token + (2 * h + (value ? 1 : 0)) * lanes + c;
}

}  // namespace rpa::test
