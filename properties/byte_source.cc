#include "properties/byte_source.h"

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

uint64_t span_of(int64_t lo, int64_t hi) {
  return static_cast<uint64_t>(hi) - static_cast<uint64_t>(lo);
}

}  // namespace

void ByteSource::num(int64_t& f, int64_t lo, int64_t hi, std::initializer_list<int64_t>) {
  if (hi < lo) hi = lo;
  const uint64_t span = span_of(lo, hi);
  uint64_t raw = 0;
  const int w = width(span);
  for (int b = 0; b < w && pos_ < bytes_.size(); ++b) {
    const uint64_t byte = bytes_[pos_++];
    // Big-endian: the bytes read so far are the high ones (a missing tail reads as zeros).
    raw |= order_ == ByteOrder::kLittle ? byte << (8 * b) : byte << (8 * (w - 1 - b));
  }
  if (span != UINT64_MAX) raw %= span + 1;
  f = static_cast<int64_t>(static_cast<uint64_t>(lo) + raw);
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
  const uint64_t raw = static_cast<uint64_t>(f) - static_cast<uint64_t>(lo);
  const int w = width(span_of(lo, hi));
  for (int b = 0; b < w; ++b) bytes_.push_back(static_cast<uint8_t>(raw >> (8 * b)));
}

}  // namespace rpa::props
