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
#include <span>

#include "harness/input_families.h"
#include "harness/raw_check.h"
#include "harness/targets.h"

int rpa::fuzz::fuzz_raw_inputs(const uint8_t* data, size_t size) {
  const FamilyInput in = input_family(std::span<const uint8_t>(data, size));
  const RawCheck r = in.family->raw(in.payload);
  if (r.problem) {
    std::fprintf(stderr, "fuzz_raw_inputs: %s\n", r.problem->c_str());
    std::abort();
  }
  return 0;
}
