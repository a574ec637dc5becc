// The compiled module of the Python package (rpa._rpa, DESIGN.md section 15): the top layer,
// beside cli/ (neither includes the other), which nothing includes. It holds no logic of its
// own: it turns Python's arrays into the library's Case (borrowing their memory), calls the
// service the commands call (validation, service/'s run and check of a case, the case-file
// reader and writer, the generators), and turns Tensors back into numpy arrays. Option lists
// are the commands' own flags, parsed by the service's parse_case_options, so every option
// means what it means on the command line.
//
// Arrays cross as (dtype name, array): the package's Python side names numpy's or
// ml_dtypes' dtype and hands over the bits (bfloat16 as uint16, float8 as uint8), never
// values converted through float. The GIL is released around everything that computes.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "harness/jax_workload.h"
#include "casefile/case_file.h"
#include "casefile/npy.h"
#include "core/dialect.h"
#include "core/v3_inputs.h"
#include "core/v3_params.h"
#include "oracle/v3_compare.h"
#include "casegen/byte_source.h"
#include "casegen/jax_case_codec.h"
#include "casegen/generate.h"
#include "casegen/jax_materialize.h"
#include "casegen/jax_mutation.h"
#include "casegen/jax_spec_model.h"
#include "casegen/production.h"
#include "casegen/production_reach.h"
#include "casegen/random_source.h"
#include "casegen/v3_build_case.h"
#include "casegen/v3_case_spec.h"
#include "casegen/v3_materialize.h"
#include "casegen/v3_mutation.h"
#include "casegen/v3_spec_model.h"
#include "casegen/v3_unreachable.h"
#include "reference/semantics.h"
#include "reference/v3_reference.h"
#include "schedule/v3_program.h"
#include "service/case_options.h"
#include "service/check_case.h"
#include "service/jax_run_case.h"
#include "service/path_features.h"
#include "service/v3_check_case.h"
#include "service/v3_run_case.h"
#include "validation/jax_rule.h"
#include "validation/jax_validate.h"
#include "validation/target_profile.h"
#include "validation/v3_rule.h"
#include "validation/v3_validate.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace rpa {
namespace {

using Array = nb::ndarray<nb::ro, nb::device::cpu>;
// A case's arrays and parameters as the Python side holds them: name -> (dtype name, array)
// and name -> value (None for an absent parameter).
using ArrayMap = std::vector<std::pair<std::string, std::pair<std::string, nb::object>>>;
using ParamMap = nb::dict;

constexpr const char* kArrayNames[] = {"q", "kv_pages", "kv_lens", "page_indices", "cu_q_lens",
                                       "num_seqs"};

std::string dtype_list() {
  std::string names;
  for (int t = 0; t <= static_cast<int>(DType::kBool); ++t) {
    names += (names.empty() ? "" : ", ") + std::string(dtype_name(static_cast<DType>(t)));
  }
  return names;
}

// A borrowed Tensor over the array's memory: it must be C-contiguous and hold the bits of
// `dtype` (its itemsize). Throws std::invalid_argument (ValueError) naming the array.
// `keep` holds the array handles for as long as the tensor is used.
Tensor borrow_array(const std::string& name, const std::string& dtype, const nb::object& obj,
                    std::vector<Array>& keep) {
  const std::optional<DType> t = dtype_from_name(dtype);
  if (!t) {
    throw std::invalid_argument(name + ": dtype " + dtype + " is not one rpa reads (" +
                                dtype_list() + ")");
  }
  Array a;
  if (!nb::try_cast(obj, a)) {
    throw std::invalid_argument(name + ": the array's memory cannot be read as " + dtype +
                                " on the CPU (a big-endian or device array?)");
  }
  if (a.itemsize() != static_cast<size_t>(dtype_size(*t))) {
    throw std::invalid_argument(name + ": " + std::to_string(a.itemsize()) +
                                "-byte items for dtype " + dtype);
  }
  Shape shape(a.ndim());
  int64_t expected_stride = 1;
  bool contiguous = true;
  for (size_t k = a.ndim(); k-- > 0;) {
    shape[k] = static_cast<int64_t>(a.shape(k));
    if (a.shape(k) != 1 && a.stride(k) != expected_stride) contiguous = false;
    expected_stride *= shape[k];
  }
  if (!contiguous && shape_numel(shape) > 0) {  // an empty array has no layout to speak of
    throw std::invalid_argument(name + ": the array is not C-contiguous (shape " +
                                shape_repr(shape) + "); pass numpy.ascontiguousarray(" + name +
                                ")");
  }
  keep.push_back(a);
  return Tensor::borrow(*t, std::move(shape), static_cast<const std::byte*>(a.data()));
}

std::optional<double> opt_float(const ParamMap& p, const char* key) {
  if (!p.contains(key) || p[key].is_none()) return std::nullopt;
  return nb::cast<double>(p[key]);
}

std::optional<int64_t> opt_int(const ParamMap& p, const char* key) {
  if (!p.contains(key) || p[key].is_none()) return std::nullopt;
  return nb::cast<int64_t>(p[key]);
}

// A Case over the caller's arrays (borrowed) and the handles that keep them readable.
struct BorrowedCase {
  Case c;
  std::vector<Array> keep;
};

std::optional<bool> opt_bool(const ParamMap& p, const char* key) {
  if (!p.contains(key) || p[key].is_none()) return std::nullopt;
  return nb::cast<bool>(p[key]);
}

std::optional<V3BlockSizes> opt_blocks(const ParamMap& p, const char* key) {
  if (!p.contains(key) || p[key].is_none()) return std::nullopt;
  const auto v = nb::cast<std::vector<int64_t>>(p[key]);
  if (v.size() != 4) throw std::invalid_argument(std::string(key) + ": expected 4 ints");
  return V3BlockSizes{v[0], v[1], v[2], v[3]};
}

// The dialect a case's parameters name under "dialect" (absent: jax).
Dialect dialect_of(const ParamMap& params) {
  if (!params.contains("dialect") || params["dialect"].is_none()) return Dialect::kJax;
  const auto name = nb::cast<std::string>(params["dialect"]);
  const std::optional<Dialect> d = parse_dialect(name);
  if (!d) throw std::invalid_argument("unknown dialect " + name);
  return *d;
}

// The v3 dialects' arrays (DESIGN.md section 16), by the kernel's argument names.
constexpr std::pair<const char*, Tensor V3Inputs::*> kV3Arrays[] = {
    {"queries", &V3Inputs::queries},     {"keys", &V3Inputs::keys},
    {"values", &V3Inputs::values},       {"kv_cache", &V3Inputs::kv_cache},
    {"kv_lens", &V3Inputs::kv_lens},     {"page_indices", &V3Inputs::page_indices},
    {"cu_q_lens", &V3Inputs::cu_q_lens}, {"distribution", &V3Inputs::distribution}};

// A v3 call's arrays and keywords into c (its dialect set).
void to_v3_case(const ArrayMap& arrays, const ParamMap& params, BorrowedCase& b) {
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

// The Case the arrays and parameters describe (params["dialect"] names its dialect).
BorrowedCase to_case(const ArrayMap& arrays, const ParamMap& params) {
  BorrowedCase b;
  Case& c = b.c;
  c.dialect = dialect_of(params);
  if (is_v3(c.dialect)) {
    to_v3_case(arrays, params, b);
    return b;
  }
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
  return b;
}

// A numpy array that owns the tensor (moved, not copied): numpy's own dtype where it has
// one, else the bits (bfloat16 and float16 as uint16, float8 as uint8).
nb::object to_numpy(Tensor t) {
  auto* owned = new Tensor(std::move(t));
  nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<Tensor*>(p); });
  std::vector<size_t> shape(owned->shape().begin(), owned->shape().end());
  nb::dlpack::dtype dt;
  switch (owned->dtype()) {
    case DType::kFloat32: dt = nb::dtype<float>(); break;
    case DType::kFloat64: dt = nb::dtype<double>(); break;
    case DType::kInt32: dt = nb::dtype<int32_t>(); break;
    case DType::kInt64: dt = nb::dtype<int64_t>(); break;
    case DType::kInt16: dt = nb::dtype<int16_t>(); break;
    case DType::kInt8: dt = nb::dtype<int8_t>(); break;
    case DType::kUInt32: dt = nb::dtype<uint32_t>(); break;
    case DType::kUInt64: dt = nb::dtype<uint64_t>(); break;
    case DType::kBool: dt = nb::dtype<bool>(); break;
    case DType::kUInt16:
    case DType::kBFloat16:
    case DType::kFloat16: dt = nb::dtype<uint16_t>(); break;
    default: dt = nb::dtype<uint8_t>(); break;  // uint8, float8
  }
  // An empty tensor has no buffer; numpy still wants an address.
  void* data = owned->numel() > 0 ? static_cast<void*>(owned->data()) : static_cast<void*>(owned);
  return nb::ndarray<nb::numpy>(data, shape.size(), shape.data(), owner, nullptr, dt).cast();
}

nb::tuple typed(Tensor t) {
  const std::string name(dtype_name(t.dtype()));
  return nb::make_tuple(name, to_numpy(std::move(t)));
}

nb::object opt_blocks_object(const std::optional<V3BlockSizes>& b) {
  if (!b) return nb::none();
  return nb::make_tuple((*b)[0], (*b)[1], (*b)[2], (*b)[3]);
}

// A v3 Case's arrays and keywords, for the keywords its dialect's kernel takes.
void from_v3_case(Case& c, nb::dict& arrays, nb::dict& params) {
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

// A Case as the Python side builds rpa.Case from it: (arrays, params), the dialect's name
// under params["dialect"].
nb::tuple from_case(Case c) {
  nb::dict arrays, params;
  params["dialect"] = std::string(dialect_name(c.dialect));
  if (c.out) arrays["out"] = typed(std::move(*c.out));
  if (c.expected) arrays["expected"] = typed(std::move(*c.expected));
  if (is_v3(c.dialect)) {
    from_v3_case(c, arrays, params);
    return nb::make_tuple(arrays, params);
  }
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
  return nb::make_tuple(arrays, params);
}

// Options as the commands' flags for a case named `label`, parsed by the service's parser (as
// the commands parse them); a bad value raises ValueError with the command's message.
CaseOptions parse_flags(const std::vector<std::string>& flags,
                        const std::set<std::string_view>& allowed, const std::string& label = "case") {
  const std::vector<std::string_view> views(flags.begin(), flags.end());
  CaseOptions a;
  a.path = label;
  if (std::string err = parse_case_options(views, allowed, a); !err.empty()) {
    throw std::invalid_argument(err);
  }
  return a;
}

// A rejection's why, mode and rule (None, with its message, where no rule rejected it).
nb::object rejection_dict(const std::string& why, Mode mode, const std::optional<RuleReport>& rule) {
  nb::dict d;
  d["why"] = why;
  d["mode"] = std::string(mode_name(mode));
  d["rule"] = rule ? nb::cast(std::string(rule->rule)) : nb::none();
  d["message"] = rule ? nb::cast(rule->message) : nb::none();
  return d;
}

nb::object rejection_dict(const Rejection& r) {
  std::optional<RuleReport> rule;
  if (r.failure) rule = rule_report(*r.failure, r.mode);
  return rejection_dict(r.why, r.mode, rule);
}

nb::object rejection_dict(const CheckOutcome& o) {
  const std::optional<RejectedRule>& r = o.findings.rejected_rule;
  return rejection_dict(o.detail, o.findings.rejected_mode,
                        r ? std::optional<RuleReport>(r->report) : std::nullopt);
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

// rpa run's options, for a case named "case".
CaseOptions run_args(const std::vector<std::string>& flags) {
  CaseOptions a = parse_flags(flags, kRunOptions);
  if (std::string err = run_options_error(a); !err.empty()) throw std::invalid_argument(err);
  return a;
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

// -- the tpu-inference v3 dialects (DESIGN.md section 16) ------------------------------------

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

// The case's out and kv_cache_out against the v3 dense reference in `semantics`
// (oracle/v3_compare.h; precondition: strict validation accepted the case), or with oracle
// "literal" against the literal v3 schedule on `target`'s generation under the schedule
// tolerance (precondition: native validation accepted it): the comparison's fields and its
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
  V3OutCheck r;
  std::string line;
  {
    nb::gil_scoped_release release;
    r = v3_check_out(c, s, oracle == "literal", V3ProgramOptions{.tpu_version = tpu_generation(*profile)});
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

// rpa gen --profile production [--dialect D] --seed S, or --spec prod:HEX: the call, its spec
// the prod: hex; jax calls with the spec model's verdicts, as every generated jax case.
nb::tuple production_generated(const props::ProductionSpec& spec) {
  const std::string hex = props::production_spec_hex(spec), text = props::describe(spec);
  return is_v3(spec.dialect) ? v3_generated(props::production_v3_case(spec), hex, text)
                             : generated(props::production_case(spec), hex, text);
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
}  // namespace rpa

NB_MODULE(_rpa, m) {
  using namespace rpa;
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
  m.def("validate", &validate_case, "arrays"_a, "params"_a, "flags"_a);
  m.def("run", &run, "arrays"_a, "params"_a, "flags"_a);
  m.def("plan", &plan, "arrays"_a, "params"_a, "flags"_a);
  m.def("check", &check, "arrays"_a, "params"_a, "flags"_a, "label"_a);
  m.def("read_case", &read_case, "path"_a, "max_bytes"_a);
  m.def("read_case_bytes", &read_case_from_bytes, "data"_a, "max_bytes"_a);
  m.def("parse_npy", &parse_npy_bytes, "data"_a);
  m.def("write_case", &write_case, "path"_a, "arrays"_a, "params"_a);
  m.def("write_case_bytes", &write_case_to_bytes, "arrays"_a, "params"_a);
  m.def("gen", &gen, "seed"_a, "profile"_a, "size"_a, "head_dim"_a.none());
  m.def("gen_spec", &gen_spec, "hex"_a);
  m.def("decode", &decode, "data"_a, "profile"_a, "head_dim"_a.none(), "bounds"_a, "valid"_a,
        "mutations"_a, "data_seed"_a.none() = nb::none());
  m.def("workload", &workload, "name"_a, "dtype"_a);
  m.def("rules", &rules);
  m.def("v3_validate", &v3_validate_case, "arrays"_a, "params"_a, "mode"_a, "all"_a);
  m.def("v3_run", &v3_run, "arrays"_a, "params"_a, "flags"_a);
  m.def("path_features", &path_features, "arrays"_a, "params"_a, "target"_a);
  m.def("v3_check", &v3_check_case, "arrays"_a, "params"_a, "semantics"_a, "oracle"_a, "target"_a);
  m.def("v3_gen", &v3_gen, "seed"_a, "dialect"_a, "profile"_a, "size"_a, "head_dim"_a.none());
  m.def("v3_gen_spec", &v3_gen_spec, "hex"_a);
  m.def("v3_strict_unreachable", &v3_strict_unreachable, "dialect"_a);
  m.def("v3_mutation_names", &v3_mutation_names, "dialect"_a);
  m.def("v3_decode", &v3_decode, "data"_a, "dialect"_a, "profile"_a, "head_dim"_a.none(), "bounds"_a,
        "valid"_a, "mutations"_a, "data_seed"_a.none() = nb::none(), "zeros"_a = false);
  m.def("production_gen", &production_gen, "seed"_a, "dialect"_a);
  m.def("production_gen_spec", &production_gen_spec, "hex"_a);
  m.def("production_recipe", &production_recipe, "seed"_a, "dialect"_a);
  m.def("production_decode", &production_decode, "data"_a, "dialect"_a);
  m.def("production_reach", &production_reach, "specs"_a, "indent"_a);
  m.def("v3_rules", &v3_rules, "dialect"_a);
  m.attr("default_max_bytes") = CaseReadOptions{}.max_bytes;
  m.attr("full_size") = props::kFullSize;
}
