// fuzz_raw_inputs: bytes -> an arbitrary call built without the generators (jax_raw_call.h: any
// dtype, rank 0..5, dims, contents and parameter values) -> check_raw_call (raw_check.h):
// validation returns a verdict in both modes for every target profile, and whatever strict
// mode accepts runs through the dense reference and the tiled kernel with no sanitizer
// report. That is how we learn that strict mode rejects every input the implementations
// cannot run safely. An input tagged v3 (target_inputs.h: kV3Tag) is a raw tpu-inference v3
// call instead (v3_raw_call.h; check_v3_raw_call: both modes' verdicts, and a strict-accepted
// call's kernel against the v3 reference).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <span>

#include "casegen/jax_raw_call.h"
#include "harness/raw_check.h"
#include "harness/target_inputs.h"
#include "harness/targets.h"
#include "casegen/v3_raw_call.h"

int rpa::fuzz::fuzz_raw_inputs(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> bytes(data, size);
  const std::optional<std::span<const uint8_t>> v3 = rpa::fuzz::v3_payload(bytes);
  const rpa::fuzz::RawCheck r =
      v3 ? rpa::fuzz::check_v3_raw_call(rpa::fuzz::decode_v3_raw_call(*v3))
         : rpa::fuzz::check_raw_call(rpa::fuzz::decode_raw_call(bytes));
  if (r.problem) {
    std::fprintf(stderr, "fuzz_raw_inputs: %s\n", r.problem->c_str());
    std::abort();
  }
  return 0;
}
