// A generated case as a plain value (DESIGN.md section 9): shapes, per-sequence lengths, the
// page table, how data and garbage are drawn, the parameters, and the named mutations that
// make it invalid. build_case() draws one from a source of choices; materialize() turns it
// into arrays. Equality is exact, so decode(encode(spec)) == spec can be checked.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/jax_params.h"
#include "casegen/batch_mix.h"
#include "casegen/jax_mutation.h"

namespace rpa::props {

// How q and KV values are drawn from data_seed.
enum class DataKind : uint8_t {
  kNormal,    // uniform in [-2, 2)
  kLarge,     // uniform in [-2, 2) times 2^k, k in [0, 6]: large logits, near-ties
  kAllEqual,  // one value everywhere: every softmax row is flat
};

struct CaseSpec {
  Profile profile = Profile::kMixed;
  DType q_dtype = DType::kFloat32;
  DType kv_dtype = DType::kFloat32;
  int64_t num_kv_heads = 1;            // Hkv, tileable for kv_dtype
  int64_t q_per_kv = 1;                // Hq / Hkv
  int64_t head_dim = 1;                // D
  int64_t page_size = 1;               // S
  std::vector<SeqSpec> seqs;           // the sequences in use: num_seqs = seqs.size()
  int64_t max_num_seqs = 1;            // N >= max(num_seqs, 1)
  int64_t pages_per_seq = 1;           // >= every used sequence's page count, >= 1
  int64_t num_pages = 1;               // P
  int64_t max_num_batched_tokens = 0;  // T >= sum of q_len
  // i32[N * pages_per_seq]: the pages each sequence reads (and entry 0 of every row the
  // kernel prefetches) are in [0, P); every other entry is garbage.
  std::vector<int64_t> page_indices;
  std::vector<int64_t> pad_kv_lens;    // kv_lens[num_seqs .. N): garbage
  std::vector<int64_t> pad_cu_q_lens;  // cu_q_lens[num_seqs + 1 .. N]: garbage
  DataKind data = DataKind::kNormal;
  int64_t data_seed = 0;
  // Unread q rows and KV slots hold NaN (else the dtype's large finite value: 1e30, or a
  // float8's max): either way nothing the definition reads may depend on them.
  bool nan_garbage = true;
  Params params;
  // Applied in order to the materialized valid case; empty for a valid case.
  std::vector<MutationSpec> mutations;

  int64_t num_seqs() const { return static_cast<int64_t>(seqs.size()); }
  int64_t num_q_heads() const { return num_kv_heads * q_per_kv; }
  int64_t total_q_len() const;
  int64_t max_kv_len() const;  // 0 without sequences
  bool operator==(const CaseSpec&) const = default;
};

std::string_view data_kind_name(DataKind d);

// Pages a sequence of kv_len tokens reads: ceil(kv_len / page_size).
int64_t pages_for(int64_t kv_len, int64_t page_size);

// Several lines a person reads as a bug report: dtypes and shapes, each sequence's
// lengths, the parameters, the mutations.
std::string describe(const CaseSpec& spec);

}  // namespace rpa::props
