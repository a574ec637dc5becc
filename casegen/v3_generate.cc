// The v3 dialects' generator options, strategy decoder and seeded stream
// (casegen/v3_generate.h).
#include "casegen/v3_generate.h"

#include <algorithm>
#include <optional>
#include <string>
#include <string_view>

#include "casegen/byte_source.h"
#include "casegen/random_source.h"

namespace rpa::props {

V3GenOptions v3_gen_options(Dialect d, const GenRequest& request) {
  V3BuildOptions o;
  o.dialect = d;
  const std::string_view name = request.profile;
  bool known = name.empty();
  if (name == "long") {
    o = v3_long_options();
    known = true;
  } else if (name == kLongTierProfile) {
    o = v3_long_tier_options();
    known = true;
  } else if (name == "edge") {
    o = v3_edge_options();
    known = true;
  }
  o.dialect = d;
  if (const std::optional<Profile> p = named_profile(name)) {
    o.profile = *p;
    known = true;
  }
  if (!known) return {.options = std::nullopt, .error = unknown_profile(request.profile)};
  if (request.head_dim) {
    const int64_t hd = *request.head_dim;
    if (d == Dialect::kTpuInferenceV3Hd64 && hd != 64) {
      return {.options = std::nullopt,
              .error = "head_dim takes 64 alone with dialect tpu_inference_v3_hd64 (got " +
                       std::to_string(hd) + ")"};
    }
    const int64_t max_d = std::min(o.max_head_dim, kV3MaxHeadDim);
    if (hd < 1 || hd > max_d) {
      return {.options = std::nullopt,
              .error = "head_dim takes 1 to " + std::to_string(max_d) +
                       (name.empty() ? std::string() : " with profile " + request.profile) +
                       " (got " + std::to_string(hd) + ")"};
    }
    o.head_dim = hd;
  }
  return {.options = o, .error = {}};
}

V3GenOptions v3_strategy_options(Dialect d, const GenRequest& request, const DecodeBounds& bounds) {
  V3GenOptions g = v3_gen_options(d, request);
  if (!g.options) return g;
  V3BuildOptions& o = *g.options;
  if (request.profile == kLongTierProfile && bounds.max_kv_len > 0 &&
      bounds.max_kv_len < kV3MinTierKvLen) {
    return {.options = std::nullopt,
            .error = "max_kv_len takes " + std::to_string(kV3MinTierKvLen) +
                     " or more with profile long32k (got " + std::to_string(bounds.max_kv_len) +
                     ")"};
  }
  narrow(o.max_seqs, bounds.max_seqs);
  narrow(o.max_kv_len, bounds.max_kv_len);
  narrow(o.max_head_dim, bounds.max_head_dim);
  if (o.head_dim && *o.head_dim > o.max_head_dim) {
    return {.options = std::nullopt,
            .error = "head_dim " + std::to_string(*o.head_dim) + " is above max_head_dim " +
                     std::to_string(o.max_head_dim)};
  }
  if (d == Dialect::kTpuInferenceV3Hd64 && bounds.max_head_dim > 0 && bounds.max_head_dim < 64) {
    return {.options = std::nullopt,
            .error = "max_head_dim takes 64 or more with dialect tpu_inference_v3_hd64 (got " +
                     std::to_string(bounds.max_head_dim) + ")"};
  }
  o.min_seqs = std::min(o.min_seqs, o.max_seqs);
  o.min_kv_len = std::min(o.min_kv_len, o.max_kv_len);
  o.max_q_len = std::min(o.max_q_len, o.max_kv_len);
  o.integer_edges = bounds.integer_edges;
  return g;
}

V3Drawn decode_v3_strategy(std::span<const uint8_t> bytes, const V3BuildOptions& options,
                           bool valid, std::span<const V3MutationKind> kinds) {
  return decode_with<V3Drawn>(
      bytes,
      [&](auto& io, V3Drawn& v) {
        visit_v3_case(io, v.spec, options);
        if (valid) return;
        std::vector<V3MutationKind> choices;
        for (V3MutationKind k : kinds.empty() ? all_v3_mutation_kinds() : kinds) {
          if (v3_mutation_applies(k, v.spec)) choices.push_back(k);
        }
        if (choices.empty()) return;
        int64_t k = 0, arg = 0;
        io.num(k, 0, static_cast<int64_t>(choices.size()) - 1, {});
        io.num(arg, 0, kMaxV3MutationArg, {0});
        v.mutations.push_back({choices[static_cast<size_t>(k)], arg});
      },
      ByteOrder::kBig);
}

V3CaseSpec seeded_v3_spec(uint64_t seed, int size, const V3BuildOptions& options) {
  RandomSource source(seed, std::clamp(size, 0, kFullSize));
  return build_v3_case(source, options);
}

}  // namespace rpa::props
