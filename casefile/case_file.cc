#include "casefile/case_file.h"

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <new>
#include <set>
#include <stdexcept>
#include <string_view>
#include <utility>

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

bool is_known_member(std::string_view stem) {
  for (std::string_view n : kRequired) {
    if (stem == n) return true;
  }
  for (const auto& p : kOptionalFloatParams) {
    if (stem == p.name) return true;
  }
  for (const auto& p : kIntParams) {
    if (stem == p.name) return true;
  }
  return stem == kSmScale || stem == kQDtype || stem == kKvDtype || stem == kOut ||
         stem == kExpected;
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

using Members = std::map<std::string, NpyArray, std::less<>>;

class CaseBuilder {
 public:
  explicit CaseBuilder(Members members) : members_(std::move(members)) {}

  // Returns an error line, or "" with *out filled.
  std::string build(Case* out) {
    std::optional<DType> q_dtype;
    std::optional<DType> kv_dtype;
    if (std::string e = dtype_member(kQDtype, &q_dtype); !e.empty()) return e;
    if (std::string e = dtype_member(kKvDtype, &kv_dtype); !e.empty()) return e;
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
  NpyArray* find(std::string_view stem) {
    const auto it = members_.find(stem);
    return it == members_.end() ? nullptr : &it->second;
  }

  std::string dtype_member(std::string_view stem, std::optional<DType>* out) {
    const NpyArray* a = find(stem);
    if (a == nullptr) return "";
    if (a->kind != NpyKind::kUnicode || !a->shape.empty()) {
      return member_prefix(stem) + "must be a 0-d unicode string (np.array('bfloat16')), holds " +
             a->describe();
    }
    const std::u32string name = a->unicode_at(0);
    std::string ascii;
    for (char32_t c : name) {
      if (c >= 0x80) break;
      ascii.push_back(static_cast<char>(c));
    }
    const std::optional<DType> t =
        ascii.size() == name.size() ? dtype_from_name(ascii) : std::nullopt;
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
    out->emplace(dtype, std::move(a->shape), std::move(a->data));
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
    const Tensor t(a->dtype, Shape{}, std::move(a->data));
    const int64_t v = t.int_at(0);
    // int_at wraps uint64 values above INT64_MAX to negatives.
    if (a->dtype == DType::kUInt64 && v < 0) {
      return member_prefix(stem) + std::to_string(static_cast<uint64_t>(v)) +
             " does not fit in int64";
    }
    *out = v;
    return "";
  }

  Members members_;
};

std::string check_names_and_sizes(const std::vector<ZipMember>& members, uint64_t cap) {
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
    if (!seen.insert(stem).second) return "duplicate member '" + printable(name) + "'";
    if (m.size > cap) {
      return "member '" + printable(name) + "' declares " + std::to_string(m.size) +
             " bytes, more than " + cap_text;
    }
    total_overflows = total_overflows || __builtin_add_overflow(total, m.size, &total);
  }
  for (std::string_view n : kRequired) {
    if (!seen.contains(n)) {
      return "missing required member '" + std::string(n) + std::string(kNpySuffix) + "'";
    }
  }
  if (total_overflows || total > cap) {
    return "members declare " + (total_overflows ? "more than 2^64" : std::to_string(total)) +
           " bytes in all, more than " + cap_text;
  }
  return "";
}

CaseReadResult read_archive(const ZipReader& reader, const CaseReadOptions& options) {
  CaseReadResult result;
  const uint64_t cap = options.max_bytes > 0 ? static_cast<uint64_t>(options.max_bytes) : 0;
  const std::vector<ZipMember>& members = reader.members();
  result.error = check_names_and_sizes(members, cap);
  if (!result.error.empty()) return result;
  Members arrays;
  for (size_t i = 0; i < members.size(); ++i) {
    const std::string_view stem =
        std::string_view(members[i].name).substr(0, members[i].name.size() - kNpySuffix.size());
    std::vector<std::byte> bytes;
    std::string error;
    if (!reader.read(i, cap, &bytes, &error)) {
      result.error = member_prefix(stem) + error;
      return result;
    }
    NpyParseResult npy = parse_npy(std::move(bytes));
    if (!npy.value.has_value()) {
      result.error = member_prefix(stem) + npy.error;
      return result;
    }
    arrays.emplace(std::string(stem), std::move(*npy.value));
  }
  Case c;
  result.error = CaseBuilder(std::move(arrays)).build(&c);
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

std::vector<std::byte> write_case_bytes(const Case& c) {
  const DType q_dtype = c.inputs.q.dtype();
  const DType kv_dtype = c.inputs.kv_pages.dtype();
  std::vector<ZipEntry> entries;
  const auto add = [&](std::string_view stem, std::vector<std::byte> npy) {
    entries.push_back(
        ZipEntry{.name = std::string(stem) + std::string(kNpySuffix), .data = std::move(npy)});
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
  for (const auto& [stem, t] : {std::pair{kOut, &c.out}, std::pair{kExpected, &c.expected}}) {
    if (!t->has_value()) continue;
    const DType d = (*t)->dtype();
    // The reader gives out/expected q's logical dtype whenever q has a dtype member, so
    // they must have it too to read back as written.
    if (needs_dtype_member(q_dtype) && d != q_dtype) {
      throw std::invalid_argument("write_case_bytes: " + std::string(stem) + " has dtype " +
                                  std::string(dtype_name(d)) + " but q has " +
                                  std::string(dtype_name(q_dtype)));
    }
    add(stem, array_npy(stem, **t, needs_dtype_member(q_dtype)));
  }
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
