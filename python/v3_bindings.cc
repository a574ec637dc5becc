// The tpu-inference v3 dialects' part of the Python binding (python/v3_bindings.h, DESIGN.md
// section 16): kernel.py's and kernel_hd64.py's calls into a Case and back, and the functions
// of their own (rpa validate and run on a v3 case, the check of a case's out and cache against
// the reference or the literal schedule, the v3 generators and the v3 spec model's verdicts,
// the mutations, the rule table). The GIL is released around everything that computes.
#include "python/v3_bindings.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "casegen/generate.h"
#include "casegen/production.h"
#include "casegen/v3_generate.h"
#include "casegen/v3_production.h"
#include "casegen/random_source.h"
#include "casegen/v3_build_case.h"
#include "casegen/v3_case_spec.h"
#include "casegen/v3_materialize.h"
#include "casegen/v3_mutation.h"
#include "casegen/v3_spec_model.h"
#include "casegen/v3_unreachable.h"
#include "core/dtype.h"
#include "core/v3_inputs.h"
#include "core/v3_params.h"
#include "oracle/v3_compare.h"
#include "reference/semantics.h"
#include "schedule/v3_program.h"
#include "service/case_options.h"
#include "service/v3_check_case.h"
#include "service/v3_run_case.h"
#include "validation/target_profile.h"
#include "validation/v3_rule.h"
#include "validation/v3_validate.h"

using namespace nanobind::literals;

namespace rpa::py {
namespace {

std::optional<V3BlockSizes> opt_blocks(const ParamMap& p, const char* key) {
  if (!p.contains(key) || p[key].is_none()) return std::nullopt;
  const auto v = nb::cast<std::vector<int64_t>>(p[key]);
  if (v.size() != 4) throw std::invalid_argument(std::string(key) + ": expected 4 ints");
  return V3BlockSizes{v[0], v[1], v[2], v[3]};
}

// The v3 dialects' arrays (DESIGN.md section 16), by the kernel's argument names.
constexpr std::pair<const char*, Tensor V3Inputs::*> kV3Arrays[] = {
    {"queries", &V3Inputs::queries},     {"keys", &V3Inputs::keys},
    {"values", &V3Inputs::values},       {"kv_cache", &V3Inputs::kv_cache},
    {"kv_lens", &V3Inputs::kv_lens},     {"page_indices", &V3Inputs::page_indices},
    {"cu_q_lens", &V3Inputs::cu_q_lens}, {"distribution", &V3Inputs::distribution}};

}  // namespace

// A v3 call's arrays and keywords into c (its dialect set).
void v3_to_case(const ArrayMap& arrays, const ParamMap& params, BorrowedCase& b) {
  Case& c = b.c;
  std::vector<bool> seen(std::size(kV3Arrays));
  for (const auto& [name, typed] : arrays) {
    Tensor t = borrow_array(name, typed.first, typed.second, b.keep);
    const auto* field = std::find_if(std::begin(kV3Arrays), std::end(kV3Arrays),
                                     [&](const auto& e) { return name == e.first; });
    if (field != std::end(kV3Arrays)) {
      c.v3_inputs.*(field->second) = std::move(t);
      seen[static_cast<size_t>(field - std::begin(kV3Arrays))] = true;
    } else if (name == "attention_sink") {
      c.v3_inputs.attention_sink = std::move(t);
    } else if (name == "out") {
      c.out = std::move(t);
    } else if (name == "expected") {
      c.expected = std::move(t);
    } else if (name == "kv_cache_out") {
      c.kv_cache_out = std::move(t);
    } else if (name == "expected_kv_cache") {
      c.expected_kv_cache = std::move(t);
    } else {
      throw std::invalid_argument("unknown array " + name);
    }
  }
  for (size_t k = 0; k < seen.size(); ++k) {
    if (!seen[k]) throw std::invalid_argument(std::string(kV3Arrays[k].first) + " is missing");
  }
  V3Params& p = c.v3_params;
  p.use_causal_mask = opt_bool(params, "use_causal_mask").value_or(true);
  p.update_kv_cache = opt_bool(params, "update_kv_cache").value_or(true);
  p.skip_kv_mask = opt_bool(params, "skip_kv_mask").value_or(false);
  p.sm_scale = opt_float(params, "sm_scale").value_or(1.0);
  p.sliding_window = opt_int(params, "sliding_window");
  p.soft_cap = opt_float(params, "soft_cap");
  if (params.contains("out_dtype") && !params["out_dtype"].is_none()) {
    const auto name = nb::cast<std::string>(params["out_dtype"]);
    p.out_dtype = dtype_from_name(name);
    if (!p.out_dtype) {
      throw std::invalid_argument("out_dtype: " + name + " is not a dtype rpa reads (" +
                                  dtype_list() + ")");
    }
  }
  p.mask_value = opt_float(params, "mask_value");
  p.q_scale = opt_float(params, "q_scale");
  p.k_scale = opt_float(params, "k_scale");
  p.v_scale = opt_float(params, "v_scale");
  p.chunk_prefill_size = opt_int(params, "chunk_prefill_size");
  p.d_block_sizes = opt_blocks(params, "d_block_sizes");
  p.p_block_sizes = opt_blocks(params, "p_block_sizes");
  p.m_block_sizes = opt_blocks(params, "m_block_sizes");
  p.num_kv_pages_per_block = opt_int(params, "num_kv_pages_per_block");
  p.num_queries_per_block = opt_int(params, "num_queries_per_block");
  p.vmem_limit_bytes = opt_int(params, "vmem_limit_bytes");
}

namespace {

nb::object opt_blocks_object(const std::optional<V3BlockSizes>& b) {
  if (!b) return nb::none();
  return nb::make_tuple((*b)[0], (*b)[1], (*b)[2], (*b)[3]);
}

}  // namespace

// A v3 Case's arrays and keywords, for the keywords its dialect's kernel takes.
void v3_from_case(Case& c, nb::dict& arrays, nb::dict& params) {
  for (const auto& [name, field] : kV3Arrays) arrays[name] = typed(std::move(c.v3_inputs.*field));
  if (c.v3_inputs.attention_sink) arrays["attention_sink"] = typed(std::move(*c.v3_inputs.attention_sink));
  if (c.kv_cache_out) arrays["kv_cache_out"] = typed(std::move(*c.kv_cache_out));
  if (c.expected_kv_cache) arrays["expected_kv_cache"] = typed(std::move(*c.expected_kv_cache));
  const V3Params& p = c.v3_params;
  params["sm_scale"] = p.sm_scale;
  params["sliding_window"] = p.sliding_window;
  params["soft_cap"] = p.soft_cap;
  params["mask_value"] = p.mask_value;
  params["q_scale"] = p.q_scale;
  params["k_scale"] = p.k_scale;
  params["v_scale"] = p.v_scale;
  params["chunk_prefill_size"] = p.chunk_prefill_size;
  params["vmem_limit_bytes"] = p.vmem_limit_bytes;
  if (c.dialect == Dialect::kTpuInferenceV3Hd64) {
    params["num_kv_pages_per_block"] = p.num_kv_pages_per_block;
    params["num_queries_per_block"] = p.num_queries_per_block;
    return;
  }
  params["use_causal_mask"] = p.use_causal_mask;
  params["update_kv_cache"] = p.update_kv_cache;
  params["skip_kv_mask"] = p.skip_kv_mask;
  params["out_dtype"] = p.out_dtype ? nb::cast(std::string(dtype_name(*p.out_dtype))) : nb::none();
  params["d_block_sizes"] = opt_blocks_object(p.d_block_sizes);
  params["p_block_sizes"] = opt_blocks_object(p.p_block_sizes);
  params["m_block_sizes"] = opt_blocks_object(p.m_block_sizes);
}

namespace {

// rpa run on a v3 case (service/v3_run_case.h's v3_run_case, as the command runs it): (None,
// ((dtype, out), (dtype, kv_cache)), None), (rejection, None, None), or with the literal
// schedule (None, None, "KIND: why") where the kernel does not return.
nb::tuple v3_run(const ArrayMap& arrays, const ParamMap& params, const std::vector<std::string>& flags) {
  const CaseOptions a = run_args(flags);
  const BorrowedCase b = to_case(arrays, params);
  const Case& c = b.c;
  V3RunOutcome r;
  {
    nb::gil_scoped_release release;
    r = v3_run_case(c, a);
  }
  if (r.rejection) {
    const V3Rejection& j = *r.rejection;
    nb::dict d;
    d["why"] = "rejected in " + std::string(j.mode == Mode::kStrict ? "strict" : "native") +
               " mode by " + rule_line(rule_report(j.failure, j.mode));
    d["rule"] = std::string(v3_rule_info(j.failure.rule).name);
    d["message"] = j.failure.message;
    d["mode"] = j.mode == Mode::kStrict ? "strict" : "native";
    return nb::make_tuple(d, nb::none(), nb::none());
  }
  if (r.not_applicable) throw std::invalid_argument(*r.not_applicable);
  if (r.kernel_stop) return nb::make_tuple(nb::none(), nb::none(), *r.kernel_stop);
  return nb::make_tuple(nb::none(), nb::make_tuple(typed(std::move(*r.out)), typed(std::move(*r.kv_cache))),
                        nb::none());
}

// Mode::kJax is a v3 dialect's native mode.
Mode v3_mode(const std::string& name) {
  // As rpa validate --mode: jax is the native mode's other name (the jax dialect's native).
  if (name == "native" || name == "jax") return Mode::kJax;
  if (name == "strict") return Mode::kStrict;
  throw std::invalid_argument("mode takes native, jax or strict (got " + name + ")");
}

Semantics semantics_or_throw(const std::string& name) {
  const std::optional<Semantics> s = parse_semantics(name);
  if (!s) throw std::invalid_argument("semantics takes kernel or reference (got " + name + ")");
  return *s;
}

// rpa validate for a v3 case: every failure (all) or the first, each as (rule, message, crash,
// the line rpa validate prints).
nb::list v3_validate_case(const ArrayMap& arrays, const ParamMap& params, const std::string& mode,
                          bool all) {
  const Mode m = v3_mode(mode);
  const BorrowedCase b = to_case(arrays, params);
  const Case& c = b.c;
  std::vector<V3Failure> failures;
  {
    nb::gil_scoped_release release;
    if (all) {
      failures = v3_validate_all(c.dialect, c.v3_inputs, c.v3_params, m);
    } else if (auto f = v3_validate(c.dialect, c.v3_inputs, c.v3_params, m)) {
      failures.push_back(std::move(*f));
    }
  }
  nb::list out;
  for (const V3Failure& f : failures) {
    const V3RuleInfo& info = v3_rule_info(f.rule);
    out.append(nb::make_tuple(std::string(info.name), f.message, m == Mode::kJax && info.crash,
                              rule_line(rule_report(f, m))));
  }
  return out;
}

// The case's out and kv_cache_out against the v3 dense reference in `semantics`
// (oracle/v3_compare.h; precondition: strict validation accepts the case), or with oracle
// "literal" against the literal v3 schedule on `target`'s generation under the schedule
// tolerance (precondition: native validation accepts it; rpa.check validates first, and a
// case that breaks the precondition is a ValueError here, never a read past its arrays): the comparison's fields and its
// one-line description; "kernel_stop" ("KIND: why") where the literal schedule says the kernel
// does not return (then nothing is compared); against the reference, the check's power
// (rejects_zero, min_detectable_key_weight, key_weight_every_row, and "power", the phrase rpa
// check prints).
nb::dict v3_check_case(const ArrayMap& arrays, const ParamMap& params,
                       const std::string& semantics, const std::string& oracle,
                       const std::string& target) {
  const Semantics s = semantics_or_throw(semantics);
  if (oracle != "reference" && oracle != "literal") {
    throw std::invalid_argument("oracle must be \"reference\" or \"literal\", not \"" + oracle + "\"");
  }
  const std::optional<TargetProfile> profile = find_target_profile(target);
  if (!profile) throw std::invalid_argument("unknown target \"" + target + "\"");
  const BorrowedCase b = to_case(arrays, params);
  const Case& c = b.c;
  if (!c.out || !c.kv_cache_out) throw std::invalid_argument("the case has no out and kv_cache_out");
  const bool literal = oracle == "literal";
  if (const auto f = v3_validate(c.dialect, c.v3_inputs, c.v3_params, literal ? Mode::kJax : Mode::kStrict)) {
    throw std::invalid_argument(std::string("the ") + oracle + " oracle needs a case " +
                                (literal ? "native" : "strict") + " validation accepts; " +
                                std::string(v3_rule_info(f->rule).name) + ": " + f->message);
  }
  V3OutCheck r;
  std::string line;
  {
    nb::gil_scoped_release release;
    r = v3_check_out(c, s, literal, V3ProgramOptions{.tpu_version = tpu_generation(*profile)});
    line = r.kernel_stop ? v3_kernel_stop_line(*r.kernel_stop) : describe_v3_comparison(r.cmp);
  }
  const V3Comparison& cmp = r.cmp;
  const std::optional<std::string>& stop = r.kernel_stop;
  nb::dict d;
  d["kernel_stop"] = stop ? nb::cast(*stop) : nb::none();
  d["agree"] = !stop && cmp.agree();
  d["cache_equal"] = cmp.cache_equal;
  d["cache_differences"] = cmp.cache_differences;
  d["compared"] = cmp.compared;
  d["past_float32"] = cmp.past_float32;  // (row, head) pairs left out (finding 28)
  d["mismatches"] = cmp.mismatches;
  d["max_abs_err"] = cmp.max_abs_err;
  d["tolerance_at_max"] = cmp.tolerance_at_max;
  d["max_share"] = cmp.max_share;
  d["max_allowed"] = cmp.max_allowed;
  if (cmp.first) {
    const V3OutMismatch& f = *cmp.first;
    d["first"] = nb::make_tuple(f.row, f.head, f.col, f.got, f.want, f.allowed);
  } else {
    d["first"] = nb::none();
  }
  if (cmp.cache_first) {
    const V3CacheMismatch& f = *cmp.cache_first;
    d["cache_first"] = nb::make_tuple(f.element, f.page, f.slot, f.kv_head, f.value, f.lane, f.got,
                                      f.want);
  } else {
    d["cache_first"] = nb::none();
  }
  d["text"] = line;
  // The check's power (oracle/v3_compare.h), as rpa check states it: against the reference
  // and the literal schedule; None where it is not (a kernel that does not return) or where
  // nothing is guaranteed (an infinite key weight).
  const bool power = !stop && cmp.power_stated;
  const auto weight = [&](double w) {
    return power && std::isfinite(w) ? nb::cast(w) : nb::none();
  };
  d["rejects_zero"] = power ? nb::cast(cmp.rejects_zero) : nb::none();
  d["min_detectable_key_weight"] = weight(cmp.min_detectable_key_weight);
  d["key_weight_every_row"] = weight(cmp.key_weight_every_row);
  d["power"] = power ? nb::cast(v3_power_phrase(cmp)) : nb::none();
  return d;
}

// A generated v3 spec as the Python side keeps it: (arrays, params, spec hex, description,
// None, None): v3 generated cases are valid by construction.
nb::tuple v3_generated(const props::V3CaseSpec& spec, const std::optional<std::string>& hex = {},
                       const std::optional<std::string>& description = {},
                       props::Contents contents = props::Contents::kData) {
  const props::V3Materialized m = props::materialize_v3(spec, contents);
  Case c;
  c.dialect = spec.dialect;
  c.v3_inputs = m.inputs;
  c.v3_params = m.params;
  nb::tuple t = from_case(std::move(c));
  // A spec the codec cannot encode (a window at an integer edge) has no hex.
  const std::string own = props::v3_spec_encodes(spec) ? props::v3_spec_hex(spec) : "";
  return nb::make_tuple(t[0], t[1], hex ? *hex : own,
                        description ? *description : props::describe(spec), nb::none(), nb::none());
}

// A v3 dialect's name (tpu_inference_v3, tpu_inference_v3_hd64), else invalid_argument.
Dialect v3_dialect_or_throw(const std::string& dialect) {
  const std::optional<Dialect> d = parse_dialect(dialect);
  if (!d || !is_v3(*d)) {
    throw std::invalid_argument("dialect takes tpu_inference_v3 or tpu_inference_v3_hd64 (got " +
                                dialect + ")");
  }
  return *d;
}

// The v3 Hypothesis strategies' decoder (casegen/generate.h, decode_v3_strategy): the case
// and, for an invalid one, one named mutation (any, when none is named) with what the v3 spec
// model says strict and native mode must report; None where an invalid case was asked for and
// none of the named mutations applies. A mutated case has no spec (its description names the
// mutation). data_seed: as decode's. zeros: q, keys, values and the cache all zeros, not
// drawn (the campaign's candidates, whose path features and shapes need no data: a long-tier
// call's draw fills up to 270 MB).
nb::object v3_decode(const nb::bytes& data, const std::string& dialect, const std::string& profile,
                     std::optional<int64_t> head_dim, const props::DecodeBounds& bounds, bool valid,
                     const std::vector<std::string>& mutations, std::optional<uint32_t> data_seed,
                     bool zeros) {
  const props::Contents contents = zeros ? props::Contents::kZeros : props::Contents::kData;
  const Dialect d = v3_dialect_or_throw(dialect);
  std::vector<props::V3MutationKind> kinds;
  for (const std::string& name : mutations) {
    const auto all = props::all_v3_mutation_kinds();
    const auto k = std::find_if(all.begin(), all.end(), [&](props::V3MutationKind m) {
      return props::v3_mutation_name(m) == name;
    });
    if (k == all.end()) throw std::invalid_argument("no v3 mutation named " + name);
    if (!props::v3_mutation_in_dialect(*k, d)) {
      throw std::invalid_argument("the v3 mutation " + name + " is not written for " + dialect);
    }
    kinds.push_back(*k);
  }
  const props::V3GenOptions g = props::v3_strategy_options(d, {profile, head_dim}, bounds);
  if (!g.options) throw std::invalid_argument(g.error);
  const auto* p = static_cast<const uint8_t*>(data.data());
  props::V3Drawn drawn =
      props::decode_v3_strategy(std::span(p, data.size()), *g.options, valid, kinds);
  if (data_seed) drawn.spec.data_seed = *data_seed;  // the same call with other data
  if (valid) return v3_generated(drawn.spec, std::nullopt, std::nullopt, contents);
  if (drawn.mutations.empty()) return nb::none();
  const props::V3MutatedCase m = props::mutate_v3(drawn.spec, drawn.mutations, contents);
  auto verdict = [&](Mode mode) -> nb::object {
    const std::optional<V3Failure> f = props::expected_v3_failure(m.declared, mode);
    if (!f) return nb::none();
    return nb::make_tuple(std::string(v3_rule_info(f->rule).name), f->message);
  };
  Case c;
  c.dialect = drawn.spec.dialect;
  c.v3_inputs = m.call.inputs;
  c.v3_params = m.call.params;
  nb::tuple t = from_case(std::move(c));
  return nb::make_tuple(t[0], t[1], nb::none(),
                        props::describe(drawn.spec) + "\n  mutated by " +
                            props::describe_v3_mutations(drawn.mutations),
                        verdict(Mode::kStrict), verdict(Mode::kJax));
}

// The names of the v3 mutations written for a dialect (each named after the rule it breaks).
std::vector<std::string> v3_mutation_names(const std::string& dialect) {
  const Dialect d = v3_dialect_or_throw(dialect);
  std::vector<std::string> out;
  for (props::V3MutationKind k : props::all_v3_mutation_kinds()) {
    if (props::v3_mutation_in_dialect(k, d)) out.emplace_back(props::v3_mutation_name(k));
  }
  return out;
}

// The (rule, reason) pairs strict mode of a v3 dialect enforces that no input reaches
// (casegen/v3_unreachable.h).
std::vector<std::pair<std::string, std::string>> v3_strict_unreachable(const std::string& dialect) {
  const Dialect d = v3_dialect_or_throw(dialect);
  std::vector<std::pair<std::string, std::string>> out;
  for (const props::V3Unreachable& u : props::v3_strict_unreachable()) {
    if (u.dialect == d) out.emplace_back(std::string(v3_rule_info(u.rule).name), u.reason);
  }
  return out;
}

// rpa gen --dialect D --seed S [--profile P] [--size N] [--head-dim H].
nb::tuple v3_gen(uint64_t seed, const std::string& dialect, const std::string& profile, int size,
                 std::optional<int64_t> head_dim) {
  const std::optional<Dialect> d = parse_dialect(dialect);
  if (!d || !is_v3(*d)) {
    throw std::invalid_argument("dialect takes jax, tpu_inference_v3 or tpu_inference_v3_hd64 (got " +
                                dialect + ")");
  }
  if (size < 0 || size > props::kFullSize) {
    throw std::invalid_argument("size takes 0 to " + std::to_string(props::kFullSize) +
                                " (got " + std::to_string(size) + ")");
  }
  const props::V3GenOptions g = props::v3_gen_options(*d, {profile, head_dim});
  if (!g.options) throw std::invalid_argument(g.error);
  return v3_generated(props::seeded_v3_spec(seed, size, *g.options));
}

// rpa gen --spec v3:HEX.
nb::tuple v3_gen_spec(const std::string& hex) {
  const std::optional<props::V3CaseSpec> spec = props::v3_spec_from_hex(hex);
  if (!spec) {
    throw std::invalid_argument("spec takes the v3:hex a property or rpa gen printed, whole (" +
                                std::to_string(hex.size()) + " characters given)");
  }
  return v3_generated(*spec);
}

// A v3 dialect's rule table: (name, in native mode, in strict mode, crash, []).
nb::list v3_rules(const std::string& dialect) {
  const std::optional<Dialect> d = parse_dialect(dialect);
  if (!d || !is_v3(*d)) throw std::invalid_argument("not a v3 dialect: " + dialect);
  nb::list out;
  for (const V3RuleInfo& info : v3_rule_table()) {
    out.append(nb::make_tuple(std::string(info.name), info.in(*d, Mode::kJax),
                              info.in(*d, Mode::kStrict), info.crash, nb::list()));
  }
  return out;
}

}  // namespace

nb::tuple v3_production_generated(const props::ProductionSpec& spec, const std::string& hex,
                                  const std::string& description) {
  return v3_generated(props::production_v3_case(spec), hex, description);
}

void bind_v3(nb::module_& m) {
  m.def("v3_validate", &v3_validate_case, "arrays"_a, "params"_a, "mode"_a, "all"_a);
  m.def("v3_run", &v3_run, "arrays"_a, "params"_a, "flags"_a);
  m.def("v3_check", &v3_check_case, "arrays"_a, "params"_a, "semantics"_a, "oracle"_a, "target"_a);
  m.def("v3_gen", &v3_gen, "seed"_a, "dialect"_a, "profile"_a, "size"_a, "head_dim"_a.none());
  m.def("v3_gen_spec", &v3_gen_spec, "hex"_a);
  m.def("v3_strict_unreachable", &v3_strict_unreachable, "dialect"_a);
  m.def("v3_mutation_names", &v3_mutation_names, "dialect"_a);
  m.def("v3_decode", &v3_decode, "data"_a, "dialect"_a, "profile"_a, "head_dim"_a.none(), "bounds"_a,
        "valid"_a, "mutations"_a, "data_seed"_a.none() = nb::none(), "zeros"_a = false);
  m.def("v3_rules", &v3_rules, "dialect"_a);
}

}  // namespace rpa::py
