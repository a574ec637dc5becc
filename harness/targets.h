// The fuzz targets' bodies, one per harness/<name>.cc: what LLVMFuzzerTestOneInput does for each
// (fuzz/entry.cc makes the engine's entry point of one), callable in-process too, so
// `rpa replay` runs corpus/fuzz/<name>/ through its target. A body returns 0; it reports a bug
// by aborting, as under libFuzzer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace rpa::fuzz {

int fuzz_validate(const uint8_t* data, size_t size);
int fuzz_raw_inputs(const uint8_t* data, size_t size);
int fuzz_differential(const uint8_t* data, size_t size);
int fuzz_case_file(const uint8_t* data, size_t size);
int fuzz_npy(const uint8_t* data, size_t size);

struct Target {
  std::string_view name;
  int (*body)(const uint8_t* data, size_t size);
};

// Every target, as fuzz/CMakeLists.txt's rpa_add_fuzzer lines list them.
inline constexpr Target kTargets[] = {
    {"fuzz_validate", fuzz_validate},
    {"fuzz_raw_inputs", fuzz_raw_inputs},
    {"fuzz_differential", fuzz_differential},
    {"fuzz_case_file", fuzz_case_file},
    {"fuzz_npy", fuzz_npy},
};

}  // namespace rpa::fuzz
