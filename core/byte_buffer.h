// Owned bytes that start as zeros, taken from calloc. A large buffer then comes straight from
// the operating system's zero pages (glibc and ASan map it fresh and skip the memset), so a
// zero-filled array costs its allocation and nothing more until something writes to it: a
// validator that reads only shapes runs a 256 MiB production call without touching its pages.
// Copies are deep; a moved-from buffer is empty.
#pragma once

#include <cstddef>
#include <memory>

namespace rpa {

class ByteBuffer {
 public:
  ByteBuffer() = default;
  // n zero bytes. Throws std::bad_alloc when the allocation fails.
  explicit ByteBuffer(size_t n);
  // A copy of [data, data + n).
  ByteBuffer(const std::byte* data, size_t n);

  ByteBuffer(const ByteBuffer& other) : ByteBuffer(other.data(), other.size()) {}
  ByteBuffer& operator=(const ByteBuffer& other);
  ByteBuffer(ByteBuffer&& other) noexcept;
  ByteBuffer& operator=(ByteBuffer&& other) noexcept;
  ~ByteBuffer() = default;

  std::byte* data() { return bytes_.get(); }  // nullptr when empty
  const std::byte* data() const { return bytes_.get(); }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

 private:
  struct Free {
    void operator()(std::byte* p) const;
  };
  std::unique_ptr<std::byte[], Free> bytes_;
  size_t size_ = 0;
};

}  // namespace rpa
