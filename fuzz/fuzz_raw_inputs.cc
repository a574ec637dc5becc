// fuzz_raw_inputs: bytes -> an arbitrary call built without the generators (raw_call.h: any
// dtype, rank 0..5, dims, contents and parameter values) -> check_raw_call (raw_check.h):
// validation returns a verdict in both modes for every target profile, and whatever strict
// mode accepts runs through the dense reference and the tiled kernel with no sanitizer
// report. That is how we learn that strict mode rejects every input the implementations
// cannot run safely.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>

#include "fuzz/raw_call.h"
#include "fuzz/raw_check.h"
#include "fuzz/targets.h"

int rpa::fuzz::fuzz_raw_inputs(const uint8_t* data, size_t size) {
  const rpa::fuzz::RawCall c = rpa::fuzz::decode_raw_call(std::span<const uint8_t>(data, size));
  const rpa::fuzz::RawCheck r = rpa::fuzz::check_raw_call(c);
  if (r.problem) {
    std::fprintf(stderr, "fuzz_raw_inputs: %s\n", r.problem->c_str());
    std::abort();
  }
  return 0;
}
