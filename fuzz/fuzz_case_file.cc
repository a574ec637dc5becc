// fuzz_case_file: bytes as an .npz -> the case-file reader either rejects them with one line
// (never a crash, never an allocation much larger than the file could hold) or loads a case whose
// written form reads back to the same case; a loaded case then gets a verdict in both modes.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "casefile/case_file.h"
#include "fuzz/targets.h"
#include "kernel/validate.h"

namespace {

using namespace rpa;

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "fuzz_case_file: %s\n", what.c_str());
  std::abort();
}

// The reader's own limits (8 GiB by default): a member that declares more than it holds must
// be refused without allocating what it declares. libFuzzer's malloc_limit_mb
// (corpus/fuzz/fuzz_case_file.options) fails any single allocation over 256 MB, 4000 times
// the largest input; deflate expands at most 1032:1, so a legitimate case is far below it.
CaseReadResult read(std::span<const std::byte> bytes) { return read_case_bytes(bytes, {}); }

}  // namespace

int rpa::fuzz::fuzz_case_file(const uint8_t* data, size_t size) {
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
