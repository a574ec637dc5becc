// What fuzz_raw_inputs checks on one raw call of any dialect (harness/jax_raw_check.h,
// harness/v3_raw_check.h), as a value: the libFuzzer target
// aborts on a problem, `rpa campaign` records it as a finding. Sanitizer reports are the
// fuzzing build's part; this is the part every build can see.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace rpa::fuzz {

struct RawCheck {
  bool strict_accepts = false;  // strict mode, default target, accepted the call
  bool ran = false;             // ... and it was small enough to run the reference and kernel
  std::optional<std::string> problem;  // one line, when a check failed
};

// Work bound for running a strict-accepted call: sum over sequences of q_len * kv_len *
// Hq * D (logits and outputs) plus kv_len * Hc * D (the keys and values gathered). Strict
// mode accepts kv_len up to pages_per_seq * page_size, which 4096 elements of page table and
// pages can make millions of tokens: valid, but minutes of reference time. Larger calls are
// still validated, not run: a run over the bound would cost more than the thousands of
// executions a second fuzz_raw_inputs makes under ASan (the properties and
// fuzz_differential run the large valid shapes).
inline constexpr int64_t kMaxWork = int64_t{1} << 16;

}  // namespace rpa::fuzz
