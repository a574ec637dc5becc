// The numpy .npy array format: a strict parser of our own and a writer (DESIGN.md section 7).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/tensor.h"

namespace rpa {

// What the elements of an .npy array are: numbers of a DType, or fixed-width unicode
// strings (descr '<U{n}', UTF-32LE), which case files use only for q_dtype / kv_dtype.
enum class NpyKind : uint8_t { kNumeric, kUnicode };

struct NpyArray {
  NpyKind kind = NpyKind::kNumeric;
  // kNumeric: the stored element type. numpy has no descr for bfloat16 or float8, so this
  // is never one of those; a case file stores them as uint16 / uint8 bits.
  DType dtype = DType::kFloat32;
  int64_t unicode_width = 0;  // kUnicode: code points per element, the n of '<U{n}'
  Shape shape;
  std::vector<std::byte> data;  // element bytes, C order, little-endian

  // Bytes per element.
  int64_t itemsize() const;
  // kUnicode: element i (flat) with its trailing NULs removed, as numpy returns it.
  std::u32string unicode_at(int64_t i) const;
  // For messages: "float32 of shape (3, 4)", "unicode '<U8' of shape ()".
  std::string describe() const;
};

struct NpyParseResult {
  std::optional<NpyArray> value;  // set on success
  std::string error;              // one line, set on failure
};

// Parses a whole .npy file (versions 1.0, 2.0 and 3.0). Never throws on malformed input
// (only std::bad_alloc for the data copy) and allocates nothing sized by an unchecked header
// field: the data size the header implies must equal the bytes that follow it.
NpyParseResult parse_npy(std::span<const std::byte> bytes);
// Same, but moves the data out of `bytes` instead of copying it, so a large member is held
// once.
NpyParseResult parse_npy(std::vector<std::byte>&& bytes);

// The descr numpy writes for t ("<f4", "|u1"); nullopt for bfloat16 and float8, which numpy
// itself cannot name.
std::optional<std::string> npy_descr(DType t);

// Serializes a numeric array as .npy version 1.0, the header padded with spaces and '\n' so
// the data starts at a multiple of 64 bytes, as numpy does. Throws std::invalid_argument if
// t has no descr or data.size() does not match the shape.
std::vector<std::byte> write_npy(DType t, const Shape& shape, std::span<const std::byte> data);
// Serializes a 0-d unicode array holding s ('<U{len}', at least '<U1', as numpy does).
std::vector<std::byte> write_npy_unicode(std::u32string_view s);

}  // namespace rpa
