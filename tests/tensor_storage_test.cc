// The tensors' storage (issue 35): zero-filled buffers from calloc (core/byte_buffer.h), the
// read-only shared zeros (core/shared_zeros.h, Tensor::shared_zeros) that a validator-only
// materialization borrows, and Tensor::fill_float, which the materializers fill padding with.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "core/byte_buffer.h"
#include "core/shared_zeros.h"
#include "core/tensor.h"

namespace rpa {
namespace {

bool all_zero(const std::byte* p, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (p[i] != std::byte{0}) return false;
  }
  return true;
}

TEST(ByteBuffer, StartsZeroedAtEverySize) {
  // Below and above glibc's and ASan's thresholds for a fresh mapping (128 KiB, 32 MiB).
  for (size_t n : {size_t{1}, size_t{7}, size_t{4096}, size_t{200} << 10, size_t{40} << 20}) {
    ByteBuffer b(n);
    ASSERT_EQ(b.size(), n);
    ASSERT_NE(b.data(), nullptr);
    EXPECT_TRUE(all_zero(b.data(), n)) << n;
  }
  const ByteBuffer empty(0);
  EXPECT_EQ(empty.size(), 0u);
  EXPECT_EQ(empty.data(), nullptr);
  EXPECT_TRUE(empty.empty());
}

TEST(ByteBuffer, CopiesAreDeepAndMovesLeaveTheSourceEmpty) {
  ByteBuffer a(16);
  a.data()[3] = std::byte{42};
  ByteBuffer b = a;
  ASSERT_NE(b.data(), a.data());
  b.data()[3] = std::byte{7};
  EXPECT_EQ(a.data()[3], std::byte{42});
  ByteBuffer c;
  c = a;
  EXPECT_EQ(c.data()[3], std::byte{42});
  const std::byte* where = a.data();
  ByteBuffer d = std::move(a);
  EXPECT_EQ(d.data(), where);
  EXPECT_EQ(a.size(), 0u);  // NOLINT(bugprone-use-after-move): moved-from is empty by contract
  EXPECT_EQ(a.data(), nullptr);
  ByteBuffer e(3);
  e = std::move(d);
  EXPECT_EQ(e.data(), where);
  EXPECT_EQ(e.size(), 16u);
  const std::byte raw[3] = {std::byte{1}, std::byte{2}, std::byte{3}};
  const ByteBuffer f(raw, 3);
  EXPECT_EQ(f.data()[2], std::byte{3});
}

TEST(SharedZeros, ReadAsZerosAndStayValidAsTheyGrow) {
  const std::byte* small = shared_zeros(100);
  EXPECT_TRUE(all_zero(small, 100));
  // Larger than the first region: a new mapping, and the first pointer still reads.
  const size_t big = (size_t{64} << 20) + 1;
  const std::byte* large = shared_zeros(big);
  EXPECT_TRUE(all_zero(large + big - 4096, 4096));
  EXPECT_TRUE(all_zero(small, 100));
  EXPECT_EQ(shared_zeros(10), large);  // the current region serves every smaller request
}

TEST(SharedZeros, TensorEqualsAZeroFilledOneAndCopiesOnWrite) {
  for (DType t : {DType::kFloat32, DType::kBFloat16, DType::kFloat8E4M3FN, DType::kInt32}) {
    const Shape shape{3, 5, 7};
    Tensor z = Tensor::shared_zeros(t, shape);
    EXPECT_TRUE(z.borrowed());
    EXPECT_EQ(z, Tensor(t, shape));
    EXPECT_EQ(z.nbytes(), Tensor(t, shape).nbytes());
    const Tensor before = z;
    if (dtype_is_float(t)) {
      z.set_float(4, 1.0);
      EXPECT_EQ(z.float_at(4), 1.0);
    } else {
      z.set_int(4, 9);
      EXPECT_EQ(z.int_at(4), 9);
    }
    EXPECT_FALSE(z.borrowed());
    // The write went to the copy: the shared region and the other tensor still read zero.
    EXPECT_EQ(before, Tensor(t, shape));
    EXPECT_TRUE(all_zero(shared_zeros(1), 64));
  }
  const Tensor empty = Tensor::shared_zeros(DType::kFloat32, {4, 0});
  EXPECT_EQ(empty, Tensor(DType::kFloat32, {4, 0}));
  EXPECT_THROW(Tensor::shared_zeros(DType::kFloat32, {2, -1}), std::invalid_argument);
}

TEST(TensorFill, SetsExactlyTheRangeAsSetFloatDoes) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (DType t : {DType::kFloat32, DType::kBFloat16, DType::kFloat8E4M3FN, DType::kFloat8E5M2,
                  DType::kFloat64}) {
    for (double v : {1e30, 448.0, 57344.0, 0.1, -0.0, nan}) {
      Tensor filled(t, {10});
      Tensor one_by_one(t, {10});
      for (int64_t e = 0; e < 10; ++e) {
        filled.set_float(e, -2.0);
        one_by_one.set_float(e, -2.0);
      }
      filled.fill_float(2, 7, v);
      for (int64_t e = 2; e < 7; ++e) one_by_one.set_float(e, v);
      EXPECT_EQ(filled, one_by_one) << dtype_name(t) << " " << v;
      EXPECT_EQ(filled.float_at(1), one_by_one.float_at(1));
      EXPECT_EQ(filled.float_at(7), -2.0);
    }
  }
  Tensor t(DType::kFloat32, {4});
  t.fill_float(3, 3, 5.0);  // empty range: nothing
  t.fill_float(3, 1, 5.0);
  EXPECT_EQ(t, Tensor(DType::kFloat32, {4}));
  t.fill_float(0, 4, 5.0);
  for (int64_t e = 0; e < 4; ++e) EXPECT_EQ(t.float_at(e), 5.0);
}

}  // namespace
}  // namespace rpa
