// How the v3 inputs decode (harness/v3_target_inputs.h).
#include "harness/v3_target_inputs.h"

#include "casegen/byte_source.h"

namespace rpa::fuzz {

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

V3ProductionInput decode_v3_production(std::span<const uint8_t> payload) {
  return props::decode_with<V3ProductionInput>(
      payload, [](auto& io, auto& v) { visit_v3_production(io, v); });
}

std::vector<uint8_t> encode_v3_production(const V3ProductionInput& v) {
  std::vector<uint8_t> payload =
      props::encode_with(v, [](auto& io, auto& x) { visit_v3_production(io, x); });
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

}  // namespace rpa::fuzz
