// A structure-aware mutator for fuzz_case_file (DESIGN.md section 10). Zip members carry
// CRCs and sizes, so a byte flip inside a member's .npy header is almost always refused by
// the zip layer before the .npy parser sees it. This mutator unzips the input, changes one
// member's bytes (the .npy header text with its length field kept or set to a boundary, the
// data, the whole member) or the member list (drop, duplicate, rename, reorder, switch
// stored / deflated), and zips the result again with valid CRCs and sizes. A fraction of the
// time, and whenever the input is not an archive it can read, it mutates the raw bytes
// instead, so the zip layer stays fuzzed too. fuzz/fuzz_case_file_mutator.cc hands these to
// libFuzzer (LLVMFuzzerCustomMutator / LLVMFuzzerCustomCrossOver).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace rpa::fuzz {

// Mutates data[0, size) in place into at most max_size bytes and returns the new size:
// libFuzzer's LLVMFuzzerMutate while fuzzing (it uses the dictionary and the comparisons it
// traced); the tests pass their own.
using ByteMutator = std::function<size_t(uint8_t* data, size_t size, size_t max_size)>;

struct ArchiveMember {
  std::string name;
  std::vector<uint8_t> data;  // uncompressed
  bool deflated = false;
};

// The members of an archive libzip reads whole (every CRC and size right), in order, each
// at most max_member_bytes uncompressed; nullopt otherwise.
std::optional<std::vector<ArchiveMember>> unzip_members(std::span<const uint8_t> bytes,
                                                        size_t max_member_bytes);

// A zip archive of the members in order, names as given (repeats allowed, which libzip's
// writer refuses), each stored or raw-deflated, with valid CRCs and sizes, no zip64.
std::vector<uint8_t> zip_members(std::span<const ArchiveMember> members);

// Out of 16 calls, this many mutate the raw bytes whatever the input.
inline constexpr unsigned kRawMutationsIn16 = 3;

// One mutation of data[0, size) in place, as LLVMFuzzerCustomMutator: returns the new size
// (at most max_size, which is at least size). The same arguments always give the same bytes.
size_t mutate_case_file(uint8_t* data, size_t size, size_t max_size, unsigned seed,
                        const ByteMutator& mutate_bytes);

// A cross-over of two inputs into out[0, max_out_size), as LLVMFuzzerCustomCrossOver: the
// members of the first with one of the second's put in (replacing a member of the same name,
// or at a random place); two raw byte ranges spliced when either is not an archive.
size_t cross_over_case_files(std::span<const uint8_t> first, std::span<const uint8_t> second,
                             uint8_t* out, size_t max_out_size, unsigned seed);

}  // namespace rpa::fuzz
