// Tests of the case file layer: casefile/npy, casefile/zip_archive and casefile/case_file
// (DESIGN.md section 7). Malformed inputs must give one clean line naming the member and the
// problem; every case must survive write then read bit for bit.
#include "casefile/case_file.h"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <optional>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "casefile/npy.h"
#include "casefile/zip_archive.h"
#include "core/v3_cache_layout.h"

namespace rpa {
namespace {

using Bytes = std::vector<std::byte>;

// np.savez_compressed(f, q=f32[2,1,1] {1.5, -2}, kv_pages=f32[1,1,2,1] {0.25, 4},
// kv_lens=i32[1] {1}, page_indices=i32[1,1] {0}, cu_q_lens=i32[2] {0, 1},
// num_seqs=i32[1] {1}, sm_scale=np.float64(0.5), sliding_window=np.int64(7)), numpy 1.24:
// deflated members with numpy's zip64 extra field in every local header.
constexpr std::string_view kNumpySavezCompressedHex =
    "504b030414000000080000002100e0c73f6e4e0000008800000005001400712e6e7079010010008800000000"
    "0000004e000000000000009bec17ea1b10c9c850c650ad9e925a9c5ca46ea5a06e9366a2aea3a09e965f5452"
    "9498179f5f94920a12774bcc294e058a17672416a402f91a463a0a8640a4a9a350ab401ee062603860cf0024"
    "00504b0304140000000800000021002d49e01850000000880000000c0014006b765f70616765732e6e707901"
    "001000880000000000000050000000000000009bec17ea1b10c9c850c650ad9e925a9c5ca46ea5a06e9366a2"
    "aea3a09e965f54529498179f5f94920a12774bcc294e058a17672416a402f91a863a0a406404243575146a15"
    "c8005c0c0c0d7640ec0000504b030414000000080000002100a118124f48000000840000000b0014006b765f"
    "6c656e732e6e707901001000840000000000000048000000000000009bec17ea1b10c9c850c650ad9e925a9c"
    "5ca46ea5a06e9369a2aea3a09e965f54529498179f5f94920a12774bcc294e058a17672416a402f91a863a9a"
    "3a0ab50a14002e4606060600504b030414000000080000002100693aec674900000084000000100014007061"
    "67655f696e64696365732e6e707901001000840000000000000049000000000000009bec17ea1b10c9c850c6"
    "50ad9e925a9c5ca46ea5a06e9369a2aea3a09e965f54529498179f5f94920a12774bcc294e058a17672416a4"
    "02f91a863a0a869a3a0ab50a64032e06200000504b0304140000000800000021007b56b5f349000000880000"
    "000d00140063755f715f6c656e732e6e707901001000880000000000000049000000000000009bec17ea1b10"
    "c9c850c650ad9e925a9c5ca46ea5a06e9369a2aea3a09e965f54529498179f5f94920a12774bcc294e058a17"
    "672416a402f91a463a9a3a0ab50a14002e062060046200504b030414000000080000002100a118124f480000"
    "00840000000c0014006e756d5f736571732e6e707901001000840000000000000048000000000000009bec17"
    "ea1b10c9c850c650ad9e925a9c5ca46ea5a06e9369a2aea3a09e965f54529498179f5f94920a12774bcc294e"
    "058a17672416a402f91a863a9a3a0ab50a14002e4606060600504b03041400000008000000210070ee926947"
    "000000880000000c001400736d5f7363616c652e6e707901001000880000000000000047000000000000009b"
    "ec17ea1b10c9c850c650ad9e925a9c5ca46ea5a06e9366a1aea3a09e965f54529498179f5f94920a12774bcc"
    "294e058a17672416a402f91a9a3a0ab50a14012e063078600f00504b03041400000008000000210023b8f06c"
    "460000008800000012001400736c6964696e675f77696e646f772e6e70790100100088000000000000004600"
    "0000000000009bec17ea1b10c9c850c650ad9e925a9c5ca46ea5a06e9369a1aea3a09e965f54529498179f5f"
    "94920a12774bcc294e058a17672416a402f91a9a3a0ab50a14012e7606080000504b01021403140000000800"
    "00002100e0c73f6e4e00000088000000050000000000000000000000800100000000712e6e7079504b010214"
    "03140000000800000021002d49e01850000000880000000c00000000000000000000008001850000006b765f"
    "70616765732e6e7079504b0102140314000000080000002100a118124f48000000840000000b000000000000"
    "00000000008001130100006b765f6c656e732e6e7079504b0102140314000000080000002100693aec674900"
    "000084000000100000000000000000000000800198010000706167655f696e64696365732e6e7079504b0102"
    "1403140000000800000021007b56b5f349000000880000000d00000000000000000000008001230200006375"
    "5f715f6c656e732e6e7079504b0102140314000000080000002100a118124f48000000840000000c00000000"
    "000000000000008001ab0200006e756d5f736571732e6e7079504b010214031400000008000000210070ee92"
    "6947000000880000000c0000000000000000000000800131030000736d5f7363616c652e6e7079504b010214"
    "031400000008000000210023b8f06c46000000880000001200000000000000000000008001b6030000736c69"
    "64696e675f77696e646f772e6e7079504b05060000000008000800d3010000400400000000";
// np.savez(f, kv_lens=np.array([3, 7], np.int32), q_dtype=np.array('bfloat16')), numpy 1.24:
// stored members, zip64 extra fields, and the .npy bytes numpy writes.
constexpr std::string_view kNumpySavezHex =
    "504b030414000000000000002100440e515888000000880000000b0014006b765f6c656e732e6e7079010010"
    "0088000000000000008800000000000000934e554d5059010076007b276465736372273a20273c6934272c20"
    "27666f727472616e5f6f72646572273a2046616c73652c20277368617065273a2028322c292c207d20202020"
    "2020202020202020202020202020202020202020202020202020202020202020202020202020202020202020"
    "2020202020202020202020200a0300000007000000504b030414000000000000002100ac82fa94a0000000a0"
    "0000000b001400715f64747970652e6e707901001000a000000000000000a000000000000000934e554d5059"
    "010076007b276465736372273a20273c5538272c2027666f727472616e5f6f72646572273a2046616c73652c"
    "20277368617065273a2028292c207d2020202020202020202020202020202020202020202020202020202020"
    "2020202020202020202020202020202020202020202020202020202020202020200a62000000660000006c00"
    "00006f00000061000000740000003100000036000000504b0102140314000000000000002100440e51588800"
    "0000880000000b00000000000000000000008001000000006b765f6c656e732e6e7079504b01021403140000"
    "00000000002100ac82fa94a0000000a00000000b00000000000000000000008001c5000000715f6474797065"
    "2e6e7079504b0506000000000200020072000000a20100000000";

Bytes from_hex(std::string_view hex) {
  Bytes out;
  const auto nibble = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<std::byte>(nibble(hex[i]) * 16 + nibble(hex[i + 1])));
  }
  return out;
}

Bytes bytes_of(std::string_view s) {
  Bytes out(s.size());
  std::memcpy(out.data(), s.data(), s.size());
  return out;
}

Tensor random_tensor(DType t, Shape shape, std::mt19937& rng) {
  Tensor out(t, std::move(shape));
  for (int64_t i = 0; i < out.nbytes(); ++i) out.data()[i] = static_cast<std::byte>(rng());
  return out;
}

// A small batch: 2 sequences, T = 4 tokens, 4 q heads, 2 kv heads, D = 8, 3 pages of 4.
// Array contents are random bits, so NaNs and odd payloads turn up in the float arrays.
Case small_case(DType q, DType kv, uint32_t seed = 1) {
  std::mt19937 rng(seed);
  Case c;
  c.inputs.q = random_tensor(q, {4, 4, 8}, rng);
  c.inputs.kv_pages = random_tensor(kv, {3, 4, 4, 8}, rng);
  c.inputs.kv_lens = Tensor::from_int32({2}, std::vector<int32_t>{3, 7});
  c.inputs.page_indices = Tensor::from_int32({2, 2}, std::vector<int32_t>{0, 1, 2, 0});
  c.inputs.cu_q_lens = Tensor::from_int32({3}, std::vector<int32_t>{0, 1, 4});
  c.inputs.num_seqs = Tensor::from_int32({1}, std::vector<int32_t>{2});
  return c;
}

// Each case file member as written, in order, so a test can swap one for a malformed one.
std::vector<ZipEntry> entries_of(std::span<const std::byte> archive) {
  std::string error;
  std::optional<ZipReader> reader = ZipReader::open(archive, &error);
  EXPECT_TRUE(reader.has_value()) << error;
  std::vector<ZipEntry> entries;
  if (!reader.has_value()) return entries;
  for (size_t i = 0; i < reader->members().size(); ++i) {
    ZipEntry e{.name = reader->members()[i].name, .data = {}};
    EXPECT_TRUE(reader->read(i, UINT64_MAX, &e.data, &error)) << error;
    entries.push_back(std::move(e));
  }
  return entries;
}

std::vector<std::string> names_of(std::span<const std::byte> archive) {
  std::vector<std::string> names;
  for (const ZipEntry& e : entries_of(archive)) names.push_back(e.name);
  return names;
}

// The case's archive with member `name` replaced by (or, if new, added as) `npy`.
Bytes with_member(const Case& c, const std::string& name, Bytes npy) {
  std::vector<ZipEntry> entries = entries_of(write_case_bytes(c));
  bool replaced = false;
  for (ZipEntry& e : entries) {
    if (e.name == name) {
      e.data = npy;
      replaced = true;
    }
  }
  if (!replaced) entries.push_back(ZipEntry{.name = name, .data = std::move(npy)});
  return write_zip(entries);
}

Bytes without_member(const Case& c, const std::string& name) {
  std::vector<ZipEntry> entries = entries_of(write_case_bytes(c));
  std::erase_if(entries, [&](const ZipEntry& e) { return e.name == name; });
  return write_zip(entries);
}

// A hand-made .npy: magic, version, header length, then `header` and `data` verbatim.
Bytes npy(std::string_view header, std::span<const std::byte> data, int major = 1) {
  std::string prefix = "\x93NUMPY";
  prefix.push_back(static_cast<char>(major));
  prefix.push_back('\0');
  const size_t width = major == 1 ? 2 : 4;
  for (size_t k = 0; k < width; ++k) prefix.push_back(static_cast<char>(header.size() >> (8 * k)));
  Bytes out = bytes_of(prefix + std::string(header));
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

std::string header(std::string_view descr, std::string_view shape,
                   std::string_view fortran = "False") {
  return "{'descr': '" + std::string(descr) + "', 'fortran_order': " + std::string(fortran) +
         ", 'shape': " + std::string(shape) + ", }\n";
}

template <class T>
Bytes scalar_npy(std::string_view descr, T v) {
  Bytes data(sizeof(T));
  std::memcpy(data.data(), &v, sizeof(T));
  return npy(header(descr, "()"), data);
}

// Reads bytes that must be refused, and returns the error after checking it is one line.
std::string refusal(std::span<const std::byte> bytes, const CaseReadOptions& options = {}) {
  const CaseReadResult r = read_case_bytes(bytes, options);
  EXPECT_FALSE(r.value.has_value());
  EXPECT_FALSE(r.error.empty());
  EXPECT_EQ(r.error.find('\n'), std::string::npos) << r.error;
  return r.error;
}

uint64_t bits(double v) { return std::bit_cast<uint64_t>(v); }

std::optional<uint64_t> bits(const std::optional<double>& v) {
  if (!v.has_value()) return std::nullopt;
  return bits(*v);
}

// Params::operator== says NaN != NaN and -0.0 == 0.0; a file must keep the bits.
void expect_same_bits(const Params& a, const Params& b) {
  EXPECT_EQ(bits(a.sm_scale), bits(b.sm_scale));
  EXPECT_EQ(bits(a.soft_cap), bits(b.soft_cap));
  EXPECT_EQ(bits(a.mask_value), bits(b.mask_value));
  EXPECT_EQ(bits(a.k_scale), bits(b.k_scale));
  EXPECT_EQ(bits(a.v_scale), bits(b.v_scale));
  EXPECT_EQ(a.sliding_window, b.sliding_window);
  EXPECT_EQ(a.num_kv_pages_per_block, b.num_kv_pages_per_block);
  EXPECT_EQ(a.num_queries_per_block, b.num_queries_per_block);
  EXPECT_EQ(a.vmem_limit_bytes, b.vmem_limit_bytes);
}

Case read_back(const Case& c) {
  const CaseReadResult r = read_case_bytes(write_case_bytes(c), {});
  EXPECT_TRUE(r.value.has_value()) << r.error;
  return r.value.value_or(Case{});
}

void expect_round_trip(const Case& c) {
  const Case back = read_back(c);
  EXPECT_EQ(back.inputs, c.inputs);
  EXPECT_EQ(back.out, c.out);
  EXPECT_EQ(back.expected, c.expected);
  expect_same_bits(back.params, c.params);
}

constexpr DType kFloatDTypes[] = {DType::kFloat32, DType::kBFloat16, DType::kFloat8E4M3FN,
                                  DType::kFloat8E5M2};

// ---------------------------------------------------------------------------------------
// Round trips

TEST(CaseFileRoundTrip, EveryQAndKvDtype) {
  for (DType q : kFloatDTypes) {
    for (DType kv : kFloatDTypes) {
      SCOPED_TRACE(std::string(dtype_name(q)) + " q, " + std::string(dtype_name(kv)) + " kv");
      Case c = small_case(q, kv);
      std::mt19937 rng(7);
      c.out = random_tensor(q, {4, 4, 8}, rng);
      c.expected = random_tensor(q, {4, 4, 8}, rng);
      expect_round_trip(c);
      EXPECT_EQ(read_back(c), c);  // no NaN parameters here, so == holds as is
    }
  }
}

TEST(CaseFileRoundTrip, StoresBitsAndDtypeMembersOnlyWhereNumpyLacksTheType) {
  const std::vector<ZipEntry> f32 =
      entries_of(write_case_bytes(small_case(DType::kFloat32, DType::kFloat32)));
  for (const ZipEntry& e : f32) {
    EXPECT_NE(e.name, "q_dtype.npy");
    EXPECT_NE(e.name, "kv_dtype.npy");
  }
  Case c = small_case(DType::kBFloat16, DType::kFloat8E5M2);
  std::mt19937 rng(3);
  c.out = random_tensor(DType::kBFloat16, {4, 4, 8}, rng);
  for (const ZipEntry& e : entries_of(write_case_bytes(c))) {
    const NpyParseResult p = parse_npy(e.data);
    ASSERT_TRUE(p.value.has_value()) << e.name << ": " << p.error;
    if (e.name == "q.npy" || e.name == "out.npy") {
      EXPECT_EQ(p.value->dtype, DType::kUInt16);
    } else if (e.name == "kv_pages.npy") {
      EXPECT_EQ(p.value->dtype, DType::kUInt8);
    } else if (e.name == "q_dtype.npy") {
      EXPECT_EQ(p.value->unicode_at(0), U"bfloat16");
    } else if (e.name == "kv_dtype.npy") {
      EXPECT_EQ(p.value->unicode_at(0), U"float8_e5m2");
    } else if (e.name == "sm_scale.npy") {
      EXPECT_EQ(p.value->dtype, DType::kFloat64);
    }
  }
  EXPECT_EQ(names_of(write_case_bytes(c)),
            (std::vector<std::string>{"q.npy", "kv_pages.npy", "kv_lens.npy", "page_indices.npy",
                                      "cu_q_lens.npy", "num_seqs.npy", "q_dtype.npy",
                                      "kv_dtype.npy", "sm_scale.npy", "out.npy"}));
}

TEST(CaseFileRoundTrip, MembersAreStored) {
  const Bytes archive = write_case_bytes(small_case(DType::kFloat32, DType::kBFloat16));
  // Walk the local headers: compression method at offset 8 must be 0 (stored).
  size_t at = 0;
  int members = 0;
  const auto u16 = [&](size_t k) {
    return static_cast<size_t>(archive[k]) | static_cast<size_t>(archive[k + 1]) << 8;
  };
  while (at + 30 <= archive.size() && archive[at] == std::byte{'P'} &&
         archive[at + 2] == std::byte{3} && archive[at + 3] == std::byte{4}) {
    EXPECT_EQ(u16(at + 8), 0u);
    const size_t comp = u16(at + 18) | u16(at + 20) << 16;
    at += 30 + u16(at + 26) + u16(at + 28) + comp;
    ++members;
  }
  EXPECT_EQ(members, 8);  // six arrays, kv_dtype and sm_scale
}

TEST(CaseFileRoundTrip, EveryParameterPresentOrAbsent) {
  const Case base = small_case(DType::kFloat32, DType::kFloat32);
  for (unsigned mask = 0; mask < (1u << 9); ++mask) {
    SCOPED_TRACE("parameter mask " + std::to_string(mask));
    Case c = base;
    const auto on = [&](int k) { return (mask >> k & 1u) != 0; };
    if (on(0)) c.params.sm_scale = 0.125;
    if (on(1)) c.params.sliding_window = 5;
    if (on(2)) c.params.soft_cap = 30.0;
    if (on(3)) c.params.mask_value = -1e30;
    if (on(4)) c.params.k_scale = 0.5;
    if (on(5)) c.params.v_scale = 2.0;
    if (on(6)) c.params.num_kv_pages_per_block = 2;
    if (on(7)) c.params.num_queries_per_block = 16;
    if (on(8)) c.params.vmem_limit_bytes = int64_t{64} << 20;
    const Case back = read_back(c);
    EXPECT_EQ(back, c);
    EXPECT_EQ(names_of(write_case_bytes(c)).size(),
              7u + static_cast<size_t>(std::popcount(mask & ~1u)));
  }
}

TEST(CaseFileRoundTrip, AbsentSmScaleMeansOne) {
  Case c = small_case(DType::kFloat32, DType::kFloat32);
  c.params.sm_scale = 0.25;
  const CaseReadResult r = read_case_bytes(without_member(c, "sm_scale.npy"), {});
  ASSERT_TRUE(r.value.has_value()) << r.error;
  EXPECT_EQ(r.value->params.sm_scale, 1.0);
  EXPECT_FALSE(r.value->params.soft_cap.has_value());
}

TEST(CaseFileRegression, SoftCapNegativeZero) {
  Case c = small_case(DType::kFloat32, DType::kFloat32);
  c.params.soft_cap = -0.0;
  c.params.sm_scale = -0.0;
  const Case back = read_back(c);
  ASSERT_TRUE(back.params.soft_cap.has_value());
  EXPECT_TRUE(std::signbit(*back.params.soft_cap));
  EXPECT_EQ(*back.params.soft_cap, 0.0);
  EXPECT_TRUE(std::signbit(back.params.sm_scale));
}

TEST(CaseFileRoundTrip, NanAndInfinityParametersKeepTheirBits) {
  Case c = small_case(DType::kFloat32, DType::kFloat32);
  c.params.soft_cap = std::bit_cast<double>(uint64_t{0x7FF8000000001234});
  c.params.mask_value = -std::numeric_limits<double>::infinity();
  c.params.k_scale = std::bit_cast<double>(uint64_t{0xFFF0000000000001});  // signalling
  c.params.v_scale = std::numeric_limits<double>::denorm_min();
  c.params.sm_scale = std::bit_cast<double>(uint64_t{0xFFF8000000000000});
  expect_round_trip(c);
}

TEST(CaseFileRoundTrip, NanFilledArraysKeepTheirBits) {
  Case c = small_case(DType::kFloat32, DType::kBFloat16);
  for (int64_t i = 0; i < c.inputs.q.numel(); ++i) {
    const uint32_t nan = 0x7FC00000u | static_cast<uint32_t>(i);
    std::memcpy(c.inputs.q.data() + 4 * i, &nan, 4);
  }
  for (int64_t i = 0; i < c.inputs.kv_pages.numel(); ++i) {
    const uint16_t nan = static_cast<uint16_t>(0xFF80u | (i % 127 + 1));
    std::memcpy(c.inputs.kv_pages.data() + 2 * i, &nan, 2);
  }
  c.out = c.inputs.q;
  expect_round_trip(c);
}

TEST(CaseFileRoundTrip, IndexArraysAndUnnamedBitsKeepTheirStoredDtype) {
  Case c = small_case(DType::kUInt16, DType::kFloat64);  // uint16 q without q_dtype stays so
  std::mt19937 rng(5);
  c.inputs.kv_lens = random_tensor(DType::kInt64, {2}, rng);
  c.inputs.page_indices = random_tensor(DType::kFloat32, {2, 2}, rng);
  c.inputs.cu_q_lens = random_tensor(DType::kUInt8, {3}, rng);
  c.inputs.num_seqs = random_tensor(DType::kBool, {}, rng);
  c.inputs.num_seqs.data()[0] = std::byte{1};
  c.out = random_tensor(DType::kFloat16, {0, 4, 8}, rng);
  const Case back = read_back(c);
  EXPECT_EQ(back, c);
  EXPECT_EQ(back.inputs.q.dtype(), DType::kUInt16);
  EXPECT_EQ(back.inputs.kv_lens.dtype(), DType::kInt64);
}

TEST(CaseFileRoundTrip, ThroughAFile) {
  Case c = small_case(DType::kBFloat16, DType::kFloat8E4M3FN);
  c.params.sliding_window = 3;
  const std::string path = ::testing::TempDir() + "case_file_test_round_trip.npz";
  std::string error;
  ASSERT_TRUE(write_case_file(path, c, &error)) << error;
  const CaseReadResult r = read_case_file(path, {});
  ASSERT_TRUE(r.value.has_value()) << r.error;
  EXPECT_EQ(*r.value, c);
  std::remove(path.c_str());
}

TEST(CaseFileRoundTrip, DeflatedMembersRead) {
  Case c = small_case(DType::kBFloat16, DType::kFloat32);
  c.params.soft_cap = 20.0;
  const Bytes deflated = write_zip(entries_of(write_case_bytes(c)), ZipMethod::kDeflate);
  const CaseReadResult r = read_case_bytes(deflated, {});
  ASSERT_TRUE(r.value.has_value()) << r.error;
  EXPECT_EQ(*r.value, c);
}

TEST(CaseFileRoundTrip, WritingIsDeterministic) {
  const Case c = small_case(DType::kFloat32, DType::kFloat8E5M2);
  EXPECT_EQ(write_case_bytes(c), write_case_bytes(c));
}

TEST(CaseFileWrite, RefusesCasesAReaderWouldReadDifferently) {
  Case c = small_case(DType::kBFloat16, DType::kFloat32);
  std::mt19937 rng(9);
  c.out = random_tensor(DType::kFloat32, {4, 4, 8}, rng);  // out must follow q's bfloat16
  EXPECT_THROW(write_case_bytes(c), std::invalid_argument);
  std::string error;
  EXPECT_FALSE(write_case_file(::testing::TempDir() + "refused.npz", c, &error));
  EXPECT_NE(error.find("out has dtype float32 but q_dtype is bfloat16"), std::string::npos)
      << error;

  Case d = small_case(DType::kFloat32, DType::kFloat32);
  d.inputs.kv_lens = Tensor(DType::kBFloat16, {2});  // no kv_lens_dtype member to name it
  EXPECT_THROW(write_case_bytes(d), std::invalid_argument);

  Case e = small_case(DType::kFloat32, DType::kFloat32);
  e.expected = Tensor(DType::kFloat8E4M3FN, {4, 4, 8});  // would read back as uint8
  EXPECT_THROW(write_case_bytes(e), std::invalid_argument);
}

TEST(CaseFileWrite, ReportsAnUnwritablePath) {
  std::string error;
  EXPECT_FALSE(write_case_file("/nonexistent-dir/x.npz",
                               small_case(DType::kFloat32, DType::kFloat32), &error));
  EXPECT_EQ(error, "/nonexistent-dir/x.npz: cannot write: No such file or directory");
}

// ---------------------------------------------------------------------------------------
// What numpy writes

TEST(NumpyFiles, ReadsSavezCompressed) {
  const CaseReadResult r = read_case_bytes(from_hex(kNumpySavezCompressedHex), {});
  ASSERT_TRUE(r.value.has_value()) << r.error;
  const Case& c = *r.value;
  EXPECT_EQ(c.inputs.q,
            Tensor::from_floats(DType::kFloat32, {2, 1, 1}, std::vector<float>{1.5f, -2.0f}));
  EXPECT_EQ(c.inputs.kv_pages,
            Tensor::from_floats(DType::kFloat32, {1, 1, 2, 1}, std::vector<float>{0.25f, 4.0f}));
  EXPECT_EQ(c.inputs.cu_q_lens, Tensor::from_int32({2}, std::vector<int32_t>{0, 1}));
  EXPECT_EQ(c.inputs.page_indices, Tensor::from_int32({1, 1}, std::vector<int32_t>{0}));
  EXPECT_EQ(c.params.sm_scale, 0.5);
  EXPECT_EQ(c.params.sliding_window, 7);
  EXPECT_FALSE(c.params.soft_cap.has_value());
  EXPECT_EQ(read_back(c), c);
}

TEST(NumpyFiles, ReadsSavezWithZip64ExtraFieldsAndWritesTheSameNpyBytes) {
  const Bytes archive = from_hex(kNumpySavezHex);
  // numpy forces zip64: the first local header's extra field is a zip64 record (id 0x0001).
  const size_t name_len = static_cast<size_t>(archive[26]);
  ASSERT_EQ(static_cast<int>(archive[28]), 20);
  EXPECT_EQ(static_cast<int>(archive[30 + name_len]), 1);
  EXPECT_EQ(static_cast<int>(archive[31 + name_len]), 0);

  const std::vector<ZipEntry> entries = entries_of(archive);
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[0].name, "kv_lens.npy");
  const NpyParseResult kv_lens = parse_npy(entries[0].data);
  ASSERT_TRUE(kv_lens.value.has_value()) << kv_lens.error;
  EXPECT_EQ(kv_lens.value->dtype, DType::kInt32);
  EXPECT_EQ(kv_lens.value->shape, (Shape{2}));
  EXPECT_EQ(write_npy(DType::kInt32, {2}, kv_lens.value->data), entries[0].data);
  EXPECT_EQ(write_npy_unicode(U"bfloat16"), entries[1].data);
}

// ---------------------------------------------------------------------------------------
// The zip layer

TEST(ZipArchive, RefusesAMemberOverTheBudgetBeforeReading) {
  std::string error;
  const Bytes archive = from_hex(kNumpySavezHex);
  std::optional<ZipReader> reader = ZipReader::open(archive, &error);
  ASSERT_TRUE(reader.has_value()) << error;
  EXPECT_EQ(reader->members()[0].size, 136u);
  Bytes out;
  EXPECT_FALSE(reader->read(0, 100, &out, &error));
  EXPECT_EQ(error, "declares 136 bytes, more than the 100-byte budget");
  EXPECT_TRUE(out.empty());
}

// Sets the uncompressed size of a one-member archive in both its local header and the
// central directory, which keeps the archive self-consistent: only reading can tell.
// Returns how many headers it patched (2).
int set_declared_size(Bytes& archive, uint32_t size) {
  int patched = 0;
  for (size_t i = 0; i + 4 <= archive.size(); ++i) {
    const bool local = archive[i + 2] == std::byte{3} && archive[i + 3] == std::byte{4};
    const bool central = archive[i + 2] == std::byte{1} && archive[i + 3] == std::byte{2};
    if (archive[i] != std::byte{'P'} || archive[i + 1] != std::byte{'K'} || !(local || central)) {
      continue;
    }
    for (int b = 0; b < 4; ++b) {
      archive[i + (local ? 22 : 24) + b] = static_cast<std::byte>(size >> (8 * b));
    }
    ++patched;
  }
  return patched;
}

TEST(ZipArchive, RefusesAMemberLongerThanDeclared) {
  Bytes archive = write_zip(std::vector<ZipEntry>{{.name = "a", .data = bytes_of("hello")}});
  ASSERT_EQ(set_declared_size(archive, 4), 2);  // 5 bytes stored
  std::string error;
  std::optional<ZipReader> reader = ZipReader::open(archive, &error);
  ASSERT_TRUE(reader.has_value()) << error;
  Bytes out;
  EXPECT_FALSE(reader->read(0, 100, &out, &error));
  EXPECT_FALSE(error.empty());
}

// Regression (corpus/fuzz/fuzz_case_file/zip_deflated_declares_4gib.npz): a deflated member
// declaring ~4 GiB but holding 5 bytes is refused without allocating what it declares.
TEST(ZipArchive, RefusesAHugeDeclaredSizeWithoutAllocatingIt) {
  Bytes archive = write_zip(std::vector<ZipEntry>{{.name = "a", .data = bytes_of("hello")}},
                            ZipMethod::kDeflate);
  ASSERT_EQ(set_declared_size(archive, 0xfffffff0u), 2);
  std::string error;
  std::optional<ZipReader> reader = ZipReader::open(archive, &error);
  ASSERT_TRUE(reader.has_value()) << error;
  ASSERT_EQ(reader->members()[0].size, 0xfffffff0u);
  rusage before{};
  getrusage(RUSAGE_SELF, &before);
  Bytes out;
  EXPECT_FALSE(reader->read(0, uint64_t{8} << 30, &out, &error));
  EXPECT_FALSE(error.empty());
  rusage after{};
  getrusage(RUSAGE_SELF, &after);
  // Peak resident memory (KiB) grows by far less than the 4 GiB declared: one read chunk.
  EXPECT_LT(after.ru_maxrss - before.ru_maxrss, 256 * 1024);
}

// ---------------------------------------------------------------------------------------
// The .npy parser

TEST(Npy, AcceptsEveryNumericDescrAndByteOrderNumpyDoes) {
  const struct {
    std::string_view descr;
    DType dtype;
  } kCases[] = {
      {"<f4", DType::kFloat32}, {"=f4", DType::kFloat32}, {"|f4", DType::kFloat32},
      {"<f8", DType::kFloat64}, {"<f2", DType::kFloat16}, {"<i4", DType::kInt32},
      {"<i8", DType::kInt64},   {"<i2", DType::kInt16},   {"|i1", DType::kInt8},
      {"<i1", DType::kInt8},    {">i1", DType::kInt8},    {"|u1", DType::kUInt8},
      {"<u2", DType::kUInt16},  {"<u4", DType::kUInt32},  {"<u8", DType::kUInt64},
      {"|b1", DType::kBool},    {"<b1", DType::kBool},
  };
  for (const auto& k : kCases) {
    SCOPED_TRACE(k.descr);
    const Bytes data(static_cast<size_t>(3 * dtype_size(k.dtype)));
    const NpyParseResult p = parse_npy(npy(header(k.descr, "(3,)"), data));
    ASSERT_TRUE(p.value.has_value()) << p.error;
    EXPECT_EQ(p.value->kind, NpyKind::kNumeric);
    EXPECT_EQ(p.value->dtype, k.dtype);
    EXPECT_EQ(p.value->shape, (Shape{3}));
  }
}

TEST(Npy, AcceptsVersions2And3AndLooseButValidHeaders) {
  const Bytes data(24);
  const std::string kHeaders[] = {
      header("<f4", "(2, 3)"),
      "{\"shape\": (2, 3), \"fortran_order\": False, \"descr\": \"<f4\"}",
      "{'descr':'<f4','fortran_order':False,'shape':(2,3,),}",
      "{\n\t'descr': '<f4',\r\n 'fortran_order': False,\f'shape': ( 2 , 3 ) }   \n",
  };
  for (const std::string& h : kHeaders) {
    for (int major : {1, 2, 3}) {
      SCOPED_TRACE(h + " version " + std::to_string(major));
      const NpyParseResult p = parse_npy(npy(h, data, major));
      ASSERT_TRUE(p.value.has_value()) << p.error;
      EXPECT_EQ(p.value->shape, (Shape{2, 3}));
    }
  }
  const NpyParseResult scalar = parse_npy(
      npy(header("<U8", "()"),
          bytes_of(std::string("b\0\0\0f\0\0\0l\0\0\0o\0\0\0a\0\0\0t\0\0\0\0\0\0\0\0\0\0\0", 32))));
  ASSERT_TRUE(scalar.value.has_value()) << scalar.error;
  EXPECT_EQ(scalar.value->unicode_at(0), U"bfloat");
}

TEST(Npy, ZeroSizedArraysNeedNoData) {
  const NpyParseResult p = parse_npy(npy(header("<f8", "(0, 1000000)"), {}));
  ASSERT_TRUE(p.value.has_value()) << p.error;
  EXPECT_TRUE(p.value->data.empty());
}

TEST(Npy, RefusesMalformedFiles) {
  const Bytes f32x3(12);
  const struct {
    std::string name;
    Bytes file;
    std::string_view error;
  } kCases[] = {
      {"empty", {}, "not an .npy array (bad magic"},
      {"bad magic", bytes_of("\x93NUMPX\x01\x00"), "bad magic"},
      {"short prefix", bytes_of("\x93NUMPY\x01"), "truncated .npy header"},
      {"version 4.0", npy(header("<f4", "(3,)"), f32x3, 4), "unsupported .npy format version 4.0"},
      {"version 1.1",
       [&] {
         Bytes b = npy(header("<f4", "(3,)"), f32x3);
         b[7] = std::byte{1};
         return b;
       }(),
       "unsupported .npy format version 1.1"},
      {"header longer than file",
       [&] {
         Bytes b = npy(header("<f4", "(3,)"), {});
         b[9] = std::byte{0x7F};
         return b;
       }(),
       "truncated .npy header: declares"},
      {"missing key", npy("{'descr': '<f4', 'shape': (3,)}", f32x3),
       "malformed .npy header: missing key 'fortran_order'"},
      {"extra key", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), 'x': 1}", f32x3),
       "malformed .npy header: unexpected key 'x'"},
      {"duplicate key",
       npy("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, "
           "'shape': (3,)}",
           f32x3),
       "duplicate key 'descr'"},
      {"int for a tuple", npy(header("<f4", "(3)"), f32x3), "is an int, not a tuple"},
      {"list for a tuple", npy(header("<f4", "[3]"), f32x3), "shape must be a tuple"},
      {"double comma", npy(header("<f4", "(3,,)"), f32x3), "expected a dimension in shape"},
      {"float dimension", npy(header("<f4", "(3.0,)"), f32x3), "not a non-negative int"},
      {"hex dimension", npy(header("<f4", "(0x3,)"), f32x3), "not a non-negative int"},
      {"huge dimension", npy(header("<f4", "(99999999999999999999,)"), f32x3),
       "not a non-negative int in int64 range"},
      {"negative dimension", npy(header("<f4", "(-1, 4)"), f32x3),
       "shape has a negative dimension -1"},
      {"missing comma", npy(header("<f4", "(3 1)"), f32x3), "expected ',' or ')' in shape"},
      {"unterminated shape", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (3,", f32x3),
       "expected a dimension in shape at the end"},
      {"lower-case bool", npy(header("<f4", "(3,)", "false"), f32x3),
       "fortran_order must be True or False"},
      {"text after dict", npy(header("<f4", "(3,)") + "x", f32x3), "unexpected text after"},
      {"no dict", npy("'descr'", f32x3), "expected '{'"},
      {"unterminated string", npy("{'descr: '<f4'}", f32x3), "expected ':'"},
      {"escape in string", npy(header("<f\\x34", "(3,)"), f32x3), "backslash"},
      {"structured descr",
       npy("{'descr': [('a', '<f4')], 'fortran_order': False, "
           "'shape': (3,)}",
           f32x3),
       "structured dtypes are not supported"},
      {"complex", npy(header("<c8", "(3,)"), f32x3), "unsupported descr '<c8'"},
      {"bytes string", npy(header("|S4", "(3,)"), f32x3), "unsupported descr '|S4'"},
      {"object", npy(header("|O", "(3,)"), f32x3), "unsupported descr '|O'"},
      {"float128", npy(header("<f16", "(3,)"), f32x3), "unsupported descr '<f16'"},
      {"no byte order", npy(header("f4", "(3,)"), f32x3), "unsupported descr 'f4'"},
      {"big-endian", npy(header(">f4", "(3,)"), f32x3), "big-endian data is not supported"},
      {"big-endian unicode", npy(header(">U1", "(3,)"), f32x3), "big-endian data is not supported"},
      {"bfloat16 as void", npy(header("<V2", "(6,)"), f32x3),
       "descr '<V2' is an opaque void type (an ml_dtypes bfloat16 array saved directly?): save "
       "bfloat16 as its uint16 bits (x.view(np.uint16)) with a 0-d q_dtype/kv_dtype string "
       "member, or write the case with rpa.Case"},
      {"float8 as void", npy(header("|V1", "(12,)"), f32x3), "x.view(np.uint8)"},
      {"float8_e5m2 as ml_dtypes saves it", npy(header("<f1", "(12,)"), f32x3),
       "descr '<f1' names no numpy type (an ml_dtypes float8 array saved directly?)"},
      {"other void", npy(header("|V4", "(3,)"), f32x3),
       "descr '|V4' is an opaque void type, which is not supported"},
      {"fortran order", npy(header("<f4", "(3,)", "True"), f32x3),
       "fortran_order True is not supported"},
      {"shape overflow", npy(header("<f4", "(4294967296, 4294967296, 2)"), f32x3),
       "shape (4294967296, 4294967296, 2) of 4-byte elements overflows int64 bytes"},
      {"overflow behind a zero", npy(header("<f4", "(0, 4294967296, 4294967296)"), {}),
       "overflows int64 bytes"},
      {"truncated data", npy(header("<f4", "(4,)"), f32x3),
       "truncated data: header says 16 bytes, member has 12"},
      {"trailing data", npy(header("<f4", "(2,)"), f32x3),
       "trailing bytes: header says 8 bytes of data, member has 12"},
  };
  for (const auto& k : kCases) {
    SCOPED_TRACE(k.name);
    const NpyParseResult p = parse_npy(k.file);
    EXPECT_FALSE(p.value.has_value());
    EXPECT_NE(p.error.find(k.error), std::string::npos) << p.error;
    EXPECT_EQ(p.error.find('\n'), std::string::npos) << p.error;
  }
}

// ---------------------------------------------------------------------------------------
// The parser's arithmetic at its boundaries: it reads only inside the bytes it is given

// An .npy file whose header-length field declares `declared`, whatever the text's length.
Bytes npy_declaring(uint64_t declared, std::string_view text, std::span<const std::byte> data,
                    int major) {
  Bytes out = npy(text, data, major);
  const size_t width = major == 1 ? 2 : 4;
  for (size_t k = 0; k < width; ++k) out[8 + k] = static_cast<std::byte>(declared >> (8 * k));
  return out;
}

// The parser's verdict on `file`, which both entry points and the .npz reader (the file as
// member q.npy of a valid case) must give alike: "" when it is accepted, else its line.
std::string npy_verdict(const Bytes& file) {
  const NpyParseResult viewed = parse_npy(file);
  const NpyParseResult moved = parse_npy(Bytes(file));
  EXPECT_EQ(viewed.error, moved.error);
  EXPECT_EQ(viewed.value.has_value(), moved.value.has_value());
  EXPECT_EQ(viewed.error.find('\n'), std::string::npos) << viewed.error;
  if (viewed.value) {
    EXPECT_EQ(viewed.value->data, moved.value->data);
    EXPECT_EQ(viewed.value->shape, moved.value->shape);
  } else {
    const Case c = small_case(DType::kFloat32, DType::kFloat32);
    EXPECT_EQ(refusal(with_member(c, "q.npy", file)), "member 'q.npy': " + viewed.error);
  }
  return viewed.error;
}

TEST(NpyBounds, HeaderLengthAtEachBoundaryInEveryVersion) {
  // The text of an array with no elements: a file that ends with its header is whole.
  const std::string text = header("<f4", "(0,)");
  const uint64_t n = text.size();
  for (int major : {1, 2, 3}) {
    SCOPED_TRACE("version " + std::to_string(major));
    const uint64_t width = major == 1 ? 2 : 4;
    const auto declaring = [&](uint64_t declared) {
      return npy_verdict(npy_declaring(declared, text, {}, major));
    };
    const std::string follow = " bytes, " + std::to_string(n) + " follow";
    EXPECT_EQ(declaring(n), "");  // exactly to the end
    EXPECT_EQ(declaring(n - 1), "trailing bytes: header says 0 bytes of data, member has 1");
    EXPECT_EQ(declaring(n + 1),
              "truncated .npy header: declares " + std::to_string(n + 1) + follow);
    EXPECT_EQ(declaring(n + 8 + width),  // past the end by the prefix's length
              "truncated .npy header: declares " + std::to_string(n + 8 + width) + follow);
    const uint64_t widest = major == 1 ? 0xFFFF : 0xFFFFFFFF;
    EXPECT_EQ(declaring(widest),
              "truncated .npy header: declares " + std::to_string(widest) + follow);
    EXPECT_EQ(declaring(0), "malformed .npy header: expected '{' at the end");
  }
}

TEST(NpyBounds, ReadsNothingPastTheBytesItIsGiven) {
  const Bytes data(12, std::byte{0x3F});
  for (int major : {1, 2, 3}) {
    const Bytes whole = npy(header("<f4", "(3,)"), data, major);
    ASSERT_EQ(npy_verdict(whole), "");
    for (size_t keep = 0; keep < whole.size(); ++keep) {
      SCOPED_TRACE("version " + std::to_string(major) + ", first " + std::to_string(keep) +
                   " bytes");
      // A prefix of a whole file (the rest still in memory behind it), and the same prefix
      // alone on the heap, where ASan reports a read past its end.
      const NpyParseResult in_place = parse_npy(std::span(whole).first(keep));
      const Bytes alone(whole.begin(), whole.begin() + static_cast<ptrdiff_t>(keep));
      EXPECT_FALSE(in_place.value.has_value());
      EXPECT_EQ(in_place.error, npy_verdict(alone));
    }
  }
}

TEST(NpyBounds, ShapeByteCountAgainstTheData) {
  const Bytes f32x3(12);
  const auto verdict = [&](std::string_view descr, std::string_view shape,
                           std::span<const std::byte> data) {
    return npy_verdict(npy(header(descr, shape), data));
  };
  EXPECT_EQ(verdict("<f4", "(3,)", f32x3), "");
  EXPECT_EQ(verdict("<f4", "(4,)", f32x3), "truncated data: header says 16 bytes, member has 12");
  EXPECT_EQ(verdict("<f4", "(2,)", f32x3),
            "trailing bytes: header says 8 bytes of data, member has 12");
  EXPECT_EQ(verdict("<f8", "(1099511627776, 0)", {}), "");
  EXPECT_EQ(verdict("<f8", "(0, 1099511627776)", f32x3),
            "trailing bytes: header says 0 bytes of data, member has 12");
  // Byte counts that just fit in int64 are compared with the data, never allocated.
  EXPECT_EQ(verdict("|u1", "(9223372036854775807,)", f32x3),
            "truncated data: header says 9223372036854775807 bytes, member has 12");
  EXPECT_EQ(verdict("<f4", "(2305843009213693951,)", {}),
            "truncated data: header says 9223372036854775804 bytes, member has 0");
  EXPECT_EQ(verdict("<U2305843009213693951", "()", {}),
            "truncated data: header says 9223372036854775804 bytes, member has 0");
  // One element more overflows, whatever the dimensions multiply to modulo 2^64.
  EXPECT_EQ(verdict("<f4", "(2305843009213693952,)", {}),
            "shape (2305843009213693952,) of 4-byte elements overflows int64 bytes");
  EXPECT_EQ(verdict("|u1", "(4611686018427387904, 2)", {}),
            "shape (4611686018427387904, 2) of 1-byte elements overflows int64 bytes");
  EXPECT_EQ(verdict("|u1", "(4294967296, 4294967296)", {}),
            "shape (4294967296, 4294967296) of 1-byte elements overflows int64 bytes");
  EXPECT_EQ(verdict("<f4", "(0, 4611686018427387904, 4611686018427387904)", {}),
            "shape (0, 4611686018427387904, 4611686018427387904) of 4-byte elements overflows "
            "int64 bytes");
  EXPECT_EQ(verdict("<U2305843009213693952", "()", {}),
            "unsupported descr '<U2305843009213693952'");
}

TEST(NpyBounds, AMemberIsParsedAloneNotWithTheArchiveAroundIt) {
  // q.npy declares its header one byte longer than the member, and the stored member after
  // it starts right there in the archive: the reader must see the end of q.npy.
  const Case c = small_case(DType::kFloat32, DType::kFloat32);
  const std::string text = header("<f4", "(0,)");
  const Bytes q = npy_declaring(text.size() + 1, text, {}, 1);
  std::vector<ZipEntry> entries = entries_of(write_case_bytes(c));
  ASSERT_EQ(entries.front().name, "q.npy");
  entries.front().data = q;
  EXPECT_EQ(refusal(write_zip(entries)), "member 'q.npy': truncated .npy header: declares " +
                                             std::to_string(text.size() + 1) + " bytes, " +
                                             std::to_string(text.size()) + " follow");
}

// ---------------------------------------------------------------------------------------
// Malformed case files

TEST(CaseFileRead, RefusesWhatIsNotAZipArchive) {
  EXPECT_EQ(refusal({}), "not a zip archive: empty input");
  EXPECT_EQ(refusal(bytes_of("hello, world")).rfind("not a zip archive: ", 0), 0u);
  const Bytes good = write_case_bytes(small_case(DType::kFloat32, DType::kFloat32));
  for (size_t keep : {good.size() / 2, good.size() - 1, size_t{30}}) {
    SCOPED_TRACE("truncated to " + std::to_string(keep));
    EXPECT_EQ(refusal(std::span(good).first(keep)).rfind("not a zip archive: ", 0), 0u);
  }
  Bytes appended = good;
  appended.push_back(std::byte{0});
  EXPECT_EQ(refusal(appended).rfind("not a zip archive: ", 0), 0u);
}

TEST(CaseFileRead, RefusesACorruptedMemberByItsCrc) {
  const Case c = small_case(DType::kFloat32, DType::kFloat32);
  Bytes archive = write_case_bytes(c);
  const Bytes q = entries_of(archive)[0].data;
  const auto at = std::search(archive.begin(), archive.end(), q.begin(), q.end());
  ASSERT_NE(at, archive.end());
  at[200] ^= std::byte{0x01};  // in q's data: its header still parses
  EXPECT_EQ(refusal(archive), "member 'q.npy': CRC error");
}

TEST(CaseFileRead, NamesTheMemberAndTheProblem) {
  const Case c = small_case(DType::kFloat32, DType::kFloat32);
  const Bytes f32x3(12);
  const struct {
    std::string name;
    Bytes archive;
    std::string error;
  } kCases[] = {
      {"bad magic", with_member(c, "q.npy", bytes_of("not numpy")),
       "member 'q.npy': not an .npy array (bad magic; expected \"\\x93NUMPY\")"},
      {"version", with_member(c, "kv_lens.npy", npy(header("<i4", "(2,)"), Bytes(8), 2 + 3)),
       "member 'kv_lens.npy': unsupported .npy format version 5.0 (1.0, 2.0 and 3.0 are)"},
      {"missing key", with_member(c, "q.npy", npy("{'descr': '<f4', 'shape': (3,)}", f32x3)),
       "member 'q.npy': malformed .npy header: missing key 'fortran_order'"},
      {"negative dim", with_member(c, "page_indices.npy", npy(header("<i4", "(-2, 2)"), {})),
       "member 'page_indices.npy': malformed .npy header: shape has a negative dimension -2"},
      {"descr", with_member(c, "num_seqs.npy", npy(header("<c8", "(1,)"), Bytes(8))),
       "member 'num_seqs.npy': unsupported descr '<c8'"},
      {"big-endian", with_member(c, "cu_q_lens.npy", npy(header(">i4", "(3,)"), f32x3)),
       "member 'cu_q_lens.npy': big-endian data is not supported (descr '>i4')"},
      {"void", with_member(c, "kv_pages.npy", npy(header("|V1", "(12,)"), f32x3)),
       "member 'kv_pages.npy': descr '|V1' is an opaque void type (an ml_dtypes float8 array "
       "saved directly?): save float8 as its uint8 bits (x.view(np.uint8)) with a 0-d kv_dtype "
       "string member, or write the case with rpa.Case"},
      {"fortran", with_member(c, "q.npy", npy(header("<f4", "(3,)", "True"), f32x3)),
       "member 'q.npy': fortran_order True is not supported: save a C-ordered array "
       "(np.ascontiguousarray)"},
      {"overflow",
       with_member(c, "q.npy", npy(header("<f4", "(4294967296, 4294967296, 2)"), f32x3)),
       "member 'q.npy': shape (4294967296, 4294967296, 2) of 4-byte elements overflows int64 "
       "bytes"},
      {"truncated", with_member(c, "q.npy", npy(header("<f4", "(4, 3, 2)"), Bytes(80))),
       "member 'q.npy': truncated data: header says 96 bytes, member has 80"},
      {"trailing", with_member(c, "q.npy", npy(header("<f4", "(4, 3, 2)"), Bytes(100))),
       "member 'q.npy': trailing bytes: header says 96 bytes of data, member has 100"},
      {"missing", without_member(c, "kv_lens.npy"), "missing required member 'kv_lens.npy'"},
      {"unknown", with_member(c, "foo.npy", scalar_npy("<f8", 1.0)), "unknown member 'foo.npy'"},
      {"not .npy", with_member(c, "q", scalar_npy("<f8", 1.0)), "unknown member 'q'"},
      {"bare suffix", with_member(c, ".npy", scalar_npy("<f8", 1.0)), "unknown member '.npy'"},
      {"in a folder", with_member(c, "case/q.npy", scalar_npy("<f8", 1.0)),
       "unknown member 'case/q.npy'"},
      {"newline in name", with_member(c, "a\nb.npy", scalar_npy("<f8", 1.0)),
       "unknown member 'a\\x0ab.npy'"},
      {"q_dtype mismatch", with_member(c, "q_dtype.npy", write_npy_unicode(U"bfloat16")),
       "member 'q.npy': q_dtype is bfloat16, so it must hold its uint16 bits ('<u2'), but holds "
       "float32 of shape (4, 4, 8)"},
      {"kv_dtype mismatch", with_member(c, "kv_dtype.npy", write_npy_unicode(U"float8_e5m2")),
       "member 'kv_pages.npy': kv_dtype is float8_e5m2, so it must hold its uint8 bits ('|u1'), "
       "but holds float32 of shape (3, 4, 4, 8)"},
      {"explicit float32 mismatch",
       with_member(small_case(DType::kBFloat16, DType::kFloat32), "q_dtype.npy",
                   write_npy_unicode(U"float32")),
       "member 'q.npy': q_dtype is float32, so it must hold float32, but holds uint16 of shape "
       "(4, 4, 8)"},
      {"out mismatch",
       with_member(small_case(DType::kBFloat16, DType::kFloat32), "out.npy",
                   npy(header("<f4", "(3,)"), f32x3)),
       "member 'out.npy': q_dtype is bfloat16, so it must hold its uint16 bits ('<u2'), but "
       "holds float32 of shape (3,)"},
      {"unknown dtype", with_member(c, "q_dtype.npy", write_npy_unicode(U"float16")),
       "member 'q_dtype.npy': unknown dtype 'float16' (float32, bfloat16, float8_e4m3fn or "
       "float8_e5m2)"},
      {"index dtype name", with_member(c, "q_dtype.npy", write_npy_unicode(U"int32")),
       "member 'q_dtype.npy': unknown dtype 'int32' (float32, bfloat16, float8_e4m3fn or "
       "float8_e5m2)"},
      {"odd dtype name", with_member(c, "kv_dtype.npy", write_npy_unicode(U"bf\n16\u00e9")),
       "member 'kv_dtype.npy': unknown dtype 'bf\\x0a16\\xe9' (float32, bfloat16, "
       "float8_e4m3fn or float8_e5m2)"},
      {"dtype not a string", with_member(c, "q_dtype.npy", scalar_npy("<i8", int64_t{3})),
       "member 'q_dtype.npy': must be a 0-d unicode string (np.array('bfloat16')), holds int64 "
       "of shape ()"},
      {"dtype not 0-d", with_member(c, "q_dtype.npy", npy(header("<U1", "(1,)"), Bytes(4))),
       "member 'q_dtype.npy': must be a 0-d unicode string (np.array('bfloat16')), holds "
       "unicode '<U1' of shape (1,)"},
      {"string array", with_member(c, "kv_lens.npy", npy(header("<U1", "(2,)"), Bytes(8))),
       "member 'kv_lens.npy': must hold numbers, holds unicode '<U1' of shape (2,)"},
      {"int soft_cap", with_member(c, "soft_cap.npy", scalar_npy("<i8", int64_t{3})),
       "member 'soft_cap.npy': soft_cap must be a 0-d float64 or float32 array, holds int64 of "
       "shape ()"},
      {"float16 sm_scale", with_member(c, "sm_scale.npy", scalar_npy("<f2", uint16_t{0x3C00})),
       "member 'sm_scale.npy': sm_scale must be a 0-d float64 or float32 array, holds float16 "
       "of shape ()"},
      {"1-d mask_value", with_member(c, "mask_value.npy", npy(header("<f8", "(1,)"), Bytes(8))),
       "member 'mask_value.npy': mask_value must be a 0-d float64 or float32 array, holds "
       "float64 of shape (1,)"},
      {"float sliding_window", with_member(c, "sliding_window.npy", scalar_npy("<f8", 4.0)),
       "member 'sliding_window.npy': sliding_window must be a 0-d integer array, holds float64 "
       "of shape ()"},
      {"bool block size",
       with_member(c, "num_queries_per_block.npy", scalar_npy("|b1", uint8_t{1})),
       "member 'num_queries_per_block.npy': num_queries_per_block must be a 0-d integer array, "
       "holds bool of shape ()"},
      {"1-d vmem", with_member(c, "vmem_limit_bytes.npy", npy(header("<i8", "(1,)"), Bytes(8))),
       "member 'vmem_limit_bytes.npy': vmem_limit_bytes must be a 0-d integer array, holds "
       "int64 of shape (1,)"},
      {"uint64 over int64",
       with_member(c, "num_kv_pages_per_block.npy", scalar_npy("<u8", ~uint64_t{0})),
       "member 'num_kv_pages_per_block.npy': 18446744073709551615 does not fit in int64"},
  };
  for (const auto& k : kCases) {
    SCOPED_TRACE(k.name);
    EXPECT_EQ(refusal(k.archive), k.error);
  }
}

TEST(CaseFileRead, RefusesDuplicateMemberNames) {
  // libzip will not add a name twice, so write "x.npy" and rename it in place: names are
  // outside the CRC, and the local and central copies stay consistent.
  std::vector<ZipEntry> entries =
      entries_of(write_case_bytes(small_case(DType::kFloat32, DType::kFloat32)));
  entries.push_back(ZipEntry{.name = "x.npy", .data = entries[0].data});
  Bytes archive = write_zip(entries);
  const Bytes from = bytes_of("x.npy");
  int renamed = 0;
  for (auto it = archive.begin();
       (it = std::search(it, archive.end(), from.begin(), from.end())) != archive.end(); ++it) {
    *it = std::byte{'q'};
    ++renamed;
  }
  ASSERT_EQ(renamed, 2);
  EXPECT_EQ(refusal(archive), "duplicate member 'q.npy'");
}

TEST(CaseFileRead, AcceptsNarrowParameterTypes) {
  const Case c = small_case(DType::kFloat32, DType::kFloat32);
  Bytes archive = with_member(c, "soft_cap.npy", scalar_npy("<f4", -0.0f));
  std::vector<ZipEntry> entries = entries_of(archive);
  entries.push_back(
      ZipEntry{.name = "sliding_window.npy", .data = scalar_npy("|u1", uint8_t{200})});
  entries.push_back(
      ZipEntry{.name = "vmem_limit_bytes.npy", .data = scalar_npy("<i4", int32_t{-5})});
  entries.push_back(ZipEntry{.name = "num_kv_pages_per_block.npy",
                             .data = scalar_npy("<u8", uint64_t{INT64_MAX})});
  const CaseReadResult r = read_case_bytes(write_zip(entries), {});
  ASSERT_TRUE(r.value.has_value()) << r.error;
  ASSERT_TRUE(r.value->params.soft_cap.has_value());
  EXPECT_TRUE(std::signbit(*r.value->params.soft_cap));
  EXPECT_EQ(r.value->params.sliding_window, 200);
  EXPECT_EQ(r.value->params.vmem_limit_bytes, -5);
  EXPECT_EQ(r.value->params.num_kv_pages_per_block, INT64_MAX);
}

TEST(CaseFileRead, RefusesDeclaredSizesOverTheCapBeforeReading) {
  // q.npy: 512 data bytes + 128 header, kv_pages.npy: 1536 + 128.
  const Case c = small_case(DType::kFloat32, DType::kFloat32);
  EXPECT_EQ(refusal(write_case_bytes(c), CaseReadOptions{.max_bytes = 1000}),
            "member 'kv_pages.npy' declares 1664 bytes, more than the 1000-byte cap "
            "(CaseReadOptions::max_bytes)");
  // Every member fits, the sum does not.
  const std::string error = refusal(write_case_bytes(c), CaseReadOptions{.max_bytes = 1800});
  EXPECT_EQ(error.rfind("members declare ", 0), 0u) << error;
  EXPECT_NE(error.find(" bytes in all, more than the 1800-byte cap"), std::string::npos) << error;

  Case small = c;
  small.inputs.q = Tensor(DType::kFloat32, {2, 1, 1});
  small.inputs.kv_pages = Tensor(DType::kFloat32, {1, 1, 2, 1});
  Case big = small;
  big.inputs.q = Tensor(DType::kFloat32, {16, 4, 8});  // 2 KiB
  EXPECT_TRUE(read_case_bytes(write_case_bytes(small), {.max_bytes = 1024}).value.has_value());
  EXPECT_EQ(refusal(write_case_bytes(big), CaseReadOptions{.max_bytes = 1024}),
            "member 'q.npy' declares 2176 bytes, more than the 1024-byte cap "
            "(CaseReadOptions::max_bytes)");
}

TEST(CaseFileRead, FileErrorsStartWithThePath) {
  const CaseReadResult missing = read_case_file("/nonexistent-dir/case.npz", {});
  EXPECT_EQ(missing.error, "/nonexistent-dir/case.npz: cannot open: No such file or directory");
  const std::string dir = ::testing::TempDir();
  EXPECT_EQ(read_case_file(dir, {}).error, dir + ": cannot open: Is a directory");
  const std::string empty = dir + "case_file_test_empty.npz";
  std::fclose(std::fopen(empty.c_str(), "wb"));
  EXPECT_EQ(read_case_file(empty, {}).error, empty + ": not a zip archive: empty file");
  std::remove(empty.c_str());

  const std::string bad = dir + "case_file_test_bad.npz";
  std::string error;
  Case c = small_case(DType::kFloat32, DType::kFloat32);
  c.params.soft_cap = 1.0;
  ASSERT_TRUE(write_case_file(bad, c, &error)) << error;
  EXPECT_EQ(read_case_file(bad, {.max_bytes = 100}).error,
            bad +
                ": member 'q.npy' declares 640 bytes, more than the 100-byte cap "
                "(CaseReadOptions::max_bytes)");
  std::remove(bad.c_str());
}

// Every single-byte corruption and every truncation of a small case file is either refused
// with one line or read as a case that itself round-trips: never a crash, never a throw.
TEST(CaseFileRead, SurvivesEveryByteFlipAndTruncation) {
  Case c;
  c.inputs.q = Tensor(DType::kBFloat16, {1, 1, 2});
  c.inputs.kv_pages = Tensor(DType::kFloat8E4M3FN, {1, 1, 2, 2});
  c.inputs.kv_lens = Tensor::from_int32({1}, std::vector<int32_t>{1});
  c.inputs.page_indices = Tensor::from_int32({1, 1}, std::vector<int32_t>{0});
  c.inputs.cu_q_lens = Tensor::from_int32({2}, std::vector<int32_t>{0, 1});
  c.inputs.num_seqs = Tensor::from_int32({1}, std::vector<int32_t>{1});
  c.params.soft_cap = 2.0;
  const Bytes good = write_case_bytes(c);
  int read_anyway = 0;
  const auto check = [&](std::span<const std::byte> bytes) {
    const CaseReadResult r = read_case_bytes(bytes, {.max_bytes = 4096});
    if (!r.value.has_value()) {
      EXPECT_FALSE(r.error.empty());
      EXPECT_EQ(r.error.find('\n'), std::string::npos) << r.error;
      return;
    }
    ++read_anyway;
    const Case back = read_back(*r.value);
    EXPECT_EQ(back.inputs, r.value->inputs);
    expect_same_bits(back.params, r.value->params);
  };
  for (size_t i = 0; i < good.size(); ++i) {
    for (const uint8_t flip : {uint8_t{0x01}, uint8_t{0x80}, uint8_t{0xFF}}) {
      Bytes bad = good;
      bad[i] ^= std::byte{flip};
      check(bad);
    }
    check(std::span(good).first(i));
  }
  // Flips in names, times and padding leave a readable case; most others do not.
  EXPECT_GT(read_anyway, 0);
}

// ---------------------------------------------------------------------------------------
// The v3 dialects (DESIGN.md section 16)

// A small v3 batch: T = 4 tokens, 4 q heads, 2 kv heads, D = 8, 3 pages of 4 in the layout's
// packed shape, every option set that the dialect has. Random bits, so NaNs turn up.
Case small_v3_case(Dialect d, DType q, DType kv, uint32_t seed = 1) {
  std::mt19937 rng(seed);
  Case c;
  c.dialect = d;
  const bool hd64 = d == Dialect::kTpuInferenceV3Hd64;
  const int64_t dim = hd64 ? 64 : 8;
  const V3CacheLayout layout(d, kv, 2, dim);
  c.v3_inputs.queries = random_tensor(q, {4, 4, dim}, rng);
  c.v3_inputs.keys = random_tensor(kv, {4, 2, dim}, rng);
  c.v3_inputs.values = random_tensor(kv, {4, 2, dim}, rng);
  c.v3_inputs.kv_cache = random_tensor(kv, layout.cache_shape(3, 4), rng);
  c.v3_inputs.kv_lens = Tensor::from_int32({2}, std::vector<int32_t>{3, 7});
  c.v3_inputs.page_indices = Tensor::from_int32({4}, std::vector<int32_t>{0, 1, 2, 0});
  c.v3_inputs.cu_q_lens = Tensor::from_int32({3}, std::vector<int32_t>{0, 1, 4});
  c.v3_inputs.distribution = Tensor::from_int32({3}, std::vector<int32_t>{1, 1, 2});
  V3Params& p = c.v3_params;
  p.sm_scale = 0.125;
  p.sliding_window = 5;
  p.soft_cap = -0.0;
  p.mask_value = -std::numeric_limits<double>::infinity();
  p.q_scale = 0.5;
  p.k_scale = std::numeric_limits<double>::quiet_NaN();
  p.v_scale = 2.0;
  p.chunk_prefill_size = 3;
  p.vmem_limit_bytes = int64_t{1} << 40;
  if (hd64) {
    c.v3_inputs.attention_sink = random_tensor(DType::kFloat32, {4}, rng);
    p.num_kv_pages_per_block = 2;
    p.num_queries_per_block = 8;
  } else {
    p.use_causal_mask = false;
    p.update_kv_cache = false;
    p.skip_kv_mask = true;
    p.out_dtype = DType::kFloat32;
    p.d_block_sizes = V3BlockSizes{1, 4, 1, 4};
    p.p_block_sizes = V3BlockSizes{8, 8, 4, 4};
    p.m_block_sizes = V3BlockSizes{-1, 0, INT64_MAX, INT64_MIN};
  }
  c.out = random_tensor(q, {4, 4, dim}, rng);
  c.expected = random_tensor(q, {4, 4, dim}, rng);
  c.kv_cache_out = random_tensor(kv, layout.cache_shape(3, 4), rng);
  c.expected_kv_cache = random_tensor(kv, layout.cache_shape(3, 4), rng);
  return c;
}

void expect_same_bits(const V3Params& a, const V3Params& b) {
  EXPECT_EQ(bits(a.sm_scale), bits(b.sm_scale));
  EXPECT_EQ(bits(a.soft_cap), bits(b.soft_cap));
  EXPECT_EQ(bits(a.mask_value), bits(b.mask_value));
  EXPECT_EQ(bits(a.q_scale), bits(b.q_scale));
  EXPECT_EQ(bits(a.k_scale), bits(b.k_scale));
  EXPECT_EQ(bits(a.v_scale), bits(b.v_scale));
  EXPECT_EQ(a.use_causal_mask, b.use_causal_mask);
  EXPECT_EQ(a.update_kv_cache, b.update_kv_cache);
  EXPECT_EQ(a.skip_kv_mask, b.skip_kv_mask);
  EXPECT_EQ(a.sliding_window, b.sliding_window);
  EXPECT_EQ(a.out_dtype, b.out_dtype);
  EXPECT_EQ(a.chunk_prefill_size, b.chunk_prefill_size);
  EXPECT_EQ(a.d_block_sizes, b.d_block_sizes);
  EXPECT_EQ(a.p_block_sizes, b.p_block_sizes);
  EXPECT_EQ(a.m_block_sizes, b.m_block_sizes);
  EXPECT_EQ(a.num_kv_pages_per_block, b.num_kv_pages_per_block);
  EXPECT_EQ(a.num_queries_per_block, b.num_queries_per_block);
  EXPECT_EQ(a.vmem_limit_bytes, b.vmem_limit_bytes);
}

void expect_v3_round_trip(const Case& c) {
  const Case back = read_back(c);
  EXPECT_EQ(back.dialect, c.dialect);
  EXPECT_EQ(back.v3_inputs, c.v3_inputs);
  EXPECT_EQ(back.out, c.out);
  EXPECT_EQ(back.expected, c.expected);
  EXPECT_EQ(back.kv_cache_out, c.kv_cache_out);
  EXPECT_EQ(back.expected_kv_cache, c.expected_kv_cache);
  EXPECT_EQ(back.inputs, Inputs{});  // the jax arrays stay default
  expect_same_bits(back.v3_params, c.v3_params);
}

constexpr Dialect kV3Dialects[] = {Dialect::kTpuInferenceV3, Dialect::kTpuInferenceV3Hd64};

TEST(CaseFileV3, RoundTripsEveryDialectAndDtypePairBitForBit) {
  for (Dialect d : kV3Dialects) {
    for (DType q : {DType::kFloat32, DType::kBFloat16}) {
      for (DType kv : kFloatDTypes) {
        SCOPED_TRACE(std::string(dialect_name(d)) + " " + std::string(dtype_name(q)) + "/" +
                     std::string(dtype_name(kv)));
        expect_v3_round_trip(small_v3_case(d, q, kv));
      }
    }
  }
}

TEST(CaseFileV3, AbsentOptionsReadAsTheKeywordDefaults) {
  for (Dialect d : kV3Dialects) {
    Case c = small_v3_case(d, DType::kFloat32, DType::kFloat32);
    c.v3_params = V3Params{};
    c.v3_inputs.attention_sink.reset();
    c.out.reset();
    c.expected.reset();
    c.kv_cache_out.reset();
    c.expected_kv_cache.reset();
    expect_v3_round_trip(c);
    std::vector<std::string> want = {
        "dialect.npy", "queries.npy",      "keys.npy",      "values.npy",       "kv_cache.npy",
        "kv_lens.npy", "page_indices.npy", "cu_q_lens.npy", "distribution.npy", "sm_scale.npy"};
    if (d == Dialect::kTpuInferenceV3) {
      for (const char* n : {"use_causal_mask.npy", "update_kv_cache.npy", "skip_kv_mask.npy"}) {
        want.push_back(n);
      }
    }
    EXPECT_EQ(names_of(write_case_bytes(c)), want);
    // Only `dialect` and the eight arrays: every keyword at its default.
    std::vector<ZipEntry> entries = entries_of(write_case_bytes(c));
    std::erase_if(entries, [](const ZipEntry& e) {
      return e.name == "sm_scale.npy" || e.name.find("_mask") != std::string::npos ||
             e.name == "update_kv_cache.npy";
    });
    const CaseReadResult r = read_case_bytes(write_zip(entries), {});
    ASSERT_TRUE(r.value.has_value()) << r.error;
    EXPECT_TRUE(r.value->v3_params == V3Params{});
  }
}

TEST(CaseFileV3, AbsentDialectIsJaxAndJaxFilesHaveNoDialectMember) {
  const Case c = small_case(DType::kFloat32, DType::kFloat32);
  const Bytes bytes = write_case_bytes(c);
  const std::vector<std::string> names = names_of(bytes);
  EXPECT_EQ(std::count(names.begin(), names.end(), "dialect.npy"), 0);
  EXPECT_EQ(read_back(c).dialect, Dialect::kJax);
  // Named explicitly, it reads the same.
  const CaseReadResult r =
      read_case_bytes(with_member(c, "dialect.npy", write_npy_unicode(U"jax")), {});
  ASSERT_TRUE(r.value.has_value()) << r.error;
  EXPECT_EQ(r.value->inputs, c.inputs);
}

// np.savez_compressed(f, dialect=np.array('tpu_inference_v3'),
//   queries=bf16 [[[1.5, -2]]].view(np.uint16), keys=e4m3fn [[[0.5, 4]]].view(np.uint8),
//   values=e4m3fn [[[-0.25, 1]]].view(np.uint8), kv_cache=np.zeros((1,4,1,4,2), np.uint8),
//   kv_lens=i32 [1], page_indices=i32 [0], cu_q_lens=i32 [0, 1], distribution=i32 [0, 0, 1],
//   q_dtype=np.array('bfloat16'), kv_dtype=np.array('float8_e4m3fn'),
//   use_causal_mask=np.int64(0), m_block_sizes=np.array([8, 16, 4, 16], np.int64),
//   out_dtype=np.array('bfloat16'), sm_scale=np.float64(0.5)); numpy 2.5.5 and ml_dtypes 0.7.0
// in /tmp/v3venv. Bits printed there: queries 16320 49152, keys 48 72, values 168 56.
constexpr std::string_view kNumpyV3Hex =
    "504b03042d000000080000002100eb95aa21ffffffffffffffff0b0014006469616c6563742e6e7079010010"
    "00c00000000000000067000000000000009bec17ea1b10c9c850c650ad9e925a9c5ca46ea5a06e136a68a6ae"
    "a3a09e965f54529498179f5f94920a92704bcc294e058a17672416a402f91a9a3a0ab50a9400ae1206068602"
    "202e05e27820ce04e23c204e03e254202e82d220b164281ba4ae0c888d811800504b03042d00000008000000"
    "2100cbbb40f9ffffffffffffffff0b001400717565726965732e6e70790100100084000000000000004c0000"
    "00000000009bec17ea1b10c9c850c650ad9e925a9c5ca46ea5a06e536aa4aea3a09e965f54529498179f5f94"
    "920a12774bcc294e058a17672416a402f91a863a0a4064a4a9a350ab401ee03a60cf700000504b03042d0000"
    "00080000002100b1fafc99ffffffffffffffff080014006b6579732e6e70790100100082000000000000004a"
    "000000000000009bec17ea1b10c9c850c650ad9e925a9c5ca46ea5a05e536aa8aea3a09e965f54529498179f"
    "5f94920a12774bcc294e058a17672416a402f91a863a0a4064a4a9a350ab401ee032f00000504b03042d0000"
    "000800000021009f8b6170ffffffffffffffff0a00140076616c7565732e6e70790100100082000000000000"
    "004a000000000000009bec17ea1b10c9c850c650ad9e925a9c5ca46ea5a05e536aa8aea3a09e965f54529498"
    "179f5f94920a12774bcc294e058a17672416a402f91a863a0a4064a4a9a350ab401ee05a610100504b03042d"
    "000000080000002100e89de9bcffffffffffffffff0c0014006b765f63616368652e6e707901001000a00000"
    "00000000004e000000000000009bec17ea1b10c9c850c650ad9e925a9c5ca46ea5a05e536aa8aea3a09e965f"
    "54529498179f5f94920a12774bcc294e058a17672416a402f91a863a0a263a0a10d2485347a1568154c0c540"
    "000000504b03042d000000080000002100a118124fffffffffffffffff0b0014006b765f6c656e732e6e7079"
    "01001000840000000000000048000000000000009bec17ea1b10c9c850c650ad9e925a9c5ca46ea5a06e9369"
    "a2aea3a09e965f54529498179f5f94920a12774bcc294e058a17672416a402f91a863a9a3a0ab50a14002e46"
    "06060600504b03042d000000080000002100c47faef7ffffffffffffffff10001400706167655f696e646963"
    "65732e6e707901001000840000000000000047000000000000009bec17ea1b10c9c850c650ad9e925a9c5ca4"
    "6ea5a06e9369a2aea3a09e965f54529498179f5f94920a12774bcc294e058a17672416a402f91a863a9a3a0a"
    "b50a14002e06200000504b03042d0000000800000021007b56b5f3ffffffffffffffff0d00140063755f715f"
    "6c656e732e6e707901001000880000000000000049000000000000009bec17ea1b10c9c850c650ad9e925a9c"
    "5ca46ea5a06e9369a2aea3a09e965f54529498179f5f94920a12774bcc294e058a17672416a402f91a463a9a"
    "3a0ab50a14002e062060046200504b03042d0000000800000021007243a277ffffffffffffffff1000140064"
    "6973747269627574696f6e2e6e7079010010008c0000000000000049000000000000009bec17ea1b10c9c850"
    "c650ad9e925a9c5ca46ea5a06e9369a2aea3a09e965f54529498179f5f94920a12774bcc294e058a17672416"
    "a402f91ac63a9a3a0ab50a14002e062860046200504b03042d000000080000002100ac82fa94ffffffffffff"
    "ffff0b001400715f64747970652e6e707901001000a00000000000000058000000000000009bec17ea1b10c9"
    "c850c650ad9e925a9c5ca46ea5a06e136aa1aea3a09e965f54529498179f5f94920a12774bcc294e058a1767"
    "2416a402f91a9a3a0ab50a1401ae240606863420ce01e27c204e04e2122036046233200600504b03042d0000"
    "000800000021001e063f70ffffffffffffffff0c0014006b765f64747970652e6e707901001000b400000000"
    "00000065000000000000009bec17ea1b10c9c850c650ad9e925a9c5ca46ea5a06e136a68acaea3a09e965f54"
    "529498179f5f94920a92704bcc294e058a17672416a402f91a9a3a0ab50a9400ae340606861c20ce07e24420"
    "2e01620b208e07e254203601e25c2036066290da3c200600504b03042d0000000800000021003ab13566ffff"
    "ffffffffffff130014007573655f63617573616c5f6d61736b2e6e7079010010008800000000000000450000"
    "00000000009bec17ea1b10c9c850c650ad9e925a9c5ca46ea5a06e9369a1aea3a09e965f54529498179f5f94"
    "920a12774bcc294e058a17672416a402f91a9a3a0ab50a14012e06280000504b03042d000000080000002100"
    "a1b2256dffffffffffffffff110014006d5f626c6f636b5f73697a65732e6e707901001000a0000000000000"
    "004d000000000000009bec17ea1b10c9c850c650ad9e925a9c5ca46ea5a06e9369a1aea3a09e965f54529498"
    "179f5f94920a12774bcc294e058a17672416a402f91a263a9a3a0ab50a14002e0e06081080d22c687c00504b"
    "03042d000000080000002100ac82fa94ffffffffffffffff0d0014006f75745f64747970652e6e7079010010"
    "00a00000000000000058000000000000009bec17ea1b10c9c850c650ad9e925a9c5ca46ea5a06e136aa1aea3"
    "a09e965f54529498179f5f94920a12774bcc294e058a17672416a402f91a9a3a0ab50a1401ae240606863420"
    "ce01e27c204e04e2122036046233200600504b03042d00000008000000210070ee9269ffffffffffffffff0c"
    "001400736d5f7363616c652e6e707901001000880000000000000047000000000000009bec17ea1b10c9c850"
    "c650ad9e925a9c5ca46ea5a06e9366a1aea3a09e965f54529498179f5f94920a12774bcc294e058a17672416"
    "a402f91a9a3a0ab50a14012e063078600f00504b01022d032d000000080000002100eb95aa2167000000c000"
    "00000b00000000000000000000008001000000006469616c6563742e6e7079504b01022d032d000000080000"
    "002100cbbb40f94c000000840000000b00000000000000000000008001a4000000717565726965732e6e7079"
    "504b01022d032d000000080000002100b1fafc994a0000008200000008000000000000000000000080012d01"
    "00006b6579732e6e7079504b01022d032d0000000800000021009f8b61704a000000820000000a0000000000"
    "0000000000008001b101000076616c7565732e6e7079504b01022d032d000000080000002100e89de9bc4e00"
    "0000a00000000c00000000000000000000008001370200006b765f63616368652e6e7079504b01022d032d00"
    "0000080000002100a118124f48000000840000000b00000000000000000000008001c30200006b765f6c656e"
    "732e6e7079504b01022d032d000000080000002100c47faef747000000840000001000000000000000000000"
    "00800148030000706167655f696e64696365732e6e7079504b01022d032d0000000800000021007b56b5f349"
    "000000880000000d00000000000000000000008001d103000063755f715f6c656e732e6e7079504b01022d03"
    "2d0000000800000021007243a277490000008c00000010000000000000000000000080015904000064697374"
    "7269627574696f6e2e6e7079504b01022d032d000000080000002100ac82fa9458000000a00000000b000000"
    "00000000000000008001e4040000715f64747970652e6e7079504b01022d032d0000000800000021001e063f"
    "7065000000b40000000c00000000000000000000008001790500006b765f64747970652e6e7079504b01022d"
    "032d0000000800000021003ab13566450000008800000013000000000000000000000080011c060000757365"
    "5f63617573616c5f6d61736b2e6e7079504b01022d032d000000080000002100a1b2256d4d000000a0000000"
    "1100000000000000000000008001a60600006d5f626c6f636b5f73697a65732e6e7079504b01022d032d0000"
    "00080000002100ac82fa9458000000a00000000d00000000000000000000008001360700006f75745f647479"
    "70652e6e7079504b01022d032d00000008000000210070ee926947000000880000000c000000000000000000"
    "00008001cd070000736d5f7363616c652e6e7079504b0506000000000f000f0072030000520800000000";

TEST(CaseFileV3, ReadsWhatNumpyWrites) {
  const CaseReadResult r = read_case_bytes(from_hex(kNumpyV3Hex), {});
  ASSERT_TRUE(r.value.has_value()) << r.error;
  const Case& c = *r.value;
  EXPECT_EQ(c.dialect, Dialect::kTpuInferenceV3);
  ASSERT_EQ(c.v3_inputs.queries.dtype(), DType::kBFloat16);
  EXPECT_EQ(c.v3_inputs.queries.shape(), (Shape{1, 1, 2}));
  EXPECT_EQ(c.v3_inputs.queries.float_at(0), 1.5);
  EXPECT_EQ(c.v3_inputs.queries.float_at(1), -2.0);
  ASSERT_EQ(c.v3_inputs.keys.dtype(), DType::kFloat8E4M3FN);
  EXPECT_EQ(c.v3_inputs.keys.float_at(1), 4.0);
  EXPECT_EQ(c.v3_inputs.values.float_at(0), -0.25);
  EXPECT_EQ(c.v3_inputs.kv_cache.dtype(), DType::kFloat8E4M3FN);
  EXPECT_EQ(c.v3_inputs.kv_cache.shape(), (Shape{1, 4, 1, 4, 2}));
  EXPECT_EQ(c.v3_inputs.distribution.int_at(2), 1);
  EXPECT_FALSE(c.v3_params.use_causal_mask);
  EXPECT_TRUE(c.v3_params.update_kv_cache);
  EXPECT_EQ(c.v3_params.m_block_sizes, (V3BlockSizes{8, 16, 4, 16}));
  EXPECT_EQ(c.v3_params.out_dtype, DType::kBFloat16);
  EXPECT_EQ(c.v3_params.sm_scale, 0.5);
}

TEST(CaseFileV3, RefusesMalformedV3FilesNamingTheMember) {
  const Case v3 = small_v3_case(Dialect::kTpuInferenceV3, DType::kBFloat16, DType::kFloat8E5M2);
  const Case hd64 = small_v3_case(Dialect::kTpuInferenceV3Hd64, DType::kFloat32, DType::kFloat32);
  const Case jax = small_case(DType::kFloat32, DType::kFloat32);
  const struct {
    std::string name;
    Bytes archive;
    std::string error;
  } kCases[] = {
      {"unknown dialect", with_member(v3, "dialect.npy", write_npy_unicode(U"tpu_v4")),
       "member 'dialect.npy': unknown dialect 'tpu_v4' (jax, tpu_inference_v3 or "
       "tpu_inference_v3_hd64)"},
      {"dialect not text", with_member(v3, "dialect.npy", scalar_npy("<i8", int64_t{1})),
       "member 'dialect.npy': must be a 0-d unicode string (np.array('tpu_inference_v3')), "
       "holds int64 of shape ()"},
      {"q in v3", with_member(v3, "q.npy", scalar_npy("<f8", 1.0)),
       "member 'q.npy' is the jax dialect's, not the tpu_inference_v3 dialect's"},
      {"num_seqs in v3", with_member(v3, "num_seqs.npy", scalar_npy("<i8", int64_t{1})),
       "member 'num_seqs.npy' is the jax dialect's, not the tpu_inference_v3 dialect's"},
      {"hd64 block in v3",
       with_member(v3, "num_queries_per_block.npy", scalar_npy("<i8", int64_t{8})),
       "member 'num_queries_per_block.npy' is the jax and tpu_inference_v3_hd64 dialects', not "
       "the tpu_inference_v3 dialect's"},
      {"sink in v3", with_member(v3, "attention_sink.npy", scalar_npy("<f4", 1.0f)),
       "member 'attention_sink.npy' is the tpu_inference_v3_hd64 dialect's, not the "
       "tpu_inference_v3 dialect's"},
      {"causal in hd64", with_member(hd64, "use_causal_mask.npy", scalar_npy("<i8", int64_t{1})),
       "member 'use_causal_mask.npy' is the tpu_inference_v3 dialect's, not the "
       "tpu_inference_v3_hd64 dialect's"},
      {"out_dtype in hd64", with_member(hd64, "out_dtype.npy", write_npy_unicode(U"float32")),
       "member 'out_dtype.npy' is the tpu_inference_v3 dialect's, not the "
       "tpu_inference_v3_hd64 dialect's"},
      {"queries in jax", with_member(jax, "queries.npy", scalar_npy("<f4", 1.0f)),
       "member 'queries.npy' is the tpu_inference_v3 and tpu_inference_v3_hd64 dialects', not "
       "the jax dialect's"},
      {"kv_cache_out in jax", with_member(jax, "kv_cache_out.npy", scalar_npy("<f4", 1.0f)),
       "member 'kv_cache_out.npy' is the tpu_inference_v3 and tpu_inference_v3_hd64 dialects', "
       "not the jax dialect's"},
      {"missing", without_member(v3, "distribution.npy"),
       "missing required member 'distribution.npy' (dialect tpu_inference_v3)"},
      {"kv dtype", with_member(v3, "keys.npy", npy(header("<f4", "(1,)"), Bytes(4))),
       "member 'keys.npy': kv_dtype is float8_e5m2, so it must hold its uint8 bits ('|u1'), but "
       "holds float32 of shape (1,)"},
      {"cache out dtype", with_member(v3, "kv_cache_out.npy", npy(header("<u2", "(1,)"), Bytes(2))),
       "member 'kv_cache_out.npy': kv_dtype is float8_e5m2, so it must hold its uint8 bits "
       "('|u1'), but holds uint16 of shape (1,)"},
      {"queries dtype", with_member(v3, "queries.npy", npy(header("|u1", "(1,)"), Bytes(1))),
       "member 'queries.npy': q_dtype is bfloat16, so it must hold its uint16 bits ('<u2'), but "
       "holds uint8 of shape (1,)"},
      {"bool 2", with_member(v3, "skip_kv_mask.npy", scalar_npy("<i8", int64_t{2})),
       "member 'skip_kv_mask.npy': skip_kv_mask must be 0 or 1, holds 2"},
      {"bool float", with_member(v3, "update_kv_cache.npy", scalar_npy("<f8", 1.0)),
       "member 'update_kv_cache.npy': update_kv_cache must be a 0-d integer array, holds float64 "
       "of shape ()"},
      {"block rank", with_member(v3, "d_block_sizes.npy", scalar_npy("<i8", int64_t{1})),
       "member 'd_block_sizes.npy': d_block_sizes must be an integer array of shape (4,), holds "
       "int64 of shape ()"},
      {"block length", with_member(v3, "p_block_sizes.npy", npy(header("<i8", "(3,)"), Bytes(24))),
       "member 'p_block_sizes.npy': p_block_sizes must be an integer array of shape (4,), holds "
       "int64 of shape (3,)"},
      {"out_dtype", with_member(v3, "out_dtype.npy", write_npy_unicode(U"float128")),
       "member 'out_dtype.npy': unknown dtype 'float128'"},
      {"chunk float", with_member(v3, "chunk_prefill_size.npy", scalar_npy("<f8", 8.0)),
       "member 'chunk_prefill_size.npy': chunk_prefill_size must be a 0-d integer array, holds "
       "float64 of shape ()"},
      {"q_scale int", with_member(v3, "q_scale.npy", scalar_npy("<i8", int64_t{1})),
       "member 'q_scale.npy': q_scale must be a 0-d float64 or float32 array, holds int64 of "
       "shape ()"},
  };
  for (const auto& k : kCases) {
    SCOPED_TRACE(k.name);
    EXPECT_EQ(refusal(k.archive), k.error);
  }
}

TEST(CaseFileV3, WriteRefusesWhatAReaderWouldReadDifferently) {
  Case c = small_v3_case(Dialect::kTpuInferenceV3, DType::kBFloat16, DType::kBFloat16);
  c.v3_inputs.keys = Tensor(DType::kFloat32, {4, 2, 8});
  EXPECT_THROW(write_case_bytes(c), std::invalid_argument);
  c = small_v3_case(Dialect::kTpuInferenceV3, DType::kFloat32, DType::kFloat32);
  c.v3_params.num_kv_pages_per_block = 2;
  EXPECT_THROW(write_case_bytes(c), std::invalid_argument);
  c = small_v3_case(Dialect::kTpuInferenceV3Hd64, DType::kFloat32, DType::kFloat32);
  c.v3_params.use_causal_mask = false;
  EXPECT_THROW(write_case_bytes(c), std::invalid_argument);
  c = small_v3_case(Dialect::kTpuInferenceV3Hd64, DType::kFloat32, DType::kFloat32);
  c.v3_params.m_block_sizes = V3BlockSizes{1, 1, 1, 1};
  EXPECT_THROW(write_case_bytes(c), std::invalid_argument);
  Case j = small_case(DType::kFloat32, DType::kFloat32);
  j.kv_cache_out = Tensor(DType::kFloat32, {1});
  EXPECT_THROW(write_case_bytes(j), std::invalid_argument);
}

TEST(CaseFileV3, SurvivesEveryByteFlipAndTruncation) {
  const Bytes good = write_case_bytes(
      small_v3_case(Dialect::kTpuInferenceV3Hd64, DType::kBFloat16, DType::kFloat8E4M3FN));
  for (size_t i = 0; i < good.size(); i += 7) {
    Bytes flipped = good;
    flipped[i] ^= std::byte{0x5a};
    const CaseReadResult r = read_case_bytes(flipped, {});
    if (!r.value.has_value()) {
      EXPECT_EQ(r.error.find('\n'), std::string::npos) << r.error;
    }
    const CaseReadResult t = read_case_bytes(std::span(good).first(i), {});
    EXPECT_FALSE(t.value.has_value());
  }
}

}  // namespace
}  // namespace rpa
