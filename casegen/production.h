// The production profile (docs/properties.md, "The production profile"): the calls vLLM's
// TPU runner builds, drawn as a recipe (ProductionSpec) and expanded into a case of either
// dialect family. A serving step's shape: max_num_seqs 128 to 512 slots, a token budget of
// 512 to 8192 split into decode rows and chunked-prefill rows the way the scheduler splits
// it, page_size 16 to 256 and pages_per_seq from max_model_len 2K to 128K, the head layouts
// of real models, their sliding windows, soft caps, sinks and float8 caches; and, one call
// in four, an integer edge of the program (a quantity at, just below or just past the limit
// of the type the program holds it in, where a valid call can get there).
//
// Every recipe fits two bounds, so a call runs through the literal schedules, the tiled
// kernels and the dense reference in seconds: its arrays take at most kProductionMemoryBytes,
// and its attention at most kProductionMacs multiply-adds (sum of q_len * kv_len * Hq * D).
// Lengths are drawn against what is left of both, so a batch keeps its serving shape (many
// short decodes, a prefill chunk filling the budget, one long context) at a size a CPU runs.
//
// The recipe is its own codec (visit_production, any Io of casegen/choices.h), so a production
// call replays as `rpa gen --spec prod:HEX` without touching the other generators' bytes. Each
// dialect family expands a recipe into its own case spec (casegen/jax_production.h,
// casegen/v3_production.h).
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/dialect.h"
#include "core/dtype.h"
#include "casegen/batch_mix.h"
#include "casegen/choices.h"

namespace rpa::props {

inline constexpr int64_t kProductionMemoryBytes = int64_t{256} << 20;
inline constexpr int64_t kProductionMacs = int64_t{1} << 30;

// A model's attention shape as one TPU chip serves it (tensor parallelism divides heads).
struct ProductionModel {
  std::string_view name;
  int64_t q_heads;
  int64_t kv_heads;
  int64_t head_dim;
  int64_t window;    // the model's own sliding window, 0 for none
  double soft_cap;   // the model's own attention soft cap, 0 for none
  bool sinks;        // the model has attention sinks (gpt-oss)
};

// The models a dialect serves: jax and kernel.py take head_dim 64 to 256 (jax's KV heads
// whole TPU tiles); hd64 takes head_dim 64 alone.
std::span<const ProductionModel> production_models(Dialect d);

// A program's integer quantity drawn to the limit of its type (docs/v3.md "Integer edges").
enum class ProductionEdge : uint8_t {
  kNone,
  kInt16PositionsBelow,  // kernel.py bf16 on v6+: pages_per_seq * page_size = 32752, int16
  kInt16PositionsPast,   // ... = 32768: one past, int32 positions
  kInt16WindowAt,        // int16 positions, max key + window == 32767
  kInt16WindowBelow,     // ... == 32766
  kInt32WindowAt,        // max key + window == 2^31 - 1
  kInt32WindowBelow,     // ... == 2^31 - 2
};
inline constexpr ProductionEdge kProductionEdges[] = {
    ProductionEdge::kNone,           ProductionEdge::kInt16PositionsBelow,
    ProductionEdge::kInt16PositionsPast, ProductionEdge::kInt16WindowAt,
    ProductionEdge::kInt16WindowBelow,   ProductionEdge::kInt32WindowAt,
    ProductionEdge::kInt32WindowBelow};
std::string_view production_edge_name(ProductionEdge e);
// Whether the edge is one of kernel.py's int16 positions.
bool production_edge_is_int16(ProductionEdge e);
// Whether a dialect's program has the quantity (int16 positions are kernel.py's).
bool production_edge_applies(Dialect d, ProductionEdge e);

struct ProductionSpec {
  Dialect dialect = Dialect::kJax;
  int64_t model = 0;  // index into production_models(dialect)
  DType q_dtype = DType::kBFloat16;
  DType kv_dtype = DType::kBFloat16;
  ProductionEdge edge = ProductionEdge::kNone;
  int64_t max_model_len = 2048;
  int64_t page_size = 16;
  int64_t max_num_seqs = 128;
  int64_t token_budget = 512;  // the scheduler's max_num_batched_tokens
  // Sequences in call order: num_decode decodes (q_len 1), then (v3) num_prefill rows of
  // chunk_prefill_size, then chunked-prefill rows of any q_len.
  int64_t num_decode = 0;
  int64_t num_prefill = 0;
  std::optional<int64_t> chunk_prefill_size;  // v3: the prefill range's static q_len
  std::vector<SeqSpec> seqs;
  std::optional<int64_t> sliding_window;
  std::optional<double> soft_cap;
  bool sinks = false;          // hd64: the model's sinks, some heads -inf
  double kv_scale = 1.0;       // float8 caches: k_scale and v_scale
  int64_t kv_pages_per_block = 8;   // hd64's num_kv_pages_per_block
  int64_t queries_per_block = 64;   // hd64's num_queries_per_block
  int64_t spare_pages = 0;     // pages in the pool past those in use
  int64_t page_shuffle_seed = 0;
  bool nan_padding = true;     // padding rows and unused cache slots hold NaN
  int64_t data_seed = 0;

  const ProductionModel& shape() const { return production_models(dialect)[static_cast<size_t>(model)]; }
  int64_t pages_per_seq() const { return (max_model_len + page_size - 1) / page_size; }
  int64_t total_q_len() const;
  // The array rows the runner pads the tokens to: the next power of two from 16, at most
  // the budget.
  int64_t padded_tokens() const;
  int64_t max_kv_len() const;
  int64_t macs() const;          // sum of q_len * kv_len * Hq * D
  int64_t memory_bytes() const;  // the call's arrays, as materialized
  bool operator==(const ProductionSpec&) const = default;
};

// The recipe's choices, in order (an Io of casegen/choices.h). Every spec it builds keeps both
// bounds.
template <class Io>
void visit_production(Io& io, ProductionSpec& s, Dialect d);

template <class Source>
ProductionSpec build_production(Source& source, Dialect d) {
  ProductionSpec s;
  visit_production(source, s, d);
  return s;
}

// ProductionSpec::memory_bytes() is the formula of the bytes a materialized call holds
// (held_bytes, of each family's inputs: casegen/jax_production.h, casegen/v3_production.h), to
// within memory_bytes_slack(): the tables' scalars (num_seqs, distribution) and the sinks,
// which the formula leaves out.
int64_t memory_bytes_slack(const ProductionSpec& s);

// The batch mix of a recipe's sequences (decode rows have q_len 1), as each family's case
// spec and the reach table name it.
Profile profile_of(const std::vector<SeqSpec>& seqs);

// The codec: `rpa gen --spec prod:HEX`, the dialect in the first byte, then the recipe's
// choices. nullopt unless `text` is exactly the canonical form of a recipe.
inline constexpr std::string_view kProductionSpecPrefix = "prod:";
std::string production_spec_hex(const ProductionSpec& s);
std::optional<ProductionSpec> production_spec_from_hex(std::string_view text);

// What the reach table counts (docs/properties.md): each profile item the recipe reaches
// ("model llama-3-8b", "page_size 256", "max_model_len 131072", "window > kv_len",
// "edge int16_positions_below", ...).
std::vector<std::string> production_reach_items(const ProductionSpec& s);
// Every item a dialect's recipes can reach: the table's rows.
std::vector<std::string> production_reach_catalog(Dialect d);

std::string describe(const ProductionSpec& s);

// The draw's tables.
inline constexpr int64_t kProductionModelLens[] = {2048, 4096, 8192, 16384, 32768, 65536, 131072};
inline constexpr int64_t kProductionPageSizes[] = {16, 32, 64, 128, 256};
inline constexpr int64_t kProductionWindows[] = {128, 512, 1024, 4096, 8192, 32768};
inline constexpr double kProductionSoftCaps[] = {30.0, 50.0};
inline constexpr double kProductionKvScales[] = {1.0, 0.5, 0.25, 2.0};
inline constexpr int64_t kProductionQueryBlocks[] = {8, 16, 32, 64, 128};
inline constexpr int64_t kProductionMinSeqs = 128, kProductionMaxSeqs = 512;
inline constexpr int64_t kProductionMinTokens = 512, kProductionMaxTokens = 8192;
inline constexpr int64_t kProductionMaxSparePages = 3;
// kernel.py's int16 positions hold pages_per_seq * page_size <= 32767: at page_size 16 the
// largest is 2047 pages (32752 tokens), and 2048 pages (32768) is the first past.
inline constexpr int64_t kInt16PositionsBelowLen = 32752, kInt16PositionsPastLen = 32768;

// vLLM's get_page_size (vllm/v1/attention/backends/pallas.py): next_power_of_2(max_model_len)
// / 16, clamped to [16, 256].
int64_t vllm_page_size(int64_t max_model_len);
// Bytes a call's arrays take per padded token row (q, out and, for v3, the new K and V), and
// per cached token (K and V of every kv head; v3's packed record as V3CacheLayout lays it
// out, heads padded to the packing and lanes to 128).
int64_t production_token_bytes(const ProductionSpec& s);
int64_t production_cache_token_bytes(const ProductionSpec& s);
// The arrays that grow with the slots and pages_per_seq (page_indices, kv_lens, cu_q_lens).
int64_t production_table_bytes(const ProductionSpec& s);
// Whether kernel.py holds the call's mask positions in int16 on TPU v6 and later (bfloat16
// q, pages_per_seq * page_size <= 32767): its window edges are then int16's.
bool production_int16_positions(const ProductionSpec& s);
// Whether kernel.py would leave new tokens of some sequence unwritten under the recipe's
// sliding window with TPU v5, v6 or v7's default block sizes (finding 24, strict
// window_skips_cache_write): its last query block reads KV blocks from its first row's window
// on, floored to bkv_sz, and writes the new tokens only from those. The recipe then draws no
// window: a production call is strict-valid (fuzz_validate found a window edge of 15 with a
// 149-row chunk, the first time it drew production calls). Kernel.py's: defined in
// casegen/v3_production.cc.
bool production_window_skips_cache_write(const ProductionSpec& s);

// Whether jax's prefetched index arrays for these slots and pages fit the default target's
// SMEM (strict smem_budget_exceeded; jax's, defined in casegen/jax_production.cc).
bool production_smem_fits(int64_t max_num_seqs, int64_t pages_per_seq);

template <class Io>
void visit_production(Io& io, ProductionSpec& s, Dialect d) {
  s.dialect = d;
  const std::span<const ProductionModel> models = production_models(d);
  io.num(s.model, 0, static_cast<int64_t>(models.size()) - 1, {});
  const ProductionModel& m = s.shape();
  // Serving runs bfloat16 queries; float32 keeps its place as the dtype the tolerances are
  // tightest in.
  int64_t q = s.q_dtype == DType::kFloat32 ? 1 : 0;
  io.num(q, 0, 1, {0});
  s.q_dtype = q == 1 ? DType::kFloat32 : DType::kBFloat16;
  // jax: a float8 cache packs four heads a word, so one kv head (two combined) does not tile.
  const bool float8_ok = d != Dialect::kJax || m.kv_heads >= 2;
  const DType kv_dtypes[] = {s.q_dtype, DType::kFloat8E4M3FN, DType::kFloat8E5M2};
  among(io, s.kv_dtype, std::span<const DType>(kv_dtypes).first(float8_ok ? 3 : 1));

  std::vector<ProductionEdge> edges;
  for (ProductionEdge e : kProductionEdges) {
    if (production_edge_applies(d, e) && (!production_edge_is_int16(e) || s.q_dtype == DType::kBFloat16)) {
      edges.push_back(e);
    }
  }
  int64_t e = 0;
  for (size_t k = 0; k < edges.size(); ++k) e = edges[k] == s.edge ? static_cast<int64_t>(k) : e;
  io.num(e, 0, static_cast<int64_t>(edges.size()) - 1, {0, 0});
  s.edge = edges[static_cast<size_t>(e)];
  const bool int16_edge = production_edge_is_int16(s.edge);

  if (int16_edge) {
    s.max_model_len = s.edge == ProductionEdge::kInt16PositionsPast ? kInt16PositionsPastLen
                                                                     : kInt16PositionsBelowLen;
    s.page_size = 16;
  } else {
    among(io, s.max_model_len, std::span<const int64_t>(kProductionModelLens));
    // jax prefetches page_indices into SMEM: the page sizes whose table fits at 128 slots.
    std::vector<int64_t> sizes;
    for (int64_t size : kProductionPageSizes) {
      if (d != Dialect::kJax ||
          production_smem_fits(kProductionMinSeqs, (s.max_model_len + size - 1) / size)) {
        sizes.push_back(size);
      }
    }
    int64_t p = 0, vllm = 0;
    for (size_t k = 0; k < sizes.size(); ++k) {
      if (sizes[k] == s.page_size) p = static_cast<int64_t>(k);
      if (sizes[k] == vllm_page_size(s.max_model_len)) vllm = static_cast<int64_t>(k);
    }
    io.num(p, 0, static_cast<int64_t>(sizes.size()) - 1, {vllm});
    s.page_size = sizes[static_cast<size_t>(p)];
  }
  const int64_t S = s.page_size, pps = s.pages_per_seq();
  int64_t slots_hi = kProductionMaxSeqs;
  while (d == Dialect::kJax && slots_hi > kProductionMinSeqs && !production_smem_fits(slots_hi, pps)) {
    --slots_hi;
  }
  io.num(s.max_num_seqs, kProductionMinSeqs, slots_hi, {128, 256, 512, slots_hi});
  // The token rows the memory bound leaves half of itself to.
  const int64_t token_bytes = production_token_bytes(s);
  const int64_t t_hi = std::clamp<int64_t>(kProductionMemoryBytes / 2 / token_bytes, 16,
                                           kProductionMaxTokens);
  io.num(s.token_budget, std::min(kProductionMinTokens, t_hi), t_hi, {512, 2048, 4096, t_hi});
  io.num(s.spare_pages, 0, kProductionMaxSparePages, {0});

  // What is left for the cache, in pages, and for the attention, in multiply-adds.
  const int64_t cache_page_bytes = production_cache_token_bytes(s) * S;
  int64_t pages_left = std::max<int64_t>(
      (kProductionMemoryBytes - production_table_bytes(s) - s.token_budget * token_bytes) /
              cache_page_bytes - s.spare_pages, 1);
  int64_t macs_left = kProductionMacs;
  const int64_t head_macs = m.q_heads * m.head_dim;
  // An edge's long sequence comes first, when the bounds hold it.
  int64_t edge_kv = 0;
  // (An edge whose sequence the bounds do not hold keeps its table sizes and windows.)
  if (int16_edge && pps * S <= pages_left * S && pps * S * head_macs <= macs_left) {
    edge_kv = pps * S;
  }
  const int64_t lead = edge_kv > 0 ? 1 : 0;
  const int64_t lead_pages = edge_kv > 0 ? pps : 0;

  // Decodes first, as the scheduler runs them, then the prefill chunks in what budget is left.
  const int64_t decode_hi = std::max<int64_t>(
      std::min({s.max_num_seqs - lead, s.token_budget - lead, pages_left - lead_pages}), 0);
  int64_t extra_decode = std::max<int64_t>(s.num_decode - lead, 0);
  io.num(extra_decode, 0, decode_hi, {0, 1, decode_hi / 2, decode_hi});
  s.num_decode = extra_decode + lead;
  const int64_t rows_left = s.token_budget - s.num_decode;
  const int64_t prefill_hi = std::max<int64_t>(
      std::min({s.max_num_seqs - s.num_decode, rows_left,
                pages_left - lead_pages - extra_decode}), 0);
  int64_t n_prefill = static_cast<int64_t>(s.seqs.size()) - s.num_decode;
  io.num(n_prefill, s.num_decode == 0 ? std::min<int64_t>(1, prefill_hi) : 0, prefill_hi,
         {0, 1, 2, 4});
  n_prefill = std::max<int64_t>(n_prefill, 0);
  // v3: the prefill range of static q_len chunk_prefill_size, or vLLM's (d, d, k) without one.
  bool range = s.num_prefill > 0;
  int64_t chunk = s.chunk_prefill_size.value_or(1), ranged = s.num_prefill;
  s.num_prefill = 0;
  s.chunk_prefill_size.reset();
  if (is_v3(d) && n_prefill > 0) {
    flag(io, range);
    if (range) {
      // Chunks of one size: every prefill row could be one, within the rows, pages and work.
      const int64_t pages = pages_left - lead_pages - extra_decode;
      const int64_t work = (macs_left - (s.num_decode + edge_kv) * head_macs) / n_prefill;
      int64_t c_hi = std::max<int64_t>(rows_left / n_prefill, 1);
      while (c_hi > 1 && (c_hi * c_hi * head_macs > work || n_prefill * ((c_hi + S - 1) / S) > pages)) {
        c_hi = c_hi * 3 / 4;
      }
      io.num(chunk, 1, c_hi, {c_hi, 256, 512, 16});
      io.num(ranged, 1, n_prefill, {1, n_prefill});
      s.num_prefill = ranged;
      s.chunk_prefill_size = chunk;
    }
  }

  const int64_t n = s.num_decode + n_prefill;
  s.seqs.resize(static_cast<size_t>(n));
  // The rows first: decodes 1, the prefill range its chunks, the rest chunks of what is left,
  // each within the work and pages that leave every later one a row.
  int64_t rows = rows_left - s.num_prefill * s.chunk_prefill_size.value_or(0);
  // The edge's sequence holds its pages and work from the start: the rows below must not
  // take them (fuzz_validate found 82 chunks of a llama-3.1-405b call, drawn in the pages the
  // edge's 2047 were to take, 34 pages past the bound; corpus/fuzz/fuzz_validate/).
  int64_t work = macs_left - edge_kv * head_macs, pages = pages_left - lead_pages;
  for (int64_t k = 0; k < n; ++k) {
    SeqSpec& sq = s.seqs[static_cast<size_t>(k)];
    if (k < s.num_decode) {
      sq.q_len = 1;
    } else if (k < s.num_decode + s.num_prefill) {
      sq.q_len = *s.chunk_prefill_size;
    } else {
      const int64_t after = n - 1 - k;
      int64_t q_hi = std::min(rows - after, (pages - after) * S);
      while (q_hi > 1 && q_hi * q_hi * head_macs > work - after * head_macs) q_hi = q_hi * 3 / 4;
      q_hi = std::max<int64_t>(q_hi, 1);
      io.num(sq.q_len, 1, q_hi, {q_hi, 1, 16, 512});
      rows -= sq.q_len;
    }
    if (k > 0 || edge_kv == 0) {
      work -= sq.q_len * sq.q_len * head_macs;
      pages -= (sq.q_len + S - 1) / S;
    }
  }
  // Then the contexts: each as long as the model, the pages and the work allow, after the
  // least every sequence still needs (its own rows) is set aside.
  for (int64_t k = 0; k < n; ++k) {
    SeqSpec& sq = s.seqs[static_cast<size_t>(k)];
    if (k == 0 && edge_kv > 0) {
      sq.kv_len = edge_kv;
      continue;
    }
    const int64_t own_pages = (sq.q_len + S - 1) / S;
    const int64_t own_work = sq.q_len * sq.q_len * head_macs;
    const int64_t kv_hi = std::max(
        sq.q_len, std::min({s.max_model_len, (pages + own_pages) * S,
                            (work + own_work) / (sq.q_len * head_macs)}));
    io.num(sq.kv_len, sq.q_len, kv_hi, {sq.q_len, S, S + 1, kv_hi, kv_hi / 2});
    pages -= (sq.kv_len + S - 1) / S - own_pages;
    work -= sq.q_len * sq.kv_len * head_macs - own_work;
  }

  const int64_t kv_max = s.max_kv_len();
  switch (s.edge) {
    case ProductionEdge::kInt16WindowAt:
      s.sliding_window = 32768 - kv_max;
      break;
    case ProductionEdge::kInt16WindowBelow:
      s.sliding_window = 32767 - kv_max;
      break;
    // Where kernel.py holds positions in int16, its int32 edges are the int16 ones.
    case ProductionEdge::kInt32WindowAt:
      s.sliding_window = production_int16_positions(s) ? 32768 - kv_max
                                                      : int64_t{2147483647} - (kv_max - 1);
      break;
    case ProductionEdge::kInt32WindowBelow:
      s.sliding_window = production_int16_positions(s) ? 32767 - kv_max
                                                      : int64_t{2147483646} - (kv_max - 1);
      break;
    default:
      // kernel.py's int16 positions (bfloat16 q, pages_per_seq * page_size <= 32767) wrap
      // past key + window 32767 (finding 25, strict window_int16_wraps): windows stop there.
      const int64_t w_hi = production_int16_positions(s) ? 32768 - kv_max : 32768;
      maybe(io, s.sliding_window, [&](int64_t& w) {
        io.num(w, 1, w_hi, {m.window > 0 ? m.window : 4096, 128, 1024, 4096, w_hi});
      });
  }
  if (s.sliding_window && *s.sliding_window < 1) s.sliding_window = 1;
  if (production_window_skips_cache_write(s)) s.sliding_window.reset();
  maybe(io, s.soft_cap, [&](double& c) {
    int64_t k = c == kProductionSoftCaps[1] ? 1 : 0;
    io.num(k, 0, 1, {m.soft_cap == kProductionSoftCaps[1] ? 1 : 0});
    c = kProductionSoftCaps[static_cast<size_t>(k)];
  });
  if (d == Dialect::kTpuInferenceV3Hd64) {
    flag(io, s.sinks);
    // Strict sink_group_unpacked: bfloat16 q with an odd group runs without sinks.
    if (s.q_dtype == DType::kBFloat16 && (m.q_heads / m.kv_heads) % 2 != 0) s.sinks = false;
    io.num(s.kv_pages_per_block, 1, 16, {1, 2, 8, 16});
    among(io, s.queries_per_block, std::span<const int64_t>(kProductionQueryBlocks));
  } else {
    s.sinks = false;
    s.kv_pages_per_block = 8;
    s.queries_per_block = 64;
  }
  if (s.kv_dtype != s.q_dtype) {
    among(io, s.kv_scale, std::span<const double>(kProductionKvScales));
  } else {
    s.kv_scale = 1.0;
  }
  page_shuffle_seed(io, s.page_shuffle_seed);
  flag(io, s.nan_padding);
  io.num(s.data_seed, 0, 0xffffffff, {});
}

}  // namespace rpa::props
