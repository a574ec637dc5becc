#include "core/tensor.h"

#include <stdexcept>

#include "core/shared_zeros.h"

namespace rpa {

int64_t shape_numel(const Shape& shape) {
  // A zero dimension anywhere makes the product 0 however large the others are (a case file
  // may declare {8, INT64_MAX, 0}): multiplying left to right would overflow first.
  for (int64_t d : shape) {
    if (d == 0) return 0;
  }
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string shape_repr(const Shape& shape) {
  std::string s = "(";
  for (size_t k = 0; k < shape.size(); ++k) {
    if (k > 0) s += ", ";
    s += std::to_string(shape[k]);
  }
  if (shape.size() == 1) s += ",";
  return s + ")";
}

namespace {

// Shapes come from files and fuzzers: a negative dimension would turn every size and
// index computation downstream into signed overflow.
const Shape& checked(const Shape& shape) {
  for (int64_t d : shape) {
    if (d < 0) throw std::invalid_argument("Tensor: negative dimension in " + shape_repr(shape));
  }
  return shape;
}

}  // namespace

Tensor::Tensor(DType dtype, Shape shape)
    : dtype_(dtype),
      shape_(std::move(shape)),
      bytes_(static_cast<size_t>(shape_numel(checked(shape_)) * dtype_size(dtype))) {}

Tensor::Tensor(DType dtype, Shape shape, std::span<const std::byte> bytes)
    : dtype_(dtype), shape_(std::move(shape)) {
  checked(shape_);
  if (static_cast<int64_t>(bytes.size()) != shape_numel(shape_) * dtype_size(dtype_)) {
    throw std::invalid_argument("Tensor: byte count does not match shape " + shape_repr(shape_));
  }
  bytes_ = ByteBuffer(bytes.data(), bytes.size());
}

Tensor Tensor::borrow(DType dtype, Shape shape, const std::byte* data) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  checked(t.shape_);
  // An empty array may come with no address at all; an owned empty tensor is the same.
  if (t.numel() > 0) t.borrowed_ = data;
  return t;
}

Tensor Tensor::shared_zeros(DType dtype, Shape shape) {
  const int64_t n = shape_numel(checked(shape)) * dtype_size(dtype);
  return borrow(dtype, std::move(shape), rpa::shared_zeros(static_cast<size_t>(n)));
}

std::byte* Tensor::data() {
  if (borrowed_ != nullptr) {
    bytes_ = ByteBuffer(borrowed_, static_cast<size_t>(nbytes()));
    borrowed_ = nullptr;
  }
  return bytes_.data();
}

bool Tensor::operator==(const Tensor& other) const {
  if (dtype_ != other.dtype_ || shape_ != other.shape_) return false;
  const std::span<const std::byte> a = bytes(), b = other.bytes();
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size()) == 0);
}

Tensor Tensor::from_int32(Shape shape, std::span<const int32_t> values) {
  Tensor t(DType::kInt32, std::move(shape));
  if (static_cast<int64_t>(values.size()) != t.numel()) {
    throw std::invalid_argument("Tensor::from_int32: value count does not match shape");
  }
  std::memcpy(t.data(), values.data(), values.size_bytes());
  return t;
}

Tensor Tensor::from_floats(DType dtype, Shape shape, std::span<const float> values) {
  Tensor t(dtype, std::move(shape));
  if (static_cast<int64_t>(values.size()) != t.numel()) {
    throw std::invalid_argument("Tensor::from_floats: value count does not match shape");
  }
  for (size_t i = 0; i < values.size(); ++i) t.set_float(static_cast<int64_t>(i), values[i]);
  return t;
}

namespace {

template <class T>
T read_as(const std::byte* p, int64_t i) {
  T v;
  std::memcpy(&v, p + i * static_cast<int64_t>(sizeof(T)), sizeof(T));
  return v;
}

template <class T>
void write_as(std::byte* p, int64_t i, T v) {
  std::memcpy(p + i * static_cast<int64_t>(sizeof(T)), &v, sizeof(T));
}

}  // namespace

int64_t Tensor::int_at(int64_t i) const {
  const std::byte* p = data();
  switch (dtype_) {
    case DType::kInt32: return read_as<int32_t>(p, i);
    case DType::kInt64: return read_as<int64_t>(p, i);
    case DType::kInt16: return read_as<int16_t>(p, i);
    case DType::kInt8: return read_as<int8_t>(p, i);
    case DType::kUInt8: return read_as<uint8_t>(p, i);
    case DType::kUInt16: return read_as<uint16_t>(p, i);
    case DType::kUInt32: return read_as<uint32_t>(p, i);
    case DType::kUInt64: return static_cast<int64_t>(read_as<uint64_t>(p, i));
    case DType::kBool: return read_as<uint8_t>(p, i) != 0 ? 1 : 0;
    default: throw std::logic_error("Tensor::int_at on a float array");
  }
}

void Tensor::set_int(int64_t i, int64_t v) {
  std::byte* p = data();
  switch (dtype_) {
    case DType::kInt32: return write_as<int32_t>(p, i, static_cast<int32_t>(v));
    case DType::kInt64: return write_as<int64_t>(p, i, v);
    case DType::kInt16: return write_as<int16_t>(p, i, static_cast<int16_t>(v));
    case DType::kInt8: return write_as<int8_t>(p, i, static_cast<int8_t>(v));
    case DType::kUInt8: return write_as<uint8_t>(p, i, static_cast<uint8_t>(v));
    case DType::kUInt16: return write_as<uint16_t>(p, i, static_cast<uint16_t>(v));
    case DType::kUInt32: return write_as<uint32_t>(p, i, static_cast<uint32_t>(v));
    case DType::kUInt64: return write_as<uint64_t>(p, i, static_cast<uint64_t>(v));
    case DType::kBool: return write_as<uint8_t>(p, i, v != 0 ? 1 : 0);
    default: throw std::logic_error("Tensor::set_int on a float array");
  }
}

double Tensor::float_at(int64_t i) const {
  switch (dtype_) {
    case DType::kFloat64: return read_as<double>(data(), i);
    case DType::kFloat16: return f16_to_float(read_as<uint16_t>(data(), i));
    default:
      if (!dtype_is_float(dtype_)) throw std::logic_error("Tensor::float_at on an integer array");
      return load_float(dtype_, data(), i);
  }
}

void Tensor::set_float(int64_t i, double v) {
  switch (dtype_) {
    case DType::kFloat64: return write_as<double>(data(), i, v);
    case DType::kFloat16: throw std::logic_error("Tensor::set_float: float16 is not supported");
    default:
      if (!dtype_is_float(dtype_)) throw std::logic_error("Tensor::set_float on an integer array");
      return store_float(dtype_, data(), i, static_cast<float>(v));
  }
}

namespace {

// Elements (begin, end) of p set to element begin's bits: fixed-size copies, which compile to a
// load and a store (a memcpy of a run-time size is a call, and under ASan a checked one).
template <class T>
void replicate(std::byte* p, int64_t begin, int64_t end) {
  T bits;
  std::memcpy(&bits, p + begin * static_cast<int64_t>(sizeof(T)), sizeof(T));
  for (int64_t e = begin + 1; e < end; ++e) {
    std::memcpy(p + e * static_cast<int64_t>(sizeof(T)), &bits, sizeof(T));
  }
}

}  // namespace

void Tensor::fill_float(int64_t begin, int64_t end, double v) {
  if (begin >= end) return;
  set_float(begin, v);
  std::byte* p = data();
  switch (dtype_size(dtype_)) {
    case 1: return replicate<uint8_t>(p, begin, end);
    case 2: return replicate<uint16_t>(p, begin, end);
    case 4: return replicate<uint32_t>(p, begin, end);
    default: return replicate<uint64_t>(p, begin, end);
  }
}

TensorView Tensor::view() const {
  TensorView v{.data = data(), .dtype = dtype_, .shape = shape_, .strides = Shape(shape_.size())};
  int64_t stride = 1;
  for (size_t k = shape_.size(); k-- > 0;) {
    v.strides[k] = stride;
    stride *= shape_[k];
  }
  return v;
}

}  // namespace rpa
