// fuzz_npy: bytes as one bare .npy file -> the parser the .npz reader runs on every member
// (casefile/npy.h), with no zip around it, so every mutation lands in the magic, the
// version, the header-length field, the header text or the data. Both entry points (the
// span one and the moving one the .npz reader uses) must give the same verdict: a refusal
// in one non-empty line, or an array whose data is exactly shape x itemsize bytes and whose
// canonical form (what rpa writes for it) parses back to the same array. The input is a
// heap block of exactly its size, so a read outside it is an ASan report.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "casefile/npy.h"
#include "harness/targets.h"

namespace {

using namespace rpa;

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "fuzz_npy: %s\n", what.c_str());
  std::abort();
}

bool same_array(const NpyArray& a, const NpyArray& b) {
  return a.kind == b.kind && a.dtype == b.dtype && a.unicode_width == b.unicode_width &&
         a.shape == b.shape && a.data == b.data;
}

// The parser's promises about an array it returns.
void check_array(const NpyArray& a) {
  if (a.shape.size() > 64) fail("an array of rank " + std::to_string(a.shape.size()));
  int64_t numel = 1;
  for (int64_t d : a.shape) {
    if (d < 0) fail("a negative dimension in " + a.describe());
    numel *= d;  // the parser bounded the byte count, so this cannot overflow
  }
  if (static_cast<int64_t>(a.data.size()) != numel * a.itemsize()) {
    fail(a.describe() + " holds " + std::to_string(a.data.size()) + " bytes");
  }
}

// What rpa writes for the array parses back to it: numeric arrays through write_npy (which
// must also refuse one byte more than the shape holds), 0-d strings through
// write_npy_unicode (numpy's narrowest width, so compared as text).
void check_canonical_form(const NpyArray& a) {
  if (a.kind == NpyKind::kUnicode) {
    if (!a.shape.empty()) return;  // rpa writes no unicode arrays of rank > 0
    const NpyParseResult back = parse_npy(write_npy_unicode(a.unicode_at(0)));
    if (!back.value || back.value->kind != NpyKind::kUnicode || !back.value->shape.empty() ||
        back.value->unicode_at(0) != a.unicode_at(0)) {
      fail("the written form of " + a.describe() + " reads back differently: " + back.error);
    }
    return;
  }
  const std::vector<std::byte> written = write_npy(a.dtype, a.shape, a.data);
  const NpyParseResult back = parse_npy(written);
  if (!back.value || !same_array(*back.value, a)) {
    fail("the written form of " + a.describe() + " reads back differently: " + back.error);
  }
  std::vector<std::byte> longer = a.data;
  longer.emplace_back();
  try {
    (void)write_npy(a.dtype, a.shape, longer);
  } catch (const std::invalid_argument&) {
    return;
  }
  fail("write_npy wrote " + a.describe() + " with one byte too many");
}

}  // namespace

int rpa::fuzz::fuzz_npy(const uint8_t* data, size_t size) {
  const auto bytes = std::as_bytes(std::span<const uint8_t>(data, size));
  const NpyParseResult viewed = parse_npy(bytes);
  const NpyParseResult moved = parse_npy(std::vector<std::byte>(bytes.begin(), bytes.end()));
  if (viewed.error != moved.error || viewed.value.has_value() != moved.value.has_value() ||
      (viewed.value && !same_array(*viewed.value, *moved.value))) {
    fail("the two entry points disagree: '" + viewed.error + "' vs '" + moved.error + "'");
  }
  if (!viewed.value) {
    if (viewed.error.empty() || viewed.error.find('\n') != std::string::npos) {
      fail("a refusal must be one line, got '" + viewed.error + "'");
    }
    return 0;
  }
  check_array(*viewed.value);
  check_canonical_form(*viewed.value);
  return 0;
}
