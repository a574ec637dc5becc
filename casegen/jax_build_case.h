// One case builder, several sources of choices (STYLE.md): build_case(source) draws a
// CaseSpec from RapidCheck picks (RcSource), fuzzer bytes (ByteSource) or a seeded stream
// (RandomSource), and encode_case() (jax_case_codec.h) writes the bytes that make ByteSource
// draw a given spec again. All of them run the same visit_case(),
// which names every choice in order with its range; ranges depend only on earlier choices,
// so decoding what was encoded walks the same ranges.
//
// An Io has one operation, num(field, lo, hi, favourites): a source overwrites the field
// with a value in [lo, hi]; the encoder (kEncodes) reads it. `favourites` only steer the
// random sources towards edge values; `sized` ranges grow with their size.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <initializer_list>
#include <iterator>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "casegen/choices.h"
#include "casegen/jax_case_spec.h"
#include "casegen/jax_mutation.h"
#include "validation/jax_heads_per_block.h"
#include "validation/jax_vmem_budget.h"
#include "validation/target_profile.h"

namespace rpa::props {

// Bounds of generated cases. The sized ones (sequences, kv_len) are reached at RapidCheck
// size 400 (random_source.h); the default run (max_size 100) stays near a quarter of them,
// 13 sequences of up to 208 tokens, so that every property finishes in seconds on two cores
// (the reference is O(q rows * kv_len * Hq * D) in double).
inline constexpr int64_t kMaxSeqs = 48;
inline constexpr int64_t kMaxPaddingSlots = 3;
inline constexpr int64_t kMaxKvLen = 768;
// The long-context generator's bound (long_context_options): no generator goes past it.
inline constexpr int64_t kMaxLongKvLen = 8192;
// Both bounds take the same two bytes in ByteSource, so specs encoded before the long
// bound existed (kv_len up to kMaxKvLen) decode the same under it.
static_assert(kMaxKvLen > 0xff && kMaxLongKvLen <= 0xffff);
inline constexpr int64_t kMaxHeadDim = 256;
inline constexpr int64_t kMaxPageSize = 32;
inline constexpr int64_t kMaxQHeads = 16;
inline constexpr int64_t kMaxExtraPages = 4;   // unused pages in the pool
inline constexpr int64_t kMaxExtraTokens = 4;  // q rows past the last sequence
inline constexpr int64_t kInt32Min = std::numeric_limits<int32_t>::min();
inline constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

// Options only narrow the choices of widest_options() (below), so a spec built with any
// options encodes (and replays) under those, the codec's default.
struct BuildOptions {
  int min_mutations = 0;
  int max_mutations = 2;           // 0: every case is valid in strict mode
  std::optional<Profile> profile;  // draw this batch mix instead of picking one
  int64_t min_seqs = 0;            // at least this many sequences (up to kMaxSeqs)
  bool query_rows = false;         // the first sequence has a query row (and a key)
  bool gqa = false;                // at least two query heads per kv head
  // Narrower bounds on the shapes (the fuzz targets' caps: small cases run fast). The
  // defaults are the generators' own bounds above.
  int64_t max_seqs = kMaxSeqs;
  int64_t max_kv_len = kMaxKvLen;  // up to kMaxLongKvLen
  int64_t max_head_dim = kMaxHeadDim;
  int64_t max_page_size = kMaxPageSize;
  // Wider bounds and more constraints, for the long-context generator. The defaults narrow
  // nothing.
  int64_t min_kv_len = 0;             // every sequence at least this long
  bool unsized_kv_len = false;        // kv_len uniform over its range at every size
  int64_t max_q_len = kMaxLongKvLen;  // q_len at most this (chunked prefill)
  int64_t min_page_size = 1;
  bool float8_kv = false;             // KV in float8_e4m3fn or float8_e5m2
  // Whether q and KV may be one value everywhere (DataKind::kAllEqual). The kernel campaign
  // draws without: every output row is then the same, and a kernel that computes a row from
  // the wrong sequence, block or buffer agrees on it.
  bool flat_data = true;
  // At least this head_dim (rpa gen --head-dim D sets both bounds: the Pallas kernel only
  // traces multiples of 128).
  int64_t min_head_dim = 1;
  // Non-empty: mutations only of these kinds; where none of them applies to the drawn case,
  // it gets no more mutations (the Python package's invalid_cases strategy, which discards
  // those).
  std::vector<MutationKind> mutation_kinds;
};

// Options that narrow nothing: every spec any options build encodes and decodes under these
// (jax_case_codec.h), the long-context generator's included.
inline BuildOptions widest_options() {
  BuildOptions o;
  o.max_kv_len = kMaxLongKvLen;
  return o;
}

// The long-context generator: one or two sequences of kv_len up to kMaxLongKvLen whatever
// RapidCheck's size, decode rows and prefill chunks of up to 8 rows, float8 KV, page size 8
// to 32, head_dim up to 128 (so the reference, O(rows * kv_len * Hq * D) in double, stays
// fast), strict-valid.
inline BuildOptions long_context_options() {
  BuildOptions o;
  o.max_mutations = 0;
  o.min_seqs = 1;
  o.max_seqs = 2;
  o.min_kv_len = 1;
  o.max_kv_len = kMaxLongKvLen;
  o.unsized_kv_len = true;
  o.max_q_len = 8;
  o.min_page_size = 8;
  o.max_head_dim = 128;
  o.float8_kv = true;
  return o;
}

inline constexpr DType kQDtypes[] = {DType::kFloat32, DType::kBFloat16};
inline constexpr DataKind kDataKinds[] = {DataKind::kNormal, DataKind::kLarge, DataKind::kAllEqual};
inline constexpr double kSmScales[] = {1.0, 0.5, 0.125, 0.08838834764831845, 2.0, 10.0, -0.5};
inline constexpr double kSoftCaps[] = {5.0, 1.0, 2.5, 10.0, 30.0, 50.0, 1e-3, -5.0};
inline constexpr double kMaskValues[] = {kDefaultMaskValue, -1e30, -1e38, -3.4028234663852886e38};
inline constexpr double kKvScales[] = {1.0, 0.5, 2.0, 0.0, -1.0};

// How many leading entries of page_indices row i the kernel reads: the sequence's pages,
// and at least entry 0 of every sequence and of slot 0, which it prefetches regardless.
// Needs seqs, page_size and max_num_seqs drawn.
inline int64_t read_page_entries(const CaseSpec& s, int64_t i) {
  if (i < s.num_seqs()) {
    return std::max<int64_t>(1, pages_for(s.seqs[static_cast<size_t>(i)].kv_len, s.page_size));
  }
  return i == 0 ? 1 : 0;
}

// The kernel's VMEM need for the spec's blocks (or the smallest, (1, 1), when JAX picks
// them): the least vmem_limit_bytes a valid case may give.
int64_t least_vmem_limit(const CaseSpec& spec);

// kv head counts whose combined heads (2 * Hkv) fill whole TPU tiles (DESIGN.md section 3):
// 2, 4, 8, 16 rows at one value per 32-bit word; float8 packs four, so MQA (2 rows) does
// not tile.
inline constexpr int64_t kTileableKvHeads[] = {1, 2, 4, 8};
inline constexpr int64_t kTileableKvHeadsFloat8[] = {2, 4, 8};

template <class Io>
void visit_mutations(Io& io, CaseSpec& s, const BuildOptions& options);

template <class Io>
void visit_case(Io& io, CaseSpec& s, const BuildOptions& options) {
  if (options.profile) {
    s.profile = *options.profile;
  } else {
    among(io, s.profile, std::span<const Profile>(kProfiles));
  }
  among(io, s.q_dtype, std::span<const DType>(kQDtypes));
  // Strict validity: KV in q's dtype, or float8 under any q.
  const DType kv_dtypes[] = {s.q_dtype, DType::kFloat8E4M3FN, DType::kFloat8E5M2};
  among(io, s.kv_dtype, std::span<const DType>(kv_dtypes).subspan(options.float8_kv ? 1 : 0));
  const bool float8 = s.kv_dtype != s.q_dtype;
  among(io, s.num_kv_heads,
        float8 ? std::span<const int64_t>(kTileableKvHeadsFloat8)
               : std::span<const int64_t>(kTileableKvHeads));
  std::vector<int64_t> ratios;
  for (int64_t r : {1, 2, 4, 8}) {
    if (s.num_kv_heads * r <= kMaxQHeads && (r > 1 || !options.gqa)) ratios.push_back(r);
  }
  among(io, s.q_per_kv, std::span<const int64_t>(ratios));
  const int64_t max_d = std::clamp<int64_t>(options.max_head_dim, 1, kMaxHeadDim);
  io.num(s.head_dim, std::clamp<int64_t>(options.min_head_dim, 1, max_d), max_d,
         {1, 2, 8, 64, 128});
  const int64_t max_s = std::clamp<int64_t>(options.max_page_size, 1, kMaxPageSize);
  io.num(s.page_size, std::clamp<int64_t>(options.min_page_size, 1, max_s), max_s,
         {1, 2, 4, 16});

  int64_t n = s.num_seqs();
  const int64_t max_seqs = std::clamp<int64_t>(options.max_seqs, 0, kMaxSeqs);
  io.sized(n, std::min(options.min_seqs, max_seqs), max_seqs, {1, 2, 3, 8});
  s.seqs.resize(static_cast<size_t>(n));
  const int64_t S = s.page_size;
  for (size_t i = 0; i < s.seqs.size(); ++i) {
    SeqSpec& q = s.seqs[i];
    const bool row = i == 0 && options.query_rows;
    const int64_t kv_lo = s.profile == Profile::kDecode || row ? 1 : 0;
    const int64_t kv_hi = std::clamp<int64_t>(options.max_kv_len, kv_lo, kMaxLongKvLen);
    const int64_t kv_min = std::clamp<int64_t>(options.min_kv_len, kv_lo, kv_hi);
    if (options.unsized_kv_len) {
      io.num(q.kv_len, kv_min, kv_hi, {kv_hi, S + 1});
    } else {
      io.sized(q.kv_len, kv_min, kv_hi, {kv_lo, 1, S - 1, S, S + 1, 2 * S, 3 * S + 1});
    }
    if (s.profile == Profile::kDecode) {
      q.q_len = std::min<int64_t>(q.kv_len, 1);
    } else {
      const int64_t q_lo = row ? 1 : 0;
      const int64_t q_hi = std::min(q.kv_len, std::max(options.max_q_len, q_lo));
      io.num(q.q_len, q_lo, q_hi, {s.profile == Profile::kPrefill ? q_hi : 1, q_hi, 0});
    }
  }
  int64_t padding = s.max_num_seqs - n;
  io.num(padding, n == 0 ? 1 : 0, kMaxPaddingSlots, {});
  s.max_num_seqs = n + padding;

  const int64_t min_pps = std::max<int64_t>(1, pages_for(s.max_kv_len(), S));
  int64_t extra_pps = s.pages_per_seq - min_pps;
  io.num(extra_pps, 0, 3, {0, 1});
  s.pages_per_seq = min_pps + extra_pps;

  // Page table: the entries the kernel reads (the sequence's pages, and entry 0 of every
  // row it prefetches) name real pages, drawn with repetition so pages get shared.
  const int64_t N = s.max_num_seqs, pps = s.pages_per_seq;
  auto read_entries = [&](int64_t i) { return read_page_entries(s, i); };
  int64_t used = 0;
  for (int64_t i = 0; i < N; ++i) used += read_entries(i);
  io.num(s.num_pages, 1, used + kMaxExtraPages, {used, used + 1});
  const int64_t P = s.num_pages;
  s.page_indices.resize(static_cast<size_t>(N * pps));
  for (int64_t i = 0; i < N; ++i) {
    for (int64_t j = 0; j < pps; ++j) {
      int64_t& e = s.page_indices[static_cast<size_t>(i * pps + j)];
      if (j < read_entries(i)) {
        io.num(e, 0, P - 1, {});
      } else {
        io.num(e, kInt32Min, kInt32Max, {-1, P, 0, int64_t{1} << 29});
      }
    }
  }
  s.pad_kv_lens.resize(static_cast<size_t>(N - n));
  s.pad_cu_q_lens.resize(static_cast<size_t>(N - n));
  for (size_t k = 0; k < s.pad_kv_lens.size(); ++k) {
    // Padding the definition never reads. 0, 1, S, pps * S and -5 keep JAX's all-slots
    // pages_per_seq check passing; pps * S + 1, 2^30 and most uniform draws trip it (a
    // documented over-rejection). Without sequences, though, the Pallas kernel's first DMA
    // still counts the pages of slot 0 with kv_lens[0] and copies page_indices[0, j] for
    // each (schedule/jax_program.h), which strict mode rejects when out of range: at most
    // S tokens keep that to entry 0, which is in range, so the case stays strict-valid.
    const int64_t hi = n == 0 && k == 0 ? S : kInt32Max;
    io.num(s.pad_kv_lens[k], kInt32Min, hi, {0, 1, S, pps * S, pps * S + 1, int64_t{1} << 30, -5});
  }
  const int64_t total = s.total_q_len();
  for (int64_t& v : s.pad_cu_q_lens) {
    io.num(v, kInt32Min, kInt32Max, {total, 0, -1, total + kMaxExtraTokens + 1});
  }
  int64_t extra_tokens = s.max_num_batched_tokens - total;
  io.num(extra_tokens, 0, kMaxExtraTokens, {0});
  s.max_num_batched_tokens = total + extra_tokens;

  static_assert(kDataKinds[std::size(kDataKinds) - 1] == DataKind::kAllEqual);
  among(io, s.data,
        std::span<const DataKind>(kDataKinds).first(std::size(kDataKinds) - (options.flat_data ? 0 : 1)));
  io.num(s.data_seed, 0, 0xffffffff, {});
  flag(io, s.nan_garbage);

  Params& p = s.params;
  among(io, p.sm_scale, std::span<const double>(kSmScales));
  maybe(io, p.sliding_window, [&](int64_t& w) {
    const int64_t kv = s.max_kv_len();
    io.num(w, 1, kv + 2, {1, 2, kv, kv + 1});
  });
  maybe(io, p.soft_cap, [&](double& c) { among(io, c, std::span<const double>(kSoftCaps)); });
  maybe(io, p.mask_value, [&](double& m) { among(io, m, std::span<const double>(kMaskValues)); });
  maybe(io, p.k_scale, [&](double& k) { among(io, k, std::span<const double>(kKvScales)); });
  maybe(io, p.v_scale, [&](double& v) { among(io, v, std::span<const double>(kKvScales)); });
  bool blocks = p.num_kv_pages_per_block.has_value();
  flag(io, blocks);
  if (blocks) {
    // pages_per_seq + 1 and + 2 are strict-valid (the kernel clamps page slots); JAX
    // rejects them.
    p.num_kv_pages_per_block = p.num_kv_pages_per_block.value_or(1);
    io.num(*p.num_kv_pages_per_block, 1, pps + 2, {1, pps, pps + 1});
    // Up to 512 rows: past that the q blocks alone outgrow a v6e's VMEM at D 256.
    const int64_t bq_max = std::min<int64_t>(s.max_num_batched_tokens + 2, 512);
    p.num_queries_per_block = p.num_queries_per_block.value_or(1);
    io.num(*p.num_queries_per_block, 1, bq_max, {1, bq_max - 2, 8});
  }
  const int64_t capacity = default_target_profile().vmem_capacity_bytes;
  if (!blocks || least_vmem_limit(s) > capacity) {
    p.num_kv_pages_per_block.reset();
    p.num_queries_per_block.reset();
  }
  const int64_t least = least_vmem_limit(s);
  const int64_t default_limit = default_scoped_vmem_limit(default_target_profile());
  auto limit = [&](int64_t& v) { io.num(v, least, capacity, {least, capacity, default_limit}); };
  if (least > default_limit) {
    // Big blocks: the default scoped limit would not hold them, so a valid case says more.
    p.vmem_limit_bytes = p.vmem_limit_bytes.value_or(least);
    limit(*p.vmem_limit_bytes);
  } else {
    maybe(io, p.vmem_limit_bytes, limit);
  }

  visit_mutations(io, s, options);
}

// The named mutations of a drawn case: min_mutations to max_mutations of them, each applying
// to s, no two of one group, only of options.mutation_kinds where that is set. visit_case's
// last choices; the production calls of fuzz_validate draw theirs the same way.
template <class Io>
void visit_mutations(Io& io, CaseSpec& s, const BuildOptions& options) {
  int64_t count = static_cast<int64_t>(s.mutations.size());
  io.num(count, options.min_mutations, options.max_mutations, {});
  s.mutations.resize(static_cast<size_t>(count));
  for (size_t k = 0; k < s.mutations.size(); ++k) {
    std::vector<MutationKind> kinds;
    for (MutationKind kind : all_mutation_kinds()) {
      bool clash = !mutation_applies(kind, s);
      for (size_t e = 0; e < k; ++e) {
        clash = clash || mutation_group(s.mutations[e].kind) == mutation_group(kind);
      }
      clash = clash || (!options.mutation_kinds.empty() &&
                        std::find(options.mutation_kinds.begin(), options.mutation_kinds.end(),
                                  kind) == options.mutation_kinds.end());
      if (!clash) kinds.push_back(kind);
    }
    if (kinds.empty()) {  // only under options.mutation_kinds: none of them applies
      s.mutations.resize(k);
      break;
    }
    among(io, s.mutations[k].kind, std::span<const MutationKind>(kinds));
    io.num(s.mutations[k].arg, 0, 0xffff, {0, 1, 2, 3});
  }
}

template <class Source>
CaseSpec build_case(Source& source, const BuildOptions& options = {}) {
  CaseSpec spec;
  visit_case(source, spec, options);
  return spec;
}

}  // namespace rpa::props
