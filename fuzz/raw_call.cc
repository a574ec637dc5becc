#include "fuzz/raw_call.h"

#include "fuzz/v3_raw_call.h"

#include "properties/byte_source.h"

namespace rpa::fuzz {

RawCall decode_raw_call(std::span<const uint8_t> bytes) {
  props::ByteSource source(bytes);
  RawCall c;
  visit_raw_call(source, c);
  return c;
}

std::optional<std::vector<uint8_t>> encode_raw_call(const RawCall& c) {
  props::ByteSink sink;
  RawCall copy = c;
  if (!visit_raw_call(sink, copy)) return std::nullopt;
  return sink.bytes();
}

V3RawCall decode_v3_raw_call(std::span<const uint8_t> bytes) {
  props::ByteSource source(bytes);
  V3RawCall c;
  visit_v3_raw_call(source, c);
  return c;
}

std::optional<std::vector<uint8_t>> encode_v3_raw_call(const V3RawCall& c) {
  props::ByteSink sink;
  V3RawCall copy = c;
  if (!visit_v3_raw_call(sink, copy)) return std::nullopt;
  return sink.bytes();
}

}  // namespace rpa::fuzz
