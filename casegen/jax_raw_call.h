// A call decoded straight from fuzzer bytes, without the case generators (fuzz_raw_inputs):
// each of the six arrays in any dtype a case file may name, any rank 0..5, any dims within
// one element budget, any contents; every parameter present or absent with any value. It
// asks whether validation returns a verdict on anything and whether strict mode lets
// through only what the kernel and the reference can run.
//
// visit_raw_call() names every choice in order, like visit_case() (casegen/jax_build_case.h),
// and runs with the same sources: ByteSource decodes fuzzer bytes, ByteSink encodes a call
// (the seeds are generated cases written this way). Order: dtypes and shapes, parameters,
// the index arrays, then q and kv_pages, so that bytes run out on float data (zeros) first.
#pragma once

#include <bit>
#include <cstdint>
#include <cstdlib>
#include <initializer_list>
#include <limits>
#include <optional>
#include <span>
#include <vector>

#include "core/dtype.h"
#include "core/jax_inputs.h"
#include "core/jax_params.h"
#include "core/tensor.h"

namespace rpa::fuzz {

inline constexpr int64_t kMaxRawRank = 5;
// Elements over all six arrays: at up to 8 bytes an element a raw call's arrays hold at most
// 32 KiB whatever the input (the target's max_len is 4096), so decoding stays fast and no
// input makes the arrays, or anything sized by them, large.
inline constexpr int64_t kMaxRawElements = 4096;
// Any one dim: a zero elsewhere lets a shape like (0, 4096) through the element budget.
inline constexpr int64_t kMaxRawDim = 4096;

// Every dtype a case file may name, in DType order.
inline constexpr DType kAllDtypes[] = {
    DType::kFloat32, DType::kBFloat16, DType::kFloat8E4M3FN, DType::kFloat8E5M2, DType::kInt32,
    DType::kInt64,   DType::kInt16,    DType::kInt8,         DType::kUInt8,      DType::kUInt16,
    DType::kUInt32,  DType::kUInt64,   DType::kFloat16,      DType::kFloat64,    DType::kBool};
static_assert(
    [] {
      for (size_t i = 0; i < std::size(kAllDtypes); ++i) {
        if (static_cast<size_t>(kAllDtypes[i]) != i) return false;
      }
      return true;
    }(),
    "kAllDtypes lists every DType in enum order: the decoder indexes it by the enum value");

// Scalars the validation rules turn on; any other value comes as raw bits.
inline constexpr double kSpecialFloats[] = {0.0,
                                            -0.0,
                                            1.0,
                                            -1.0,
                                            1e-50,
                                            5e-324,
                                            std::numeric_limits<double>::quiet_NaN(),
                                            std::numeric_limits<double>::infinity(),
                                            -std::numeric_limits<double>::infinity(),
                                            1e39,
                                            -1e30,
                                            -1e29,
                                            kDefaultMaskValue,
                                            -3.4028234663852886e38};
inline constexpr int64_t kSpecialInts[] = {0,
                                           1,
                                           -1,
                                           std::numeric_limits<int32_t>::max(),
                                           int64_t{1} << 31,
                                           std::numeric_limits<int32_t>::min(),
                                           int64_t{1} << 40,
                                           std::numeric_limits<int64_t>::max(),
                                           std::numeric_limits<int64_t>::min()};
// Non-special integers in [-kSmallInt, kSmallInt] take two bytes; others eight.
inline constexpr int64_t kSmallInt = 1 << 14;

struct RawCall {
  Inputs inputs;
  Params params;
};

namespace raw_detail {

// A 64-bit pattern as two 32-bit choices, low word first.
template <class Io>
void bits64(Io& io, uint64_t& bits) {
  int64_t lo = static_cast<int64_t>(bits & 0xffffffffu), hi = static_cast<int64_t>(bits >> 32);
  io.num(lo, 0, 0xffffffff, {});
  io.num(hi, 0, 0xffffffff, {});
  bits = static_cast<uint64_t>(lo) | static_cast<uint64_t>(hi) << 32;
}

template <class Io>
void any_double(Io& io, double& v) {
  constexpr int64_t n = std::size(kSpecialFloats);
  int64_t k = n;  // raw bits
  for (int64_t i = 0; i < n; ++i) {
    if (std::bit_cast<uint64_t>(kSpecialFloats[i]) == std::bit_cast<uint64_t>(v)) k = i;
  }
  io.num(k, 0, n, {});
  if (k < n) {
    v = kSpecialFloats[k];
    return;
  }
  uint64_t bits = std::bit_cast<uint64_t>(v);
  bits64(io, bits);
  v = std::bit_cast<double>(bits);
}

template <class Io>
void any_int(Io& io, int64_t& v) {
  constexpr int64_t n = std::size(kSpecialInts);
  int64_t k = -1;
  for (int64_t i = 0; i < n && k < 0; ++i) {
    if (kSpecialInts[i] == v) k = i;
  }
  if (k < 0) k = v >= -kSmallInt && v <= kSmallInt ? n : n + 1;
  io.num(k, 0, n + 1, {});
  if (k < n) {
    v = kSpecialInts[k];
  } else if (k == n) {
    io.num(v, -kSmallInt, kSmallInt, {});
  } else {
    uint64_t bits = static_cast<uint64_t>(v);
    bits64(io, bits);
    v = static_cast<int64_t>(bits);
  }
}

template <class Io, class T, class Body>
void optional_field(Io& io, std::optional<T>& f, Body body) {
  int64_t present = f.has_value() ? 1 : 0;
  io.num(present, 0, 1, {});
  if (present == 0) {
    f.reset();
    return;
  }
  if (!f) f.emplace();
  body(*f);
}

// The largest dim k of `shape` may take: the element budget left over the dims before it.
inline int64_t dim_bound(const Shape& shape, size_t k, int64_t budget_left) {
  int64_t before = 1;
  for (size_t i = 0; i < k; ++i) before *= shape[i];
  return before == 0 ? kMaxRawDim : std::min(kMaxRawDim, budget_left / before);
}

// One array's dtype and shape, leaving `reserve` elements of the budget for the arrays after
// it (a 0-d array always holds one); returns false (encoding only) when the array is
// outside the bounds.
template <class Io>
bool array_header(Io& io, DType& dtype, Shape& shape, int64_t& budget_left, int64_t reserve) {
  int64_t d = static_cast<int64_t>(dtype);
  io.num(d, 0, static_cast<int64_t>(std::size(kAllDtypes)) - 1, {});
  dtype = kAllDtypes[d];
  int64_t rank = static_cast<int64_t>(shape.size());
  if (Io::kEncodes && rank > kMaxRawRank) return false;
  io.num(rank, 0, kMaxRawRank, {});
  shape.resize(static_cast<size_t>(rank));
  for (size_t k = 0; k < shape.size(); ++k) {
    const int64_t hi = dim_bound(shape, k, budget_left - reserve);
    if (Io::kEncodes && (shape[k] < 0 || shape[k] > hi)) return false;
    io.num(shape[k], 0, hi, {});
  }
  budget_left -= shape_numel(shape);
  return true;
}

// An array's bytes as they are (bool: the low bit, 0 or 1, as numpy stores it).
template <class Io>
void array_contents(Io& io, Tensor& t, DType dtype, const Shape& shape) {
  std::vector<std::byte> bytes(static_cast<size_t>(shape_numel(shape) * dtype_size(dtype)));
  if (Io::kEncodes) bytes.assign(t.bytes().begin(), t.bytes().end());
  io.raw(bytes);
  if (dtype == DType::kBool) {
    for (std::byte& b : bytes) b &= std::byte{1};
  }
  t = Tensor(dtype, shape, bytes);
}

}  // namespace raw_detail

// Returns false only when encoding a call that lies outside the bounds above (nothing was
// meaningfully written then); decoding always succeeds.
template <class Io>
bool visit_raw_call(Io& io, RawCall& c) {
  using namespace raw_detail;
  Tensor* arrays[] = {&c.inputs.kv_lens,   &c.inputs.page_indices,
                      &c.inputs.cu_q_lens, &c.inputs.num_seqs,
                      &c.inputs.q,         &c.inputs.kv_pages};
  DType dtypes[std::size(arrays)];
  Shape shapes[std::size(arrays)];
  int64_t budget_left = kMaxRawElements;
  for (size_t a = 0; a < std::size(arrays); ++a) {
    dtypes[a] = arrays[a]->dtype();
    shapes[a] = arrays[a]->shape();
    const auto after = static_cast<int64_t>(std::size(arrays) - a - 1);
    if (!array_header(io, dtypes[a], shapes[a], budget_left, after)) return false;
  }

  Params& p = c.params;
  any_double(io, p.sm_scale);
  optional_field(io, p.sliding_window, [&](int64_t& v) { any_int(io, v); });
  optional_field(io, p.soft_cap, [&](double& v) { any_double(io, v); });
  optional_field(io, p.mask_value, [&](double& v) { any_double(io, v); });
  optional_field(io, p.k_scale, [&](double& v) { any_double(io, v); });
  optional_field(io, p.v_scale, [&](double& v) { any_double(io, v); });
  optional_field(io, p.num_kv_pages_per_block, [&](int64_t& v) { any_int(io, v); });
  optional_field(io, p.num_queries_per_block, [&](int64_t& v) { any_int(io, v); });
  optional_field(io, p.vmem_limit_bytes, [&](int64_t& v) { any_int(io, v); });

  for (size_t a = 0; a < std::size(arrays); ++a) {
    array_contents(io, *arrays[a], dtypes[a], shapes[a]);
  }
  return true;
}

RawCall decode_raw_call(std::span<const uint8_t> bytes);
// The bytes from which decode_raw_call() builds `c` again; nullopt when c is outside the
// bounds (rank over 5, more than kMaxRawElements elements, a dim over kMaxRawDim).
std::optional<std::vector<uint8_t>> encode_raw_call(const RawCall& c);

}  // namespace rpa::fuzz
