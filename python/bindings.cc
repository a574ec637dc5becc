// The compiled module of the Python package (rpa._rpa, DESIGN.md section 15): the top layer,
// beside cli/ (neither includes the other), which nothing includes. It holds no logic of its
// own: it turns Python's arrays into the library's Case (borrowing their memory, through
// python/marshal.h), calls the service the commands call (validation, service/'s run and check
// of a case, the case-file reader and writer, the generators), and turns Tensors back into
// numpy arrays. Option lists are the commands' own flags, parsed by the service's
// parse_case_options, so every option means what it means on the command line. The GIL is
// released around everything that computes.
//
// The registry of the Python marshalling: the one python/ file that names every dialect. It
// lists each dialect's DialectMarshal entry (python/marshal.h) and defines each dialect's own
// functions (python/jax_bindings.h, python/v3_bindings.h); the functions here are generic and
// reach a dialect through dialect_marshal. Adding a dialect adds its entry here
// (docs/layout.md's checklist).
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "casefile/case_file.h"
#include "casefile/npy.h"
#include "casegen/byte_source.h"
#include "casegen/generate.h"
#include "casegen/production.h"
#include "casegen/production_reach.h"
#include "casegen/random_source.h"
#include "core/dialect.h"
#include "python/jax_bindings.h"
#include "python/marshal.h"
#include "python/v3_bindings.h"
#include "service/case_options.h"
#include "service/check_case.h"
#include "service/path_features.h"
#include "validation/target_profile.h"

using namespace nanobind::literals;

namespace rpa::py {
namespace {

constexpr std::array<DialectMarshal, 3> kRegistry = {{
    {.dialect = Dialect::kJax,
     .to_case = jax_to_case,
     .from_case = jax_from_case,
     .production_generated = jax_production_generated},
    {.dialect = Dialect::kTpuInferenceV3,
     .to_case = v3_to_case,
     .from_case = v3_from_case,
     .production_generated = v3_production_generated},
    {.dialect = Dialect::kTpuInferenceV3Hd64,
     .to_case = v3_to_case,
     .from_case = v3_from_case,
     .production_generated = v3_production_generated},
}};

}  // namespace

const DialectMarshal& dialect_marshal(Dialect d) {
  for (const DialectMarshal& e : kRegistry) {
    if (e.dialect == d) return e;
  }
  throw std::logic_error("dialect " + std::string(dialect_name(d)) + " has no Python marshalling");
}

namespace {

using py::rejection_dict;  // python/marshal.h's, beside the check outcome's overload

nb::object rejection_dict(const CheckOutcome& o) {
  const std::optional<RejectedRule>& r = o.findings.rejected_rule;
  return rejection_dict(o.detail, o.findings.rejected_mode,
                        r ? std::optional<RuleReport>(r->report) : std::nullopt);
}

// rpa check LABEL: (verdict, detail, json, text, rejection); json and text for a computed
// verdict (the --json object and the lines rpa check prints, naming LABEL).
nb::tuple check(const ArrayMap& arrays, const ParamMap& params, const std::vector<std::string>& flags,
                const std::string& label) {
  CaseOptions a = parse_flags(flags, kCheckOptions, label);
  if (std::string err = check_options_error(a); !err.empty()) throw std::invalid_argument(err);
  const BorrowedCase b = to_case(arrays, params);
  const Case& c = b.c;
  CheckOutcome o;
  std::string json, text;
  {
    nb::gil_scoped_release release;
    o = check_case(c, a);
    if (o.compared()) {
      json = check_json(o, a);
      text = check_text(o, a);
    }
  }
  if (o.verdict == CheckVerdict::kNotApplicable) throw std::invalid_argument(o.detail);
  return nb::make_tuple(std::string(verdict_name(o.verdict)), o.detail,
                        o.compared() ? nb::cast(json) : nb::none(),
                        o.compared() ? nb::cast(text) : nb::none(),
                        o.verdict == CheckVerdict::kRejected ? rejection_dict(o) : nb::none());
}

nb::tuple read_case(const std::string& path, int64_t max_bytes) {
  CaseReadResult r;
  {
    nb::gil_scoped_release release;
    r = read_case_file(path, {.max_bytes = max_bytes});
  }
  if (!r.value) throw std::invalid_argument(r.error);
  return from_case(std::move(*r.value));
}

nb::tuple read_case_from_bytes(const nb::bytes& data, int64_t max_bytes) {
  const auto* p = static_cast<const std::byte*>(data.data());
  CaseReadResult r = read_case_bytes(std::span(p, data.size()), {.max_bytes = max_bytes});
  if (!r.value) throw std::invalid_argument(r.error);
  return from_case(std::move(*r.value));
}

// The .npy parser alone (tools/make_case_file_seeds.py checks fuzz_npy's seeds with it):
// what the array is ("float32 of shape (3,)"), or ValueError with the parser's line.
std::string parse_npy_bytes(const nb::bytes& data) {
  const auto* p = static_cast<const std::byte*>(data.data());
  const NpyParseResult r = parse_npy(std::span(p, data.size()));
  if (!r.value) throw std::invalid_argument(r.error);
  return r.value->describe();
}

nb::bytes write_case_to_bytes(const ArrayMap& arrays, const ParamMap& params) {
  const BorrowedCase b = to_case(arrays, params);
  const Case& c = b.c;
  const std::vector<std::byte> bytes = write_case_bytes(c);
  return nb::bytes(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

void write_case(const std::string& path, const ArrayMap& arrays, const ParamMap& params) {
  const BorrowedCase b = to_case(arrays, params);
  const Case& c = b.c;
  std::string err;
  if (!write_case_file(path, c, &err)) throw std::invalid_argument(err);
}

// rpa.path_features: {name: count} of the program a case's call runs on the target
// (service/path_features.h); "" is the default target.
nb::dict path_features(const ArrayMap& arrays, const ParamMap& params, const std::string& target) {
  const std::optional<TargetProfile> profile =
      target.empty() ? std::optional<TargetProfile>(default_target_profile()) : find_target_profile(target);
  if (!profile) throw std::invalid_argument("unknown target \"" + target + "\"");
  const BorrowedCase b = to_case(arrays, params);
  PathFeatures f;
  {
    nb::gil_scoped_release release;
    f = case_path_features(b.c, *profile);
  }
  nb::dict d;
  for (const auto& [name, count] : f.counts()) d[nb::str(name.c_str())] = count;
  return d;
}

// rpa gen --profile production [--dialect D] --seed S, or --spec prod:HEX: the call, its spec
// the prod: hex; jax calls with the spec model's verdicts, as every generated jax case.
nb::tuple production_generated(const props::ProductionSpec& spec) {
  const std::string hex = props::production_spec_hex(spec), text = props::describe(spec);
  return dialect_marshal(spec.dialect).production_generated(spec, hex, text);
}

Dialect dialect_or_throw(const std::string& dialect) {
  const std::optional<Dialect> d = parse_dialect(dialect);
  if (!d) {
    throw std::invalid_argument("dialect takes jax, tpu_inference_v3 or tpu_inference_v3_hd64 (got " +
                                dialect + ")");
  }
  return *d;
}

nb::tuple production_gen(uint64_t seed, const std::string& dialect) {
  return production_generated(props::seeded_production_spec(seed, dialect_or_throw(dialect)));
}

nb::tuple production_gen_spec(const std::string& hex) {
  const std::optional<props::ProductionSpec> spec = props::production_spec_from_hex(hex);
  if (!spec) {
    throw std::invalid_argument("spec takes the prod: hex rpa gen printed, whole (" +
                                std::to_string(hex.size()) + " characters given)");
  }
  return production_generated(*spec);
}

// The Hypothesis strategy's decoder for production calls: the bytes (most significant first)
// through the recipe's visit for the dialect, then the call as production_gen makes it.
nb::tuple production_decode(const nb::bytes& data, const std::string& dialect) {
  const Dialect d = dialect_or_throw(dialect);
  const std::span<const uint8_t> bytes(reinterpret_cast<const uint8_t*>(data.c_str()), data.size());
  return production_generated(props::decode_with<props::ProductionSpec>(
      bytes, [d](auto& io, props::ProductionSpec& s) { props::visit_production(io, s, d); },
      props::ByteOrder::kBig));
}

// A production recipe without its arrays (cheap): what a caller picking calls to run reads.
nb::dict production_recipe(uint64_t seed, const std::string& dialect) {
  const props::ProductionSpec s = props::seeded_production_spec(seed, dialect_or_throw(dialect));
  nb::dict d;
  d["spec"] = props::production_spec_hex(s);
  d["description"] = props::describe(s);
  d["num_seqs"] = static_cast<int64_t>(s.seqs.size());
  d["head_dim"] = s.shape().head_dim;
  d["max_kv_len"] = s.max_kv_len();
  d["memory_bytes"] = s.memory_bytes();
  d["macs"] = s.macs();
  return d;
}

// The reach table (casegen/production_reach.h) of the calls these prod: hexes name:
// (its text, the catalog items none of them reached as "dialect: item").
nb::tuple production_reach(const std::vector<std::string>& specs, const std::string& indent) {
  props::ProductionReach reach;
  for (const std::string& hex : specs) {
    const std::optional<props::ProductionSpec> s = props::production_spec_from_hex(hex);
    if (!s) throw std::invalid_argument("not a prod: spec: " + hex.substr(0, 40));
    reach.add(*s);
  }
  return nb::make_tuple(reach.text(indent), reach.never_reached());
}

}  // namespace
}  // namespace rpa::py

NB_MODULE(_rpa, m) {
  using namespace rpa;
  using namespace rpa::py;
  // At interpreter exit Hypothesis's caches still hold strategies that reference this
  // module's functions, which nanobind would report as leaks; real leaks are measured
  // (tests/python: RSS over 10,000 checks).
  nb::set_leak_warnings(false);
  m.doc() = "rpa's C++ library (the CLI's): validation, the dense reference, the tiled kernel, "
            "the oracle, case files and generators. Use the rpa package, not this module.";
  nb::class_<props::DecodeBounds>(m, "DecodeBounds")
      .def(nb::init<>())
      .def_rw("max_seqs", &props::DecodeBounds::max_seqs)
      .def_rw("max_kv_len", &props::DecodeBounds::max_kv_len)
      .def_rw("max_head_dim", &props::DecodeBounds::max_head_dim)
      .def_rw("max_page_size", &props::DecodeBounds::max_page_size)
      .def_rw("integer_edges", &props::DecodeBounds::integer_edges)
      .def_rw("flat_data", &props::DecodeBounds::flat_data);
  bind_jax(m);
  bind_v3(m);
  m.def("check", &check, "arrays"_a, "params"_a, "flags"_a, "label"_a);
  m.def("read_case", &read_case, "path"_a, "max_bytes"_a);
  m.def("read_case_bytes", &read_case_from_bytes, "data"_a, "max_bytes"_a);
  m.def("parse_npy", &parse_npy_bytes, "data"_a);
  m.def("write_case", &write_case, "path"_a, "arrays"_a, "params"_a);
  m.def("write_case_bytes", &write_case_to_bytes, "arrays"_a, "params"_a);
  m.def("path_features", &path_features, "arrays"_a, "params"_a, "target"_a);
  m.def("production_gen", &production_gen, "seed"_a, "dialect"_a);
  m.def("production_gen_spec", &production_gen_spec, "hex"_a);
  m.def("production_recipe", &production_recipe, "seed"_a, "dialect"_a);
  m.def("production_decode", &production_decode, "data"_a, "dialect"_a);
  m.def("production_reach", &production_reach, "specs"_a, "indent"_a);
  m.attr("default_max_bytes") = CaseReadOptions{}.max_bytes;
  m.attr("full_size") = props::kFullSize;
}
