// Choices read from, or written to, raw bytes: the libFuzzer side of build_case. Reads go
// front to back, each choice taking the fewest bytes that cover its range, little-endian
// (the Hypothesis strategies read them big-endian, ByteOrder);
// a source that runs out answers the low end of every range, and it never throws.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace rpa::props {

// How a choice of several bytes reads them. The fuzzers' bytes, the corpus and every spec hex
// are little-endian. A shrinker that orders byte strings lexicographically (Hypothesis)
// lowers the first byte of a choice first: read most significant first, that shrinks the
// value, where little-endian 0x00 0x01 (256) would be a local minimum.
enum class ByteOrder : uint8_t { kLittle, kBig };

class ByteSource {
 public:
  static constexpr bool kEncodes = false;
  explicit ByteSource(std::span<const uint8_t> bytes, ByteOrder order = ByteOrder::kLittle)
      : bytes_(bytes), order_(order) {}

  void num(int64_t& f, int64_t lo, int64_t hi, std::initializer_list<int64_t> favourites);
  void sized(int64_t& f, int64_t lo, int64_t hi, std::initializer_list<int64_t> favourites) {
    num(f, lo, hi, favourites);
  }
  // Fills `out` with the next bytes as they are (zeros once the bytes run out): the same as
  // one num(v, 0, 255) per byte, in one step.
  void raw(std::span<std::byte> out);

 private:
  std::span<const uint8_t> bytes_;
  ByteOrder order_;
  size_t pos_ = 0;
};

// The inverse of ByteSource: writes the bytes from which it reads the same values.
class ByteSink {
 public:
  static constexpr bool kEncodes = true;
  void num(int64_t& f, int64_t lo, int64_t hi, std::initializer_list<int64_t> favourites);
  void sized(int64_t& f, int64_t lo, int64_t hi, std::initializer_list<int64_t> favourites) {
    num(f, lo, hi, favourites);
  }
  void raw(std::span<std::byte> out);
  const std::vector<uint8_t>& bytes() const { return bytes_; }

 private:
  std::vector<uint8_t> bytes_;
};

// Walks a value's choices writing nothing: ok() is false once a choice lies outside its
// range. (It does not encode, so a pick among listed options that is not among them reads
// as the first: a caller compares the walked copy with the value too, as encodes() does.)
class RangeCheck {
 public:
  static constexpr bool kEncodes = false;
  void num(int64_t& f, int64_t lo, int64_t hi, std::initializer_list<int64_t>) {
    ok_ = ok_ && f >= lo && f <= std::max(hi, lo);
  }
  void sized(int64_t& f, int64_t lo, int64_t hi, std::initializer_list<int64_t> favourites) {
    num(f, lo, hi, favourites);
  }
  void raw(std::span<std::byte>) {}
  bool ok() const { return ok_; }

 private:
  bool ok_ = true;
};

// Whether `visit` can encode `value`: every choice in its range and every listed pick among
// its options (the walked copy equals the value).
template <class T, class Visit>
bool encodes(const T& value, Visit visit) {
  RangeCheck check;
  T copy = value;
  visit(check, copy);
  return check.ok() && copy == value;
}

// A value that `visit(io, value)` names choice by choice (a generic callable, run on a
// ByteSource or a ByteSink): decoded from bytes, or encoded to the bytes it decodes from.
template <class T, class Visit>
T decode_with(std::span<const uint8_t> bytes, Visit visit, ByteOrder order = ByteOrder::kLittle) {
  ByteSource source(bytes, order);
  T value;
  visit(source, value);
  return value;
}
template <class T, class Visit>
std::vector<uint8_t> encode_with(const T& value, Visit visit) {
  ByteSink sink;
  T copy = value;
  visit(sink, copy);
  return sink.bytes();
}

// Every dialect's spec hex and the production recipe's (`rpa gen --spec`):
// Bytes in lower-case hex, two digits a byte.
std::string to_hex(std::span<const uint8_t> bytes);
// The bytes of an even-length hex text (either case), nullopt if it is not one.
std::optional<std::vector<uint8_t>> from_hex(std::string_view hex);

}  // namespace rpa::props
