// Reads and writes cases as numpy .npz archives (DESIGN.md section 7).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "casefile/case.h"

namespace rpa {

struct CaseReadOptions {
  // The most bytes the reader allocates for array data, summed over members (the
  // uncompressed sizes the archive declares are checked against it before any read).
  int64_t max_bytes = int64_t{8} << 30;
};

struct CaseReadResult {
  std::optional<Case> value;  // set on success
  std::string error;          // one line, set on failure: "member 'q.npy': ..." etc.
};

// Parses an in-memory .npz. Never throws on malformed input, never aborts.
CaseReadResult read_case_bytes(std::span<const std::byte> bytes, const CaseReadOptions& options);
// Reads a file; a failure's error starts with the path: "case.npz: member 'q.npy': ...".
CaseReadResult read_case_file(const std::string& path, const CaseReadOptions& options);

// Serializes a case as an .npz with stored (uncompressed) members: float32 and int32
// arrays as such, bfloat16 as uint16 bits and float8 as uint8 bits with 0-d unicode
// members q_dtype / kv_dtype, parameters that are set as 0-d float64 / int64 arrays.
// Throws std::invalid_argument for a case no file can hold so that it reads back equal
// (bfloat16 or float8 index arrays; out / expected in a dtype other than q's).
std::vector<std::byte> write_case_bytes(const Case& c);
// Writes a file; returns false and sets *error (one line) on failure.
bool write_case_file(const std::string& path, const Case& c, std::string* error);

}  // namespace rpa
