// fuzz_differential: bytes -> a thread count, a schedule and a small generated valid CaseSpec
// (caps and why: target_inputs.h) -> the tiled kernel (default or literal schedule) against
// the dense reference within the case's tolerance. The definition holds on every generated
// case; where strict mode rejects one because the Pallas kernel departs from it
// (stale_kv_block, rows_not_computed), the literal schedule, which is the Pallas program, is
// compared on every other row (casegen/jax_departed_rows.h). On disagreement it prints the
// first mismatch, the case and the command that replays it (`rpa check --schedule literal`
// for the literal schedule), then aborts.
// An input tagged v3 (target_inputs.h: kV3Tag) is a thread count and a generated
// tpu-inference v3 case (either dialect) instead: v3_tiled_attention against the v3
// reference's kernel semantics (the updated cache bit for bit, the output within the
// float32-accumulator tolerance, oracle/v3_compare.h), and the same bits on the other thread
// count.
#include <cstdint>
#include <span>

#include "harness/input_families.h"
#include "harness/targets.h"

int rpa::fuzz::fuzz_differential(const uint8_t* data, size_t size) {
  const FamilyInput in = input_family(std::span<const uint8_t>(data, size));
  in.family->differential(in.payload);
  return 0;
}
