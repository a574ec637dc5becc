// fuzz_case_file: bytes as an .npz -> the case-file reader either rejects them with one line
// (never a crash, never an allocation larger than the file could hold) or loads a case whose
// written form reads back to the same case; a loaded case then gets a verdict in both modes.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernel/validate.h"
#include "oracle/case_file.h"

namespace {

using namespace rpa;

// Deflate expands at most 1032:1, so n bytes of archive hold at most 1032 n bytes of array
// data. The reader checks the sizes an archive declares against this cap before it
// allocates, so a member claiming more is refused, not allocated.
constexpr int64_t kMaxDeflateRatio = 1032;

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "fuzz_case_file: %s\n", what.c_str());
  std::abort();
}

CaseReadResult read(std::span<const std::byte> bytes) {
  return read_case_bytes(bytes, {.max_bytes = kMaxDeflateRatio * static_cast<int64_t>(bytes.size())});
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const CaseReadResult r = read(std::as_bytes(std::span<const uint8_t>(data, size)));
  if (!r.value) {
    if (r.error.empty() || r.error.find('\n') != std::string::npos) {
      fail("a rejection must be one line, got '" + r.error + "'");
    }
    return 0;
  }
  std::vector<std::byte> written;
  try {
    written = write_case_bytes(*r.value);
  } catch (const std::invalid_argument& e) {
    fail(std::string("the reader loaded a case the writer refuses: ") + e.what());
  }
  const CaseReadResult back = read(written);
  if (!back.value) fail("the written case does not read back: " + back.error);
  // Tensors compare by bytes; parameters through their written form, so NaN equals NaN.
  if (back.value->inputs != r.value->inputs || back.value->out != r.value->out ||
      back.value->expected != r.value->expected || write_case_bytes(*back.value) != written) {
    fail("the written case reads back as a different case");
  }
  for (Mode mode : {Mode::kStrict, Mode::kJax}) {
    (void)validate(r.value->inputs, r.value->params, {.mode = mode});
  }
  return 0;
}
