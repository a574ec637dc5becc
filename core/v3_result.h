// What a tpu-inference v3 call returns: the output and the KV cache after the fused update;
// the tiled kernel and the literal schedule both return it.
#pragma once

#include "core/tensor.h"

namespace rpa {

struct V3KernelResult {
  Tensor out;       // [T, Hq, D] in the queries' dtype; rows >= cu_q_lens[distribution[2]] are 0
  Tensor kv_cache;  // the cache after the fused update (the input's when update_kv_cache is off)
};

}  // namespace rpa
