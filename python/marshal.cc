// The Python binding's generic marshalling (python/marshal.h): arrays into a borrowed Case and
// Tensors back into numpy arrays, the commands' flags, a rejection's dict. It names no dialect:
// each dialect's part goes through dialect_marshal (python/bindings.cc).
#include "python/marshal.h"

#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/dtype.h"

namespace rpa::py {
namespace {

// The dialect a case's parameters name under "dialect" (absent: jax).
Dialect dialect_of(const ParamMap& params) {
  if (!params.contains("dialect") || params["dialect"].is_none()) return Dialect::kJax;
  const auto name = nb::cast<std::string>(params["dialect"]);
  const std::optional<Dialect> d = parse_dialect(name);
  if (!d) throw std::invalid_argument("unknown dialect " + name);
  return *d;
}

}  // namespace

std::string dtype_list() {
  std::string names;
  for (int t = 0; t <= static_cast<int>(DType::kBool); ++t) {
    names += (names.empty() ? "" : ", ") + std::string(dtype_name(static_cast<DType>(t)));
  }
  return names;
}

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

std::optional<bool> opt_bool(const ParamMap& p, const char* key) {
  if (!p.contains(key) || p[key].is_none()) return std::nullopt;
  return nb::cast<bool>(p[key]);
}

BorrowedCase to_case(const ArrayMap& arrays, const ParamMap& params) {
  BorrowedCase b;
  b.c.dialect = dialect_of(params);
  dialect_marshal(b.c.dialect).to_case(arrays, params, b);
  return b;
}

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

nb::tuple from_case(Case c) {
  nb::dict arrays, params;
  params["dialect"] = std::string(dialect_name(c.dialect));
  if (c.out) arrays["out"] = typed(std::move(*c.out));
  if (c.expected) arrays["expected"] = typed(std::move(*c.expected));
  dialect_marshal(c.dialect).from_case(c, arrays, params);
  return nb::make_tuple(arrays, params);
}

CaseOptions parse_flags(const std::vector<std::string>& flags,
                        const std::set<std::string_view>& allowed, const std::string& label) {
  const std::vector<std::string_view> views(flags.begin(), flags.end());
  CaseOptions a;
  a.path = label;
  if (std::string err = parse_case_options(views, allowed, a); !err.empty()) {
    throw std::invalid_argument(err);
  }
  return a;
}

nb::object rejection_dict(const std::string& why, Mode mode, const std::optional<RuleReport>& rule) {
  nb::dict d;
  d["why"] = why;
  d["mode"] = std::string(mode_name(mode));
  d["rule"] = rule ? nb::cast(std::string(rule->rule)) : nb::none();
  d["message"] = rule ? nb::cast(rule->message) : nb::none();
  return d;
}

CaseOptions run_args(const std::vector<std::string>& flags) {
  CaseOptions a = parse_flags(flags, kRunOptions);
  if (std::string err = run_options_error(a); !err.empty()) throw std::invalid_argument(err);
  return a;
}

}  // namespace rpa::py
