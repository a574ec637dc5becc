#include "validation/jax_program_rules.h"

#include <algorithm>
#include <string>

#include "core/python_repr.h"

namespace rpa {
namespace {

std::string I(int64_t v) { return py_int_repr(v); }

}  // namespace

namespace {

// The first DMA or departure of the walk, as a rule (pallas_program_failure).
class ProgramCheck : public DepartureVisitor {
 public:
  ProgramCheck(const Inputs& in, const PallasGrid& grid, Mode mode)
      : DepartureVisitor(in, grid), mode_(mode), P_(in.kv_pages.dim(0)) {}

  std::optional<Failure> failure;

 private:
  // jax mode: where interpret mode raises (numpy indexing takes -P..-1 from the end).
  // strict mode: anything outside [0, P); its own page rule has checked the pages the
  // definition reads and each slot's first page, so what is left is the first DMA of a
  // batch without sequences, which counts slot 0's pages from its padding kv_len.
  void on_dma(const KvBlockId& id) override {
    if (failure) return;
    const int64_t lo = mode_ == Mode::kJax ? -P_ : 0;
    for (int64_t i = 0; i < grid_.kv_pages_per_block; ++i) {
      const int64_t column = dma_page_column(in_, grid_.kv_pages_per_block, id, i);
      const int64_t page = page_at(id.seq, column);
      if (page >= P_ || page < lo) {
        const std::string where = "KV block " + I(id.kv_blk) + " of sequence " + I(id.seq);
        failure = Failure{
            RuleId::page_index_out_of_range,
            "page_indices[" + I(id.seq) + ", " + I(column) + "]=" + I(page) +
                " must be in range [0, " + I(P_) + ") (the Pallas kernel DMAs it for " + where +
                (mode_ == Mode::kJax ? "; interpret mode raises IndexError)."
                                     : ", its kv_lens entry " + I(in_.kv_lens.int_at(id.seq)) +
                                           " counting the pages).")};
        return;
      }
    }
  }

  void departed_step(int64_t qb, const KvBlockId& want, const KvBlockId& have, int64_t,
                     int64_t) override {
    if (failure || mode_ != Mode::kStrict) return;
    const std::string other_heads = have.heads_blk != want.heads_blk
                                        ? " in heads block " + I(have.heads_blk)
                                        : std::string();
    failure = Failure{RuleId::stale_kv_block,
                      "heads block " + I(want.heads_blk) + ", query block " + I(qb) +
                          ": the Pallas kernel computes KV block " + I(want.kv_blk) +
                          " of sequence " + I(want.seq) + " from the block it prefetched for KV "
                          "block " + I(have.kv_blk) + " of sequence " + I(have.seq) +
                          other_heads + ", which no step consumed (sequence " + I(have.seq) +
                          " has kv_len " + I(in_.kv_lens.int_at(have.seq)) + ")."};
  }

  void unstored_rows(int64_t hb, int64_t qb, int64_t first, int64_t last) override {
    if (failure || mode_ != Mode::kStrict) return;
    int64_t seq = 0;
    while (in_.cu_q_lens.int_at(seq + 1) <= first) ++seq;
    last = std::min<int64_t>(last, in_.cu_q_lens.int_at(seq + 1) - 1);
    failure = Failure{RuleId::rows_not_computed,
                      "heads block " + I(hb) + ", query block " + I(qb) + ": rows " + I(first) +
                          ".." + I(last) + " of sequence " + I(seq) +
                          " are never computed (the Pallas kernel starts the block past that "
                          "sequence, as the previous heads block left seq_buf_idx), so they "
                          "keep earlier values."};
  }

  const Mode mode_;
  const int64_t P_;
};

}  // namespace

std::optional<Failure> pallas_program_failure(const Inputs& in, const PallasGrid& grid, Mode mode,
                                              int64_t max_steps) {
  ProgramCheck check(in, grid, mode);
  walk_pallas_program(in, grid, check, max_steps);
  return check.failure;
}

}  // namespace rpa
