// fuzz_case_file: bytes as an .npz -> the case-file reader either rejects them with one line
// (never a crash, never an allocation much larger than the file could hold) or loads a case whose
// written form reads back to the same case; a loaded case then gets a verdict in both modes.
// The same bytes read from a file (libzip's file source, not its buffer source) give the same
// case or the same refusal after the path, and write_case_file writes exactly the written
// form. In a libFuzzer build, fuzz/fuzz_case_file_mutator.cc mutates inside the archive.
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "casefile/case_file.h"
#include "harness/targets.h"
#include "service/dialect_ops.h"

namespace {

using namespace rpa;

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "fuzz_case_file: %s\n", what.c_str());
  std::abort();
}

// The reader's own limits (8 GiB by default): a member that declares more than it holds must
// be refused without allocating what it declares. libFuzzer's malloc_limit_mb
// (corpus/fuzz/fuzz_case_file.options) fails any single allocation over 256 MB, 4000 times
// the largest input; deflate expands at most 1032:1, so a legitimate case is far below it.
CaseReadResult read(std::span<const std::byte> bytes) { return read_case_bytes(bytes, {}); }

// A file in memory (memfd) that every input is written to, and its path.
struct ScratchFile {
  int fd = -1;
  std::string path;
};

const ScratchFile& scratch_file() {
  static const ScratchFile file = [] {
    ScratchFile f;
    f.fd = memfd_create("fuzz_case_file", 0);
    if (f.fd < 0) fail(std::string("memfd_create: ") + std::strerror(errno));
    f.path = "/proc/self/fd/" + std::to_string(f.fd);
    return f;
  }();
  return file;
}

void put_file(std::span<const std::byte> bytes) {
  const ScratchFile& f = scratch_file();
  if (ftruncate(f.fd, 0) != 0 ||
      pwrite(f.fd, bytes.data(), bytes.size(), 0) != static_cast<ssize_t>(bytes.size())) {
    fail(std::string("cannot write the scratch file: ") + std::strerror(errno));
  }
}

std::vector<std::byte> file_bytes() {
  const ScratchFile& f = scratch_file();
  std::vector<std::byte> out(static_cast<size_t>(lseek(f.fd, 0, SEEK_END)));
  if (pread(f.fd, out.data(), out.size(), 0) != static_cast<ssize_t>(out.size())) {
    fail(std::string("cannot read the scratch file: ") + std::strerror(errno));
  }
  return out;
}

// read_case_file on the same bytes: the same refusal after "PATH: " (an empty file is called
// one rather than empty input), or a case with the same written form.
void check_file_read(std::span<const std::byte> bytes, const CaseReadResult& r,
                     const std::vector<std::byte>& written) {
  put_file(bytes);
  const std::string& path = scratch_file().path;
  const CaseReadResult f = read_case_file(path, {});
  if (!r.value) {
    std::string want = path + ": " + r.error;
    if (bytes.empty()) want = path + ": not a zip archive: empty file";
    if (f.value || f.error != want) {
      fail("from a file: '" + f.error + "', in memory: '" + r.error + "'");
    }
    return;
  }
  if (!f.value) fail("in memory the case loads, from a file: '" + f.error + "'");
  if (write_case_bytes(*f.value) != written) fail("from a file the case reads differently");
}

}  // namespace

int rpa::fuzz::fuzz_case_file(const uint8_t* data, size_t size) {
  const auto bytes = std::as_bytes(std::span<const uint8_t>(data, size));
  const CaseReadResult r = read(bytes);
  if (!r.value) {
    if (r.error.empty() || r.error.find('\n') != std::string::npos) {
      fail("a rejection must be one line, got '" + r.error + "'");
    }
    check_file_read(bytes, r, {});
    return 0;
  }
  std::vector<std::byte> written;
  try {
    written = write_case_bytes(*r.value);
  } catch (const std::invalid_argument& e) {
    fail(std::string("the reader loaded a case the writer refuses: ") + e.what());
  }
  const CaseReadResult back = read(written);
  if (!back.value) fail("the written case does not read back: " + back.error);
  // Tensors compare by bytes; parameters through their written form, so NaN equals NaN.
  if (back.value->inputs != r.value->inputs || back.value->out != r.value->out ||
      back.value->expected != r.value->expected || write_case_bytes(*back.value) != written) {
    fail("the written case reads back as a different case");
  }
  check_file_read(bytes, r, written);
  std::string error;
  if (!write_case_file(scratch_file().path, *r.value, &error)) fail(error);
  if (file_bytes() != written) fail("write_case_file wrote other bytes than write_case_bytes");
  // Every rule of the case's own dialect, in both modes: validation never crashes on a case
  // the reader loads.
  for (Mode mode : {Mode::kStrict, Mode::kJax}) {
    (void)dialect_ops(r.value->dialect).failures(*r.value, {.mode = mode}, /*all=*/true);
  }
  return 0;
}
