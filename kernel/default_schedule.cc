#include "kernel/default_schedule.h"

#include <algorithm>
#include <atomic>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "core/flush_subnormals.h"
#include "kernel/block_math.h"

namespace rpa {
namespace {

using namespace kernel_detail;

// The default schedule's unit of work: a tile of one sequence's rows [a, b) in one heads
// block, and
// the KV blocks [kb_begin, kb_end) that can weigh anything for them (with exact skips, the
// blocks after the last row's position and before the first row's window are left out:
// each of their weights is exp(mask - m) = 0 against a row's real maximum, which a kept
// block supplies). The blocks are cut into `chunks` runs of chunk_blocks, computed
// independently and merged in order. Heads share only the pass over a page, never
// arithmetic, so which heads a segment takes changes no bit; it takes them through a plan of
// its own (heads_blk indexes that plan's heads blocks):
// - a decode sequence (at most kFewRows rows per kv head) every head at once (all_heads),
//   so that a page's token records are read whole, front to back, which the hardware
//   prefetchers follow;
// - any other a single kv head, so that a prefill's tiles split into as many tasks as it has
//   kv heads (each head's K and V rows are widened once per tile either way).
struct Segment {
  int64_t heads_blk, seq, a, b, kb_begin, kb_end, chunk_blocks, chunks;
  bool all_heads;
  int64_t hq_blk;  // q heads the segment covers
  size_t partial;  // offset of the chunks' partial results (chunks > 1)
};

// Floats per chunk of a segment's partial results: m and l of each (row, q head), then its
// accumulator row of D.
int64_t partial_floats(const Segment& sg, int64_t d) {
  return (sg.b - sg.a) * sg.hq_blk * (d + 2);
}

// The plan with heads blocks of kv_heads kv heads each (the same KV and query blocks): every
// head (decode's segments) or one (the others').
KernelPlan heads_plan(const KernelPlan& plan, const PagedKvView& view, int64_t kv_heads) {
  KernelPlan out = plan;
  out.heads.q_heads = kv_heads * view.q_heads_per_kv();
  out.heads.combined_kv_heads = 2 * kv_heads;
  out.num_heads_blks = view.num_kv_heads() / kv_heads;
  return out;
}

// The default schedule's worker: reads each KV block in place from the paged cache.
class SegmentWorker : public BlockMath {
 public:
  SegmentWorker(const PagedKvView& view, const AttentionMath& math, const KernelPlan& plan,
                int64_t tile_queries)
      : BlockMath(view, math, plan, /*literal=*/false, tile_queries),
        pages_(static_cast<size_t>(bkv_)) {}

  // Chunk c of segment sg: its online softmax into m, l and the accumulator, then either
  // the output rows (one chunk) or the chunk's partial results.
  void run(const Segment& sg, int64_t c, Tensor& out, float* partial) {
    const int64_t b0 = sg.kb_begin + c * sg.chunk_blocks;
    const int64_t b1 = std::min(sg.kb_end, b0 + sg.chunk_blocks);
    load_q(sg.heads_blk, sg.a, sg.b);
    sink_chunk_ = c == 0;
    for (int64_t kv_blk = b0; kv_blk < b1; ++kv_blk) {
      block(sg.seq, sg.a, sg.b, sg.a, kv_blk, kv_blk == b0, pages_of(sg, kv_blk));
    }
    if (b0 >= b1) std::fill(acc_.begin(), acc_.end(), 0.0f);  // no block: nothing attended
    if (math_.out_scale) {  // v3's v_scale on p.V: on the chunk's result, which is linear in it
      const float scale = float32_scalar(*math_.out_scale);
      const int64_t n = (sg.b - sg.a) * hq_blk_ * d_;
      for (int64_t e = 0; e < n; ++e) acc_[static_cast<size_t>(e)] *= scale;
    }
    if (sg.chunks == 1) {
      store(out, sg.heads_blk, acc_.data(), sg.a, sg.a, sg.b);
      return;
    }
    const int64_t n = (sg.b - sg.a) * hq_blk_;
    float* pm = partial + c * partial_floats(sg, d_);
    float* pl = pm + n;
    float* po = pl + n;
    for (int64_t e = 0; e < n; ++e) {  // e = (r - a) * Hq_blk + h * group + g
      const int64_t h = e % hq_blk_ / group_;
      const int64_t i = e / hq_blk_ * group_ + e % group_;
      pm[e] = b0 < b1 ? m_[static_cast<size_t>(h * rows_max_ + i)] : -std::numeric_limits<float>::infinity();
      pl[e] = b0 < b1 ? l_[static_cast<size_t>(h * rows_max_ + i)] : 1.0f;
    }
    std::memcpy(po, acc_.data(), static_cast<size_t>(n * d_) * sizeof(float));
  }

 private:
  // Where the tokens of block kv_blk of the segment's sequence lie in the cache.
  KvRows pages_of(const Segment& sg, int64_t kv_blk) {
    const int64_t S = view_.page_size();
    const int64_t P = view_.num_pages();
    const int64_t token_bytes = view_.token_stride() * kv_bytes_;
    const int64_t valid = std::min(kv_per_blk_, view_.kv_len(sg.seq) - kv_blk * kv_per_blk_);
    const int64_t pages = exact_skips() ? (valid + S - 1) / S : bkv_;
    for (int64_t i = 0; i < pages; ++i) {
      const int64_t column = kv_blk * bkv_ + i;
      const int64_t page = column < view_.pages_per_seq() ? view_.page_of(sg.seq, column * S) : -1;
      // Strict validation keeps every page a token is read from in range; a page past
      // kv_len is never read (its slots are zero-filled slots, see BlockMath::block).
      if (i * S < valid && (page < 0 || page >= P)) {
        throw std::out_of_range("tiled_attention: page index out of range (validate first)");
      }
      pages_[static_cast<size_t>(i)] =
          i * S < valid ? view_.kv_data() + (page * S * token_bytes) +
                              sg.heads_blk * hkv_blk_ * head_bytes_
                        : nullptr;
    }
    return {.pages = pages_.data(), .page_size = S, .token_stride = token_bytes};
  }

  std::vector<const std::byte*> pages_;  // [bkv]
};

// The chunks of a split segment merged in order, as one more online-softmax step each:
// chunk c's rows weigh l_c * exp(m_c - m) against the running m.
void merge_chunks(const Segment& sg, const float* partial, int64_t d, const PagedKvView& view,
                  DType q_dtype, Tensor& out, std::vector<float>& o) {
  const int64_t hq_blk = sg.hq_blk;
  const int64_t n = (sg.b - sg.a) * hq_blk;
  const int64_t stride = partial_floats(sg, d);
  o.resize(static_cast<size_t>(d));
  for (int64_t e = 0; e < n; ++e) {
    float m = partial[e], l = partial[n + e];
    std::copy_n(partial + 2 * n + e * d, d, o.begin());
    for (int64_t c = 1; c < sg.chunks; ++c) {
      const float* pc = partial + c * stride;
      const float m_c = pc[e], l_c = pc[n + e];
      const float* o_c = pc + 2 * n + e * d;
      // A chunk of -inf logits alone weighs nothing (softmax_row): its o_c is 0.
      if (m_c == -std::numeric_limits<float>::infinity()) continue;
      const float m_next = std::isnan(m) ? m : std::isnan(m_c) ? m_c : std::max(m, m_c);
      const float alpha = std::exp(m - m_next);
      const float beta = std::exp(m_c - m_next) * l_c;
      const float l_alpha = alpha * l;
      const float l_next = l_alpha + beta;
      const float l_safe = l_next == 0.0f ? 1.0f : l_next;
      // As row_update computes it: beta * o_c fused onto l_alpha * o.
      for (int64_t k = 0; k < d; ++k) {
        float& x = o[static_cast<size_t>(k)];
        x = simd::fma_one(beta, o_c[k], l_alpha * x) / l_safe;
      }
      m = m_next;
      l = l_safe;
    }
    const int64_t r = sg.a + e / hq_blk;
    const int64_t dst = view.q_offset(r, sg.heads_blk * hq_blk + e % hq_blk);
    for (int64_t k = 0; k < d; ++k) store_float(q_dtype, out.data(), dst + k, o[static_cast<size_t>(k)]);
  }
}

// Query rows per tile of the default schedule: kTileRows rows of one kv head.
int64_t tile_queries(const PagedKvView& view) {
  return std::max<int64_t>(1, kTileRows / view.q_heads_per_kv());
}

// The default schedule's segments: heads blocks in order, then each sequence's rows in
// tiles of tile_queries, then its KV blocks in chunks. Everything here follows from the
// shape and the plan, never from the thread count.
std::vector<Segment> plan_segments(const PagedKvView& view, const AttentionMath& math,
                                   const KernelPlan& plan, bool exact_skips) {
  const int64_t tile = tile_queries(view);
  const int64_t kv_per_blk = plan.blocks.kv_pages_per_block * view.page_size();
  const int64_t chunk_blocks = std::max<int64_t>(1, (kSplitTokens + kv_per_blk - 1) / kv_per_blk);
  std::vector<Segment> out;
  for (int64_t hb = 0; hb < view.num_kv_heads(); ++hb) {
    for (int64_t s = 0; s < view.num_seqs(); ++s) {
      const bool all_heads = view.q_len(s) * view.q_heads_per_kv() <= kFewRows;
      if (all_heads && hb > 0) continue;  // the first pass took every head
      for (int64_t a = view.q_start(s); a < view.q_end(s); a += tile) {
        const int64_t b = std::min(view.q_end(s), a + tile);
        const int64_t kv_len = view.kv_len(s);
        const int64_t first_pos = view.q_position(s, a - view.q_start(s));
        const int64_t last_pos = view.q_position(s, b - 1 - view.q_start(s));
        int64_t kb_begin = -1, kb_end = 0;
        for (int64_t kb = 0; kb * kv_per_blk < kv_len; ++kb) {
          const int64_t kv_start = kb * kv_per_blk;
          const int64_t valid = std::min(kv_per_blk, kv_len - kv_start);
          // Every key of the block masked for every row: after the last row's position, or
          // before the first row's window.
          const bool all_masked =
              (math.causal && kv_start > last_pos) ||
              (math.sliding_window && kv_start + valid - 1 <= first_pos - *math.sliding_window);
          if (exact_skips && all_masked) continue;
          if (kb_begin < 0) kb_begin = kb;
          kb_end = kb + 1;
        }
        if (kb_begin < 0) kb_begin = kb_end = 0;
        const int64_t blocks = kb_end - kb_begin;
        // Only decode segments are split: a prefill's tiles and heads are tasks enough, and its
        // chunks' partial results (rows x heads x D each) would add up to gigabytes.
        const int64_t chunks = exact_skips && all_heads
                                   ? std::max<int64_t>(1, (blocks + chunk_blocks - 1) / chunk_blocks)
                                   : 1;
        out.push_back({.heads_blk = hb, .seq = s, .a = a, .b = b, .kb_begin = kb_begin,
                       .kb_end = kb_end,
                       .chunk_blocks = chunks == 1 ? std::max<int64_t>(blocks, 1) : chunk_blocks,
                       .chunks = chunks, .all_heads = all_heads,
                       .hq_blk = all_heads ? view.num_q_heads() : view.q_heads_per_kv(), .partial = 0});
      }
    }
  }
  return out;
}

// Runs body(worker_index) on `workers` threads, the calling thread included.
template <class F>
void on_threads(int workers, F&& body) {
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(std::max(0, workers - 1)));
  for (int w = 1; w < workers; ++w) threads.emplace_back(body);
  body();
  for (std::thread& t : threads) t.join();
}

}  // namespace

void default_schedule(const PagedKvView& view, const AttentionMath& math, const KernelPlan& plan,
                      int threads_wanted, Tensor& out) {
  // Every chunk of every segment is one task; a task's arithmetic does not depend on the
  // thread that runs it, and split segments are merged in chunk order afterwards.
  const bool exact = SegmentWorker(view, math, plan, 1).exact_skips();
  std::vector<Segment> segments = plan_segments(view, math, plan, exact);
  const int64_t d = view.head_dim();
  const KernelPlan all = heads_plan(plan, view, view.num_kv_heads());
  const KernelPlan one = heads_plan(plan, view, 1);
  std::vector<std::pair<size_t, int64_t>> tasks;
  std::vector<size_t> split;
  size_t partial_size = 0;
  for (size_t i = 0; i < segments.size(); ++i) {
    Segment& sg = segments[i];
    if (sg.chunks > 1) {
      sg.partial = partial_size;
      partial_size += static_cast<size_t>(sg.chunks * partial_floats(sg, d));
      split.push_back(i);
    }
    for (int64_t c = 0; c < sg.chunks; ++c) tasks.emplace_back(i, c);
  }
  // Costliest first, so that the last tasks to start are short (a prefill's tiles differ
  // up to its length in keys); the order changes who computes a task, never its bits. The
  // cost: rows times the keys the middle row attends within the chunk, times heads.
  const int64_t kv_per_blk = plan.blocks.kv_pages_per_block * view.page_size();
  auto cost = [&](const std::pair<size_t, int64_t>& t) {
    const Segment& sg = segments[t.first];
    const int64_t k0 = (sg.kb_begin + t.second * sg.chunk_blocks) * kv_per_blk;
    const int64_t k1 = std::min((sg.kb_begin + (t.second + 1) * sg.chunk_blocks) * kv_per_blk,
                                view.kv_len(sg.seq));
    const int64_t mid = view.q_position(sg.seq, (sg.a + sg.b) / 2 - view.q_start(sg.seq));
    return (sg.b - sg.a) * sg.hq_blk * std::clamp<int64_t>(mid + 1 - k0, 1, std::max<int64_t>(k1 - k0, 1));
  };
  std::stable_sort(tasks.begin(), tasks.end(),
                   [&](const auto& x, const auto& y) { return cost(x) > cost(y); });
  std::vector<float> partial(partial_size);
  // Scratch for the tallest tile of this call, per kind of segment (decode's are one row).
  int64_t tile = 1, all_tile = 1;
  for (const Segment& sg : segments) (sg.all_heads ? all_tile : tile) = std::max(sg.all_heads ? all_tile : tile, sg.b - sg.a);
  const int hw = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  const int threads = threads_wanted > 0 ? threads_wanted : hw;
  const auto workers =
      static_cast<int>(std::min<int64_t>(std::max<size_t>(tasks.size(), 1), threads));
  std::atomic<size_t> next{0};
  on_threads(workers, [&] {
    const FlushSubnormals flush;
    std::optional<SegmentWorker> blocks, every_head;  // made when first needed
    for (size_t t = next++; t < tasks.size(); t = next++) {
      const Segment& sg = segments[tasks[t].first];
      std::optional<SegmentWorker>& worker = sg.all_heads ? every_head : blocks;
      if (!worker) worker.emplace(view, math, sg.all_heads ? all : one, sg.all_heads ? all_tile : tile);
      worker->run(sg, tasks[t].second, out, partial.data() + sg.partial);
    }
  });
  std::atomic<size_t> next_split{0};
  on_threads(static_cast<int>(std::min<size_t>(std::max<size_t>(split.size(), 1), workers)), [&] {
    const FlushSubnormals flush;
    std::vector<float> o;
    for (size_t t = next_split++; t < split.size(); t = next_split++) {
      const Segment& sg = segments[split[t]];
      merge_chunks(sg, partial.data() + sg.partial, d, view, view.q_dtype(), out, o);
    }
  });
}

}  // namespace rpa
