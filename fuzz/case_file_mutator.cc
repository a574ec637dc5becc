#include "fuzz/case_file_mutator.h"

#include <zlib.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <random>
#include <string_view>
#include <utility>

#include "casefile/zip_archive.h"

namespace rpa::fuzz {
namespace {

using Members = std::vector<ArchiveMember>;
using Rng = std::mt19937;

// Members are read whole to be mutated: more than this (a deflate bomb among the seeds)
// leaves the archive to raw byte mutation.
constexpr size_t kMaxMemberBytes = size_t{1} << 20;
// A mutated name or header text may grow by this much.
constexpr size_t kGrowth = 64;
// Zip names are at most 65535 bytes; mutated ones are kept far shorter.
constexpr size_t kMaxNameBytes = 255;
// 2000-01-01 00:00 as a DOS date and time, the time write_zip gives its members.
constexpr uint16_t kDosDate = (20 << 9) | (1 << 5) | 1;
constexpr uint16_t kDosTime = 0;
constexpr std::string_view kNpyMagic = "\x93NUMPY";

size_t pick(Rng& rng, size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng); }

void put16(std::vector<uint8_t>& out, uint32_t v) {
  out.push_back(static_cast<uint8_t>(v));
  out.push_back(static_cast<uint8_t>(v >> 8));
}

void put32(std::vector<uint8_t>& out, uint32_t v) {
  put16(out, v & 0xFFFF);
  put16(out, v >> 16);
}

// Raw deflate (negative window bits: what zip members hold, no zlib header). One stream,
// reset for each member: setting one up allocates and clears a few hundred KiB, which cost
// more than the rest of a mutation. Level 1 and a small hash table: the mutator needs valid
// streams, not small ones.
std::vector<uint8_t> raw_deflate(const std::vector<uint8_t>& data) {
  struct Stream {
    z_stream zs{};
    bool ready = deflateInit2(&zs, 1, Z_DEFLATED, -15, 2, Z_DEFAULT_STRATEGY) == Z_OK;
    ~Stream() {
      if (ready) deflateEnd(&zs);
    }
  };
  static thread_local Stream s;
  if (!s.ready || deflateReset(&s.zs) != Z_OK) return {};
  std::vector<uint8_t> out(deflateBound(&s.zs, static_cast<uLong>(data.size())));
  s.zs.next_in = const_cast<Bytef*>(data.data());
  s.zs.avail_in = static_cast<uInt>(data.size());
  s.zs.next_out = out.data();
  s.zs.avail_out = static_cast<uInt>(out.size());
  const int status = deflate(&s.zs, Z_FINISH);
  out.resize(s.zs.total_out);
  return status == Z_STREAM_END ? out : std::vector<uint8_t>{};
}

// Runs the byte mutator on `bytes`, letting it grow by at most `growth` bytes (one at
// least: libFuzzer's mutator needs room for a byte).
void mutate_vector(std::vector<uint8_t>& bytes, size_t growth, const ByteMutator& mutate_bytes) {
  const size_t size = bytes.size();
  growth = std::max<size_t>(growth, 1);
  bytes.resize(size + growth);
  bytes.resize(mutate_bytes(bytes.data(), size, size + growth));
}

// Where an .npy member's header-length field and header text are, if it starts like one.
struct NpyLayout {
  size_t width = 0;       // of the length field: 2 (version 1) or 4
  size_t text_start = 0;  // 8 + width
  size_t text_len = 0;    // as declared, cut to what the member holds
};

std::optional<NpyLayout> npy_layout(const std::vector<uint8_t>& m) {
  if (m.size() < 10 || std::memcmp(m.data(), kNpyMagic.data(), kNpyMagic.size()) != 0) {
    return std::nullopt;
  }
  NpyLayout l;
  l.width = m[6] == 1 ? 2 : 4;
  l.text_start = 8 + l.width;
  if (m.size() < l.text_start) return std::nullopt;
  size_t declared = 0;
  for (size_t k = 0; k < l.width; ++k) declared |= size_t{m[8 + k]} << (8 * k);
  l.text_len = std::min(declared, m.size() - l.text_start);
  return l;
}

void set_length_field(std::vector<uint8_t>& m, const NpyLayout& l, uint64_t value) {
  for (size_t k = 0; k < l.width; ++k) m[8 + k] = static_cast<uint8_t>(value >> (8 * k));
}

// One change to an .npy member that keeps it an .npy file worth parsing further, or sets
// its header-length field at a boundary of the parser's arithmetic.
void mutate_npy(std::vector<uint8_t>& m, const NpyLayout& l, Rng& rng,
                const ByteMutator& mutate_bytes) {
  const auto begin = m.begin() + static_cast<std::ptrdiff_t>(l.text_start);
  std::vector<uint8_t> text(begin, begin + static_cast<std::ptrdiff_t>(l.text_len));
  std::vector<uint8_t> data(begin + static_cast<std::ptrdiff_t>(l.text_len), m.end());
  const uint64_t widest = l.width == 2 ? 0xFFFF : 0xFFFFFFFF;
  std::vector<uint8_t> prefix(m.begin(), begin);
  switch (pick(rng, 5)) {
    case 0:  // the header text, its length field following it
    case 1:
      mutate_vector(text, kGrowth, mutate_bytes);
      text.resize(std::min<size_t>(text.size(), widest));
      set_length_field(prefix, l, text.size());
      break;
    case 2:  // the data, the header unchanged
      mutate_vector(data, kGrowth, mutate_bytes);
      break;
    case 3: {  // the length field at a boundary of the parser's arithmetic, measured from
               // the member's end (half the time with the data gone first): the header
               // running exactly to the end, one byte short of it, past it by one, two, the
               // field's width or the whole prefix; one byte either side of the header text's
               // end; nothing; the widest value
      if (pick(rng, 2) == 0) data.clear();
      const uint64_t to_end = text.size() + data.size();
      const uint64_t text_end = text.size();
      const std::array<uint64_t, 10> lengths = {to_end,
                                                to_end - (to_end > 0 ? 1 : 0),
                                                to_end + 1,
                                                to_end + 2,
                                                to_end + l.width,
                                                to_end + 8 + l.width,
                                                text_end - (text_end > 0 ? 1 : 0),
                                                text_end + 1,
                                                0,
                                                widest};
      set_length_field(prefix, l, lengths[pick(rng, lengths.size())]);
      break;
    }
    default: {  // version 1.0 <-> 2.0 / 3.0, the length field re-encoded in its new width
      const uint8_t major = l.width == 2 ? static_cast<uint8_t>(2 + pick(rng, 2)) : 1;
      if (major == 1 && text.size() > 0xFFFF) return;
      prefix.resize(8);
      prefix[6] = major;
      const NpyLayout next{.width = major == 1 ? size_t{2} : size_t{4}};
      prefix.resize(8 + next.width);
      set_length_field(prefix, next, text.size());
      break;
    }
  }
  m = std::move(prefix);
  m.insert(m.end(), text.begin(), text.end());
  m.insert(m.end(), data.begin(), data.end());
}

// One change to the archive's members. Returns false when the list gives it nothing to act
// on (no members to change), so the caller mutates raw bytes instead.
bool mutate_members(Members& ms, size_t max_size, Rng& rng, const ByteMutator& mutate_bytes) {
  if (ms.empty()) return false;
  ArchiveMember& m = ms[pick(rng, ms.size())];
  switch (pick(rng, 10)) {
    case 0:  // .npy-aware changes, three times as often as the others
    case 1:
    case 2:
      if (const std::optional<NpyLayout> l = npy_layout(m.data)) {
        mutate_npy(m.data, *l, rng, mutate_bytes);
        return true;
      }
      [[fallthrough]];
    case 3:  // the member's bytes, whole
      mutate_vector(m.data,
                    m.data.size() < max_size ? std::min(kGrowth, max_size - m.data.size()) : 0,
                    mutate_bytes);
      return true;
    case 4:  // drop it
      ms.erase(ms.begin() + static_cast<std::ptrdiff_t>(&m - ms.data()));
      return true;
    case 5: {  // a copy elsewhere: the same name (a duplicate) or a mutated one
      ArchiveMember copy = m;
      if (pick(rng, 2) == 1) {
        std::vector<uint8_t> name(copy.name.begin(), copy.name.end());
        mutate_vector(name, kGrowth, mutate_bytes);
        copy.name.assign(name.begin(), name.begin() + std::min(name.size(), kMaxNameBytes));
      }
      ms.insert(ms.begin() + static_cast<std::ptrdiff_t>(pick(rng, ms.size() + 1)),
                std::move(copy));
      return true;
    }
    case 6: {  // rename: the byte mutator (whose dictionary holds every member name), or
               // swap names with another member
      ArchiveMember& other = ms[pick(rng, ms.size())];
      if (&other != &m && pick(rng, 2) == 0) {
        std::swap(m.name, other.name);
        return true;
      }
      std::vector<uint8_t> name(m.name.begin(), m.name.end());
      mutate_vector(name, kGrowth, mutate_bytes);
      m.name.assign(name.begin(), name.begin() + std::min(name.size(), kMaxNameBytes));
      return true;
    }
    case 7: {  // move it elsewhere
      ArchiveMember moved = std::move(m);
      ms.erase(ms.begin() + static_cast<std::ptrdiff_t>(&m - ms.data()));
      ms.insert(ms.begin() + static_cast<std::ptrdiff_t>(pick(rng, ms.size() + 1)),
                std::move(moved));
      return true;
    }
    case 8:  // stored <-> deflated: this member, or every member alike
      if (pick(rng, 2) == 0) {
        m.deflated = !m.deflated;
      } else {
        const bool deflated = !m.deflated;
        for (ArchiveMember& each : ms) each.deflated = deflated;
      }
      return true;
    default:  // another member's bytes under this name
      m.data = ms[pick(rng, ms.size())].data;
      return true;
  }
}

size_t write_out(const std::vector<uint8_t>& bytes, uint8_t* out, size_t max_size) {
  const size_t n = std::min(bytes.size(), max_size);
  std::copy_n(bytes.begin(), n, out);
  return n;
}

}  // namespace

std::optional<std::vector<ArchiveMember>> unzip_members(std::span<const uint8_t> bytes,
                                                        size_t max_member_bytes) {
  std::string error;
  const std::optional<ZipReader> reader = ZipReader::open(std::as_bytes(bytes), &error);
  if (!reader) return std::nullopt;
  Members out;
  std::vector<std::byte> data;
  for (size_t i = 0; i < reader->members().size(); ++i) {
    const ZipMember& z = reader->members()[i];
    if (!reader->read(i, max_member_bytes, &data, &error)) return std::nullopt;
    const auto* p = reinterpret_cast<const uint8_t*>(data.data());
    out.push_back(
        ArchiveMember{.name = z.name, .data = {p, p + data.size()}, .deflated = !z.stored});
  }
  return out;
}

std::vector<uint8_t> zip_members(std::span<const ArchiveMember> members) {
  std::vector<uint8_t> out;
  std::vector<uint8_t> central;
  for (const ArchiveMember& m : members) {
    const auto crc =
        static_cast<uint32_t>(crc32(0, m.data.data(), static_cast<uInt>(m.data.size())));
    std::vector<uint8_t> packed = m.deflated ? raw_deflate(m.data) : m.data;
    const bool deflated = m.deflated && (!packed.empty() || m.data.empty());
    if (!deflated) packed = m.data;
    const auto name_len = static_cast<uint32_t>(std::min<size_t>(m.name.size(), 0xFFFF));
    const auto offset = static_cast<uint32_t>(out.size());
    // The fields both headers share, from "version needed" on.
    const auto common = [&](std::vector<uint8_t>& h) {
      put16(h, 20);  // version needed: 2.0
      put16(h, 0);   // flags
      put16(h, deflated ? 8 : 0);
      put16(h, kDosTime);
      put16(h, kDosDate);
      put32(h, crc);
      put32(h, static_cast<uint32_t>(packed.size()));
      put32(h, static_cast<uint32_t>(m.data.size()));
      put16(h, name_len);
      put16(h, 0);  // extra field length
    };
    put32(out, 0x04034B50);
    common(out);
    out.insert(out.end(), m.name.begin(), m.name.begin() + name_len);
    out.insert(out.end(), packed.begin(), packed.end());
    put32(central, 0x02014B50);
    put16(central, (3 << 8) | 20);  // made by: Unix, 2.0
    common(central);
    put16(central, 0);            // comment length
    put16(central, 0);            // disk
    put16(central, 0);            // internal attributes
    put32(central, 0600u << 16);  // external attributes: a regular file, rw-------
    put32(central, offset);
    central.insert(central.end(), m.name.begin(), m.name.begin() + name_len);
  }
  const auto count = static_cast<uint32_t>(std::min<size_t>(members.size(), 0xFFFF));
  const auto central_offset = static_cast<uint32_t>(out.size());
  out.insert(out.end(), central.begin(), central.end());
  put32(out, 0x06054B50);
  put16(out, 0);  // this disk
  put16(out, 0);  // the central directory's disk
  put16(out, count);
  put16(out, count);
  put32(out, static_cast<uint32_t>(central.size()));
  put32(out, central_offset);
  put16(out, 0);  // comment length
  return out;
}

size_t mutate_case_file(uint8_t* data, size_t size, size_t max_size, unsigned seed,
                        const ByteMutator& mutate_bytes) {
  Rng rng(seed);
  if (pick(rng, 16) >= kRawMutationsIn16) {
    std::optional<Members> ms = unzip_members({data, size}, kMaxMemberBytes);
    if (ms && mutate_members(*ms, max_size, rng, mutate_bytes)) {
      const std::vector<uint8_t> zipped = zip_members(*ms);
      if (zipped.size() <= max_size) return write_out(zipped, data, max_size);
    }
  }
  return mutate_bytes(data, size, max_size);
}

size_t cross_over_case_files(std::span<const uint8_t> first, std::span<const uint8_t> second,
                             uint8_t* out, size_t max_out_size, unsigned seed) {
  Rng rng(seed);
  std::optional<Members> a = unzip_members(first, kMaxMemberBytes);
  const std::optional<Members> b = unzip_members(second, kMaxMemberBytes);
  if (a && b && !b->empty()) {
    const ArchiveMember& given = (*b)[pick(rng, b->size())];
    const auto same = std::find_if(a->begin(), a->end(),
                                   [&](const ArchiveMember& m) { return m.name == given.name; });
    if (same != a->end() && pick(rng, 4) != 0) {
      *same = given;
    } else {
      a->insert(a->begin() + static_cast<std::ptrdiff_t>(pick(rng, a->size() + 1)), given);
    }
    const std::vector<uint8_t> zipped = zip_members(*a);
    if (zipped.size() <= max_out_size) return write_out(zipped, out, max_out_size);
  }
  // Raw bytes: a prefix of the first, then a suffix of the second.
  const size_t head = pick(rng, first.size() + 1);
  const size_t tail = pick(rng, second.size() + 1);
  std::vector<uint8_t> spliced(first.begin(), first.begin() + static_cast<std::ptrdiff_t>(head));
  spliced.insert(spliced.end(), second.begin() + static_cast<std::ptrdiff_t>(tail), second.end());
  return write_out(spliced, out, max_out_size);
}

}  // namespace rpa::fuzz
