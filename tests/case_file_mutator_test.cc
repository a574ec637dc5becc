// Tests of fuzz_case_file's structure-aware mutator (fuzz/case_file_mutator.h): its zip
// writer round-trips through libzip (duplicate names included), its mutations are
// deterministic and fit the size they are given, every kind of change happens, and, the
// reason it exists, its mutations reach the .npy parser where raw byte mutations of the
// same archive stop at the zip layer.
#include "fuzz/case_file_mutator.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "casefile/case_file.h"

namespace rpa::fuzz {
namespace {

using Bytes = std::vector<uint8_t>;

// A stand-in for libFuzzer's LLVMFuzzerMutate: flips a bit, inserts a byte or erases one,
// drawing from `rng`.
ByteMutator flip_insert_erase(std::mt19937& rng) {
  return [&rng](uint8_t* d, size_t size, size_t max_size) -> size_t {
    const auto what = rng() % 3;
    if (what == 0 && size > 0) {
      d[rng() % size] ^= static_cast<uint8_t>(1u << (rng() % 8));
      return size;
    }
    if (what == 1 && size < max_size) {
      const size_t at = rng() % (size + 1);
      std::memmove(d + at + 1, d + at, size - at);
      d[at] = static_cast<uint8_t>(rng());
      return size + 1;
    }
    if (size > 1) {
      const size_t at = rng() % size;
      std::memmove(d + at, d + at + 1, size - at - 1);
      return size - 1;
    }
    d[0] = static_cast<uint8_t>(rng());
    return 1;
  };
}

// A small valid jax-dialect case file: one sequence of two tokens, one page.
Bytes valid_case_file() {
  Case c;
  c.inputs.q = Tensor(DType::kFloat32, {2, 1, 8});
  c.inputs.kv_pages = Tensor(DType::kFloat32, {1, 4, 2, 8});
  c.inputs.kv_lens = Tensor::from_int32({1}, std::vector<int32_t>{2});
  c.inputs.page_indices = Tensor::from_int32({1, 1}, std::vector<int32_t>{0});
  c.inputs.cu_q_lens = Tensor::from_int32({2}, std::vector<int32_t>{0, 2});
  c.inputs.num_seqs = Tensor::from_int32({1}, std::vector<int32_t>{1});
  c.params.soft_cap = 30.0;
  const std::vector<std::byte> bytes = write_case_bytes(c);
  const auto* p = reinterpret_cast<const uint8_t*>(bytes.data());
  return Bytes(p, p + bytes.size());
}

// One mutation with a byte mutator seeded like the mutator itself.
Bytes mutated(const Bytes& input, unsigned seed, size_t max_size) {
  std::mt19937 rng(seed ^ 0x5EEDu);
  Bytes out = input;
  out.resize(std::max(max_size, input.size()));
  out.resize(mutate_case_file(out.data(), input.size(), max_size, seed, flip_insert_erase(rng)));
  return out;
}

std::string read_error(const Bytes& bytes) {
  return read_case_bytes(std::as_bytes(std::span(bytes)), {}).error;
}

// The kind of refusal, for errors the .npy parser gave (a member's error, past the zip
// layer); "" for anything else.
std::string npy_error_kind(const std::string& error) {
  constexpr std::string_view kKinds[] = {"not an .npy array",     "unsupported .npy format version",
                                         "truncated .npy header", "malformed .npy header",
                                         "unsupported descr",     "big-endian",
                                         "fortran_order",         "overflows int64 bytes",
                                         "truncated data",        "trailing bytes",
                                         "opaque void type",      "names no numpy type"};
  if (!error.starts_with("member '")) return "";
  for (std::string_view k : kKinds) {
    if (error.find(k) != std::string::npos) return std::string(k);
  }
  return "";
}

TEST(CaseFileMutator, ZipsMembersLibzipReadsBackIncludingRepeatedNames) {
  const std::vector<ArchiveMember> members = {
      {.name = "q.npy", .data = Bytes(300, 7), .deflated = false},
      {.name = "q.npy", .data = Bytes(300, 9), .deflated = true},
      {.name = "empty.npy", .data = {}, .deflated = true},
      {.name = "x", .data = {}, .deflated = false},
  };
  const Bytes zipped = zip_members(members);
  const auto back = unzip_members(zipped, 1 << 20);
  ASSERT_TRUE(back.has_value());
  ASSERT_EQ(back->size(), members.size());
  for (size_t i = 0; i < members.size(); ++i) {
    EXPECT_EQ((*back)[i].name, members[i].name);
    EXPECT_EQ((*back)[i].data, members[i].data);
    EXPECT_EQ((*back)[i].deflated, members[i].deflated);
  }
  EXPECT_EQ(read_error(zipped), "duplicate member 'q.npy'");
  // A member over the budget leaves the archive to raw mutation.
  EXPECT_FALSE(unzip_members(zipped, 299).has_value());
  EXPECT_FALSE(unzip_members(Bytes{'P', 'K'}, 1 << 20).has_value());
}

TEST(CaseFileMutator, AReZippedCaseFileReadsAsTheSameCase) {
  const Bytes input = valid_case_file();
  const auto members = unzip_members(input, 1 << 20);
  ASSERT_TRUE(members.has_value());
  const Bytes again = zip_members(*members);
  const CaseReadResult a = read_case_bytes(std::as_bytes(std::span(input)), {});
  const CaseReadResult b = read_case_bytes(std::as_bytes(std::span(again)), {});
  ASSERT_TRUE(a.value.has_value()) << a.error;
  ASSERT_TRUE(b.value.has_value()) << b.error;
  EXPECT_EQ(a.value->inputs, b.value->inputs);
  EXPECT_EQ(write_case_bytes(*a.value), write_case_bytes(*b.value));
}

TEST(CaseFileMutator, IsDeterministicAndFitsTheSizeItIsGiven) {
  const Bytes input = valid_case_file();
  // libFuzzer never asks for less room than the input takes (it cuts inputs to -max_len).
  for (size_t max_size : {input.size() + 256, input.size() + 1, input.size()}) {
    for (unsigned seed = 0; seed < 400; ++seed) {
      SCOPED_TRACE("max_size " + std::to_string(max_size) + ", seed " + std::to_string(seed));
      const Bytes a = mutated(input, seed, max_size);
      EXPECT_LE(a.size(), max_size);
      EXPECT_EQ(a, mutated(input, seed, max_size));
    }
  }
}

TEST(CaseFileMutator, MakesEveryKindOfChange) {
  const Bytes input = valid_case_file();
  const auto before = unzip_members(input, 1 << 20);
  ASSERT_TRUE(before.has_value());
  std::set<std::string> seen;
  int raw = 0;
  constexpr unsigned kSeeds = 1600;
  for (unsigned seed = 0; seed < kSeeds; ++seed) {
    const Bytes out = mutated(input, seed, input.size() + 4096);
    const auto after = unzip_members(out, 1 << 20);
    if (!after) {
      ++raw;
      continue;
    }
    std::set<std::string> names;
    bool repeated = false;
    for (const ArchiveMember& m : *after) {
      repeated = !names.insert(m.name).second || repeated;
      if (m.deflated) seen.insert("deflated");
    }
    if (after->size() < before->size()) seen.insert("dropped");
    if (repeated) seen.insert("duplicated");
    if (after->size() == before->size()) {
      bool renamed = false;
      bool reordered = false;
      for (size_t i = 0; i < after->size(); ++i) {
        const bool known = std::any_of(before->begin(), before->end(), [&](const ArchiveMember& m) {
          return m.name == (*after)[i].name;
        });
        renamed = renamed || !known;
        reordered = reordered || (known && (*after)[i].name != (*before)[i].name);
      }
      if (renamed) seen.insert("renamed");
      if (reordered) seen.insert("reordered");
    }
    const std::string kind = npy_error_kind(read_error(out));
    if (!kind.empty()) seen.insert("npy: " + kind);
  }
  for (std::string_view want : {"deflated", "dropped", "duplicated", "renamed", "reordered",
                                "npy: truncated .npy header", "npy: malformed .npy header",
                                "npy: trailing bytes", "npy: unsupported .npy format version"}) {
    EXPECT_TRUE(seen.contains(std::string(want))) << want;
  }
  // About 3 in 16 mutate the raw bytes, and a raw change to this stored archive rarely
  // leaves it readable; every structured change leaves it readable.
  EXPECT_GT(raw, static_cast<int>(kSeeds * 2 / 16));
  EXPECT_LT(raw, static_cast<int>(kSeeds * 5 / 16));
}

TEST(CaseFileMutator, ReachesTheNpyParserWhereRawByteMutationsDoNot) {
  const Bytes input = valid_case_file();
  constexpr unsigned kSeeds = 2000;
  int structured = 0;
  int raw = 0;
  std::set<std::string> kinds;
  for (unsigned seed = 0; seed < kSeeds; ++seed) {
    const std::string kind = npy_error_kind(read_error(mutated(input, seed, input.size() + 4096)));
    structured += !kind.empty();
    if (!kind.empty()) kinds.insert(kind);
    std::mt19937 rng(seed);
    Bytes bytes = input;
    bytes.resize(input.size() + 4096);
    bytes.resize(flip_insert_erase(rng)(bytes.data(), input.size(), bytes.size()));
    raw += !npy_error_kind(read_error(bytes)).empty();
  }
  RecordProperty("structured", structured);
  RecordProperty("raw", raw);
  RecordProperty("kinds", static_cast<int>(kinds.size()));
  EXPECT_GE(structured, static_cast<int>(kSeeds / 10)) << "raw: " << raw;
  EXPECT_GE(structured, 10 * std::max(raw, 1)) << "raw: " << raw;
  EXPECT_GE(kinds.size(), 5u);
}

TEST(CaseFileMutator, CrossOverPutsAMemberOfTheSecondIntoTheFirst) {
  const Bytes first = valid_case_file();
  const Bytes second = zip_members(
      std::vector<ArchiveMember>{{.name = "sm_scale.npy", .data = Bytes(130, 1), .deflated = true},
                                 {.name = "q.npy", .data = Bytes(5, 2), .deflated = false}});
  const size_t first_members = unzip_members(first, 1 << 20)->size();
  int added = 0;
  int replaced = 0;
  for (unsigned seed = 0; seed < 200; ++seed) {
    Bytes out(first.size() + 1024);
    out.resize(cross_over_case_files(first, second, out.data(), out.size(), seed));
    const auto members = unzip_members(out, 1 << 20);
    ASSERT_TRUE(members.has_value()) << "seed " << seed;
    const bool has_sm_scale = std::any_of(members->begin(), members->end(), [](const auto& m) {
      return m.name == "sm_scale.npy" && m.data == Bytes(130, 1);
    });
    const bool q_replaced = std::any_of(members->begin(), members->end(), [](const auto& m) {
      return m.name == "q.npy" && m.data == Bytes(5, 2);
    });
    added += has_sm_scale && members->size() == first_members + 1;
    replaced += q_replaced && members->size() == first_members;
  }
  EXPECT_GT(added, 0);
  EXPECT_GT(replaced, 0);
  // Not archives: a prefix of one and a suffix of the other, within the size given.
  const Bytes a(100, 'a');
  const Bytes b(100, 'b');
  for (unsigned seed = 0; seed < 50; ++seed) {
    Bytes out(64);
    out.resize(cross_over_case_files(a, b, out.data(), out.size(), seed));
    ASSERT_LE(out.size(), 64u);
    const auto first_b = std::find(out.begin(), out.end(), 'b');
    EXPECT_TRUE(std::all_of(first_b, out.end(), [](uint8_t c) { return c == 'b'; }));
  }
}

}  // namespace
}  // namespace rpa::fuzz
