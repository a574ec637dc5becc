// A thin RAII wrapper over libzip: read the members of an in-memory or on-disk archive
// within a byte budget, and build an archive in memory (DESIGN.md section 7: numpy's zip64
// local headers and savez_compressed's deflate are libzip's business, not ours).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

struct zip;  // libzip's zip_t; <zip.h> stays out of this header

namespace rpa {

struct ZipMember {
  std::string name;
  uint64_t size = 0;   // the uncompressed size the archive declares (central directory)
  bool stored = true;  // compression method 0 (store); else deflate or another method
};

class ZipReader {
 public:
  // Opens the archive held in `bytes`, which must outlive the reader. On failure returns
  // nullopt and sets *error to one line: "not a zip archive: " and "empty input" or
  // libzip's message.
  static std::optional<ZipReader> open(std::span<const std::byte> bytes, std::string* error);
  // Opens an archive file, reading members from disk as they are asked for. On failure
  // *error is "cannot open: <strerror>" or "not a zip archive: " and "empty file" or
  // libzip's message.
  static std::optional<ZipReader> open_file(const std::string& path, std::string* error);

  ZipReader(ZipReader&&) noexcept;
  ~ZipReader();

  // In archive order, as listed when the archive was opened. Names may repeat (libzip's
  // other consistency checks have passed): a caller that needs them unique checks.
  const std::vector<ZipMember>& members() const { return members_; }

  // Reads member `index` (< members().size()) whole into *out. Fails (false, *error set to
  // one line) if its declared size exceeds max_bytes, before allocating anything; if libzip
  // reports an error (CRC mismatch, bad deflate stream, encryption); or if the bytes it
  // yields differ in number from the declared size. Never throws except std::bad_alloc.
  bool read(size_t index, uint64_t max_bytes, std::vector<std::byte>* out,
            std::string* error) const;

 private:
  struct Closer {
    void operator()(::zip* archive) const;
  };

  explicit ZipReader(std::unique_ptr<::zip, Closer> archive) : archive_(std::move(archive)) {}
  // Takes ownership of an open archive (nullptr: a failed open, *error already set).
  static std::optional<ZipReader> adopt(::zip* archive, std::string* error);
  bool list_members(std::string* error);

  std::unique_ptr<::zip, Closer> archive_;
  std::vector<ZipMember> members_;
};

enum class ZipMethod : uint8_t { kStore, kDeflate };

struct ZipEntry {
  std::string name;
  std::vector<std::byte> data;
};

// Builds an archive in memory holding `entries` in order, each stored or deflated, with a
// fixed modification time so the same entries always give the same bytes. Throws
// std::runtime_error with libzip's message if libzip fails (out of memory, in practice).
std::vector<std::byte> write_zip(std::span<const ZipEntry> entries,
                                 ZipMethod method = ZipMethod::kStore);

}  // namespace rpa
