// A tpu-inference v3 call decoded straight from fuzzer bytes, without the case generators
// (fuzz_raw_inputs' v3 part; jax_raw_call.h is the jax dialect's): the dialect (v3 or hd64),
// each of the eight arrays and the optional attention_sink in any dtype a case file may
// name, any rank 0..5, any dims within one element budget, any contents; every keyword
// present or absent with any value. Same order and the same encodings as visit_raw_call:
// dtypes and shapes, keywords, then the contents (index arrays first), so bytes run out on
// float data first.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "core/dialect.h"
#include "core/v3_inputs.h"
#include "core/v3_params.h"
#include "casegen/jax_raw_call.h"

namespace rpa::fuzz {

struct V3RawCall {
  Dialect dialect = Dialect::kTpuInferenceV3;
  V3Inputs inputs;
  V3Params params;
};

template <class Io>
bool visit_v3_raw_call(Io& io, V3RawCall& c) {
  using namespace raw_detail;
  int64_t hd64 = c.dialect == Dialect::kTpuInferenceV3Hd64 ? 1 : 0;
  io.num(hd64, 0, 1, {});
  c.dialect = hd64 ? Dialect::kTpuInferenceV3Hd64 : Dialect::kTpuInferenceV3;
  V3Inputs& in = c.inputs;
  int64_t has_sink = in.attention_sink.has_value() ? 1 : 0;
  io.num(has_sink, 0, 1, {});
  if (has_sink && !in.attention_sink) in.attention_sink.emplace();
  if (!has_sink) in.attention_sink.reset();
  std::vector<Tensor*> arrays = {&in.kv_lens, &in.page_indices, &in.cu_q_lens, &in.distribution,
                                 &in.queries, &in.keys,         &in.values,    &in.kv_cache};
  if (in.attention_sink) arrays.insert(arrays.begin() + 4, &*in.attention_sink);
  std::vector<DType> dtypes(arrays.size());
  std::vector<Shape> shapes(arrays.size());
  int64_t budget_left = kMaxRawElements;
  for (size_t a = 0; a < arrays.size(); ++a) {
    dtypes[a] = arrays[a]->dtype();
    shapes[a] = arrays[a]->shape();
    const auto after = static_cast<int64_t>(arrays.size() - a - 1);
    if (!array_header(io, dtypes[a], shapes[a], budget_left, after)) return false;
  }
  V3Params& p = c.params;
  for (bool* flag : {&p.use_causal_mask, &p.update_kv_cache, &p.skip_kv_mask}) {
    int64_t v = *flag ? 1 : 0;
    io.num(v, 0, 1, {});
    *flag = v != 0;
  }
  any_double(io, p.sm_scale);
  optional_field(io, p.sliding_window, [&](int64_t& v) { any_int(io, v); });
  optional_field(io, p.soft_cap, [&](double& v) { any_double(io, v); });
  optional_field(io, p.out_dtype, [&](DType& t) {
    int64_t d = static_cast<int64_t>(t);
    io.num(d, 0, static_cast<int64_t>(std::size(kAllDtypes)) - 1, {});
    t = kAllDtypes[d];
  });
  for (std::optional<double>* f : {&p.mask_value, &p.q_scale, &p.k_scale, &p.v_scale}) {
    optional_field(io, *f, [&](double& v) { any_double(io, v); });
  }
  optional_field(io, p.chunk_prefill_size, [&](int64_t& v) { any_int(io, v); });
  for (std::optional<V3BlockSizes>* f : {&p.d_block_sizes, &p.p_block_sizes, &p.m_block_sizes}) {
    optional_field(io, *f, [&](V3BlockSizes& b) {
      for (int64_t& v : b) any_int(io, v);
    });
  }
  for (std::optional<int64_t>* f :
       {&p.num_kv_pages_per_block, &p.num_queries_per_block, &p.vmem_limit_bytes}) {
    optional_field(io, *f, [&](int64_t& v) { any_int(io, v); });
  }
  for (size_t a = 0; a < arrays.size(); ++a) array_contents(io, *arrays[a], dtypes[a], shapes[a]);
  return true;
}

V3RawCall decode_v3_raw_call(std::span<const uint8_t> bytes);
// nullopt when c is outside the bounds (as encode_raw_call).
std::optional<std::vector<uint8_t>> encode_v3_raw_call(const V3RawCall& c);

}  // namespace rpa::fuzz
