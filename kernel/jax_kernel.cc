#include "kernel/jax_kernel.h"

#include <algorithm>
#include <limits>
#include <stdexcept>

#include "core/flush_subnormals.h"
#include "core/jax_attention_math.h"
#include "core/jax_kv_view.h"
#include "core/paged_kv_view.h"
#include "kernel/block_math.h"
#include "kernel/default_schedule.h"
#include "schedule/jax_program.h"

namespace rpa {
namespace {

using namespace kernel_detail;

// The literal schedule's worker (DESIGN.md section 5): the TPU's KV double buffer in the KV
// dtype, filled by the Pallas program's DMAs, and m, l and the accumulator carried across
// grid cells from NaN (TPU interpret mode's uninitialized scratch).
class LiteralWorker : public BlockMath {
 public:
  LiteralWorker(const Inputs& in, const Params& p, const KernelPlan& plan, Tensor& out)
      : BlockMath(kv_view(in), attention_math(p), plan, /*literal=*/true,
                  plan.blocks.queries_per_block),
        in_(in),
        out_(out),
        slot_bytes_(hc_blk_ * d_ * kv_bytes_),
        kv_buf_(static_cast<size_t>(2 * kv_per_blk_ * slot_bytes_)),
        pages_(static_cast<size_t>(2 * bkv_)) {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    std::fill(m_.begin(), m_.end(), nan);
    std::fill(l_.begin(), l_.end(), nan);
    std::fill(acc_.begin(), acc_.end(), nan);
    for (int64_t half = 0; half < 2; ++half) {
      for (int64_t i = 0; i < bkv_; ++i) {
        pages_[static_cast<size_t>(half * bkv_ + i)] =
            kv_buf_.data() + (half * kv_per_blk_ + i * view_.page_size()) * slot_bytes_;
      }
    }
  }

  void dma(int half, const KvBlockId& id) { copy_kv_block(id, half); }
  void step(int64_t heads_blk, int64_t q_blk, int64_t s, int64_t kv_blk, int half,
            int64_t store_lo, int64_t store_hi) {
    if (store_lo >= store_hi) return;  // every store of the step is masked out
    const int64_t r0 = q_blk * bq_;
    const KvRows src{.pages = pages_.data() + half * bkv_,
                     .page_size = view_.page_size(),
                     .token_stride = slot_bytes_};
    load_q(heads_blk, r0 + store_lo, r0 + store_hi);
    block(s, r0 + store_lo, r0 + store_hi, r0, kv_blk, kv_blk == 0, src);
  }
  // The Pallas kernel writes its whole query block from the accumulator, rows it did not
  // compute in this grid cell included.
  void cell_end(int64_t heads_blk, int64_t q_blk) {
    const int64_t r0 = q_blk * bq_;
    store(out_, heads_blk, acc_.data(), r0, r0, std::min(r0 + bq_, in_.q.dim(0)));
  }

 private:
  // The TPU's MultiPageAsyncCopyDescriptor: bkv pages of block id's combined heads into one
  // half of the double buffer; page slots past the sequence's last page copy its first page
  // (dma_page_column). A page index in [-P, 0) is read from the end, as TPU interpret
  // mode's numpy indexing does (jax mode accepts it; strict mode does not).
  void copy_kv_block(const KvBlockId& id, int64_t half) {
    const int64_t S = view_.page_size();
    const int64_t P = in_.kv_pages.dim(0);
    const int64_t page_bytes = S * view_.num_kv_heads() * 2 * d_ * kv_bytes_;
    std::byte* dst = kv_buf_.data() + half * kv_per_blk_ * slot_bytes_;
    for (int64_t i = 0; i < bkv_; ++i) {
      const int64_t column = dma_page_column(in_, bkv_, id, i);
      int64_t page = in_.page_indices.int_at(id.seq * view_.pages_per_seq() + column);
      if (page < 0) page += P;
      if (page < 0 || page >= P) throw std::out_of_range("tiled_attention: page index out of range (validate first)");
      const std::byte* src = in_.kv_pages.data() + page * page_bytes +
                             id.heads_blk * slot_bytes_;
      for (int64_t slot = 0; slot < S; ++slot) {
        std::memcpy(dst + (i * S + slot) * slot_bytes_, src + slot * page_bytes / S,
                    static_cast<size_t>(slot_bytes_));
      }
    }
  }

  const Inputs& in_;
  Tensor& out_;
  const int64_t slot_bytes_;
  Scratch<std::byte> kv_buf_;  // [2, bkv, S, Hc_blk, D] in the KV dtype
  std::vector<const std::byte*> pages_;  // [2, bkv]: each half's pages in the buffer
};

// Runs a LiteralWorker through the Pallas program's walk.
class LiteralProgram : public PallasProgramVisitor {
 public:
  explicit LiteralProgram(LiteralWorker& worker) : worker_(worker) {}
  void dma(int buf, const KvBlockId& id) override { worker_.dma(buf, id); }
  void step(int64_t hb, int64_t qb, int64_t seq, int64_t kv_blk, int buf, int64_t store_lo,
            int64_t store_hi, int pending) override {
    // The program never waits on a buffer no DMA was started into (schedule/jax_program.h).
    if (pending == 0) throw std::logic_error("tiled_attention: a wait with no DMA pending");
    worker_.step(hb, qb, seq, kv_blk, buf, store_lo, store_hi);
  }
  void cell_end(int64_t hb, int64_t qb) override { worker_.cell_end(hb, qb); }

 private:
  LiteralWorker& worker_;
};

}  // namespace

Tensor tiled_attention(const Inputs& in, const Params& p, const KernelOptions& options) {
  const KernelPlan plan =
      plan_kernel(in, p, options.target, options.literal_schedule && options.untuned_blocks);
  Tensor out(in.q.dtype(), in.q.shape());
  if (options.literal_schedule) {  // one thread: the grid cells run in order, as on the TPU
    const FlushSubnormals flush;
    LiteralWorker worker(in, p, plan, out);
    LiteralProgram program(worker);
    const PallasGrid grid{.num_heads_blks = plan.num_heads_blks,
                          .num_q_blks = plan.num_q_blks,
                          .kv_pages_per_block = plan.blocks.kv_pages_per_block,
                          .queries_per_block = plan.blocks.queries_per_block};
    if (!walk_pallas_program(in, grid, program, std::numeric_limits<int64_t>::max())) {
      throw std::invalid_argument("tiled_attention: the Pallas program does not end");
    }
    return out;
  }
  default_schedule(kv_view(in), attention_math(p), plan, options.threads, out);
  return out;
}

}  // namespace rpa
