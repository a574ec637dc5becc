#include "core/byte_buffer.h"

#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

namespace rpa {

void ByteBuffer::Free::operator()(std::byte* p) const { std::free(p); }

ByteBuffer::ByteBuffer(size_t n) : size_(n) {
  if (n == 0) return;
  bytes_.reset(static_cast<std::byte*>(std::calloc(n, 1)));
  if (!bytes_) throw std::bad_alloc();
}

ByteBuffer::ByteBuffer(const std::byte* data, size_t n) : size_(n) {
  if (n == 0) return;
  bytes_.reset(static_cast<std::byte*>(std::malloc(n)));
  if (!bytes_) throw std::bad_alloc();
  std::memcpy(bytes_.get(), data, n);
}

ByteBuffer& ByteBuffer::operator=(const ByteBuffer& other) {
  if (this != &other) *this = ByteBuffer(other);
  return *this;
}

ByteBuffer::ByteBuffer(ByteBuffer&& other) noexcept
    : bytes_(std::move(other.bytes_)), size_(std::exchange(other.size_, 0)) {}

ByteBuffer& ByteBuffer::operator=(ByteBuffer&& other) noexcept {
  bytes_ = std::move(other.bytes_);
  size_ = std::exchange(other.size_, 0);
  return *this;
}

}  // namespace rpa
