// How the jax inputs decode (harness/jax_target_inputs.h).
#include "harness/jax_target_inputs.h"

#include "casegen/byte_source.h"

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
  return props::decode_with<DifferentialInput>(bytes, [](auto& io, auto& d) { visit_differential(io, d); });
}

std::vector<uint8_t> encode_differential(const DifferentialInput& d) {
  return props::encode_with(d, [](auto& io, auto& x) { visit_differential(io, x); });
}

JaxProductionInput decode_jax_production(std::span<const uint8_t> payload) {
  return props::decode_with<JaxProductionInput>(
      payload, [](auto& io, auto& v) { visit_jax_production(io, v); });
}

std::vector<uint8_t> encode_jax_production(const JaxProductionInput& v) {
  std::vector<uint8_t> payload =
      props::encode_with(v, [](auto& io, auto& x) { visit_jax_production(io, x); });
  payload.insert(payload.begin(), {kProductionTag[0], kProductionTag[1]});
  return payload;
}

}  // namespace rpa::fuzz
