#include "casefile/case_file.h"

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <new>
#include <set>
#include <span>
#include <stdexcept>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "casefile/npy.h"
#include "casefile/zip_archive.h"

namespace rpa {
namespace {

constexpr std::string_view kNpySuffix = ".npy";

// The arrays of section 2, in the order the writer stores them.
constexpr std::array<std::string_view, 6> kRequired = {
    "q", "kv_pages", "kv_lens", "page_indices", "cu_q_lens", "num_seqs"};

constexpr std::array<Tensor Inputs::*, 6> kRequiredFields = {
    &Inputs::q,         &Inputs::kv_pages, &Inputs::kv_lens, &Inputs::page_indices,
    &Inputs::cu_q_lens, &Inputs::num_seqs};

struct OptionalFloatParam {
  std::string_view name;
  std::optional<double> Params::*field;
};
constexpr std::array<OptionalFloatParam, 4> kOptionalFloatParams = {{
    {"soft_cap", &Params::soft_cap},
    {"mask_value", &Params::mask_value},
    {"k_scale", &Params::k_scale},
    {"v_scale", &Params::v_scale},
}};

struct IntParam {
  std::string_view name;
  std::optional<int64_t> Params::*field;
};
constexpr std::array<IntParam, 4> kIntParams = {{
    {"sliding_window", &Params::sliding_window},
    {"num_kv_pages_per_block", &Params::num_kv_pages_per_block},
    {"num_queries_per_block", &Params::num_queries_per_block},
    {"vmem_limit_bytes", &Params::vmem_limit_bytes},
}};

constexpr std::string_view kSmScale = "sm_scale";
constexpr std::string_view kQDtype = "q_dtype";
constexpr std::string_view kKvDtype = "kv_dtype";
constexpr std::string_view kOut = "out";
constexpr std::string_view kExpected = "expected";
constexpr std::string_view kDialect = "dialect";

// Members every dialect may hold.
constexpr std::array<std::string_view, 12> kSharedMembers = {
    "dialect",  "q_dtype",    "kv_dtype", "out",     "expected",       "sm_scale",
    "soft_cap", "mask_value", "k_scale",  "v_scale", "sliding_window", "vmem_limit_bytes"};

// The v3 dialects' arrays (DESIGN.md section 16), in the order the writer stores them.
constexpr std::array<std::string_view, 8> kV3Required = {"queries",   "keys",        "values",
                                                         "kv_cache",  "kv_lens",     "page_indices",
                                                         "cu_q_lens", "distribution"};
constexpr std::array<Tensor V3Inputs::*, 8> kV3RequiredFields = {
    &V3Inputs::queries, &V3Inputs::keys,         &V3Inputs::values,    &V3Inputs::kv_cache,
    &V3Inputs::kv_lens, &V3Inputs::page_indices, &V3Inputs::cu_q_lens, &V3Inputs::distribution};

constexpr std::string_view kAttentionSink = "attention_sink";
constexpr std::string_view kOutDtype = "out_dtype";
constexpr std::string_view kKvCacheOut = "kv_cache_out";
constexpr std::string_view kExpectedKvCache = "expected_kv_cache";

struct V3FloatParam {
  std::string_view name;
  std::optional<double> V3Params::*field;
};
// sm_scale is not optional (absent means 1.0): read apart.
constexpr std::array<V3FloatParam, 5> kV3FloatParams = {{
    {"soft_cap", &V3Params::soft_cap},
    {"mask_value", &V3Params::mask_value},
    {"q_scale", &V3Params::q_scale},
    {"k_scale", &V3Params::k_scale},
    {"v_scale", &V3Params::v_scale},
}};

struct V3IntParam {
  std::string_view name;
  std::optional<int64_t> V3Params::*field;
  bool hd64_only;  // else: both v3 dialects
};
constexpr std::array<V3IntParam, 5> kV3IntParams = {{
    {"sliding_window", &V3Params::sliding_window, false},
    {"chunk_prefill_size", &V3Params::chunk_prefill_size, false},
    {"vmem_limit_bytes", &V3Params::vmem_limit_bytes, false},
    {"num_kv_pages_per_block", &V3Params::num_kv_pages_per_block, true},
    {"num_queries_per_block", &V3Params::num_queries_per_block, true},
}};

// kernel.py's keywords that hd64 lacks.
struct V3BoolParam {
  std::string_view name;
  bool V3Params::*field;
};
constexpr std::array<V3BoolParam, 3> kV3BoolParams = {{
    {"use_causal_mask", &V3Params::use_causal_mask},
    {"update_kv_cache", &V3Params::update_kv_cache},
    {"skip_kv_mask", &V3Params::skip_kv_mask},
}};
struct V3BlockParam {
  std::string_view name;
  std::optional<V3BlockSizes> V3Params::*field;
};
constexpr std::array<V3BlockParam, 3> kV3BlockParams = {{
    {"d_block_sizes", &V3Params::d_block_sizes},
    {"p_block_sizes", &V3Params::p_block_sizes},
    {"m_block_sizes", &V3Params::m_block_sizes},
}};

template <class Table>
bool in_table(const Table& table, std::string_view stem) {
  for (const auto& e : table) {
    if constexpr (std::is_convertible_v<decltype(e), std::string_view>) {
      if (stem == e) return true;
    } else {
      if (stem == e.name) return true;
    }
  }
  return false;
}

// Whether `stem` is a member a case of dialect d may hold.
bool belongs_to(Dialect d, std::string_view stem) {
  if (in_table(kSharedMembers, stem)) return true;
  if (d == Dialect::kJax) {
    return in_table(kRequired, stem) || in_table(kIntParams, stem) ||
           in_table(kOptionalFloatParams, stem);
  }
  if (in_table(kV3Required, stem) || stem == kKvCacheOut || stem == kExpectedKvCache) {
    return true;
  }
  for (const V3FloatParam& p : kV3FloatParams) {
    if (stem == p.name) return true;
  }
  for (const V3IntParam& p : kV3IntParams) {
    if (stem == p.name) return !p.hd64_only || d == Dialect::kTpuInferenceV3Hd64;
  }
  if (d == Dialect::kTpuInferenceV3Hd64) return stem == kAttentionSink;
  return stem == kOutDtype || in_table(kV3BoolParams, stem) || in_table(kV3BlockParams, stem);
}

constexpr std::array<Dialect, 3> kDialects = {Dialect::kJax, Dialect::kTpuInferenceV3,
                                              Dialect::kTpuInferenceV3Hd64};

bool is_known_member(std::string_view stem) {
  for (Dialect d : kDialects) {
    if (belongs_to(d, stem)) return true;
  }
  return false;
}

// "the jax dialect's" / "the jax and tpu_inference_v3_hd64 dialects'": whose member it is.
std::string owners(std::string_view stem) {
  std::vector<std::string_view> names;
  for (Dialect d : kDialects) {
    if (belongs_to(d, stem)) names.push_back(dialect_name(d));
  }
  std::string out = "the ";
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += i + 1 == names.size() ? " and " : ", ";
    out += names[i];
  }
  return out + (names.size() == 1 ? " dialect's" : " dialects'");
}

// numpy has no bfloat16 or float8, so a case file holds their bits as unsigned ints and
// names the logical dtype in a q_dtype / kv_dtype member.
bool needs_dtype_member(DType t) {
  return t == DType::kBFloat16 || t == DType::kFloat8E4M3FN || t == DType::kFloat8E5M2;
}

DType storage_dtype(DType t) {
  switch (t) {
    case DType::kBFloat16:
      return DType::kUInt16;
    case DType::kFloat8E4M3FN:
    case DType::kFloat8E5M2:
      return DType::kUInt8;
    default:
      return t;
  }
}

// Renders text for a one-line message as Python's ascii() would: printable ASCII as is,
// everything else (a newline in a member name, say) escaped, and so a backslash too.
std::string printable(std::u32string_view s) {
  std::string out;
  for (char32_t c : s) {
    if (c == '\\') {
      out += "\\\\";
      continue;
    }
    if (c >= 0x20 && c < 0x7F) {
      out.push_back(static_cast<char>(c));
      continue;
    }
    char buf[16];
    const auto v = static_cast<unsigned>(c);
    if (c < 0x100) {
      std::snprintf(buf, sizeof(buf), "\\x%02x", v);
    } else if (c < 0x10000) {
      std::snprintf(buf, sizeof(buf), "\\u%04x", v);
    } else {
      std::snprintf(buf, sizeof(buf), "\\U%08x", v);
    }
    out += buf;
  }
  return out;
}

// Bytes are rendered one by one (a UTF-8 name's non-ASCII bytes as \xNN).
std::string printable(std::string_view bytes) {
  std::u32string wide;
  for (char c : bytes) wide.push_back(static_cast<unsigned char>(c));
  return printable(wide);
}

std::string member_prefix(std::string_view stem) {
  return "member '" + printable(stem) + std::string(kNpySuffix) + "': ";
}

// A name's ASCII text, or "" (which names nothing) if it holds any other code point.
std::string ascii_or_empty(std::u32string_view name) {
  std::string ascii;
  for (char32_t c : name) {
    if (c >= 0x80) return "";
    ascii.push_back(static_cast<char>(c));
  }
  return ascii;
}

using Members = std::map<std::string, NpyArray, std::less<>>;

class CaseBuilder {
 public:
  explicit CaseBuilder(Members members) : members_(std::move(members)) {}

  // Returns an error line, or "" with *out filled. The dialect member was read before
  // (read_dialect) and the members checked against it.
  std::string build(Dialect dialect, Case* out) {
    out->dialect = dialect;
    std::optional<DType> q_dtype;
    std::optional<DType> kv_dtype;
    if (std::string e = dtype_member(kQDtype, &q_dtype); !e.empty()) return e;
    if (std::string e = dtype_member(kKvDtype, &kv_dtype); !e.empty()) return e;
    if (is_v3(dialect)) return build_v3(q_dtype, kv_dtype, out);
    for (size_t k = 0; k < kRequired.size(); ++k) {
      const bool is_kv = kRequired[k] == "kv_pages";
      const std::optional<DType> logical =
          kRequired[k] == "q" ? q_dtype : (is_kv ? kv_dtype : std::nullopt);
      std::optional<Tensor> t;
      const std::string_view dtype_stem = is_kv ? kKvDtype : kQDtype;
      if (std::string e = tensor(kRequired[k], logical, dtype_stem, &t); !e.empty()) return e;
      out->inputs.*kRequiredFields[k] = std::move(*t);
    }
    if (std::string e = tensor(kOut, q_dtype, kQDtype, &out->out); !e.empty()) return e;
    if (std::string e = tensor(kExpected, q_dtype, kQDtype, &out->expected); !e.empty()) {
      return e;
    }
    std::optional<double> sm_scale;
    if (std::string e = float_param(kSmScale, &sm_scale); !e.empty()) return e;
    out->params.sm_scale = sm_scale.value_or(1.0);
    for (const auto& p : kOptionalFloatParams) {
      if (std::string e = float_param(p.name, &(out->params.*p.field)); !e.empty()) return e;
    }
    for (const auto& p : kIntParams) {
      if (std::string e = int_param(p.name, &(out->params.*p.field)); !e.empty()) return e;
    }
    return "";
  }

 private:
  std::string build_v3(std::optional<DType> q_dtype, std::optional<DType> kv_dtype, Case* out) {
    V3Inputs& in = out->v3_inputs;
    V3Params& params = out->v3_params;
    for (size_t k = 0; k < kV3Required.size(); ++k) {
      const std::string_view stem = kV3Required[k];
      const bool is_q = stem == "queries";
      const bool is_kv = stem == "keys" || stem == "values" || stem == "kv_cache";
      const std::optional<DType> logical = is_q ? q_dtype : (is_kv ? kv_dtype : std::nullopt);
      std::optional<Tensor> t;
      if (std::string e = tensor(stem, logical, is_kv ? kKvDtype : kQDtype, &t); !e.empty()) {
        return e;
      }
      in.*kV3RequiredFields[k] = std::move(*t);
    }
    if (std::string e = tensor(kAttentionSink, std::nullopt, kQDtype, &in.attention_sink);
        !e.empty()) {
      return e;
    }
    if (std::string e = tensor(kOut, q_dtype, kQDtype, &out->out); !e.empty()) return e;
    if (std::string e = tensor(kExpected, q_dtype, kQDtype, &out->expected); !e.empty()) {
      return e;
    }
    if (std::string e = tensor(kKvCacheOut, kv_dtype, kKvDtype, &out->kv_cache_out); !e.empty()) {
      return e;
    }
    if (std::string e = tensor(kExpectedKvCache, kv_dtype, kKvDtype, &out->expected_kv_cache);
        !e.empty()) {
      return e;
    }
    std::optional<double> sm_scale;
    if (std::string e = float_param(kSmScale, &sm_scale); !e.empty()) return e;
    params.sm_scale = sm_scale.value_or(1.0);
    for (const V3FloatParam& p : kV3FloatParams) {
      if (std::string e = float_param(p.name, &(params.*p.field)); !e.empty()) return e;
    }
    for (const V3IntParam& p : kV3IntParams) {
      if (std::string e = int_param(p.name, &(params.*p.field)); !e.empty()) return e;
    }
    for (const V3BoolParam& p : kV3BoolParams) {
      std::optional<int64_t> v;
      if (std::string e = int_param(p.name, &v); !e.empty()) return e;
      if (!v.has_value()) continue;
      if (*v != 0 && *v != 1) {
        return member_prefix(p.name) + std::string(p.name) + " must be 0 or 1, holds " +
               std::to_string(*v);
      }
      params.*p.field = *v == 1;
    }
    for (const V3BlockParam& p : kV3BlockParams) {
      if (std::string e = block_param(p.name, &(params.*p.field)); !e.empty()) return e;
    }
    if (const NpyArray* a = find(kOutDtype); a != nullptr) {
      std::optional<DType> t;
      if (std::string e = dtype_name_member(kOutDtype, *a, &t); !e.empty()) return e;
      params.out_dtype = t;
    }
    return "";
  }

  NpyArray* find(std::string_view stem) {
    const auto it = members_.find(stem);
    return it == members_.end() ? nullptr : &it->second;
  }

  // out_dtype: any dtype numpy or ml_dtypes names (validation judges it).
  std::string dtype_name_member(std::string_view stem, const NpyArray& a,
                                std::optional<DType>* out) {
    if (a.kind != NpyKind::kUnicode || !a.shape.empty()) {
      return member_prefix(stem) + "must be a 0-d unicode string (np.array('float32')), holds " +
             a.describe();
    }
    const std::u32string name = a.unicode_at(0);
    const std::optional<DType> t = dtype_from_name(ascii_or_empty(name));
    if (!t.has_value()) return member_prefix(stem) + "unknown dtype '" + printable(name) + "'";
    *out = t;
    return "";
  }

  std::string dtype_member(std::string_view stem, std::optional<DType>* out) {
    const NpyArray* a = find(stem);
    if (a == nullptr) return "";
    if (a->kind != NpyKind::kUnicode || !a->shape.empty()) {
      return member_prefix(stem) + "must be a 0-d unicode string (np.array('bfloat16')), holds " +
             a->describe();
    }
    const std::u32string name = a->unicode_at(0);
    const std::optional<DType> t = dtype_from_name(ascii_or_empty(name));
    if (!t.has_value() || (*t != DType::kFloat32 && !needs_dtype_member(*t))) {
      return member_prefix(stem) + "unknown dtype '" + printable(name) +
             "' (float32, bfloat16, float8_e4m3fn or float8_e5m2)";
    }
    *out = *t;
    return "";
  }

  // An absent member leaves *out empty (required members were checked before any read).
  // With a logical dtype (named by member dtype_stem), the array must hold its bits; out and
  // expected follow q's.
  std::string tensor(std::string_view stem, std::optional<DType> logical,
                     std::string_view dtype_stem, std::optional<Tensor>* out) {
    NpyArray* a = find(stem);
    if (a == nullptr) return "";
    if (a->kind != NpyKind::kNumeric) {
      return member_prefix(stem) + "must hold numbers, holds " + a->describe();
    }
    DType dtype = a->dtype;
    if (logical.has_value()) {
      const DType stored = storage_dtype(*logical);
      if (a->dtype != stored) {
        const std::string how = stored == *logical
                                    ? std::string(dtype_name(stored))
                                    : "its " + std::string(dtype_name(stored)) + " bits ('" +
                                          npy_descr(stored).value_or("") + "')";
        return member_prefix(stem) + std::string(dtype_stem) + " is " +
               std::string(dtype_name(*logical)) + ", so it must hold " + how + ", but holds " +
               a->describe();
      }
      dtype = *logical;
    }
    out->emplace(dtype, std::move(a->shape), a->data);
    return "";
  }

  std::string float_param(std::string_view stem, std::optional<double>* out) {
    const NpyArray* a = find(stem);
    if (a == nullptr) return "";
    const bool is_f64 = a->kind == NpyKind::kNumeric && a->dtype == DType::kFloat64;
    const bool is_f32 = a->kind == NpyKind::kNumeric && a->dtype == DType::kFloat32;
    if (!a->shape.empty() || !(is_f64 || is_f32)) {
      return member_prefix(stem) + std::string(stem) +
             " must be a 0-d float64 or float32 array, holds " + a->describe();
    }
    if (is_f64) {
      double v;
      std::memcpy(&v, a->data.data(), sizeof(v));
      *out = v;
    } else {
      float v;
      std::memcpy(&v, a->data.data(), sizeof(v));
      *out = static_cast<double>(v);
    }
    return "";
  }

  std::string int_param(std::string_view stem, std::optional<int64_t>* out) {
    NpyArray* a = find(stem);
    if (a == nullptr) return "";
    if (!a->shape.empty() || a->kind != NpyKind::kNumeric || !dtype_is_integer(a->dtype)) {
      return member_prefix(stem) + std::string(stem) + " must be a 0-d integer array, holds " +
             a->describe();
    }
    const Tensor t(a->dtype, Shape{}, a->data);
    const int64_t v = t.int_at(0);
    // int_at wraps uint64 values above INT64_MAX to negatives.
    if (a->dtype == DType::kUInt64 && v < 0) {
      return member_prefix(stem) + std::to_string(static_cast<uint64_t>(v)) +
             " does not fit in int64";
    }
    *out = v;
    return "";
  }

  // d/p/m_block_sizes: int[4].
  std::string block_param(std::string_view stem, std::optional<V3BlockSizes>* out) {
    NpyArray* a = find(stem);
    if (a == nullptr) return "";
    if (a->shape != Shape{4} || a->kind != NpyKind::kNumeric || !dtype_is_integer(a->dtype)) {
      return member_prefix(stem) + std::string(stem) +
             " must be an integer array of shape (4,), holds " + a->describe();
    }
    const Tensor t(a->dtype, Shape{4}, a->data);
    V3BlockSizes v{};
    for (int64_t i = 0; i < 4; ++i) {
      v[static_cast<size_t>(i)] = t.int_at(i);
      if (a->dtype == DType::kUInt64 && v[static_cast<size_t>(i)] < 0) {
        return member_prefix(stem) + std::to_string(static_cast<uint64_t>(t.int_at(i))) +
               " does not fit in int64";
      }
    }
    *out = v;
    return "";
  }

  Members members_;
};

// Members are checked against the dialect's set once the dialect is known; required ones
// after all names are (a misnamed member reads as what it is, not as a missing one).
std::string check_names_and_sizes(const std::vector<ZipMember>& members, uint64_t cap,
                                  Dialect dialect) {
  std::set<std::string_view> seen;
  const std::string cap_text =
      "the " + std::to_string(cap) + "-byte cap (CaseReadOptions::max_bytes)";
  uint64_t total = 0;
  bool total_overflows = false;
  for (const ZipMember& m : members) {
    const std::string_view name = m.name;
    const bool npy = name.size() > kNpySuffix.size() && name.ends_with(kNpySuffix);
    const std::string_view stem = name.substr(0, name.size() - kNpySuffix.size());
    if (!npy || !is_known_member(stem)) return "unknown member '" + printable(name) + "'";
    if (!belongs_to(dialect, stem)) {
      return "member '" + printable(name) + "' is " + owners(stem) + ", not the " +
             std::string(dialect_name(dialect)) + " dialect's";
    }
    if (!seen.insert(stem).second) return "duplicate member '" + printable(name) + "'";
    if (m.size > cap) {
      return "member '" + printable(name) + "' declares " + std::to_string(m.size) +
             " bytes, more than " + cap_text;
    }
    total_overflows = total_overflows || __builtin_add_overflow(total, m.size, &total);
  }
  const auto require = [&](std::string_view n) -> std::string {
    if (seen.contains(n)) return "";
    return "missing required member '" + std::string(n) + std::string(kNpySuffix) + "'" +
           (is_v3(dialect) ? " (dialect " + std::string(dialect_name(dialect)) + ")" : "");
  };
  if (is_v3(dialect)) {
    for (std::string_view n : kV3Required) {
      if (std::string e = require(n); !e.empty()) return e;
    }
  } else {
    for (std::string_view n : kRequired) {
      if (std::string e = require(n); !e.empty()) return e;
    }
  }
  if (total_overflows || total > cap) {
    return "members declare " + (total_overflows ? "more than 2^64" : std::to_string(total)) +
           " bytes in all, more than " + cap_text;
  }
  return "";
}

// Reads and parses member i; an error line names it.
std::string read_member(const ZipReader& reader, size_t i, uint64_t cap, NpyArray* out) {
  const std::string& name = reader.members()[i].name;
  const std::string_view stem = std::string_view(name).substr(0, name.size() - kNpySuffix.size());
  std::vector<std::byte> bytes;
  std::string error;
  if (!reader.read(i, cap, &bytes, &error)) return member_prefix(stem) + error;
  NpyParseResult npy = parse_npy(std::move(bytes));
  if (!npy.value.has_value()) return member_prefix(stem) + npy.error;
  *out = std::move(*npy.value);
  return "";
}

// The `dialect` member, read before any other so that the names can be checked against its
// set; absent means jax.
std::string read_dialect(const ZipReader& reader, uint64_t cap, Dialect* out) {
  *out = Dialect::kJax;
  const std::vector<ZipMember>& members = reader.members();
  for (size_t i = 0; i < members.size(); ++i) {
    if (members[i].name != std::string(kDialect) + std::string(kNpySuffix)) continue;
    if (members[i].size > cap) return "";  // check_names_and_sizes reports it
    NpyArray a;
    if (std::string e = read_member(reader, i, cap, &a); !e.empty()) return e;
    if (a.kind != NpyKind::kUnicode || !a.shape.empty()) {
      return member_prefix(kDialect) +
             "must be a 0-d unicode string (np.array('tpu_inference_v3')), holds " + a.describe();
    }
    const std::u32string name = a.unicode_at(0);
    const std::optional<Dialect> d = parse_dialect(ascii_or_empty(name));
    if (!d.has_value()) {
      return member_prefix(kDialect) + "unknown dialect '" + printable(name) +
             "' (jax, tpu_inference_v3 or tpu_inference_v3_hd64)";
    }
    *out = *d;
    return "";
  }
  return "";
}

CaseReadResult read_archive(const ZipReader& reader, const CaseReadOptions& options) {
  CaseReadResult result;
  const uint64_t cap = options.max_bytes > 0 ? static_cast<uint64_t>(options.max_bytes) : 0;
  const std::vector<ZipMember>& members = reader.members();
  Dialect dialect = Dialect::kJax;
  result.error = read_dialect(reader, cap, &dialect);
  if (!result.error.empty()) return result;
  result.error = check_names_and_sizes(members, cap, dialect);
  if (!result.error.empty()) return result;
  Members arrays;
  for (size_t i = 0; i < members.size(); ++i) {
    const std::string_view stem =
        std::string_view(members[i].name).substr(0, members[i].name.size() - kNpySuffix.size());
    NpyArray a;
    result.error = read_member(reader, i, cap, &a);
    if (!result.error.empty()) return result;
    arrays.emplace(std::string(stem), std::move(a));
  }
  Case c;
  result.error = CaseBuilder(std::move(arrays)).build(dialect, &c);
  if (result.error.empty()) result.value = std::move(c);
  return result;
}

// The reader's promise is one error line and no exception, whatever the input; allocation
// failure (a large declared size under a generous cap) is the expected way to get here.
template <class F>
CaseReadResult guarded(F&& read) {
  try {
    return read();
  } catch (const std::bad_alloc&) {
    return CaseReadResult{.value = std::nullopt, .error = "out of memory reading the case"};
  } catch (const std::exception& e) {
    return CaseReadResult{.value = std::nullopt,
                          .error = "internal error reading the case: " + printable(e.what())};
  } catch (...) {
    return CaseReadResult{.value = std::nullopt, .error = "internal error reading the case"};
  }
}

// bfloat16 and float8 bits read back as such only where a dtype member names them: q,
// kv_pages, and out / expected (which follow q). Elsewhere they would come back as uints.
std::vector<std::byte> array_npy(std::string_view stem, const Tensor& t, bool dtype_named) {
  if (needs_dtype_member(t.dtype()) && !dtype_named) {
    throw std::invalid_argument("write_case_bytes: " + std::string(stem) + " has dtype " +
                                std::string(dtype_name(t.dtype())) +
                                ", which a case file cannot hold there");
  }
  return write_npy(storage_dtype(t.dtype()), t.shape(), t.bytes());
}

template <class T>
std::vector<std::byte> scalar_npy(DType t, T v) {
  std::array<std::byte, sizeof(T)> bytes;
  std::memcpy(bytes.data(), &v, sizeof(T));
  return write_npy(t, Shape{}, bytes);
}

std::vector<std::byte> dtype_npy(DType t) {
  const std::string_view name = dtype_name(t);
  return write_npy_unicode(std::u32string(name.begin(), name.end()));
}

}  // namespace

CaseReadResult read_case_bytes(std::span<const std::byte> bytes, const CaseReadOptions& options) {
  return guarded([&] {
    CaseReadResult result;
    std::optional<ZipReader> reader = ZipReader::open(bytes, &result.error);
    if (!reader.has_value()) return result;
    return read_archive(*reader, options);
  });
}

CaseReadResult read_case_file(const std::string& path, const CaseReadOptions& options) {
  CaseReadResult result = guarded([&] {
    CaseReadResult r;
    std::optional<ZipReader> reader = ZipReader::open_file(path, &r.error);
    if (!reader.has_value()) return r;
    return read_archive(*reader, options);
  });
  if (!result.error.empty()) result.error = printable(path) + ": " + result.error;
  return result;
}

namespace {

using Entries = std::vector<ZipEntry>;

void add_entry(Entries& entries, std::string_view stem, std::vector<std::byte> npy) {
  entries.push_back(
      ZipEntry{.name = std::string(stem) + std::string(kNpySuffix), .data = std::move(npy)});
}

[[noreturn]] void cannot_hold(const std::string& what) {
  throw std::invalid_argument("write_case_bytes: " + what);
}

// Arrays whose logical dtype a dtype member names must all have that one dtype, else they
// read back as another.
void add_named(Entries& entries, std::string_view stem, const Tensor& t, DType named,
               std::string_view dtype_stem) {
  if (needs_dtype_member(named) && t.dtype() != named) {
    cannot_hold(std::string(stem) + " has dtype " + std::string(dtype_name(t.dtype())) + " but " +
                std::string(dtype_stem) + " is " + std::string(dtype_name(named)));
  }
  add_entry(entries, stem, array_npy(stem, t, needs_dtype_member(named)));
}

void write_v3(const Case& c, Entries& entries) {
  const V3Inputs& in = c.v3_inputs;
  const V3Params& p = c.v3_params;
  const bool hd64 = c.dialect == Dialect::kTpuInferenceV3Hd64;
  const DType q_dtype = in.queries.dtype();
  const DType kv_dtype = in.kv_cache.dtype();
  add_entry(entries, kDialect,
            write_npy_unicode(
                std::u32string(dialect_name(c.dialect).begin(), dialect_name(c.dialect).end())));
  for (size_t k = 0; k < kV3Required.size(); ++k) {
    const std::string_view stem = kV3Required[k];
    const Tensor& t = in.*kV3RequiredFields[k];
    if (stem == "queries") {
      add_named(entries, stem, t, q_dtype, kQDtype);
    } else if (stem == "keys" || stem == "values" || stem == "kv_cache") {
      add_named(entries, stem, t, kv_dtype, kKvDtype);
    } else {
      add_entry(entries, stem, array_npy(stem, t, false));
    }
  }
  if (in.attention_sink.has_value()) {
    if (!hd64) cannot_hold("attention_sink is kernel_hd64.py's alone");
    add_entry(entries, kAttentionSink, array_npy(kAttentionSink, *in.attention_sink, false));
  }
  if (needs_dtype_member(q_dtype)) add_entry(entries, kQDtype, dtype_npy(q_dtype));
  if (needs_dtype_member(kv_dtype)) add_entry(entries, kKvDtype, dtype_npy(kv_dtype));
  add_entry(entries, kSmScale, scalar_npy(DType::kFloat64, p.sm_scale));
  for (const V3FloatParam& f : kV3FloatParams) {
    if ((p.*f.field).has_value())
      add_entry(entries, f.name, scalar_npy(DType::kFloat64, *(p.*f.field)));
  }
  for (const V3IntParam& f : kV3IntParams) {
    if (!(p.*f.field).has_value()) continue;
    if (f.hd64_only && !hd64) cannot_hold(std::string(f.name) + " is kernel_hd64.py's alone");
    add_entry(entries, f.name, scalar_npy(DType::kInt64, *(p.*f.field)));
  }
  const V3Params defaults;
  for (const V3BoolParam& f : kV3BoolParams) {
    if (hd64) {
      if (p.*f.field != defaults.*f.field)
        cannot_hold(std::string(f.name) + " is kernel.py's alone");
      continue;
    }
    add_entry(entries, f.name, scalar_npy(DType::kInt64, int64_t{p.*f.field ? 1 : 0}));
  }
  for (const V3BlockParam& f : kV3BlockParams) {
    if (!(p.*f.field).has_value()) continue;
    if (hd64) cannot_hold(std::string(f.name) + " is kernel.py's alone");
    add_entry(entries, f.name,
              write_npy(DType::kInt64, Shape{4}, std::as_bytes(std::span(*(p.*f.field)))));
  }
  if (p.out_dtype.has_value()) {
    if (hd64) cannot_hold("out_dtype is kernel.py's alone");
    add_entry(entries, kOutDtype, dtype_npy(*p.out_dtype));
  }
  if (c.out) add_named(entries, kOut, *c.out, q_dtype, kQDtype);
  if (c.expected) add_named(entries, kExpected, *c.expected, q_dtype, kQDtype);
  if (c.kv_cache_out) add_named(entries, kKvCacheOut, *c.kv_cache_out, kv_dtype, kKvDtype);
  if (c.expected_kv_cache) {
    add_named(entries, kExpectedKvCache, *c.expected_kv_cache, kv_dtype, kKvDtype);
  }
}

}  // namespace

std::vector<std::byte> write_case_bytes(const Case& c) {
  std::vector<ZipEntry> entries;
  if (is_v3(c.dialect)) {
    write_v3(c, entries);
    return write_zip(entries);
  }
  if (c.kv_cache_out || c.expected_kv_cache) {
    cannot_hold("kv_cache_out / expected_kv_cache belong to the v3 dialects");
  }
  const DType q_dtype = c.inputs.q.dtype();
  const DType kv_dtype = c.inputs.kv_pages.dtype();
  const auto add = [&](std::string_view stem, std::vector<std::byte> npy) {
    add_entry(entries, stem, std::move(npy));
  };
  for (size_t k = 0; k < kRequired.size(); ++k) {
    const bool dtype_named = kRequired[k] == "q" || kRequired[k] == "kv_pages";
    add(kRequired[k], array_npy(kRequired[k], c.inputs.*kRequiredFields[k], dtype_named));
  }
  if (needs_dtype_member(q_dtype)) add(kQDtype, dtype_npy(q_dtype));
  if (needs_dtype_member(kv_dtype)) add(kKvDtype, dtype_npy(kv_dtype));
  add(kSmScale, scalar_npy(DType::kFloat64, c.params.sm_scale));
  for (const auto& p : kOptionalFloatParams) {
    const std::optional<double>& v = c.params.*p.field;
    if (v.has_value()) add(p.name, scalar_npy(DType::kFloat64, *v));
  }
  for (const auto& p : kIntParams) {
    const std::optional<int64_t>& v = c.params.*p.field;
    if (v.has_value()) add(p.name, scalar_npy(DType::kInt64, *v));
  }
  // The reader gives out/expected q's logical dtype whenever q has a dtype member.
  if (c.out) add_named(entries, kOut, *c.out, q_dtype, kQDtype);
  if (c.expected) add_named(entries, kExpected, *c.expected, q_dtype, kQDtype);
  return write_zip(entries);
}

bool write_case_file(const std::string& path, const Case& c, std::string* error) {
  std::vector<std::byte> bytes;
  try {
    bytes = write_case_bytes(c);
  } catch (const std::exception& e) {
    *error = printable(path) + ": " + printable(e.what());
    return false;
  }
  std::FILE* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr) {
    *error = printable(path) + ": cannot write: " + std::strerror(errno);
    return false;
  }
  const bool written = std::fwrite(bytes.data(), 1, bytes.size(), file) == bytes.size();
  const int write_errno = errno;
  const bool closed = std::fclose(file) == 0;
  if (!written || !closed) {
    *error = printable(path) + ": cannot write: " + std::strerror(written ? errno : write_errno);
    return false;
  }
  return true;
}

}  // namespace rpa
