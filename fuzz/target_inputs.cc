#include "fuzz/target_inputs.h"

#include "properties/byte_source.h"

namespace rpa::fuzz {

props::BuildOptions validate_options() {
  props::BuildOptions o;
  o.max_seqs = 8;
  o.max_kv_len = 64;
  o.max_head_dim = 128;
  o.max_page_size = 16;
  return o;
}

props::BuildOptions differential_options() {
  props::BuildOptions o;
  o.max_mutations = 0;
  o.max_seqs = 4;
  o.max_kv_len = 32;
  o.max_head_dim = 8;
  o.max_page_size = 8;
  return o;
}

DifferentialInput decode_differential(std::span<const uint8_t> bytes) {
  props::ByteSource source(bytes);
  DifferentialInput d;
  visit_differential(source, d);
  return d;
}

std::vector<uint8_t> encode_differential(const DifferentialInput& d) {
  props::ByteSink sink;
  DifferentialInput copy = d;
  visit_differential(sink, copy);
  return sink.bytes();
}

}  // namespace rpa::fuzz
