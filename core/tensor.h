// An owned, C-ordered, little-endian array with a dtype and a shape, and a strided view.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "core/byte_buffer.h"
#include "core/dtype.h"

namespace rpa {

using Shape = std::vector<int64_t>;

// Number of elements of a shape; the caller guarantees the product fits (case readers
// check for overflow before they build a Shape).
int64_t shape_numel(const Shape& shape);
// Python's rendering of a shape tuple: (), (3,), (2, 4).
std::string shape_repr(const Shape& shape);

// A non-owning view: element (i0, i1, ...) lives at data + sum(ik * strides[k]) elements.
struct TensorView {
  const std::byte* data = nullptr;
  DType dtype = DType::kFloat32;
  Shape shape;    // one entry per dimension
  Shape strides;  // in elements, same rank as shape

  int rank() const { return static_cast<int>(shape.size()); }
};

class Tensor {
 public:
  // A 0-d float32 holding 0.0: one element with its storage, like any 0-d array (a Case
  // holds one dialect's arrays and leaves the other's default, and compares them all).
  Tensor() : bytes_(sizeof(float)) {}
  // Zero-filled (core/byte_buffer.h: a large array's pages stay untouched until written).
  // Throws std::invalid_argument on a negative dimension.
  Tensor(DType dtype, Shape shape);
  // Copies raw little-endian bytes; bytes.size() must equal numel * dtype_size.
  Tensor(DType dtype, Shape shape, std::span<const std::byte> bytes);

  // A tensor over memory it does not own (a numpy array handed over by the Python package):
  // no copy is made, and the caller keeps `data` alive and unchanged for as long as this
  // tensor or any copy of it lives. Reads see `data`; the first mutable access (data(),
  // set_int, set_float) copies it into owned storage. Throws std::invalid_argument on a
  // negative dimension.
  static Tensor borrow(DType dtype, Shape shape, const std::byte* data);
  // Zeros borrowed from the process-wide read-only mapping (core/shared_zeros.h): reads see
  // zeros and no memory is allocated or touched; the first mutable access copies them into
  // owned storage like any borrowed tensor's. Equal (==) to Tensor(dtype, shape).
  static Tensor shared_zeros(DType dtype, Shape shape);
  static Tensor from_int32(Shape shape, std::span<const int32_t> values);
  static Tensor from_floats(DType dtype, Shape shape, std::span<const float> values);

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int rank() const { return static_cast<int>(shape_.size()); }
  int64_t dim(int k) const { return shape_[static_cast<size_t>(k)]; }
  int64_t numel() const { return shape_numel(shape_); }
  int64_t nbytes() const { return numel() * dtype_size(dtype_); }

  std::byte* data();  // owned storage (a borrowed tensor copies its data here first)
  const std::byte* data() const { return borrowed_ != nullptr ? borrowed_ : bytes_.data(); }
  std::span<const std::byte> bytes() const {
    return {data(), static_cast<size_t>(nbytes())};
  }
  bool borrowed() const { return borrowed_ != nullptr; }

  // Element i (flat, C order) of an integer or bool array, widened to int64.
  int64_t int_at(int64_t i) const;
  void set_int(int64_t i, int64_t v);  // integer dtypes; v is truncated to the width
  // Element i of a float array (any float dtype, float64 included) as double.
  double float_at(int64_t i) const;
  void set_float(int64_t i, double v);  // rounds to the dtype
  // Elements [begin, end) of a float array set to v, each as set_float sets it (the first one
  // rounded, its bytes copied to the others: a cache's filler costs a copy per element).
  void fill_float(int64_t begin, int64_t end, double v);

  TensorView view() const;

  // Same dtype, shape and bytes (owned or borrowed alike).
  bool operator==(const Tensor& other) const;

 private:
  DType dtype_ = DType::kFloat32;
  Shape shape_;
  ByteBuffer bytes_;
  const std::byte* borrowed_ = nullptr;  // set: the data lives there, bytes_ is empty
};

}  // namespace rpa
