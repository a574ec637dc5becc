#include "properties/build_case.h"

#include "properties/byte_source.h"

namespace rpa::props {

int64_t least_vmem_limit(const CaseSpec& spec) {
  const int64_t hc = 2 * spec.num_kv_heads;
  const VmemShape shape{
      .page_size = spec.page_size,
      .head_dim = spec.head_dim,
      .q_heads_per_kv = spec.q_per_kv,
      .heads = *min_heads_per_block(spec.num_q_heads(), hc, spec.q_dtype, spec.kv_dtype),
      .q_dtype = spec.q_dtype,
      .kv_dtype = spec.kv_dtype};
  const Params& p = spec.params;
  const BlockSizes blocks = p.num_kv_pages_per_block && p.num_queries_per_block
                                ? BlockSizes{*p.num_kv_pages_per_block, *p.num_queries_per_block}
                                : BlockSizes{1, 1};
  return vmem_need_bytes(shape, blocks);
}

std::vector<int64_t> tileable_kv_heads(DType kv_dtype) {
  std::vector<int64_t> heads;
  for (int64_t h : {1, 2, 4, 8}) {
    if (can_be_xla_fully_tiled(2 * h, dtype_packing(kv_dtype))) heads.push_back(h);
  }
  return heads;
}

std::vector<uint8_t> encode_case(const CaseSpec& spec, const BuildOptions& options) {
  ByteSink sink;
  CaseSpec copy = spec;
  visit_case(sink, copy, options);
  return sink.bytes();
}

CaseSpec decode_case(std::span<const uint8_t> bytes, const BuildOptions& options) {
  ByteSource source(bytes);
  return build_case(source, options);
}

std::string spec_hex(const CaseSpec& spec) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string hex;
  for (uint8_t b : encode_case(spec)) {
    hex += kDigits[b >> 4];
    hex += kDigits[b & 15];
  }
  return hex;
}

std::optional<std::vector<uint8_t>> bytes_from_hex(std::string_view hex) {
  auto digit = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  if (hex.size() % 2 != 0) return std::nullopt;
  std::vector<uint8_t> bytes;
  for (size_t i = 0; i < hex.size(); i += 2) {
    const int hi = digit(hex[i]), lo = digit(hex[i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    bytes.push_back(static_cast<uint8_t>(hi * 16 + lo));
  }
  return bytes;
}

}  // namespace rpa::props
