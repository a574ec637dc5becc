#include "casegen/v3_materialize.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <utility>
#include <vector>

#include "core/dtype.h"
#include "core/tensor.h"
#include "core/v3_cache_layout.h"
#include "casegen/random_source.h"

namespace rpa::props {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// The data stream: splitmix64 from the spec's seed (portable, as random_source.h).
class DataStream {
 public:
  explicit DataStream(uint64_t seed) : state_(seed) {}
  uint64_t bits() { return splitmix64(state_); }
  double uniform() { return static_cast<double>(bits() >> 11) * 0x1.0p-53; }
  // Irwin-Hall of four uniforms, centred and scaled to variance 1.
  float normal() {
    double sum = 0.0;
    for (int i = 0; i < 4; ++i) sum += uniform();
    return static_cast<float>((sum - 2.0) * std::sqrt(3.0));
  }
  int64_t below(int64_t n) {
    return n <= 0 ? 0 : static_cast<int64_t>(bits() % static_cast<uint64_t>(n));
  }
  // An int32 no valid call holds at this place: negative, huge, one past the end, or any.
  int64_t garbage_int(int64_t past_end) {
    switch (below(4)) {
      case 0:
        return -1;
      case 1:
        return std::numeric_limits<int32_t>::max();
      case 2:
        return past_end;
      default:
        return static_cast<int32_t>(static_cast<uint32_t>(bits()));
    }
  }

 private:
  uint64_t state_;
};

}  // namespace

V3Materialized materialize_v3(const V3CaseSpec& s, Contents contents) {
  DataStream data(static_cast<uint64_t>(s.data_seed));
  const int64_t n = s.num_seqs(), slots = s.max_num_seqs(), pps = s.pages_per_seq();
  const int64_t pages = s.total_num_pages(), tokens = s.max_num_tokens();
  const int64_t hq = s.num_q_heads(), hkv = s.num_kv_heads, d = s.head_dim;
  const int64_t ps = s.page_size;
  const float filler = s.garbage ? kNaN : 0.0f;
  V3Materialized m;
  m.params = s.params;
  V3Inputs& in = m.inputs;

  // Index arrays.
  std::vector<int32_t> cu(static_cast<size_t>(slots + 1), 0);
  for (int64_t k = 0; k < n; ++k) {
    cu[static_cast<size_t>(k + 1)] =
        cu[static_cast<size_t>(k)] + static_cast<int32_t>(s.seqs[static_cast<size_t>(k)].q_len);
  }
  const int32_t used_rows = cu[static_cast<size_t>(n)];
  std::vector<int32_t> kv_lens(static_cast<size_t>(slots), 0);
  for (int64_t k = 0; k < slots; ++k) {
    if (k < n) {
      kv_lens[static_cast<size_t>(k)] = static_cast<int32_t>(s.seqs[static_cast<size_t>(k)].kv_len);
    } else {
      kv_lens[static_cast<size_t>(k)] = s.garbage ? static_cast<int32_t>(data.garbage_int(0)) : 0;
    }
  }
  for (int64_t k = n + 1; k <= slots; ++k) {
    // Unused slots' offsets: garbage, or the end of the used rows.
    cu[static_cast<size_t>(k)] =
        s.garbage ? static_cast<int32_t>(data.garbage_int(tokens + 1)) : used_rows;
  }
  // The page pool, in order or shuffled, handed out sequence by sequence (a production call's
  // table holds up to 4M entries: written in place, and unused entries left as allocated,
  // zero, unless they hold garbage).
  std::vector<int32_t> pool;
  if (s.page_shuffle_seed != 0) {
    pool.resize(static_cast<size_t>(pages));
    std::iota(pool.begin(), pool.end(), 0);
    DataStream shuffle(static_cast<uint64_t>(s.page_shuffle_seed));
    for (int64_t i = pages - 1; i > 0; --i) {
      std::swap(pool[static_cast<size_t>(i)], pool[static_cast<size_t>(shuffle.below(i + 1))]);
    }
  }
  in.page_indices = Tensor(DType::kInt32, {slots * pps});
  int32_t* page_indices = reinterpret_cast<int32_t*>(in.page_indices.data());
  int32_t next_page = 0;
  for (int64_t k = 0; k < slots; ++k) {
    const int64_t used = k < n ? (s.seqs[static_cast<size_t>(k)].kv_len + ps - 1) / ps : 0;
    int32_t* row = page_indices + k * pps;
    for (int64_t j = 0; j < used; ++j, ++next_page) {
      row[j] = pool.empty() ? next_page : pool[static_cast<size_t>(next_page)];
    }
    if (s.garbage) {
      for (int64_t j = used; j < pps; ++j) row[j] = static_cast<int32_t>(data.garbage_int(pages));
    }
  }
  in.kv_lens = Tensor::from_int32({slots}, kv_lens);
  in.cu_q_lens = Tensor::from_int32({slots + 1}, cu);
  const int32_t i = static_cast<int32_t>(s.num_decode);
  const int32_t j = static_cast<int32_t>(s.num_decode + s.num_prefill);
  in.distribution = Tensor::from_int32({3}, std::vector<int32_t>{i, j, static_cast<int32_t>(n)});

  // The sink, which hd64's strict validation reads (NaN and +inf are its rule's values), is
  // drawn with data whatever the contents: hq floats.
  auto draw_sink = [&] {
    if (s.sink == V3Sink::kNone) return;
    std::vector<float> sink(static_cast<size_t>(hq));
    for (int64_t h = 0; h < hq; ++h) {
      const bool inf = s.sink == V3Sink::kWithInfs && (h == 0 || data.below(3) == 0);
      sink[static_cast<size_t>(h)] = inf ? -std::numeric_limits<float>::infinity() : data.normal();
    }
    in.attention_sink = Tensor::from_floats(DType::kFloat32, {hq}, sink);
  };

  if (contents == Contents::kZeros) {
    const V3CacheLayout layout(s.dialect, s.kv_dtype, hkv, d);
    in.queries = Tensor::shared_zeros(s.q_dtype, {tokens, hq, d});
    in.keys = Tensor::shared_zeros(s.kv_dtype, {tokens, hkv, d});
    in.values = Tensor::shared_zeros(s.kv_dtype, {tokens, hkv, d});
    in.kv_cache = Tensor::shared_zeros(s.kv_dtype, layout.cache_shape(pages, ps));
    draw_sink();
    return m;
  }

  // q, k, v: data on the rows sequences own, garbage below (a fresh tensor is zero already).
  auto rows = [&](DType t, int64_t heads) {
    Tensor x(t, {tokens, heads, d});
    std::byte* out = x.data();
    const int64_t used = used_rows * heads * d;
    for (int64_t e = 0; e < used; ++e) store_float(t, out, e, round_to(t, data.normal()));
    if (filler != 0.0f) x.fill_float(used, x.numel(), filler);
    return x;
  };
  in.queries = rows(s.q_dtype, hq);
  in.keys = rows(s.kv_dtype, hkv);
  in.values = rows(s.kv_dtype, hkv);

  // The cache: garbage everywhere, then each sequence's tokens as merge_kv lays them out
  // (lanes past head_dim and padded heads 0): the cached prefix with fresh data, and the new
  // tokens too where the kernel does not write them (update_kv_cache=False: the cache holds
  // the sequence's own K/V, the keys/values rows).
  const V3CacheLayout layout(s.dialect, s.kv_dtype, hkv, d);
  in.kv_cache = Tensor(s.kv_dtype, layout.cache_shape(pages, ps));
  std::byte* cache = in.kv_cache.data();
  if (filler != 0.0f) in.kv_cache.fill_float(0, in.kv_cache.numel(), filler);
  for (int64_t k = 0; k < n; ++k) {
    const V3SeqSpec& q = s.seqs[static_cast<size_t>(k)];
    const int64_t first_new = q.kv_len - q.q_len;
    for (int64_t pos = 0; pos < q.kv_len; ++pos) {
      const bool is_new = pos >= first_new;
      if (is_new && s.params.update_kv_cache) continue;
      const int64_t page = page_indices[k * pps + pos / ps];
      const int64_t base = layout.token_offset(page, pos % ps, ps);
      if (filler != 0.0f) in.kv_cache.fill_float(base, base + layout.token_stride(), 0.0);
      const int64_t row = cu[static_cast<size_t>(k)] + (pos - first_new);
      for (int64_t h = 0; h < hkv; ++h) {
        for (int64_t c = 0; c < d; ++c) {
          float kx, vx;
          if (is_new) {
            kx = load_float(s.kv_dtype, in.keys.data(), (row * hkv + h) * d + c);
            vx = load_float(s.kv_dtype, in.values.data(), (row * hkv + h) * d + c);
          } else {
            kx = round_to(s.kv_dtype, data.normal());
            vx = round_to(s.kv_dtype, data.normal());
          }
          store_float(s.kv_dtype, cache, base + layout.k_offset(h) + c, kx);
          store_float(s.kv_dtype, cache, base + layout.v_offset(h) + c, vx);
        }
      }
    }
  }

  draw_sink();
  return m;
}

}  // namespace rpa::props
