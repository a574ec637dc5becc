// The fuzzing engine's entry point for one target: compiled once per target with
// RPA_FUZZ_TARGET set to its name (fuzz/CMakeLists.txt), calling that body (harness/targets.h).
#include <cstddef>
#include <cstdint>

#include "harness/targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return rpa::fuzz::RPA_FUZZ_TARGET(data, size);
}
