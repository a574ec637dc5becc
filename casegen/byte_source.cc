#include "casegen/byte_source.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace rpa::props {
namespace {

// Width of hi - lo in bytes (0 for a single value).
int width(uint64_t span) {
  int w = 0;
  while (span != 0) {
    ++w;
    span >>= 8;
  }
  return w;
}

// v - lo for lo <= v: any value up to 2^64 - 1, computed without wrapping (UBSan's
// unsigned-integer-overflow check, which OSS-Fuzz's flags turn on, reports a wrap).
uint64_t offset_from(int64_t lo, int64_t v) {
  if (lo >= 0 || v < 0) return static_cast<uint64_t>(v - lo);  // one sign: no overflow
  // lo < 0 <= v: v + |lo|, with |lo| = -(lo + 1) + 1 (INT64_MIN has no int64 negation).
  return static_cast<uint64_t>(v) + static_cast<uint64_t>(-(lo + 1)) + 1;
}

// lo + r for r <= offset_from(lo, hi): a value in [lo, hi], computed without wrapping.
int64_t add_offset(int64_t lo, uint64_t r) {
  if (lo >= 0) return static_cast<int64_t>(static_cast<uint64_t>(lo) + r);
  const uint64_t magnitude = static_cast<uint64_t>(-(lo + 1)) + 1;  // |lo|, up to 2^63
  if (r >= magnitude) return static_cast<int64_t>(r - magnitude);
  return lo + static_cast<int64_t>(r);  // r < |lo|: negative, and r fits an int64
}

}  // namespace

void ByteSource::num(int64_t& f, int64_t lo, int64_t hi, std::initializer_list<int64_t>) {
  if (hi < lo) hi = lo;
  const uint64_t span = offset_from(lo, hi);
  uint64_t raw = 0;
  const int w = width(span);
  for (int b = 0; b < w && pos_ < bytes_.size(); ++b) {
    const uint64_t byte = bytes_[pos_++];
    // Big-endian: the bytes read so far are the high ones (a missing tail reads as zeros).
    raw |= order_ == ByteOrder::kLittle ? byte << (8 * b) : byte << (8 * (w - 1 - b));
  }
  if (span != UINT64_MAX) raw %= span + 1;
  f = add_offset(lo, raw);
}

void ByteSource::raw(std::span<std::byte> out) {
  const size_t n = std::min(out.size(), bytes_.size() - pos_);
  if (n > 0) std::memcpy(out.data(), bytes_.data() + pos_, n);
  std::fill(out.begin() + static_cast<std::ptrdiff_t>(n), out.end(), std::byte{0});
  pos_ += n;
}

void ByteSink::raw(std::span<std::byte> out) {
  for (std::byte b : out) bytes_.push_back(std::to_integer<uint8_t>(b));
}

void ByteSink::num(int64_t& f, int64_t lo, int64_t hi, std::initializer_list<int64_t>) {
  if (hi < lo) hi = lo;
  // A value outside its range cannot be encoded: the spec was not built by build_case.
  if (f < lo || f > hi) std::abort();
  const uint64_t raw = offset_from(lo, f);
  const int w = width(offset_from(lo, hi));
  for (int b = 0; b < w; ++b) bytes_.push_back(static_cast<uint8_t>(raw >> (8 * b)));
}

std::string to_hex(std::span<const uint8_t> bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string hex;
  for (uint8_t b : bytes) {
    hex += kDigits[b >> 4];
    hex += kDigits[b & 15];
  }
  return hex;
}

std::optional<std::vector<uint8_t>> from_hex(std::string_view hex) {
  auto digit = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  if (hex.size() % 2 != 0) return std::nullopt;
  std::vector<uint8_t> bytes;
  for (size_t i = 0; i < hex.size(); i += 2) {
    const int hi = digit(hex[i]), lo = digit(hex[i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    bytes.push_back(static_cast<uint8_t>(hi * 16 + lo));
  }
  return bytes;
}

}  // namespace rpa::props
