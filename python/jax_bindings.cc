// The jax dialect's part of the Python binding (python/jax_bindings.h): JAX's
// ragged_paged_attention calls into a Case and back, and the functions of its own (rpa validate,
// run and its kernel's grid, the generators and their spec model's verdicts, the bench
// workloads, the rule table). The GIL is released around everything that computes.
#include "python/jax_bindings.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "casegen/byte_source.h"
#include "casegen/generate.h"
#include "casegen/jax_generate.h"
#include "casegen/jax_case_codec.h"
#include "casegen/jax_materialize.h"
#include "casegen/jax_mutation.h"
#include "casegen/jax_spec_model.h"
#include "casegen/jax_production.h"
#include "casegen/production.h"
#include "casegen/random_source.h"
#include "core/dtype.h"
#include "harness/jax_workload.h"
#include "harness/workloads.h"
#include "service/case_options.h"
#include "service/jax_run_case.h"
#include "validation/jax_rule.h"
#include "validation/jax_validate.h"

using namespace nanobind::literals;

namespace rpa::py {
namespace {

constexpr const char* kArrayNames[] = {"q", "kv_pages", "kv_lens", "page_indices", "cu_q_lens",
                                       "num_seqs"};

}  // namespace

// A jax call's arrays and keywords into c (its dialect set).
void jax_to_case(const ArrayMap& arrays, const ParamMap& params, BorrowedCase& b) {
  Case& c = b.c;
  std::vector<bool> seen(std::size(kArrayNames));
  for (const auto& [name, typed] : arrays) {
    Tensor t = borrow_array(name, typed.first, typed.second, b.keep);
    if (name == "q") c.inputs.q = std::move(t);
    else if (name == "kv_pages") c.inputs.kv_pages = std::move(t);
    else if (name == "kv_lens") c.inputs.kv_lens = std::move(t);
    else if (name == "page_indices") c.inputs.page_indices = std::move(t);
    else if (name == "cu_q_lens") c.inputs.cu_q_lens = std::move(t);
    else if (name == "num_seqs") c.inputs.num_seqs = std::move(t);
    else if (name == "out") c.out = std::move(t);
    else if (name == "expected") c.expected = std::move(t);
    else throw std::invalid_argument("unknown array " + name);
    for (size_t k = 0; k < seen.size(); ++k) seen[k] = seen[k] || name == kArrayNames[k];
  }
  for (size_t k = 0; k < seen.size(); ++k) {
    if (!seen[k]) throw std::invalid_argument(std::string(kArrayNames[k]) + " is missing");
  }
  Params& p = c.params;
  p.sm_scale = opt_float(params, "sm_scale").value_or(1.0);
  p.sliding_window = opt_int(params, "sliding_window");
  p.soft_cap = opt_float(params, "soft_cap");
  p.mask_value = opt_float(params, "mask_value");
  p.k_scale = opt_float(params, "k_scale");
  p.v_scale = opt_float(params, "v_scale");
  p.num_kv_pages_per_block = opt_int(params, "num_kv_pages_per_block");
  p.num_queries_per_block = opt_int(params, "num_queries_per_block");
  p.vmem_limit_bytes = opt_int(params, "vmem_limit_bytes");
}

// A jax Case's arrays and keywords, for the keywords JAX's kernel takes.
void jax_from_case(Case& c, nb::dict& arrays, nb::dict& params) {
  arrays["q"] = typed(std::move(c.inputs.q));
  arrays["kv_pages"] = typed(std::move(c.inputs.kv_pages));
  arrays["kv_lens"] = typed(std::move(c.inputs.kv_lens));
  arrays["page_indices"] = typed(std::move(c.inputs.page_indices));
  arrays["cu_q_lens"] = typed(std::move(c.inputs.cu_q_lens));
  arrays["num_seqs"] = typed(std::move(c.inputs.num_seqs));
  const Params& p = c.params;
  params["sm_scale"] = p.sm_scale;
  params["sliding_window"] = p.sliding_window;
  params["soft_cap"] = p.soft_cap;
  params["mask_value"] = p.mask_value;
  params["k_scale"] = p.k_scale;
  params["v_scale"] = p.v_scale;
  params["num_kv_pages_per_block"] = p.num_kv_pages_per_block;
  params["num_queries_per_block"] = p.num_queries_per_block;
  params["vmem_limit_bytes"] = p.vmem_limit_bytes;
}

namespace {

using py::rejection_dict;  // python/marshal.h's, beside the jax rejection's overload

nb::object rejection_dict(const Rejection& r) {
  std::optional<RuleReport> rule;
  if (r.failure) rule = rule_report(*r.failure, r.mode);
  return rejection_dict(r.why, r.mode, rule);
}

nb::list failures_list(const std::vector<Failure>& failures, Mode mode) {
  nb::list out;
  for (const Failure& f : failures) {
    const RuleInfo& info = rule_info(f.rule);
    out.append(nb::make_tuple(std::string(info.name), f.message,
                              mode == Mode::kJax && info.jax_crash, rule_line(rule_report(f, mode))));
  }
  return out;
}

// rpa validate [--mode M] [--target T] [--all]: every failure (or the first), each as
// (rule, message, jax_crash, line).
nb::list validate_case(const ArrayMap& arrays, const ParamMap& params,
                       const std::vector<std::string>& flags) {
  CaseOptions a = parse_flags(flags, kValidateOptions);
  const BorrowedCase b = to_case(arrays, params);
  const Case& c = b.c;
  std::vector<Failure> failures;
  {
    nb::gil_scoped_release release;
    if (a.all) {
      failures = validate_all(c.inputs, c.params, a.validate);
    } else if (auto f = validate(c.inputs, c.params, a.validate)) {
      failures.push_back(std::move(*f));
    }
  }
  return failures_list(failures, a.validate.mode);
}

// rpa run: (None, (dtype, out)) or (rejection, None).
nb::tuple run(const ArrayMap& arrays, const ParamMap& params, const std::vector<std::string>& flags) {
  const CaseOptions a = run_args(flags);
  const BorrowedCase b = to_case(arrays, params);
  const Case& c = b.c;
  RunOutcome r;
  {
    nb::gil_scoped_release release;
    r = run_case(c, a);
  }
  if (r.rejection) return nb::make_tuple(rejection_dict(*r.rejection), nb::none());
  return nb::make_tuple(nb::none(), typed(std::move(*r.out)));
}

// The grid rpa run --impl kernel would use (its --json fields): (None, report) or
// (rejection, None); report {rows, kv_pages_per_block, queries_per_block, q_heads_per_block,
// combined_kv_heads_per_block, num_heads_blocks, num_q_blocks, vmem_bytes}. Nothing is computed.
nb::tuple plan(const ArrayMap& arrays, const ParamMap& params, const std::vector<std::string>& flags) {
  const CaseOptions a = run_args(flags);
  const BorrowedCase b = to_case(arrays, params);
  const Case& c = b.c;
  if (auto r = run_rejection(c, a)) {
    return nb::make_tuple(rejection_dict(*r), nb::none());
  }
  const RunReport report = run_report(c, a);
  const KernelPlan& p = *report.plan;
  nb::dict d;
  d["rows"] = report.rows;
  d["kv_pages_per_block"] = p.blocks.kv_pages_per_block;
  d["queries_per_block"] = p.blocks.queries_per_block;
  d["q_heads_per_block"] = p.heads.q_heads;
  d["combined_kv_heads_per_block"] = p.heads.combined_kv_heads;
  d["num_heads_blocks"] = p.num_heads_blks;
  d["num_q_blocks"] = p.num_q_blks;
  d["vmem_bytes"] = p.vmem_bytes;
  return nb::make_tuple(nb::none(), d);
}

// A generated spec as the Python side keeps it: (arrays, params, spec hex, description,
// strict verdict, jax verdict), each verdict (rule, message) or None.
// A production call passes its own prod: hex and description (its expansion has no jax or
// v3 hex).
nb::tuple generated(const props::CaseSpec& spec, const std::optional<std::string>& hex = {},
                    const std::optional<std::string>& description = {}) {
  const props::Materialized m = props::materialize(spec);
  auto verdict = [&](Mode mode) -> nb::object {
    const std::optional<Failure> f = props::expected_failure(m, mode);
    if (!f) return nb::none();
    return nb::make_tuple(std::string(rule_info(f->rule).name), f->message);
  };
  Case c;
  c.inputs = m.inputs;
  c.params = m.params;
  nb::tuple t = from_case(std::move(c));
  return nb::make_tuple(t[0], t[1], hex ? *hex : props::spec_hex(spec),
                        description ? *description : props::describe(spec), verdict(Mode::kStrict),
                        verdict(Mode::kJax));
}

props::BuildOptions options_or_throw(const props::GenOptions& g) {
  if (!g.options) throw std::invalid_argument(g.error);
  return *g.options;
}

// rpa gen --seed S [--profile P] [--size N] [--head-dim D].
nb::tuple gen(uint64_t seed, const std::string& profile, int size, std::optional<int64_t> head_dim) {
  if (size < 0 || size > props::kFullSize) {
    throw std::invalid_argument("size takes 0 to " + std::to_string(props::kFullSize) +
                                " (got " + std::to_string(size) + ")");
  }
  const props::BuildOptions o = options_or_throw(props::gen_options({profile, head_dim}));
  return generated(props::seeded_spec(seed, size, o));
}

// rpa gen --spec HEX.
nb::tuple gen_spec(const std::string& hex) {
  const std::optional<props::CaseSpec> spec = props::spec_from_hex(hex);
  if (!spec) {
    throw std::invalid_argument("spec takes the hex a property or rpa gen printed, whole (" +
                                std::to_string(hex.size()) + " characters given)");
  }
  return generated(*spec);
}

// The Hypothesis strategies' decoder: bytes through ByteSource (the fuzzers' decoder, each
// choice's bytes read most significant first so that Hypothesis's shrinking lowers values)
// under the options; None where an invalid case was asked for and none of the named mutations
// (any, when none is named) applied. data_seed: draw the arrays' data from it instead (the same
// shapes, sequences and keywords: rpa.campaign's calls per compile key).
nb::object decode(const nb::bytes& data, const std::string& profile,
                  std::optional<int64_t> head_dim, const props::DecodeBounds& bounds, bool valid,
                  const std::vector<std::string>& mutations, std::optional<uint32_t> data_seed) {
  std::vector<props::MutationKind> kinds;
  for (const std::string& name : mutations) {
    const auto all = props::all_mutation_kinds();
    const auto k = std::find_if(all.begin(), all.end(),
                                [&](props::MutationKind m) { return props::mutation_name(m) == name; });
    if (k == all.end()) throw std::invalid_argument("no mutation named " + name);
    kinds.push_back(*k);
  }
  const props::BuildOptions o =
      options_or_throw(props::strategy_options({profile, head_dim}, bounds, valid, kinds));
  const auto* p = static_cast<const uint8_t*>(data.data());
  props::CaseSpec spec = props::decode_case(std::span(p, data.size()), o, props::ByteOrder::kBig);
  if (!valid && spec.mutations.empty()) return nb::none();
  if (data_seed) spec.data_seed = *data_seed;  // the same call with other data
  return generated(spec);
}

// One of rpa bench's workloads ("decode", "prefill", "mixed") in a dtype.
nb::tuple workload(const std::string& name, const std::string& dtype) {
  const std::optional<DType> t = dtype_from_name(dtype);
  if (!t || !is_kernel_q_dtype(*t)) {
    throw std::invalid_argument("workload dtype takes float32 or bfloat16 (got " + dtype + ")");
  }
  bench::Workload w = bench::build_workload(bench::workload_spec(name, *t));
  Case c;
  c.inputs = std::move(w.inputs);
  c.params = w.params;
  return from_case(std::move(c));
}

// The rule table: (name, in jax mode, in strict mode, jax_crash, mutation names).
nb::list rules() {
  nb::list out;
  for (const RuleInfo& info : rule_table()) {
    nb::list mutations;
    for (props::MutationKind k : props::all_mutation_kinds()) {
      if (props::mutation_rule(k) == info.id) mutations.append(std::string(props::mutation_name(k)));
    }
    out.append(nb::make_tuple(std::string(info.name), info.in(Mode::kJax), info.in(Mode::kStrict),
                              info.jax_crash, mutations));
  }
  return out;
}

}  // namespace

nb::tuple jax_production_generated(const props::ProductionSpec& spec, const std::string& hex,
                                   const std::string& description) {
  return generated(props::production_case(spec), hex, description);
}

void bind_jax(nb::module_& m) {
  m.def("validate", &validate_case, "arrays"_a, "params"_a, "flags"_a);
  m.def("run", &run, "arrays"_a, "params"_a, "flags"_a);
  m.def("plan", &plan, "arrays"_a, "params"_a, "flags"_a);
  m.def("gen", &gen, "seed"_a, "profile"_a, "size"_a, "head_dim"_a.none());
  m.def("gen_spec", &gen_spec, "hex"_a);
  m.def("decode", &decode, "data"_a, "profile"_a, "head_dim"_a.none(), "bounds"_a, "valid"_a,
        "mutations"_a, "data_seed"_a.none() = nb::none());
  m.def("workload", &workload, "name"_a, "dtype"_a);
  m.def("rules", &rules);
}

}  // namespace rpa::py
