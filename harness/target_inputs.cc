#include "harness/target_inputs.h"

#include <algorithm>

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

std::optional<std::span<const uint8_t>> v3_payload(std::span<const uint8_t> bytes) {
  if (bytes.size() < 2 || bytes[0] != kV3Tag[0] || bytes[1] != kV3Tag[1]) return std::nullopt;
  return bytes.subspan(2);
}

std::vector<uint8_t> with_v3_tag(std::span<const uint8_t> payload) {
  std::vector<uint8_t> out(payload.size() + 2);
  out[0] = kV3Tag[0];
  out[1] = kV3Tag[1];
  std::copy(payload.begin(), payload.end(), out.begin() + 2);
  return out;
}

props::V3BuildOptions v3_differential_options() {
  props::V3BuildOptions o;
  o.max_seqs = 4;
  o.max_kv_len = 32;
  o.max_q_len = 8;
  o.max_head_dim = 8;
  return o;
}

props::V3BuildOptions v3_validate_options() {
  props::V3BuildOptions o;
  o.max_seqs = 8;
  o.max_kv_len = 64;
  o.max_q_len = 16;
  o.max_head_dim = 128;
  return o;
}

std::vector<props::V3MutationKind> v3_mutation_choices(
    const props::V3CaseSpec& spec, const std::vector<props::V3Mutation>& before) {
  // v3_mutations_compose is the one rule (its hd64 exception included: fuzz_validate once
  // decoded kv_len_overflows_int32 then kv_pages_per_block_nonpositive on an hd64 call).
  std::vector<props::V3MutationKind> out;
  std::vector<props::V3Mutation> trial = before;
  trial.push_back({});
  for (props::V3MutationKind k : props::all_v3_mutation_kinds()) {
    trial.back() = {k, 0};
    if (props::v3_mutations_compose(spec, trial)) out.push_back(k);
  }
  return out;
}

V3ValidateInput decode_v3_validate(std::span<const uint8_t> payload) {
  return props::decode_with<V3ValidateInput>(payload, [](auto& io, auto& v) { visit_v3_validate(io, v); });
}

std::vector<uint8_t> encode_v3_validate(const V3ValidateInput& v) {
  return with_v3_tag(props::encode_with(v, [](auto& io, auto& x) { visit_v3_validate(io, x); }));
}

std::optional<std::span<const uint8_t>> production_payload(std::span<const uint8_t> bytes) {
  if (bytes.size() < 2 || bytes[0] != kProductionTag[0] || bytes[1] != kProductionTag[1]) {
    return std::nullopt;
  }
  return bytes.subspan(2);
}

ProductionValidateInput decode_production_validate(std::span<const uint8_t> payload) {
  return props::decode_with<ProductionValidateInput>(
      payload, [](auto& io, auto& v) { visit_production_validate(io, v); });
}

std::vector<uint8_t> encode_production_validate(const ProductionValidateInput& v) {
  std::vector<uint8_t> payload =
      props::encode_with(v, [](auto& io, auto& x) { visit_production_validate(io, x); });
  payload.insert(payload.begin(), {kProductionTag[0], kProductionTag[1]});
  return payload;
}

V3DifferentialInput decode_v3_differential(std::span<const uint8_t> payload) {
  return props::decode_with<V3DifferentialInput>(
      payload, [](auto& io, auto& d) { visit_v3_differential(io, d); });
}

std::vector<uint8_t> encode_v3_differential(const V3DifferentialInput& d) {
  return with_v3_tag(props::encode_with(d, [](auto& io, auto& x) { visit_v3_differential(io, x); }));
}

std::string production_replay(const ProductionValidateInput& v) {
  return "production call " + props::production_spec_hex(v.spec) + "\n" + props::describe(v.spec) +
         "\n";
}

}  // namespace rpa::fuzz
