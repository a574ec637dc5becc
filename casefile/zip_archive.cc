#include "casefile/zip_archive.h"

#include <sys/stat.h>
#include <zip.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <stdexcept>
#include <utility>

namespace rpa {
namespace {

// ZIP_CHECKCONS makes libzip compare every local header with the central directory, refuse
// bytes after the end record and refuse duplicate names: corrupt archives then fail at open
// rather than half way through a read.
constexpr int kReadFlags = ZIP_RDONLY | ZIP_CHECKCONS;
// Members are read in pieces so that a libzip error surfaces before the rest is inflated.
constexpr uint64_t kReadChunk = uint64_t{1} << 20;
// 2000-01-01T00:00:00Z: a fixed member time keeps written archives byte-for-byte
// reproducible (for the corpus and for diffs) on machines in the same time zone, since zip
// stores local DOS times.
constexpr time_t kFixedMtime = 946684800;

[[noreturn]] void throw_write_error(const std::string& what) {
  throw std::runtime_error("write_zip: " + what);
}

std::string error_message(zip_error_t* error) {
  std::string message = zip_error_strerror(error);
  zip_error_fini(error);
  return message;
}

struct SourceFree {
  void operator()(zip_source_t* source) const { zip_source_free(source); }
};
using SourcePtr = std::unique_ptr<zip_source_t, SourceFree>;

struct FileClose {
  void operator()(zip_file_t* file) const { zip_fclose(file); }
};

// Takes ownership of `source` whatever happens; returns nullptr with *error set on failure.
// libzip checks names for duplicates last, after the rest of its consistency check has
// passed, so an archive refused for that alone is reopened without the check: its members
// are then listed, repeats included, and whether a repeat matters is the caller's call.
zip_t* open_source(SourcePtr source, std::string* error) {
  zip_error_t zerr;
  zip_error_init(&zerr);
  zip_t* archive = zip_open_from_source(source.get(), kReadFlags, &zerr);
  if (archive == nullptr && zip_error_code_zip(&zerr) == ZIP_ER_EXISTS) {
    zip_error_fini(&zerr);
    zip_error_init(&zerr);
    archive = zip_open_from_source(source.get(), ZIP_RDONLY, &zerr);
  }
  if (archive == nullptr) {
    *error = "not a zip archive: " + error_message(&zerr);
    return nullptr;
  }
  zip_error_fini(&zerr);
  source.release();  // the archive owns it now
  return archive;
}

}  // namespace

void ZipReader::Closer::operator()(::zip* archive) const {
  // Read-only: nothing to write back, so discard rather than close.
  zip_discard(archive);
}

ZipReader::ZipReader(ZipReader&&) noexcept = default;
ZipReader::~ZipReader() = default;

std::optional<ZipReader> ZipReader::open(std::span<const std::byte> bytes, std::string* error) {
  // libzip opens an empty source as an empty archive; to a reader it is a wrong file.
  if (bytes.empty()) {
    *error = "not a zip archive: empty input";
    return std::nullopt;
  }
  zip_error_t zerr;
  zip_error_init(&zerr);
  SourcePtr source(zip_source_buffer_create(bytes.data(), bytes.size(), 0, &zerr));
  if (source == nullptr) {
    *error = "not a zip archive: " + error_message(&zerr);
    return std::nullopt;
  }
  zip_error_fini(&zerr);
  return adopt(open_source(std::move(source), error), error);
}

std::optional<ZipReader> ZipReader::open_file(const std::string& path, std::string* error) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) {
    *error = std::string("cannot open: ") + std::strerror(errno);
    return std::nullopt;
  }
  struct stat st {};
  if (fstat(fileno(file), &st) != 0 || S_ISDIR(st.st_mode)) {
    const int err = S_ISDIR(st.st_mode) ? EISDIR : errno;
    std::fclose(file);
    *error = std::string("cannot open: ") + std::strerror(err);
    return std::nullopt;
  }
  if (S_ISREG(st.st_mode) && st.st_size == 0) {
    std::fclose(file);
    *error = "not a zip archive: empty file";
    return std::nullopt;
  }
  zip_error_t zerr;
  zip_error_init(&zerr);
  // Length 0: the whole file, in every libzip version.
  SourcePtr source(zip_source_filep_create(file, 0, 0, &zerr));
  if (source == nullptr) {
    std::fclose(file);
    *error = "not a zip archive: " + error_message(&zerr);
    return std::nullopt;
  }
  zip_error_fini(&zerr);
  return adopt(open_source(std::move(source), error), error);
}

std::optional<ZipReader> ZipReader::adopt(::zip* archive, std::string* error) {
  if (archive == nullptr) return std::nullopt;
  ZipReader reader{std::unique_ptr<::zip, Closer>(archive)};
  if (!reader.list_members(error)) return std::nullopt;
  return reader;
}

bool ZipReader::list_members(std::string* error) {
  const zip_int64_t count = zip_get_num_entries(archive_.get(), 0);
  for (zip_int64_t i = 0; i < count; ++i) {
    zip_stat_t st;
    zip_stat_init(&st);
    if (zip_stat_index(archive_.get(), static_cast<zip_uint64_t>(i), 0, &st) != 0) {
      *error = std::string("not a zip archive: ") + zip_strerror(archive_.get());
      return false;
    }
    if ((st.valid & ZIP_STAT_NAME) == 0 || (st.valid & ZIP_STAT_SIZE) == 0) {
      *error = "not a zip archive: member " + std::to_string(i) + " has no name or size";
      return false;
    }
    const bool stored = (st.valid & ZIP_STAT_COMP_METHOD) == 0 || st.comp_method == ZIP_CM_STORE;
    members_.push_back(ZipMember{.name = st.name, .size = st.size, .stored = stored});
  }
  return true;
}

bool ZipReader::read(size_t index, uint64_t max_bytes, std::vector<std::byte>* out,
                     std::string* error) const {
  const uint64_t size = members_.at(index).size;
  if (size > max_bytes) {
    *error = "declares " + std::to_string(size) + " bytes, more than the " +
             std::to_string(max_bytes) + "-byte budget";
    return false;
  }
  std::unique_ptr<zip_file_t, FileClose> file(zip_fopen_index(archive_.get(), index, 0));
  if (file == nullptr) {
    *error = zip_strerror(archive_.get());
    return false;
  }
  // The buffer grows with the bytes that arrive, not to the declared size at once: a member
  // of a few compressed bytes may declare gigabytes (found by the case-file seeds: 1424
  // bytes declaring 4 GiB made every reader allocate and zero 4 GiB before refusing it).
  out->clear();
  uint64_t got = 0;
  while (got < size) {
    const uint64_t want = std::min(size - got, kReadChunk);
    // Doubling, but never past the declared size: the largest allocation is the member.
    if (out->capacity() < got + want) {
      out->reserve(static_cast<size_t>(std::min(size, std::max(2 * got, got + want))));
    }
    out->resize(static_cast<size_t>(got + want));
    const zip_int64_t n = zip_fread(file.get(), out->data() + got, want);
    if (n < 0) {
      *error = zip_file_strerror(file.get());
      return false;
    }
    got += static_cast<uint64_t>(n);
    out->resize(static_cast<size_t>(got));
    if (n == 0) break;
  }
  if (got < size) {
    *error = "declares " + std::to_string(size) + " bytes, holds " + std::to_string(got);
    return false;
  }
  // Reading on to the end is what makes libzip compare the CRC (and the size) with the
  // directory, so ask for one more byte even though none should come.
  std::byte extra{};
  const zip_int64_t n = zip_fread(file.get(), &extra, 1);
  if (n < 0) {
    *error = zip_file_strerror(file.get());
    return false;
  }
  if (n > 0) {
    *error = "declares " + std::to_string(size) + " bytes, holds more";
    return false;
  }
  return true;
}

std::vector<std::byte> write_zip(std::span<const ZipEntry> entries, ZipMethod method) {
  zip_error_t zerr;
  zip_error_init(&zerr);
  SourcePtr target(zip_source_buffer_create(nullptr, 0, 0, &zerr));
  if (target == nullptr) throw_write_error(error_message(&zerr));
  zip_t* archive = zip_open_from_source(target.get(), ZIP_TRUNCATE, &zerr);
  if (archive == nullptr) throw_write_error(error_message(&zerr));
  zip_error_fini(&zerr);
  // The archive releases its reference to the target on close; ours keeps the bytes alive.
  zip_source_keep(target.get());
  const auto discard_and_fail = [&](const std::string& what) {
    std::string message = what + ": " + zip_strerror(archive);
    zip_discard(archive);
    throw_write_error(message);
  };
  const zip_int32_t compression = method == ZipMethod::kStore ? ZIP_CM_STORE : ZIP_CM_DEFLATE;
  for (const ZipEntry& entry : entries) {
    zip_source_t* source = zip_source_buffer(archive, entry.data.data(), entry.data.size(), 0);
    if (source == nullptr) discard_and_fail("member '" + entry.name + "'");
    const zip_int64_t index = zip_file_add(archive, entry.name.c_str(), source, ZIP_FL_ENC_UTF_8);
    if (index < 0) {
      zip_source_free(source);
      discard_and_fail("member '" + entry.name + "'");
    }
    const auto i = static_cast<zip_uint64_t>(index);
    if (zip_set_file_compression(archive, i, compression, 0) != 0 ||
        zip_file_set_mtime(archive, i, kFixedMtime, 0) != 0) {
      discard_and_fail("member '" + entry.name + "'");
    }
  }
  if (zip_close(archive) != 0) discard_and_fail("close");

  zip_source_t* src = target.get();
  const auto source_fail = [&](const char* what) {
    throw_write_error(std::string(what) + ": " + zip_error_strerror(zip_source_error(src)));
  };
  if (zip_source_open(src) != 0) source_fail("reopen");
  std::vector<std::byte> bytes;
  if (zip_source_seek(src, 0, SEEK_END) != 0) source_fail("seek");
  const zip_int64_t size = zip_source_tell(src);
  if (size < 0 || zip_source_seek(src, 0, SEEK_SET) != 0) source_fail("seek");
  bytes.resize(static_cast<size_t>(size));
  size_t got = 0;
  while (got < bytes.size()) {
    const zip_int64_t n = zip_source_read(src, bytes.data() + got, bytes.size() - got);
    if (n <= 0) source_fail("read back");
    got += static_cast<size_t>(n);
  }
  zip_source_close(src);
  return bytes;
}

}  // namespace rpa
