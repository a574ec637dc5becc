// The jax dialect's generator options and seeded stream (casegen/jax_generate.h).
#include "casegen/jax_generate.h"

#include <algorithm>
#include <optional>
#include <string>
#include <string_view>

#include "casegen/random_source.h"

namespace rpa::props {

GenOptions gen_options(const GenRequest& request) {
  BuildOptions o;
  o.max_mutations = 0;
  const std::string_view name = request.profile;
  bool known = name.empty();
  if (name == "long") {
    o = long_context_options();
    known = true;
  } else if (name == "edge") {
    o.min_mutations = 1;
    o.max_mutations = 2;
    known = true;
  }
  if (const std::optional<Profile> p = named_profile(name)) {
    o.profile = *p;
    known = true;
  }
  if (!known) return {.options = std::nullopt, .error = unknown_profile(request.profile)};
  if (request.head_dim) {
    const int64_t d = *request.head_dim;
    if (d < 1 || d > o.max_head_dim) {
      return {.options = std::nullopt,
              .error = "head_dim takes 1 to " + std::to_string(o.max_head_dim) +
                       (name.empty() ? std::string() : " with profile " + request.profile) +
                       " (got " + std::to_string(d) + ")"};
    }
    o.min_head_dim = o.max_head_dim = d;
  }
  return {.options = o, .error = {}};
}

CaseSpec seeded_spec(uint64_t seed, int size, const BuildOptions& options) {
  RandomSource source(seed, std::clamp(size, 0, kFullSize));
  return build_case(source, options);
}

GenOptions strategy_options(const GenRequest& request, const DecodeBounds& bounds, bool valid,
                            std::span<const MutationKind> kinds) {
  GenOptions g = gen_options(request);
  if (!g.options) return g;
  BuildOptions& o = *g.options;
  narrow(o.max_seqs, bounds.max_seqs);
  narrow(o.max_kv_len, bounds.max_kv_len);
  narrow(o.max_head_dim, bounds.max_head_dim);
  narrow(o.max_page_size, bounds.max_page_size);
  o.flat_data = bounds.flat_data;
  if (o.min_head_dim > o.max_head_dim) {
    return {.options = std::nullopt,
            .error = "head_dim " + std::to_string(o.min_head_dim) + " is above max_head_dim " +
                     std::to_string(o.max_head_dim)};
  }
  o.min_seqs = std::min(o.min_seqs, o.max_seqs);
  o.min_kv_len = std::min(o.min_kv_len, o.max_kv_len);
  o.min_page_size = std::min(o.min_page_size, o.max_page_size);
  o.min_mutations = valid ? 0 : 1;
  o.max_mutations = valid ? 0 : 1;
  if (!valid) o.mutation_kinds.assign(kinds.begin(), kinds.end());
  return g;
}

}  // namespace rpa::props
