#include "casegen/v3_build_case.h"

#include "casegen/byte_source.h"
#include "casegen/jax_case_codec.h"

namespace rpa::props {

std::vector<uint8_t> encode_v3_case(const V3CaseSpec& spec) {
  return encode_with(spec, [](auto& io, auto& s) { visit_v3_case(io, s, v3_widest_options()); });
}

V3CaseSpec decode_v3_case(std::span<const uint8_t> bytes) {
  ByteSource source(bytes);
  return build_v3_case(source, v3_widest_options());
}

bool v3_spec_encodes(const V3CaseSpec& spec) {
  return encodes(spec, [](auto& io, auto& s) { visit_v3_case(io, s, v3_widest_options()); });
}

std::string v3_spec_hex(const V3CaseSpec& spec) {
  return std::string(kV3SpecPrefix) + to_hex(encode_v3_case(spec));
}

std::optional<V3CaseSpec> v3_spec_from_hex(std::string_view text) {
  if (!text.starts_with(kV3SpecPrefix)) return std::nullopt;
  const std::optional<std::vector<uint8_t>> bytes = from_hex(text.substr(kV3SpecPrefix.size()));
  if (!bytes) return std::nullopt;
  V3CaseSpec spec = decode_v3_case(*bytes);
  if (encode_v3_case(spec) != *bytes) return std::nullopt;
  return spec;
}

}  // namespace rpa::props
