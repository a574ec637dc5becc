#include "casefile/npy.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <stdexcept>
#include <utility>

namespace rpa {
namespace {

// Array bytes are copied to and from files unchanged; a big-endian host would need swaps.
static_assert(std::endian::native == std::endian::little, "rpa assumes a little-endian host");

constexpr std::string_view kMagic = "\x93NUMPY";
constexpr size_t kVersionEnd = 8;  // magic, then major and minor version bytes
// numpy aligns the data to 64 bytes and leaves room for the first dimension to grow to 21
// digits (np.lib.format's ARRAY_ALIGN and GROWTH_AXIS_MAX_DIGITS); we match it byte for byte.
constexpr size_t kArrayAlign = 64;
constexpr size_t kGrowthAxisMaxDigits = 21;
// numpy allows 32 (64 since numpy 2) dimensions; a bound keeps hostile headers cheap.
constexpr size_t kMaxRank = 64;
// Quoting a few dozen characters of a bad descr or key identifies it; more only floods.
constexpr size_t kMaxEcho = 40;

struct NumericDescr {
  char kind;  // numpy's kind character: f, i, u, b
  int size;
  DType dtype;
};

constexpr std::array<NumericDescr, 12> kNumericDescrs = {{
    {'f', 2, DType::kFloat16},
    {'f', 4, DType::kFloat32},
    {'f', 8, DType::kFloat64},
    {'i', 1, DType::kInt8},
    {'i', 2, DType::kInt16},
    {'i', 4, DType::kInt32},
    {'i', 8, DType::kInt64},
    {'u', 1, DType::kUInt8},
    {'u', 2, DType::kUInt16},
    {'u', 4, DType::kUInt32},
    {'u', 8, DType::kUInt64},
    {'b', 1, DType::kBool},
}};

// Header strings are restricted to printable ASCII (see parse_string), so only length needs
// guarding before a string goes into a message.
std::string echo(std::string_view s) {
  if (s.size() <= kMaxEcho) return std::string(s);
  return std::string(s.substr(0, kMaxEcho)) + "...";
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }

bool is_identifier_char(char c) {
  return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

// Parses a non-negative decimal with no sign, no leading zero (Python 3 rejects "03") and no
// other decoration; nullopt if it is malformed or does not fit in int64.
std::optional<int64_t> parse_decimal(std::string_view digits) {
  if (digits.empty() || (digits.size() > 1 && digits[0] == '0')) return std::nullopt;
  int64_t value = 0;
  for (char c : digits) {
    if (!is_digit(c)) return std::nullopt;
    if (__builtin_mul_overflow(value, 10, &value) ||
        __builtin_add_overflow(value, c - '0', &value)) {
      return std::nullopt;
    }
  }
  return value;
}

struct Descr {
  NpyKind kind = NpyKind::kNumeric;
  DType dtype = DType::kFloat32;
  int64_t unicode_width = 0;
  int64_t itemsize = 0;
};

// Maps a descr string to an element type, or returns an error. numpy itself accepts '<', '='
// and '|' for every type ('=' and '|' mean native, and every host we build for is little-
// endian), and '>' where byte order is moot (one-byte types).
std::string parse_descr(std::string_view s, Descr* out) {
  const std::string unsupported = "unsupported descr '" + echo(s) + "'";
  if (s.size() < 2) return unsupported;
  const char order = s[0];
  const char kind = s[1];
  if (order != '<' && order != '>' && order != '=' && order != '|') return unsupported;
  const std::optional<int64_t> size = parse_decimal(s.substr(2));
  if (!size.has_value()) return unsupported;
  // ml_dtypes types have no numpy descr, so np.save writes an ml_dtypes array with a descr
  // that loses its element type: '<V2' for bfloat16, '<V1' for most float8 types and '<f1'
  // for float8_e5m2. Say how to save them so that the type is kept.
  const bool void_type = kind == 'V';
  if (void_type || (kind == 'f' && *size == 1)) {
    const std::string what =
        "descr '" + echo(s) + "' " + (void_type ? "is an opaque void type" : "names no numpy type");
    if (*size == 2) {
      return what +
             " (an ml_dtypes bfloat16 array saved directly?): save bfloat16 as its uint16 bits "
             "(x.view(np.uint16)) with a 0-d q_dtype/kv_dtype string member, or write the "
             "case with rpa.Case";
    }
    if (*size == 1) {
      return what +
             " (an ml_dtypes float8 array saved directly?): save float8 as its uint8 bits "
             "(x.view(np.uint8)) with a 0-d kv_dtype string member, or write the case with "
             "rpa.Case";
    }
    return what + ", which is not supported";
  }
  if (kind == 'U') {
    if (*size == 0) return unsupported;
    if (order == '>') return "big-endian data is not supported (descr '" + echo(s) + "')";
    // At most 18 digits fit in int64, so 4 * width could still overflow.
    if (__builtin_mul_overflow(*size, int64_t{4}, &out->itemsize)) return unsupported;
    out->kind = NpyKind::kUnicode;
    out->unicode_width = *size;
    return "";
  }
  for (const NumericDescr& d : kNumericDescrs) {
    if (d.kind != kind || d.size != *size) continue;
    if (order == '>' && d.size > 1) {
      return "big-endian data is not supported (descr '" + echo(s) + "')";
    }
    out->kind = NpyKind::kNumeric;
    out->dtype = d.dtype;
    out->itemsize = d.size;
    return "";
  }
  return unsupported;
}

struct Header {
  std::string descr;
  bool fortran_order = false;
  Shape shape;
};

// A strict parser of the Python dict literal numpy writes as the header:
//   {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
// Exactly those three keys in any order, single or double quotes, optional trailing commas,
// and Python's whitespace. It accepts a subset of what ast.literal_eval does: nothing numpy
// writes is missing, and what is left out (escapes, comments, hex, string concatenation)
// only makes room for surprises.
class HeaderParser {
 public:
  explicit HeaderParser(std::string_view text) : text_(text) {}

  // Returns an error (without the "malformed .npy header: " prefix) or "".
  std::string parse(Header* out) {
    bool seen_descr = false;
    bool seen_fortran = false;
    bool seen_shape = false;
    skip_space();
    if (!eat('{')) return expected("'{'");
    while (true) {
      skip_space();
      if (eat('}')) break;
      std::string key;
      if (peek() != '\'' && peek() != '"') return expected("a quoted key or '}'");
      if (std::string e = parse_string(&key); !e.empty()) return e;
      skip_space();
      if (!eat(':')) return expected("':'");
      skip_space();
      bool* seen = nullptr;
      std::string e;
      if (key == "descr") {
        seen = &seen_descr;
        if (peek() == '[') return "descr is a list: structured dtypes are not supported";
        if (peek() != '\'' && peek() != '"') return expected("a quoted descr");
        e = parse_string(&out->descr);
      } else if (key == "fortran_order") {
        seen = &seen_fortran;
        e = parse_bool(&out->fortran_order);
      } else if (key == "shape") {
        seen = &seen_shape;
        e = parse_shape(&out->shape);
      } else {
        return "unexpected key '" + echo(key) + "'";
      }
      if (*seen) return "duplicate key '" + key + "'";
      *seen = true;
      if (!e.empty()) return e;
      skip_space();
      if (eat(',')) continue;
      if (eat('}')) break;
      return expected("',' or '}'");
    }
    skip_space();
    if (pos_ != text_.size()) return "unexpected text after the dict at offset " + offset();
    if (!seen_descr) return "missing key 'descr'";
    if (!seen_fortran) return "missing key 'fortran_order'";
    if (!seen_shape) return "missing key 'shape'";
    return "";
  }

 private:
  char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }

  bool eat(char c) {
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }

  // Python's whitespace between tokens; newlines count too, as inside any bracket.
  void skip_space() {
    while (pos_ < text_.size()) {
      const char c = text_[pos_];
      if (c != ' ' && c != '\t' && c != '\f' && c != '\n' && c != '\r') break;
      ++pos_;
    }
  }

  std::string offset() const { return std::to_string(pos_); }

  std::string expected(std::string_view what) const {
    if (pos_ >= text_.size()) return "expected " + std::string(what) + " at the end";
    return "expected " + std::string(what) + " at offset " + offset();
  }

  std::string parse_string(std::string* out) {
    const char quote = text_[pos_++];
    const size_t start = pos_;
    while (pos_ < text_.size() && text_[pos_] != quote) {
      const auto c = static_cast<unsigned char>(text_[pos_]);
      // Printable ASCII only: no escapes to interpret, and anything quoted back in a
      // message stays on one line.
      if (c < 0x20 || c > 0x7E || c == '\\') {
        return "string has a backslash or a non-printable byte at offset " + offset();
      }
      ++pos_;
    }
    if (pos_ >= text_.size()) return "unterminated string";
    *out = std::string(text_.substr(start, pos_ - start));
    ++pos_;
    return "";
  }

  std::string_view word() {
    const size_t start = pos_;
    while (pos_ < text_.size() && is_identifier_char(text_[pos_])) ++pos_;
    return text_.substr(start, pos_ - start);
  }

  std::string parse_bool(bool* out) {
    const std::string_view w = word();
    if (w == "True") {
      *out = true;
    } else if (w == "False") {
      *out = false;
    } else {
      return "fortran_order must be True or False";
    }
    return "";
  }

  std::string parse_shape(Shape* out) {
    if (!eat('(')) return "shape must be a tuple of ints, e.g. (3, 4)";
    out->clear();
    bool trailing_comma = false;
    skip_space();
    while (!eat(')')) {
      if (!out->empty() && !trailing_comma) return expected("',' or ')' in shape");
      if (out->size() == kMaxRank) {
        return "shape has more than " + std::to_string(kMaxRank) + " dimensions";
      }
      const bool negative = eat('-');
      // A dimension ends at the first non-identifier character; "3.0", "3L", "0x3" and
      // "3_000" all fail to parse as a decimal below.
      const size_t start = pos_;
      while (pos_ < text_.size() && (is_identifier_char(text_[pos_]) || text_[pos_] == '.')) {
        ++pos_;
      }
      const std::string_view token = text_.substr(start, pos_ - start);
      const std::optional<int64_t> dim = parse_decimal(token);
      if (!dim.has_value()) {
        if (token.empty()) return expected("a dimension in shape");
        return "shape has a dimension that is not a non-negative int in int64 range: '" +
               echo(token) + "'";
      }
      if (negative && *dim != 0) return "shape has a negative dimension -" + std::string(token);
      out->push_back(*dim);
      skip_space();
      trailing_comma = eat(',');
      skip_space();
    }
    if (out->size() == 1 && !trailing_comma) {
      return "shape (" + std::to_string((*out)[0]) + ") is an int, not a tuple: write (" +
             std::to_string((*out)[0]) + ",)";
    }
    return "";
  }

  std::string_view text_;
  size_t pos_ = 0;
};

uint32_t read_le(std::span<const std::byte> bytes, size_t at, size_t width) {
  uint32_t v = 0;
  for (size_t k = 0; k < width; ++k) {
    v |= static_cast<uint32_t>(bytes[at + k]) << (8 * k);
  }
  return v;
}

// Everything but the data: the array's description and where its data starts.
struct Parsed {
  NpyArray array;  // data left empty
  size_t data_offset = 0;
  int64_t nbytes = 0;
};

std::string parse_prefix_and_header(std::span<const std::byte> bytes, Parsed* out) {
  if (bytes.size() < kMagic.size() ||
      std::memcmp(bytes.data(), kMagic.data(), kMagic.size()) != 0) {
    return "not an .npy array (bad magic; expected \"\\x93NUMPY\")";
  }
  if (bytes.size() < kVersionEnd) return "truncated .npy header";
  const auto major = static_cast<int>(bytes[6]);
  const auto minor = static_cast<int>(bytes[7]);
  if (minor != 0 || major < 1 || major > 3) {
    return "unsupported .npy format version " + std::to_string(major) + "." +
           std::to_string(minor) + " (1.0, 2.0 and 3.0 are)";
  }
  // Version 1.0 has a uint16 header length; 2.0 and 3.0 (utf-8 header) have uint32.
  const size_t len_width = major == 1 ? 2 : 4;
  const size_t header_start = kVersionEnd + len_width;
  if (bytes.size() < header_start) return "truncated .npy header";
  const size_t header_len = read_le(bytes, kVersionEnd, len_width);
  if (header_len > bytes.size() - header_start) {
    return "truncated .npy header: declares " + std::to_string(header_len) + " bytes, " +
           std::to_string(bytes.size() - header_start) + " follow";
  }
  const std::string_view text(reinterpret_cast<const char*>(bytes.data() + header_start),
                              header_len);
  Header header;
  if (std::string e = HeaderParser(text).parse(&header); !e.empty()) {
    return "malformed .npy header: " + e;
  }
  Descr descr;
  if (std::string e = parse_descr(header.descr, &descr); !e.empty()) return e;
  if (header.fortran_order) {
    return "fortran_order True is not supported: save a C-ordered array "
           "(np.ascontiguousarray)";
  }
  // Every partial product of the dimensions must fit too (readers of the Tensor multiply
  // dims in both directions), so zero dims count as one here: the bound then covers all of
  // them, and the byte count is zero anyway.
  int64_t bound = descr.itemsize;
  bool empty = false;
  for (int64_t d : header.shape) {
    empty = empty || d == 0;
    if (__builtin_mul_overflow(bound, std::max<int64_t>(d, 1), &bound)) {
      return "shape " + shape_repr(header.shape) + " of " + std::to_string(descr.itemsize) +
             "-byte elements overflows int64 bytes";
    }
  }
  out->nbytes = empty ? 0 : bound;
  out->data_offset = header_start + header_len;
  const size_t available = bytes.size() - out->data_offset;
  if (static_cast<uint64_t>(out->nbytes) > available) {
    return "truncated data: header says " + std::to_string(out->nbytes) + " bytes, member has " +
           std::to_string(available);
  }
  if (static_cast<uint64_t>(out->nbytes) < available) {
    return "trailing bytes: header says " + std::to_string(out->nbytes) +
           " bytes of data, member has " + std::to_string(available);
  }
  out->array.kind = descr.kind;
  out->array.dtype = descr.dtype;
  out->array.unicode_width = descr.unicode_width;
  out->array.shape = std::move(header.shape);
  return "";
}

std::vector<std::byte> write_with_header(std::string_view descr, const Shape& shape,
                                         std::span<const std::byte> data) {
  std::string header = "{'descr': '" + std::string(descr) +
                       "', 'fortran_order': False, 'shape': " + shape_repr(shape) + ", }";
  if (!shape.empty()) {
    const size_t digits = std::to_string(shape[0]).size();
    if (digits < kGrowthAxisMaxDigits) header.append(kGrowthAxisMaxDigits - digits, ' ');
  }
  // numpy switches to version 2.0 only when the header outgrows a uint16 length.
  size_t len_width = 2;
  size_t hlen = header.size() + 1;  // + '\n'
  size_t pad = kArrayAlign - (kVersionEnd + len_width + hlen) % kArrayAlign;
  if (hlen + pad > 0xFFFF) {
    len_width = 4;
    pad = kArrayAlign - (kVersionEnd + len_width + hlen) % kArrayAlign;
  }
  header.append(pad, ' ');
  header.push_back('\n');
  std::vector<std::byte> out;
  out.reserve(kVersionEnd + len_width + header.size() + data.size());
  for (char c : kMagic) out.push_back(static_cast<std::byte>(c));
  out.push_back(std::byte{static_cast<uint8_t>(len_width == 2 ? 1 : 2)});
  out.push_back(std::byte{0});
  for (size_t k = 0; k < len_width; ++k) {
    out.push_back(static_cast<std::byte>((header.size() >> (8 * k)) & 0xFF));
  }
  for (char c : header) out.push_back(static_cast<std::byte>(c));
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

}  // namespace

int64_t NpyArray::itemsize() const {
  return kind == NpyKind::kUnicode ? 4 * unicode_width : dtype_size(dtype);
}

std::u32string NpyArray::unicode_at(int64_t i) const {
  std::u32string s;
  const auto width = static_cast<size_t>(unicode_width);
  const size_t base = static_cast<size_t>(i) * width * 4;
  for (size_t k = 0; k < width; ++k) {
    s.push_back(static_cast<char32_t>(read_le(data, base + 4 * k, 4)));
  }
  while (!s.empty() && s.back() == U'\0') s.pop_back();
  return s;
}

std::string NpyArray::describe() const {
  const std::string what = kind == NpyKind::kUnicode
                               ? "unicode '<U" + std::to_string(unicode_width) + "'"
                               : std::string(dtype_name(dtype));
  return what + " of shape " + shape_repr(shape);
}

NpyParseResult parse_npy(std::span<const std::byte> bytes) {
  NpyParseResult result;
  Parsed parsed;
  result.error = parse_prefix_and_header(bytes, &parsed);
  if (!result.error.empty()) return result;
  const auto data = bytes.subspan(parsed.data_offset);
  parsed.array.data.assign(data.begin(), data.end());
  result.value = std::move(parsed.array);
  return result;
}

NpyParseResult parse_npy(std::vector<std::byte>&& bytes) {
  NpyParseResult result;
  Parsed parsed;
  result.error = parse_prefix_and_header(bytes, &parsed);
  if (!result.error.empty()) return result;
  // Shifting the data to the front in place keeps one copy of a large array in memory.
  bytes.erase(bytes.begin(), bytes.begin() + static_cast<ptrdiff_t>(parsed.data_offset));
  parsed.array.data = std::move(bytes);
  result.value = std::move(parsed.array);
  return result;
}

std::optional<std::string> npy_descr(DType t) {
  for (const NumericDescr& d : kNumericDescrs) {
    if (d.dtype != t) continue;
    return std::string{d.size == 1 ? '|' : '<', d.kind} + std::to_string(d.size);
  }
  return std::nullopt;
}

std::vector<std::byte> write_npy(DType t, const Shape& shape, std::span<const std::byte> data) {
  const std::optional<std::string> descr = npy_descr(t);
  if (!descr.has_value()) {
    throw std::invalid_argument("write_npy: numpy has no descr for " + std::string(dtype_name(t)));
  }
  if (static_cast<int64_t>(data.size()) != shape_numel(shape) * dtype_size(t)) {
    throw std::invalid_argument("write_npy: byte count does not match shape " + shape_repr(shape));
  }
  return write_with_header(*descr, shape, data);
}

std::vector<std::byte> write_npy_unicode(std::u32string_view s) {
  const size_t width = std::max<size_t>(s.size(), 1);
  std::vector<std::byte> data(4 * width);
  for (size_t k = 0; k < s.size(); ++k) {
    for (size_t b = 0; b < 4; ++b) {
      data[4 * k + b] = static_cast<std::byte>((static_cast<uint32_t>(s[k]) >> (8 * b)) & 0xFF);
    }
  }
  return write_with_header("<U" + std::to_string(width), Shape{}, data);
}

}  // namespace rpa
