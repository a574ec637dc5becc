// fuzz_raw_inputs: bytes -> an arbitrary call built without the generators (raw_call.h: any
// dtype, rank 0..5, dims, contents and parameter values) -> validate() and validate_all() in
// both modes for every target profile must return a verdict (they agree on the first
// failure); whatever strict mode accepts for the default target must run through the dense
// reference and the tiled kernel (both schedules) with no sanitizer report. That is how we
// learn that strict mode rejects every input the implementations cannot run safely.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "fuzz/raw_call.h"
#include "kernel/paged_kv_view.h"
#include "kernel/target_profile.h"
#include "kernel/tiled_kernel.h"
#include "kernel/validate.h"
#include "properties/spec_model.h"
#include "reference/dense_reference.h"

namespace {

using namespace rpa;

// Work bound for running a strict-accepted call: sum over sequences of q_len * kv_len *
// Hq * D (logits and outputs) plus kv_len * Hc * D (the keys and values gathered). Strict
// mode accepts kv_len up to pages_per_seq * page_size, which 4096 elements of page table and
// pages can make millions of tokens: valid, but minutes of reference time. Larger calls are
// still validated; running them would exercise no other code, only spend the time that
// keeps this target above 5,000 executions a second under ASan.
constexpr int64_t kMaxWork = int64_t{1} << 16;

int64_t work(const Inputs& in) {
  const PagedKvView view(in);
  int64_t total = 0;
  for (int64_t s = 0; s < view.num_seqs(); ++s) {
    const int64_t kv = view.kv_len(s);
    total += view.q_len(s) * kv * view.num_q_heads() * view.head_dim();
    total += kv * 2 * view.num_kv_heads() * view.head_dim();
    if (total > kMaxWork) break;
  }
  return total;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const fuzz::RawCall c = fuzz::decode_raw_call(std::span<const uint8_t>(data, size));
  bool strict_accepts = false;
  for (Mode mode : {Mode::kStrict, Mode::kJax}) {
    for (const TargetProfile& target : target_profiles()) {
      const ValidateOptions options{.mode = mode, .target = target};
      const std::optional<Failure> got = validate(c.inputs, c.params, options);
      const std::vector<Failure> all = validate_all(c.inputs, c.params, options);
      const std::optional<Failure> first =
          all.empty() ? std::nullopt : std::optional<Failure>(all.front());
      if (first != got) {
        std::fprintf(stderr, "fuzz_raw_inputs: %s mode, %s: validate says %s, validate_all %s\n",
                     std::string(mode_name(mode)).c_str(), std::string(target.name).c_str(),
                     props::verdict_text(got).c_str(), props::verdict_text(first).c_str());
        std::abort();
      }
      if (mode == Mode::kStrict && target.name == default_target_profile().name) {
        strict_accepts = !got.has_value();
      }
    }
  }
  if (!strict_accepts || work(c.inputs) > kMaxWork) return 0;
  const ReferenceResult ref = dense_reference(c.inputs, c.params);
  for (bool literal : {false, true}) {
    const Tensor out =
        tiled_attention(c.inputs, c.params, {.threads = 1, .literal_schedule = literal});
    if (out.shape() != ref.out.shape() || out.dtype() != ref.out.dtype()) {
      std::fprintf(stderr, "fuzz_raw_inputs: kernel output %s, reference %s\n",
                   shape_repr(out.shape()).c_str(), shape_repr(ref.out.shape()).c_str());
      std::abort();
    }
  }
  return 0;
}
