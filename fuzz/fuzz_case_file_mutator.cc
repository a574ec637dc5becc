// fuzz_case_file's mutator hooks (fuzz/case_file_mutator.h), linked into its libFuzzer
// binary only: a replay build has no LLVMFuzzerMutate to call.
#include <cstddef>
#include <cstdint>
#include <span>

#include "fuzz/case_file_mutator.h"

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size,
                                          unsigned int seed) {
  return rpa::fuzz::mutate_case_file(data, size, max_size, seed, LLVMFuzzerMutate);
}

extern "C" size_t LLVMFuzzerCustomCrossOver(const uint8_t* data1, size_t size1,
                                            const uint8_t* data2, size_t size2, uint8_t* out,
                                            size_t max_out_size, unsigned int seed) {
  return rpa::fuzz::cross_over_case_files({data1, size1}, {data2, size2}, out, max_out_size, seed);
}
