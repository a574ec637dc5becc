// tpu-inference v3's Pallas programs, literally (DESIGN.md section 16; issue 23): the literal
// v3 schedule. kernel.py's up to three pallas_calls (decode with d_block_sizes and one query
// row, prefill with p_block_sizes and chunk_prefill_size rows, only when that is set, then
// mixed with m_block_sizes), each a loop over its range of distribution, and kernel_hd64.py's
// one call over grid (distribution[2],), walked step by step as the kernels run in TPU
// interpret mode (python/rpa/jax/v3_pallas.py, with its seven patches):
//
// - Memory. q and the output are one array (input_output_aliases): rows no pass stores keep
//   the queries (hd64: zeros, its output being the padded lanes), and a later pass reads
//   what an earlier one stored. The cache is read and
//   written in place. Scratch starts as NaN in each call (interpret mode's uninitialized
//   memory; hd64's prologue zeroes its KV buffers): the q, KV and output double buffers and
//   l, m, acc. The scalar bookkeeping (sem_ids, bo_ids, bkv_update_ids) starts as 0, -1, -1.
// - DMAs as interpret mode runs them ("on_wait"): a start queues the copy on its semaphore;
//   a wait for n units runs the queued copies newest first until the semaphore's count
//   reaches n, then takes n. So a copy reads its source when something waits on it (a KV
//   fetch sees the cache writes of the steps before), a wait for a negative size adds to the
//   count, a copy nothing waits on never happens, and a wait that no queued copy can satisfy
//   is a hang (V3ProgramError::kHang; interpret mode waits forever, as a TPU would).
// - Reads past the KV or q buffer (a compute block past bkv_sz) read all-ones bits (NaN),
//   as the strided_load patch pads them.
// - Arithmetic as XLA's CPU backend evaluates the kernel body: f32 dots; every op on an
//   out_dtype (kernel.py's l, m, acc: bfloat16 for bfloat16 queries) value rounded to it;
//   jnp.sum(p, dtype=A) as XLA's tree reduction (windows of 32, padded on both sides, each
//   summed in order in A, then the window sums likewise); m rounded to A; kernel.py's int16
//   positions on v6+ with packed q; hd64's approximate reciprocal as 1 / bf16(l) in float32.
//   Subnormals are flushed. What is left to the schedule tolerance is the order of each f32
//   dot (and where that moves a rounding to A).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

#include "core/dialect.h"
#include "core/v3_inputs.h"
#include "core/v3_params.h"
#include "core/v3_result.h"
#include "schedule/path_features.h"
#include "schedule/v3_enclosure.h"
#include "schedule/v3_block_sizes.h"

namespace rpa {

// How a second run of the program computes what the literal schedule computes one way: each
// float32 dot (q.K over the lanes, p.V (hd64: p.[K | V]) over the compute block's tokens)
// and float32 row sum in another order, forward (the literal's), reversed, pairwise (halves,
// recursively), or blocked as an MXU accumulates (chunks of 128 or 256 terms, each product
// exact and each addition rounded to float32, then the chunks' sums in order); exp's and
// tanh's results moved by up to exp_ulps units of 2^-24 of themselves (within kExpError, 2^-21:
// |exp_ulps| <= 8; p's alternately up and down by the slot's parity, which a uniform error
// would not show); l's and acc's
// alpha x + y rounded once (fused); kernel.py's row sum in A as a float32 sum in that order
// rounded once to A.
enum class V3DotOrder { kForward, kReversed, kPairwise, kBlocked128, kBlocked256 };
struct V3SecondRun {
  V3DotOrder order = V3DotOrder::kForward;
  int exp_ulps = 0;
  bool fused = false;
  bool row_sum_once = false;
};

struct V3ProgramOptions {
  // The TPU generation whose code path runs: kernel.py's default block sizes (5, 6, 7; with
  // -1, a CPU's, a pass without block sizes cannot run) and its int16 mask positions (6 and
  // later). hd64's tuned block sizes are not here: an hd64 call must name both.
  int tpu_version = -1;
  // Compute steps (KV blocks of a query block) before giving up (kHang).
  int64_t max_steps = int64_t{1} << 22;
  // A correct second run of the same program (the schedule tolerance's test instrument,
  // oracle/v3_compare.h): what another implementation may compute. Default: the literal.
  V3SecondRun second_run{};
  // Where the call's path features go (schedule/path_features.h), when set.
  PathFeatures* features = nullptr;
  // false: the program's control flow, DMAs and positions only, without the blocks'
  // arithmetic (the output is then meaningless): what v3_path_features walks.
  bool compute = true;
  // Where the enclosure of every legal run's output goes (schedule/v3_enclosure.h), when set:
  // its terms are read, lo, hi and max_abs_v written. Costs about three more of the
  // arithmetic.
  V3Enclosure* enclosure = nullptr;
};

// Where the kernel does not return: it cannot trace (a Python assertion or error, a reshape
// that does not fit), raises when run (interpret mode's IndexError), or hangs.
class V3ProgramError : public std::runtime_error {
 public:
  enum class Kind { kTrace, kRun, kHang };
  V3ProgramError(Kind kind, const std::string& what) : std::runtime_error(what), kind_(kind) {}
  Kind kind() const { return kind_; }

 private:
  Kind kind_;
};

// "trace", "run" or "hang".
const char* v3_program_error_kind_name(V3ProgramError::Kind k);

// The (bq_sz, bkv_sz, bq_csz, bkv_csz) a kernel.py pass runs with: the call's tuple, else
// get_default_block_sizes on that generation (V3ProgramError kTrace off 5..8).
V3BlockSizes v3_pass_block_sizes(const V3Inputs& in, const V3Params& p, V3Pass pass,
                                 int tpu_version);

// Runs the dialect's program on a call its native validation accepts (any other call:
// std::invalid_argument naming what is malformed). Returns out [T, Hq, D] in q's dtype (every
// row: those no pass stores hold the queries, for hd64 zeros: its output is lanes 64..127 of
// the aliased q array, where the queries' padding lies) and the cache after the call. Throws
// V3ProgramError where the kernel does not return.
V3KernelResult v3_literal_attention(Dialect d, const V3Inputs& in, const V3Params& p,
                                    const V3ProgramOptions& options = {});

// The path features of a call its native validation accepts (schedule/path_features.h):
// tpu_version's program walked without its arithmetic (kernel.py's passes "decode",
// "prefill", "mixed"; kernel_hd64.py's "hd64"), with the call's own ("dtype.q.bfloat16",
// "window", "scale.k", ...). Where the program stops, "stops.trace", "stops.run" or
// "stops.hang" with the features up to there; an hd64 call without block sizes (whose tuned
// tables rpa does not hold) "stops.hd64_untuned"; a fetch block of no rows or tokens, which the
// schedule does not model, "stops.not_modelled"; blocks whose buffers this machine cannot
// allocate, "stops.too_large_to_walk"; a kernel.py pass without block sizes off
// generations 5-8, "stops.trace". Cost: the walk's DMAs, no dot.
PathFeatures v3_path_features(Dialect d, const V3Inputs& in, const V3Params& p, int tpu_version);

}  // namespace rpa
