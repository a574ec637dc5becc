#include "casegen/jax_raw_call.h"

#include "casegen/v3_raw_call.h"

#include "casegen/byte_source.h"

namespace rpa::fuzz {

RawCall decode_raw_call(std::span<const uint8_t> bytes) {
  return props::decode_with<RawCall>(bytes, [](auto& io, auto& c) { visit_raw_call(io, c); });
}

std::optional<std::vector<uint8_t>> encode_raw_call(const RawCall& c) {
  bool inside = true;
  std::vector<uint8_t> bytes =
      props::encode_with(c, [&](auto& io, auto& x) { inside = visit_raw_call(io, x); });
  if (!inside) return std::nullopt;
  return bytes;
}

V3RawCall decode_v3_raw_call(std::span<const uint8_t> bytes) {
  return props::decode_with<V3RawCall>(bytes, [](auto& io, auto& c) { visit_v3_raw_call(io, c); });
}

std::optional<std::vector<uint8_t>> encode_v3_raw_call(const V3RawCall& c) {
  bool inside = true;
  std::vector<uint8_t> bytes =
      props::encode_with(c, [&](auto& io, auto& x) { inside = visit_v3_raw_call(io, x); });
  if (!inside) return std::nullopt;
  return bytes;
}

}  // namespace rpa::fuzz
