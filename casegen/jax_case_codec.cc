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

std::string spec_hex(const CaseSpec& spec) { return to_hex(encode_case(spec)); }

std::optional<CaseSpec> spec_from_hex(std::string_view hex) {
  const std::optional<std::vector<uint8_t>> bytes = from_hex(hex);
  if (!bytes) return std::nullopt;
  CaseSpec spec = decode_case(*bytes);
  if (encode_case(spec) != *bytes) return std::nullopt;
  return spec;
}

}  // namespace rpa::props
