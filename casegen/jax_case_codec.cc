#include "casegen/jax_case_codec.h"

#include "casegen/byte_source.h"

namespace rpa::props {

std::vector<uint8_t> encode_case(const CaseSpec& spec, const BuildOptions& options) {
  return encode_with(spec, [&](auto& io, auto& s) { visit_case(io, s, options); });
}

CaseSpec decode_case(std::span<const uint8_t> bytes, const BuildOptions& options,
                     ByteOrder order) {
  ByteSource source(bytes, order);
  return build_case(source, options);
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

std::string spec_hex(const CaseSpec& spec) { return to_hex(encode_case(spec)); }

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

std::optional<CaseSpec> spec_from_hex(std::string_view hex) {
  const std::optional<std::vector<uint8_t>> bytes = from_hex(hex);
  if (!bytes) return std::nullopt;
  CaseSpec spec = decode_case(*bytes);
  if (encode_case(spec) != *bytes) return std::nullopt;
  return spec;
}

}  // namespace rpa::props
