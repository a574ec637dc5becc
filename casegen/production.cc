#include "casegen/production.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "casegen/byte_source.h"
#include "casegen/dialect_generator.h"
#include "casegen/random_source.h"

namespace rpa::props {
namespace {

// Head layouts of served models, per chip (docs/properties.md lists the sources): Llama 3
// (32/8, 64/8; 8/1 is 70B at tensor parallelism 8; 128/8 is 3.1 405B), Qwen2.5-14B (40/8),
// Mistral 7B (window 4096), Gemma 2 9B (16/8, D 256, window 4096, soft cap 50), Gemma 2B
// (8/1, D 256), Gemma 7B (16/16, D 256), Grok-1 (48/8, soft cap 30), gpt-oss (64/8, D 64,
// window 128, sinks).
constexpr ProductionModel kJaxModels[] = {
    {"llama-3-8b", 32, 8, 128, 0, 0, false},      {"llama-3-70b", 64, 8, 128, 0, 0, false},
    {"llama-3.1-405b", 128, 8, 128, 0, 0, false}, {"qwen2.5-14b", 40, 8, 128, 0, 0, false},
    {"llama-3-70b-tp8", 8, 1, 128, 0, 0, false},  {"mistral-7b", 32, 8, 128, 4096, 0, false},
    {"gemma-2-9b", 16, 8, 256, 4096, 50, false},  {"gemma-2b", 8, 1, 256, 0, 0, false},
    {"grok-1", 48, 8, 128, 0, 30, false},         {"gpt-oss-20b", 64, 8, 64, 128, 0, true},
};
constexpr ProductionModel kV3Models[] = {
    {"llama-3-8b", 32, 8, 128, 0, 0, false},      {"llama-3-70b", 64, 8, 128, 0, 0, false},
    {"llama-3.1-405b", 128, 8, 128, 0, 0, false}, {"qwen2.5-14b", 40, 8, 128, 0, 0, false},
    {"llama-3-70b-tp8", 8, 1, 128, 0, 0, false},  {"mistral-7b", 32, 8, 128, 4096, 0, false},
    {"gemma-2-9b", 16, 8, 256, 4096, 50, false},  {"gemma-2b", 8, 1, 256, 0, 0, false},
    {"gemma-7b", 16, 16, 256, 0, 0, false},       {"grok-1", 48, 8, 128, 0, 30, false},
    {"gpt-oss-20b", 64, 8, 64, 128, 0, true},
};
// hd64 serves gpt-oss: whole (64/8) and per chip at tensor parallelism 4 and 8.
constexpr ProductionModel kHd64Models[] = {
    {"gpt-oss-20b", 64, 8, 64, 128, 0, true},
    {"gpt-oss-120b-tp4", 16, 2, 64, 128, 0, true},
    {"gpt-oss-20b-tp8", 8, 1, 64, 128, 0, true},
};

int64_t next_power_of_2(int64_t v) {
  int64_t p = 1;
  while (p < v) p *= 2;
  return p;
}

}  // namespace

Profile profile_of(const std::vector<SeqSpec>& seqs) {
  bool decode = false, prefill = false;
  for (const SeqSpec& q : seqs) (q.q_len == 1 ? decode : prefill) = true;
  return decode && prefill ? Profile::kMixed : prefill ? Profile::kPrefill : Profile::kDecode;
}

bool production_edge_is_int16(ProductionEdge e) {
  return e == ProductionEdge::kInt16PositionsBelow || e == ProductionEdge::kInt16PositionsPast ||
         e == ProductionEdge::kInt16WindowAt || e == ProductionEdge::kInt16WindowBelow;
}

namespace {

std::string range_text(int64_t v, std::initializer_list<int64_t> edges, const char* what) {
  int64_t lo = 0;
  for (int64_t e : edges) {
    if (v < e) break;
    lo = e;
  }
  return std::string(what) + " " + std::to_string(lo) + "+";
}

// The codec's visit: the dialect first (so the hex names it, as a v3 spec's does), then the
// recipe.
auto visitor() {
  return [](auto& io, ProductionSpec& s) {
    int64_t d = static_cast<int64_t>(s.dialect);
    io.num(d, 0, 2, {});
    visit_production(io, s, static_cast<Dialect>(d));
  };
}

}  // namespace

std::span<const ProductionModel> production_models(Dialect d) {
  switch (d) {
    case Dialect::kJax:
      return kJaxModels;
    case Dialect::kTpuInferenceV3:
      return kV3Models;
    case Dialect::kTpuInferenceV3Hd64:
      return kHd64Models;
  }
  return kJaxModels;
}

std::string_view production_edge_name(ProductionEdge e) {
  switch (e) {
    case ProductionEdge::kNone:
      return "none";
    case ProductionEdge::kInt16PositionsBelow:
      return "int16_positions_below";
    case ProductionEdge::kInt16PositionsPast:
      return "int16_positions_past";
    case ProductionEdge::kInt16WindowAt:
      return "int16_window_at";
    case ProductionEdge::kInt16WindowBelow:
      return "int16_window_below";
    case ProductionEdge::kInt32WindowAt:
      return "int32_window_at";
    case ProductionEdge::kInt32WindowBelow:
      return "int32_window_below";
  }
  return "?";
}

bool production_edge_applies(Dialect d, ProductionEdge e) {
  return !production_edge_is_int16(e) || d == Dialect::kTpuInferenceV3;
}

int64_t vllm_page_size(int64_t max_model_len) {
  return std::clamp<int64_t>(next_power_of_2(max_model_len) / 16, 16, 256);
}

int64_t production_token_bytes(const ProductionSpec& s) {
  const ProductionModel& m = s.shape();
  const int64_t q = 2 * m.q_heads * m.head_dim * dtype_size(s.q_dtype);  // q and out
  return q + (is_v3(s.dialect) ? 2 * m.kv_heads * m.head_dim * dtype_size(s.kv_dtype) : 0);
}

int64_t production_cache_token_bytes(const ProductionSpec& s) {
  return dialect_generator(s.dialect).production_cache_token_bytes(s);
}

int64_t production_table_bytes(const ProductionSpec& s) {
  return 4 * (s.max_num_seqs * s.pages_per_seq() + 2 * s.max_num_seqs + 4);
}

bool production_int16_positions(const ProductionSpec& s) {
  return s.dialect == Dialect::kTpuInferenceV3 && s.q_dtype == DType::kBFloat16 &&
         s.pages_per_seq() * s.page_size <= 32767;
}

int64_t ProductionSpec::total_q_len() const {
  int64_t t = 0;
  for (const SeqSpec& q : seqs) t += q.q_len;
  return t;
}

int64_t ProductionSpec::padded_tokens() const {
  return std::min(next_power_of_2(std::max<int64_t>(total_q_len(), 16)), token_budget);
}

int64_t ProductionSpec::max_kv_len() const {
  int64_t most = 0;
  for (const SeqSpec& q : seqs) most = std::max(most, q.kv_len);
  return most;
}

int64_t ProductionSpec::macs() const {
  const ProductionModel& m = shape();
  int64_t t = 0;
  for (const SeqSpec& q : seqs) t += q.q_len * q.kv_len * m.q_heads * m.head_dim;
  return t;
}

int64_t ProductionSpec::memory_bytes() const {
  int64_t pages = spare_pages;
  for (const SeqSpec& q : seqs) pages += (q.kv_len + page_size - 1) / page_size;
  return production_table_bytes(*this) + padded_tokens() * production_token_bytes(*this) +
         std::max<int64_t>(pages, 1) * page_size * production_cache_token_bytes(*this);
}

int64_t memory_bytes_slack(const ProductionSpec& s) { return 4 * s.shape().q_heads + 64; }

std::string production_spec_hex(const ProductionSpec& s) {
  return std::string(kProductionSpecPrefix) + to_hex(encode_with(s, visitor()));
}

std::optional<ProductionSpec> production_spec_from_hex(std::string_view text) {
  if (!text.starts_with(kProductionSpecPrefix)) return std::nullopt;
  const std::optional<std::vector<uint8_t>> bytes = from_hex(text.substr(kProductionSpecPrefix.size()));
  if (!bytes || bytes->empty() || (*bytes)[0] > 2) return std::nullopt;
  ProductionSpec s = decode_with<ProductionSpec>(*bytes, visitor());
  if (encode_with(s, visitor()) != *bytes) return std::nullopt;  // not canonical
  return s;
}

std::vector<std::string> production_reach_items(const ProductionSpec& s) {
  const ProductionModel& m = s.shape();
  std::vector<std::string> items = {
      "model " + std::string(m.name),
      "head_dim " + std::to_string(m.head_dim),
      "q " + std::string(dtype_name(s.q_dtype)),
      "kv " + std::string(dtype_name(s.kv_dtype)),
      "page_size " + std::to_string(s.page_size),
      "max_model_len " + std::to_string(s.max_model_len),
      range_text(s.max_num_seqs, {128, 256, 512}, "max_num_seqs"),
      range_text(s.token_budget, {0, 512, 2048, 4096, 8192}, "token budget"),
      "batch " + std::string(profile_name(profile_of(s.seqs))),
      range_text(s.max_kv_len(), {0, 1024, 8192, 32768, 65536}, "kv_len"),
  };
  if (s.num_prefill > 0) items.push_back("prefill range (chunk_prefill_size)");
  if (s.sliding_window) {
    items.push_back(*s.sliding_window >= s.max_kv_len() ? "window >= kv_len" : "window < kv_len");
  }
  if (s.soft_cap) items.push_back("soft_cap " + std::to_string(static_cast<int>(*s.soft_cap)));
  if (s.sinks) items.push_back("sinks");
  if (s.kv_dtype != s.q_dtype) items.push_back("float8 scale " + std::to_string(s.kv_scale).substr(0, 4));
  if (s.nan_padding) items.push_back("NaN padding");
  const bool positions = s.edge == ProductionEdge::kInt16PositionsBelow ||
                         s.edge == ProductionEdge::kInt16PositionsPast;
  // A positions edge is reached when its sequence fit the bounds (it runs to the last token).
  // An int32 window edge under int16 positions is the int16 one.
  ProductionEdge e = s.edge;
  if (production_int16_positions(s) && e == ProductionEdge::kInt32WindowAt) {
    e = ProductionEdge::kInt16WindowAt;
  } else if (production_int16_positions(s) && e == ProductionEdge::kInt32WindowBelow) {
    e = ProductionEdge::kInt16WindowBelow;
  }
  // A window edge is reached when the call kept its window (production_window_skips_cache_write).
  const bool reached = positions ? !s.seqs.empty() && s.seqs[0].kv_len == s.pages_per_seq() * s.page_size
                                 : s.sliding_window.has_value();
  if (e != ProductionEdge::kNone && reached) {
    items.push_back("edge " + std::string(production_edge_name(e)));
  }
  return items;
}

std::vector<std::string> production_reach_catalog(Dialect d) {
  std::vector<std::string> items;
  std::vector<int64_t> dims;
  for (const ProductionModel& m : production_models(d)) {
    items.push_back("model " + std::string(m.name));
    if (std::find(dims.begin(), dims.end(), m.head_dim) == dims.end()) dims.push_back(m.head_dim);
  }
  for (int64_t dim : dims) items.push_back("head_dim " + std::to_string(dim));
  for (DType t : {DType::kFloat32, DType::kBFloat16}) items.push_back("q " + std::string(dtype_name(t)));
  for (DType t : {DType::kFloat32, DType::kBFloat16, DType::kFloat8E4M3FN, DType::kFloat8E5M2}) {
    items.push_back("kv " + std::string(dtype_name(t)));
  }
  for (int64_t p : kProductionPageSizes) items.push_back("page_size " + std::to_string(p));
  for (int64_t l : kProductionModelLens) items.push_back("max_model_len " + std::to_string(l));
  for (int64_t n : {128, 256, 512}) items.push_back("max_num_seqs " + std::to_string(n) + "+");
  for (int64_t t : {512, 2048, 4096, 8192}) items.push_back("token budget " + std::to_string(t) + "+");
  for (Profile p : {Profile::kDecode, Profile::kPrefill, Profile::kMixed}) {
    items.push_back("batch " + std::string(profile_name(p)));
  }
  for (int64_t k : {0, 1024, 8192, 32768, 65536}) items.push_back("kv_len " + std::to_string(k) + "+");
  if (is_v3(d)) items.push_back("prefill range (chunk_prefill_size)");
  items.push_back("window >= kv_len");
  items.push_back("window < kv_len");
  for (double c : kProductionSoftCaps) items.push_back("soft_cap " + std::to_string(static_cast<int>(c)));
  if (d == Dialect::kTpuInferenceV3Hd64) items.push_back("sinks");
  for (double v : kProductionKvScales) items.push_back("float8 scale " + std::to_string(v).substr(0, 4));
  items.push_back("NaN padding");
  for (ProductionEdge e : kProductionEdges) {
    if (e != ProductionEdge::kNone && production_edge_applies(d, e)) {
      items.push_back("edge " + std::string(production_edge_name(e)));
    }
  }
  return items;
}

std::string describe(const ProductionSpec& s) {
  const ProductionModel& m = s.shape();
  std::ostringstream os;
  os << dialect_name(s.dialect) << " production call: " << m.name << " (" << m.q_heads << "/"
     << m.kv_heads << " heads, head_dim " << m.head_dim << "), q " << dtype_name(s.q_dtype)
     << ", kv " << dtype_name(s.kv_dtype) << "\n  max_model_len " << s.max_model_len
     << ", page_size " << s.page_size << " (" << s.pages_per_seq() << " pages a sequence), "
     << s.max_num_seqs << " slots, token budget " << s.token_budget << " (arrays "
     << s.padded_tokens() << " rows)\n  " << s.seqs.size() << " sequences: " << s.num_decode
     << " decode";
  if (s.num_prefill > 0) os << ", " << s.num_prefill << " prefill of " << *s.chunk_prefill_size;
  os << ", " << static_cast<int64_t>(s.seqs.size()) - s.num_decode - s.num_prefill
     << " chunked; " << s.total_q_len() << " rows, longest kv_len " << s.max_kv_len() << "\n  ";
  if (s.sliding_window) os << "sliding_window " << *s.sliding_window << ", ";
  if (s.soft_cap) os << "soft_cap " << *s.soft_cap << ", ";
  if (s.sinks) os << "sinks, ";
  if (s.kv_dtype != s.q_dtype) os << "k/v scale " << s.kv_scale << ", ";
  os << "edge " << production_edge_name(s.edge) << "; " << s.macs() << " multiply-adds, "
     << s.memory_bytes() / (1 << 20) << " MiB of arrays";
  return os.str();
}

}  // namespace rpa::props
