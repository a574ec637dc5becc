#include "validation/jax_vmem_budget.h"

#include <algorithm>
#include <initializer_list>
#include <limits>

namespace rpa {
namespace {

constexpr int64_t kSaturated = std::numeric_limits<int64_t>::max();

int64_t sat_mul(std::initializer_list<int64_t> factors) {
  int64_t p = 1;
  for (int64_t f : factors) {
    if (__builtin_mul_overflow(p, f, &p)) return kSaturated;
  }
  return p;
}

int64_t sat_add(std::initializer_list<int64_t> terms) {
  int64_t s = 0;
  for (int64_t t : terms) {
    if (__builtin_add_overflow(s, t, &s)) return kSaturated;
  }
  return s;
}

int64_t round_up(int64_t x, int64_t m) {
  const int64_t r = x % m;
  return r == 0 ? x : sat_add({x, m - r});
}

// Bytes of an array whose last two dims are (rows, cols), laid out in TPU tiles.
int64_t tiled_bytes(int64_t leading, int64_t rows, int64_t cols, DType t) {
  const int64_t row_tile = 8 * int64_t{std::max(1, dtype_packing(t))};
  return sat_mul({leading, round_up(rows, row_tile), round_up(cols, 128), dtype_size(t)});
}

}  // namespace

int64_t vmem_need_bytes(const VmemShape& s, BlockSizes b) {
  const int64_t bkv = b.kv_pages_per_block;
  const int64_t bq = b.queries_per_block;
  const int64_t kv_heads_blk = s.heads.combined_kv_heads / 2;
  const int64_t kv_double_buffer =
      tiled_bytes(sat_mul({2, bkv, s.page_size}), s.heads.combined_kv_heads, s.head_dim,
                  s.kv_dtype);
  const int64_t l_and_m =
      sat_mul({2, tiled_bytes(kv_heads_blk, sat_mul({bq, s.q_heads_per_kv}), 128,
                              DType::kFloat32)});
  const int64_t acc = tiled_bytes(bq, s.heads.q_heads, s.head_dim, DType::kFloat32);
  const int64_t q_and_o = sat_mul({2, 2, tiled_bytes(bq, s.heads.q_heads, s.head_dim, s.q_dtype)});
  return sat_add({kv_double_buffer, l_and_m, acc, q_and_o});
}

BlockSizes untuned_block_sizes(int64_t pages_per_seq, int64_t max_num_batched_tokens) {
  return {std::max<int64_t>(1, std::min<int64_t>(pages_per_seq, 128)),
          std::max<int64_t>(1, std::min<int64_t>(max_num_batched_tokens, 32))};
}

std::optional<BlockSizes> default_block_sizes(const VmemShape& shape, int64_t pages_per_seq,
                                              int64_t max_num_batched_tokens,
                                              int64_t vmem_limit) {
  BlockSizes b = untuned_block_sizes(pages_per_seq, max_num_batched_tokens);
  while (vmem_need_bytes(shape, b) > vmem_limit) {
    if (b.kv_pages_per_block > 1) {
      b.kv_pages_per_block = (b.kv_pages_per_block + 1) / 2;
    } else if (b.queries_per_block > 1) {
      b.queries_per_block = (b.queries_per_block + 1) / 2;
    } else {
      return std::nullopt;
    }
  }
  return b;
}

int64_t smem_need_bytes(int64_t max_num_seqs, int64_t pages_per_seq) {
  const int64_t words =
      sat_add({max_num_seqs, sat_mul({max_num_seqs, pages_per_seq}), max_num_seqs, 1, 2, 1});
  return sat_mul({words, 4});
}

}  // namespace rpa
