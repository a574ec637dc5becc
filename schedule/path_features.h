// A literal program's path features (DESIGN.md section 17; issue 46): for one call, which of
// the program's branches it takes and which block kinds its arithmetic meets, as name ->
// count. The kernel campaign sends first the calls that add features not yet covered, so that
// tens of interpret-mode calls still walk every branch the bounds can reach (a call that never
// starts a window inside a partial last KV block cannot find a bug there).
//
// Entries named "cost.*" are not features: what the call costs in TPU interpret mode, where each
// page copy a KV fetch starts is a DMA the interpreter runs and each one its static loops unroll
// is traced and compiled ("cost.traced_page_copies": kernel.py's `for i in range(bkv_p)` per
// pallas_call; "cost.run_page_copies": the copies the run starts; kernel.py's
// "cost.traced_compute_bodies": q compute chunks times kv heads, unrolled per pass). The
// campaign's cover prefers the cheaper of two calls that add the same features.
//
// Names are dotted paths, the program's part first: "mixed.kv_block.last",
// "decode.window.starts_inside_block", "positions.int16.within_16", "dtype.q.bfloat16". The
// literal programs record them as they walk (schedule/jax_program.h, v3_program.h); the
// helpers below classify one thing the same way for every program.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

namespace rpa {

class PathFeatures {
 public:
  void hit(std::string_view name, int64_t n = 1);
  // The count of `name` (0 when never hit).
  int64_t count(std::string_view name) const;
  const std::map<std::string, int64_t, std::less<>>& counts() const { return counts_; }
  size_t size() const { return counts_.size(); }

 private:
  std::map<std::string, int64_t, std::less<>> counts_;
};

// Block `idx` of the run [first, end) of blocks one loop walks: "only" (the run is one block),
// "first", "middle" or "last".
const char* block_run_kind(int64_t idx, int64_t first, int64_t end);

// Where the first key a row keeps under its sliding window lies, relative to the KV blocks of
// bkv tokens that cover the `effective` keys the row may see: "covers_all" (key 0 is kept),
// "starts_at_block_edge" (the first kept key opens a block), "starts_inside_partial_last_block"
// (inside the last block, which holds fewer than bkv keys), "starts_inside_last_block",
// "starts_inside_block" (another block), or "past_effective" (the window keeps no key).
const char* window_start_kind(int64_t first_kept_key, int64_t bkv, int64_t effective);

// How far a position (or position + window) comes to the largest value of its integer type,
// margin = max - value: "wraps" (< 0), "at" (0), "within_16", "within_256", "within_4096",
// "within_32768", "far".
const char* wrap_margin_bucket(int64_t margin);

}  // namespace rpa
