// One v3 case builder, several sources of choices (STYLE.md), as jax_build_case.h is for the jax
// dialect: build_v3_case(source) draws a V3CaseSpec from RapidCheck picks (RcSource), bytes
// (ByteSource) or a seeded stream (RandomSource), and encode_v3_case() writes the bytes from
// which ByteSource draws a given spec again. All of them run visit_v3_case(), which names
// every choice in order with its range; ranges depend only on earlier choices and options
// only narrow them, so a spec built under any options encodes under v3_widest_options(); the
// two exceptions, the integer edges and the long tier, are drawn and replayed from case files.
//
// Every spec it builds is strict-valid (validation/v3_validate.h): q float32 | bfloat16, KV
// float32 | bfloat16 | float8, out_dtype the default, 0 <= i <= j <= k <= N, decode rows
// q_len 1, prefill rows q_len == chunk_prefill_size, 0 < q_len <= kv_len, page_size a
// multiple of the KV packing, block tuples that tile (bq_sz % bq_csz == 0, bkv_sz % bkv_csz
// == 0, both kv blocks whole pages), skip_kv_mask only without the causal mask and with
// every kv_len a multiple of every pass's bkv_csz, finite nonzero scales, mask_value far
// below any logit.
#pragma once

#include <cstdint>
#include <numeric>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/v3_cache_layout.h"
#include "casegen/batch_mix.h"
#include "casegen/choices.h"
#include "casegen/v3_case_spec.h"

namespace rpa::props {

// Bounds of generated v3 cases. Sized ones reach their bound at size 400; the default (100)
// stays near a quarter of them. At the full bounds a case holds a few tens of MB.
inline constexpr int64_t kV3MaxSeqs = 16;
inline constexpr int64_t kV3MaxKvLen = 384;
inline constexpr int64_t kV3MaxLongKvLen = 4096;  // the long profile's bound, and the codec's
inline constexpr int64_t kV3MaxQLen = 64;         // mixed rows and chunk_prefill_size
inline constexpr int64_t kV3MaxHeadDim = 256;
inline constexpr int64_t kV3MaxKvHeads = 8;
inline constexpr int64_t kV3MaxQPerKv = 4;
inline constexpr int64_t kV3MaxPageMultiple = 8;  // page_size = packing * 1..8
inline constexpr int64_t kV3MaxExtraSlots = 3;
inline constexpr int64_t kV3MaxExtraPages = 3;
inline constexpr int64_t kV3MaxExtraTokens = 4;
inline constexpr int64_t kV3MaxSlidingWindow = 8192;
// The long tier (v3_long_tier_options, profile "long32k"; issue 46): kv_len past int16's
// positions, in pages up to 64 times the packing so that a call's page copies stay few. Its
// specs do not encode (the codec's bounds are kV3MaxLongKvLen and kV3MaxPageMultiple).
inline constexpr int64_t kV3MinTierKvLen = 32768;
inline constexpr int64_t kV3MaxTierKvLen = 65536;
inline constexpr int64_t kV3MaxTierPageMultiple = 64;

struct V3BuildOptions {
  std::optional<Dialect> dialect;    // draw this dialect instead of picking one
  std::optional<Profile> profile;  // draw this batch mix instead of picking one
  std::optional<int64_t> head_dim;   // fix D (kernel.py: 1 to 256; hd64 is always 64)
  int64_t min_seqs = 0;
  int64_t max_seqs = kV3MaxSeqs;
  int64_t min_kv_len = 1;
  int64_t max_kv_len = kV3MaxKvLen;  // up to kV3MaxLongKvLen (the long tier: kV3MaxTierKvLen)
  bool unsized_kv_len = false;       // kv_len uniform over its range at every size
  int64_t max_q_len = kV3MaxQLen;    // <= max_kv_len
  int64_t max_head_dim = kV3MaxHeadDim;
  int64_t max_kv_heads = kV3MaxKvHeads;
  int64_t max_page_multiple = kV3MaxPageMultiple;  // up to kV3MaxTierPageMultiple
  // The integer edges at the cost of a short call (issue 46; the kernel campaign's draws): a
  // page table sized at kernel.py's int16 switch (pages_per_seq * page_size just at or past
  // 32767) and windows that bring the longest sequence's last key + window to the wrap of its
  // positions (32767 where kernel.py holds them in int16, else 2147483647), each still
  // strict-valid. Off in the codec (a spec with such a window does not encode: its hex is "").
  bool integer_edges = false;
};

// Options that narrow nothing: the codec's.
inline V3BuildOptions v3_widest_options() {
  V3BuildOptions o;
  o.max_kv_len = kV3MaxLongKvLen;
  return o;
}

// One or two sequences of kv_len up to kV3MaxLongKvLen whatever the size, prefill chunks of
// up to 16 rows, head_dim up to 128.
inline V3BuildOptions v3_long_options() {
  V3BuildOptions o;
  o.min_seqs = 1;
  o.max_seqs = 2;
  o.max_kv_len = kV3MaxLongKvLen;
  o.unsized_kv_len = true;
  o.max_q_len = 16;
  o.max_head_dim = 128;
  return o;
}

// The long tier: one or two sequences of kv_len 32768 to 65536 (every position past int16's
// wrap; kernel.py holds them in int32, as pages_per_seq * page_size > 32767), one or two KV
// heads, head_dim up to 128, prefill chunks of up to 16 rows, pages of up to 64 times the
// packing. At most about 270 MB of cache (two float32 sequences of 65536 tokens, 2 KV heads
// of 128); in TPU interpret mode a call costs tens of seconds (docs/python.md).
inline V3BuildOptions v3_long_tier_options() {
  V3BuildOptions o;
  o.min_seqs = 1;
  o.max_seqs = 2;
  o.min_kv_len = kV3MinTierKvLen;
  o.max_kv_len = kV3MaxTierKvLen;
  o.unsized_kv_len = true;
  o.max_q_len = 16;
  o.max_head_dim = 128;
  o.max_kv_heads = 2;
  o.max_page_multiple = kV3MaxTierPageMultiple;
  return o;
}

// Small batches whose favourites are the boundaries: page_size == packing, kv_len at page
// edges and == q_len, one-page blocks, window 1.
inline V3BuildOptions v3_edge_options() {
  V3BuildOptions o;
  o.min_seqs = 1;
  o.max_seqs = 4;
  o.max_kv_len = 40;
  o.max_q_len = 8;
  return o;
}

inline constexpr Dialect kV3GenDialects[] = {Dialect::kTpuInferenceV3,
                                             Dialect::kTpuInferenceV3Hd64};
inline constexpr DType kV3QDtypes[] = {DType::kFloat32, DType::kBFloat16};
inline constexpr V3Sink kV3Sinks[] = {V3Sink::kNone, V3Sink::kNormal, V3Sink::kWithInfs};
inline constexpr double kV3SmScales[] = {1.0, 0.5, 0.125, 0.08838834764831845, 2.0, -0.5};
inline constexpr double kV3SoftCaps[] = {5.0, 50.0, 1.0, 30.0, -5.0};
// Far below any logit: exp(mask_value - m) is 0 in every accumulator dtype.
inline constexpr double kV3MaskValues[] = {-1e30, -1e38, -3.3895313892515355e38, -2.3819763e38};
inline constexpr double kV3Scales[] = {0.5, 2.0, 1.0, 0.25};
inline constexpr int64_t kV3VmemLimits[] = {int64_t{100} << 20, 1, int64_t{16} << 20,
                                            int64_t{128} << 20};

// One pass's (bq_sz, bkv_sz, bq_csz, bkv_csz): compute blocks 1..8 rows and 1..8 pages,
// fetch blocks 1..4 compute blocks.
template <class Io>
void visit_v3_blocks(Io& io, std::optional<V3BlockSizes>& f, int64_t page_size) {
  V3BlockSizes b = f.value_or(V3BlockSizes{1, page_size, 1, page_size});
  int64_t bq_csz = b[2], bq_mult = b[2] > 0 ? b[0] / b[2] : 1;
  int64_t kv_pages = b[3] / page_size, kv_mult = b[3] > 0 ? b[1] / b[3] : 1;
  io.num(bq_csz, 1, 8, {1, 8});
  io.num(bq_mult, 1, 4, {1});
  io.num(kv_pages, 1, 8, {1, 8});
  io.num(kv_mult, 1, 4, {1});
  f = V3BlockSizes{bq_csz * bq_mult, kv_pages * page_size * kv_mult, bq_csz, kv_pages * page_size};
}

// kv_len (a multiple of `unit`) in [lo, hi], the page edges favoured.
template <class Io>
void visit_v3_kv_len(Io& io, int64_t& kv_len, int64_t lo, int64_t hi, int64_t unit,
                     int64_t page_size, bool unsized) {
  const int64_t lo_m = (lo + unit - 1) / unit;
  const int64_t hi_m = std::max(hi / unit, lo_m);
  int64_t m = kv_len / unit;
  // Named lists: a conditional between two braced lists would leave `favourites` pointing at
  // arrays destroyed at the end of the statement.
  const std::initializer_list<int64_t> token_favourites = {lo, page_size - 1, page_size,
                                                            page_size + 1, 2 * page_size, hi};
  const std::initializer_list<int64_t> unit_favourites = {lo_m, lo_m + 1, hi_m};
  const std::initializer_list<int64_t> favourites = unit == 1 ? token_favourites : unit_favourites;
  if (unsized) {
    io.num(m, lo_m, hi_m, favourites);
  } else {
    io.sized(m, lo_m, hi_m, favourites);
  }
  kv_len = m * unit;
}

template <class Io>
void visit_v3_case(Io& io, V3CaseSpec& s, const V3BuildOptions& options) {
  if (options.dialect) {
    s.dialect = *options.dialect;
  } else {
    among(io, s.dialect, std::span<const Dialect>(kV3GenDialects));
  }
  const bool hd64 = s.dialect == Dialect::kTpuInferenceV3Hd64;
  if (options.profile) {
    s.profile = *options.profile;
  } else {
    among(io, s.profile, std::span<const Profile>(kProfiles));
  }
  among(io, s.q_dtype, std::span<const DType>(kV3QDtypes));
  // Strict validity: KV in q's dtype, or float8 (the quantized cache) under either q.
  const DType kv_dtypes[] = {s.q_dtype, DType::kFloat8E4M3FN, DType::kFloat8E5M2};
  among(io, s.kv_dtype, std::span<const DType>(kv_dtypes));
  const int64_t packing = v3_kv_packing(s.kv_dtype);
  if (hd64) {
    s.head_dim = 64;
  } else if (options.head_dim) {
    s.head_dim = *options.head_dim;
  } else {
    io.num(s.head_dim, 1, std::clamp<int64_t>(options.max_head_dim, 1, kV3MaxHeadDim),
           {64, 80, 128, 240, 256});
  }
  io.num(s.num_kv_heads, 1, std::clamp<int64_t>(options.max_kv_heads, 1, kV3MaxKvHeads),
         {1, 2, 3, 8});
  io.num(s.q_per_kv, 1, kV3MaxQPerKv, {1, 2, 4});
  int64_t page_mult = s.page_size / packing;
  // The long tier favours large pages (few page copies in a call of 32768 tokens and more).
  const int64_t max_page_mult =
      std::clamp<int64_t>(options.max_page_multiple, 1, kV3MaxTierPageMultiple);
  const std::initializer_list<int64_t> short_pages = {1, 2, 4};
  const std::initializer_list<int64_t> long_pages = {16, 32, 64};
  io.num(page_mult, 1, max_page_mult, max_page_mult > kV3MaxPageMultiple ? long_pages : short_pages);
  s.page_size = page_mult * packing;

  // The ranges: how many sequences each holds.
  const int64_t max_seqs = std::clamp<int64_t>(options.max_seqs, 0, kV3MaxSeqs);
  const int64_t min_seqs = std::min(options.min_seqs, max_seqs);
  int64_t n_mixed = s.num_seqs() - s.num_decode - s.num_prefill;
  if (s.profile == Profile::kDecode) {
    io.sized(s.num_decode, min_seqs, max_seqs, {1, 2, 3});
    s.num_prefill = n_mixed = 0;
  } else if (s.profile == Profile::kPrefill) {
    s.num_decode = 0;
    bool prefill_range = s.num_prefill > 0;
    flag(io, prefill_range);
    if (prefill_range) {
      io.sized(s.num_prefill, std::max<int64_t>(min_seqs, 1), std::max<int64_t>(max_seqs, 1),
               {1, 2, 3});
      n_mixed = 0;
    } else {
      s.num_prefill = 0;
      io.sized(n_mixed, min_seqs, max_seqs, {1, 2, 3});
    }
  } else {
    io.sized(s.num_decode, 0, max_seqs, {0, 1, 2});
    io.sized(s.num_prefill, 0, max_seqs - s.num_decode, {0, 1});
    io.sized(n_mixed, std::max<int64_t>(min_seqs - s.num_decode - s.num_prefill, 0),
             max_seqs - s.num_decode - s.num_prefill, {0, 1, 2});
  }
  const int64_t n = s.num_decode + s.num_prefill + n_mixed;

  V3Params& p = s.params;
  const int64_t max_q = std::clamp<int64_t>(options.max_q_len, 1, kV3MaxQLen);
  // kernel.py's prefill pass runs with static q_len chunk_prefill_size: its rows have it.
  if (s.num_prefill > 0) {
    int64_t c = p.chunk_prefill_size.value_or(1);
    io.num(c, 1, max_q, {1, 2, 8});
    p.chunk_prefill_size = c;
  } else {
    maybe(io, p.chunk_prefill_size, [&](int64_t& c) { io.num(c, 1, max_q, {1, 8}); });
  }
  if (hd64) {
    p.use_causal_mask = true;
    p.update_kv_cache = true;
    p.skip_kv_mask = false;
    p.d_block_sizes = p.p_block_sizes = p.m_block_sizes = std::nullopt;
    p.out_dtype = std::nullopt;
  } else {
    flag(io, p.use_causal_mask);
    flag(io, p.update_kv_cache);
    visit_v3_blocks(io, p.d_block_sizes, s.page_size);
    visit_v3_blocks(io, p.p_block_sizes, s.page_size);
    visit_v3_blocks(io, p.m_block_sizes, s.page_size);
    bool explicit_out = p.out_dtype.has_value();
    flag(io, explicit_out);
    // The only out_dtype the kernel traces: q's default.
    p.out_dtype = explicit_out ? std::optional<DType>(s.q_dtype) : std::nullopt;
  }
  // Without the kv_len mask every kv_len is whole kv compute blocks of every pass; offered
  // only where such a kv_len fits the bound.
  const int64_t max_kv = std::clamp<int64_t>(options.max_kv_len, 1, kV3MaxTierKvLen);
  const int64_t skip_unit = hd64 ? 0
                                 : std::lcm(std::lcm((*p.d_block_sizes)[3], (*p.p_block_sizes)[3]),
                                            (*p.m_block_sizes)[3]);
  if (hd64 || p.use_causal_mask || skip_unit > max_kv) {
    p.skip_kv_mask = false;
  } else {
    flag(io, p.skip_kv_mask);
  }
  const int64_t unit = p.skip_kv_mask ? skip_unit : 1;

  s.seqs.resize(static_cast<size_t>(n));
  for (int64_t k = 0; k < n; ++k) {
    V3SeqSpec& q = s.seqs[static_cast<size_t>(k)];
    const bool decode = k < s.num_decode;
    const bool prefill = !decode && k < s.num_decode + s.num_prefill;
    const int64_t q_lo = prefill ? *p.chunk_prefill_size : 1;
    visit_v3_kv_len(io, q.kv_len, std::max(options.min_kv_len, q_lo), std::max(max_kv, q_lo), unit,
                    s.page_size, options.unsized_kv_len);
    if (decode) {
      q.q_len = 1;
    } else if (prefill) {
      q.q_len = *p.chunk_prefill_size;
    } else {
      io.num(q.q_len, 1, std::min(q.kv_len, max_q), {1, q.kv_len});
    }
  }
  io.num(s.extra_seq_slots, 0, kV3MaxExtraSlots, {0, 1});
  if (options.integer_edges) {
    // pages_per_seq * page_size at 32767 (the largest that keeps int16 positions) or one page
    // past it.
    const int64_t most = (s.max_kv_len() + s.page_size - 1) / s.page_size;
    const int64_t at = std::max<int64_t>(32767 / s.page_size - most, 0);
    int64_t table = s.extra_page_slots == at ? 1 : (s.extra_page_slots == at + 1 ? 2 : 0);
    io.num(table, 0, 2, {0});
    if (table == 0) {
      io.num(s.extra_page_slots, 0, 2, {0, 1});
    } else {
      s.extra_page_slots = at + table - 1;
    }
  } else {
    io.num(s.extra_page_slots, 0, 2, {0, 1});
  }
  io.num(s.extra_pages, 0, kV3MaxExtraPages, {0, 1});
  io.num(s.extra_tokens, 0, kV3MaxExtraTokens, {0, 1});
  page_shuffle_seed(io, s.page_shuffle_seed);
  flag(io, s.garbage);
  io.num(s.data_seed, 0, 0xffffffff, {});
  if (hd64) {
    among(io, s.sink, std::span<const V3Sink>(kV3Sinks));
    // kernel_hd64 cannot take sinks when q heads per kv head are not a multiple of q's
    // packing (strict sink_group_unpacked): bfloat16 q with an odd group runs without.
    if (s.q_dtype == DType::kBFloat16 && s.q_per_kv % 2 != 0) s.sink = V3Sink::kNone;
  } else {
    s.sink = V3Sink::kNone;
  }

  among(io, p.sm_scale, std::span<const double>(kV3SmScales));
  maybe(io, p.sliding_window, [&](int64_t& w) {
    if (!options.integer_edges) return io.num(w, 1, kV3MaxSlidingWindow, {1, 2, 5, 128});
    // Near the edge: the longest sequence's last key + W at the wrap or 1, 16 below it; else
    // as without the option. kernel.py's int16 positions (bfloat16 q, pages_per_seq *
    // page_size <= 32767) wrap past 32767 and strict rejects every window past that on every
    // generation (window_int16_wraps), so the edge is the int16 one there.
    const int64_t last = std::max<int64_t>(s.max_kv_len() - 1, 0);
    const bool int16 = !hd64 && s.q_dtype == DType::kBFloat16 &&
                       s.pages_per_seq() * s.page_size <= 32767;
    const int64_t at = (int16 ? int64_t{32767} : int64_t{2147483647}) - last;
    bool edge = w > kV3MaxSlidingWindow;
    flag(io, edge);
    if (!edge) return io.num(w, 1, kV3MaxSlidingWindow, {1, 2, 5, 128});
    int64_t below = std::clamp<int64_t>(at - w, 0, 16);
    io.num(below, 0, 16, {0, 1, 16});
    w = std::max<int64_t>(at - below, 1);
  });
  // Finding 25 (strict window_int16_wraps): kernel.py on TPU v6 and later holds mask
  // positions in int16 for bfloat16 q, where a key + sliding_window past 32767 wraps. Every
  // generated window and kv_len keep inside it; the named mutation makes the others. (The
  // long tier's kv_len is past 32767, and so its positions are int32.)
  static_assert(kV3MaxSlidingWindow + kV3MaxLongKvLen - 1 <= 32767);
  static_assert(kV3MinTierKvLen > 32767 && kV3MaxSlidingWindow + kV3MaxTierKvLen < (int64_t{1} << 31));
  maybe(io, p.soft_cap, [&](double& c) { among(io, c, std::span<const double>(kV3SoftCaps)); });
  maybe(io, p.mask_value, [&](double& m) { among(io, m, std::span<const double>(kV3MaskValues)); });
  // Finding 24 (strict window_skips_cache_write): kernel.py writes a sequence's new tokens
  // from the KV blocks its last query block reads, and a sliding window can start those past
  // the first new token. Such calls drop the window (the same bytes).
  if (!hd64 && p.sliding_window && p.update_kv_cache) {
    for (int64_t k = 0; k < n; ++k) {
      const V3SeqSpec& q = s.seqs[static_cast<size_t>(k)];
      const bool decode = k < s.num_decode, prefill = !decode && k < s.num_decode + s.num_prefill;
      const V3BlockSizes& b = decode ? *p.d_block_sizes : prefill ? *p.p_block_sizes : *p.m_block_sizes;
      const int64_t rows = decode ? 1 : q.q_len, step = std::min(b[0], rows);
      const int64_t gap = q.kv_len - q.q_len, last = gap + (rows - 1) / step * step;
      if (gap / b[1] < std::max<int64_t>(last - *p.sliding_window, 0) / b[1]) {
        p.sliding_window.reset();
        break;
      }
    }
  }
  // Finding 23 (strict masked_block_overflows): kernel.py with bfloat16 q rounds each KV
  // compute block's row max to bfloat16, where -1e30 rounds away from zero; under a sliding
  // window a fully masked first block then makes a row NaN. Such calls draw -1e38 instead (the
  // same bytes), so generated calls stay valid; the named mutation makes the others.
  if (!hd64 && s.q_dtype == DType::kBFloat16 && p.sliding_window && p.mask_value &&
      *p.mask_value == kV3MaskValues[0]) {
    p.mask_value = kV3MaskValues[1];
  }
  for (std::optional<double>* scale : {&p.q_scale, &p.k_scale, &p.v_scale}) {
    maybe(io, *scale, [&](double& v) { among(io, v, std::span<const double>(kV3Scales)); });
  }
  if (hd64) {
    int64_t kv_pages = p.num_kv_pages_per_block.value_or(1);
    int64_t queries = p.num_queries_per_block.value_or(1);
    io.num(kv_pages, 1, 16, {1, 2, 8});
    io.num(queries, 1, 128, {1, 8, 16, 64});
    p.num_kv_pages_per_block = kv_pages;
    p.num_queries_per_block = queries;
  } else {
    p.num_kv_pages_per_block = p.num_queries_per_block = std::nullopt;
  }
  maybe(io, p.vmem_limit_bytes,
        [&](int64_t& v) { among(io, v, std::span<const int64_t>(kV3VmemLimits)); });
}

template <class Source>
V3CaseSpec build_v3_case(Source& source, const V3BuildOptions& options) {
  V3CaseSpec s;
  visit_v3_case(source, s, options);
  return s;
}

// The bytes from which ByteSource builds `spec` again, under v3_widest_options().
std::vector<uint8_t> encode_v3_case(const V3CaseSpec& spec);
V3CaseSpec decode_v3_case(std::span<const uint8_t> bytes);

// `rpa gen --spec` for a v3 dialect: "v3:" then encode_v3_case in lower-case hex (the prefix
// keeps a v3 replay line from reading as a jax spec).
inline constexpr std::string_view kV3SpecPrefix = "v3:";
std::string v3_spec_hex(const V3CaseSpec& spec);
// Whether the codec can encode `spec` (a production call's expansion, say, it cannot).
bool v3_spec_encodes(const V3CaseSpec& spec);
// nullopt unless `text` is exactly the canonical form of a spec.
std::optional<V3CaseSpec> v3_spec_from_hex(std::string_view text);

}  // namespace rpa::props
