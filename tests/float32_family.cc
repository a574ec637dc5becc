#include "tests/float32_family.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <sstream>
#include <utility>

#include "core/jax_kv_view.h"
#include "core/paged_kv_view.h"
#include "kernel/jax_kernel.h"
#include "casegen/random_source.h"
#include "tests/inputs_builder.h"

namespace rpa::testing {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// The larger of a and b; a NaN b leaves a (no NaN appears in these cases).
inline float larger(float a, float b) { return b > a ? b : a; }

// Sums one row's softmax: s[0, n) the row's float32 logits (masked ones included, the mask
// added), v the n x d row-major float32 V_eff of its kv head, page_size the case's S;
// writes o[0, d) in float32.
using RowSum = std::function<void(const float* s, const float* v, int64_t n, int64_t d,
                                  int64_t page_size, float* o)>;

// K_eff / V_eff of one element as the reference takes it: with a scale, the float32
// product cast to q's dtype.
float effective(float x, const std::optional<double>& scale, DType q_dtype) {
  if (!scale) return x;
  const float product = x * static_cast<float>(*scale);
  return round_to(q_dtype, product);
}

// Element i of kv_pages as float32 (float32 read in place, the other dtypes decoded).
inline float kv_element(const Inputs& in, DType kt, int64_t i) {
  if (kt == DType::kFloat32) {
    float x;
    std::memcpy(&x, in.kv_pages.data() + i * 4, 4);
    return x;
  }
  return load_float(kt, in.kv_pages.data(), i);
}

// Everything up to the sums, in float32, shared by the summation members. Each logit is a
// sequential float32 dot over the head's columns; K is held transposed so that the dots of
// many tokens advance together (each in its own order, column 0 first).
Tensor run_float32(const Inputs& in, const Params& p, const RowSum& row_sum) {
  const PagedKvView view = kv_view(in);
  const DType qt = in.q.dtype(), kt = in.kv_pages.dtype();
  const int64_t d = view.head_dim(), S = view.page_size();
  const float sm_scale = static_cast<float>(p.sm_scale);
  const float mask_value = static_cast<float>(p.effective_mask_value());
  const std::optional<float> cap =
      p.soft_cap ? std::optional<float>(static_cast<float>(*p.soft_cap)) : std::nullopt;
  Tensor out(qt, in.q.shape());
  std::vector<float> k_t, tile, v, q(static_cast<size_t>(d)), s, o(static_cast<size_t>(d));
  for (int64_t seq = 0; seq < view.num_seqs(); ++seq) {
    const int64_t q_len = view.q_len(seq), n = view.kv_len(seq);
    if (q_len == 0) continue;
    k_t.assign(static_cast<size_t>(n * d), 0.0f);
    v.assign(static_cast<size_t>(n * d), 0.0f);
    s.assign(static_cast<size_t>(n), 0.0f);
    for (int64_t kv_head = 0; kv_head < view.num_kv_heads(); ++kv_head) {
      // 64 tokens at a time: rows read in place, K transposed through a small tile.
      constexpr int64_t kTile = 64;
      tile.resize(static_cast<size_t>(kTile * d));
      for (int64_t t0 = 0; t0 < n; t0 += kTile) {
        const int64_t t1 = std::min(n, t0 + kTile);
        for (int64_t t = t0; t < t1; ++t) {
          const int64_t k0 = view.k_offset(seq, t, kv_head), v0 = view.v_offset(seq, t, kv_head);
          for (int64_t c = 0; c < d; ++c) {
            tile[static_cast<size_t>((t - t0) * d + c)] =
                effective(kv_element(in, kt, k0 + c), p.k_scale, qt);
            v[static_cast<size_t>(t * d + c)] = effective(kv_element(in, kt, v0 + c), p.v_scale, qt);
          }
        }
        for (int64_t c = 0; c < d; ++c) {
          for (int64_t t = t0; t < t1; ++t) {
            k_t[static_cast<size_t>(c * n + t)] = tile[static_cast<size_t>((t - t0) * d + c)];
          }
        }
      }
      for (int64_t g = 0; g < view.q_heads_per_kv(); ++g) {
        const int64_t q_head = kv_head * view.q_heads_per_kv() + g;
        for (int64_t r = 0; r < q_len; ++r) {
          const int64_t row = view.q_start(seq) + r;
          const int64_t q0 = view.q_offset(row, q_head);
          for (int64_t c = 0; c < d; ++c) q[static_cast<size_t>(c)] = load_float(qt, in.q.data(), q0 + c);
          std::fill(s.begin(), s.end(), 0.0f);
          for (int64_t c = 0; c < d; ++c) {
            const float qc = q[static_cast<size_t>(c)];
            const float* __restrict kc = k_t.data() + c * n;
            float* __restrict dot = s.data();
            for (int64_t t = 0; t < n; ++t) {
              const float product = qc * kc[t];
              dot[t] = dot[t] + product;
            }
          }
          const int64_t q_pos = view.q_position(seq, r);
          for (int64_t t = 0; t < n; ++t) {
            float x = s[static_cast<size_t>(t)] * sm_scale;
            if (cap) {
              const float inner = x / *cap;
              const float th = std::tanh(inner);
              x = *cap * th;
            }
            const bool masked = q_pos < t || (p.sliding_window && q_pos - *p.sliding_window >= t);
            if (masked) x = x + mask_value;
            s[static_cast<size_t>(t)] = x;
          }
          row_sum(s.data(), v.data(), n, d, S, o.data());
          for (int64_t c = 0; c < d; ++c) {
            store_float(qt, out.data(), q0 + c, o[static_cast<size_t>(c)]);
          }
        }
      }
    }
  }
  return out;
}

// Two-pass weights: w_t = exp(s_t - max_u s_u), all in float32.
std::vector<float> two_pass_weights(const float* s, int64_t n) {
  float m = kNegInf;
  for (int64_t t = 0; t < n; ++t) m = larger(m, s[t]);
  std::vector<float> w(static_cast<size_t>(n));
  for (int64_t t = 0; t < n; ++t) {
    const float x = s[t] - m;
    w[static_cast<size_t>(t)] = std::exp(x);
  }
  return w;
}

void divide(const float* num, float den, int64_t d, float* o) {
  for (int64_t c = 0; c < d; ++c) o[c] = num[c] / den;
}

// Tokens in the order `order` gives (first to last or last to first).
void ordered_sum(const float* s, const float* v, int64_t n, int64_t d, bool reversed, float* o) {
  const std::vector<float> w = two_pass_weights(s, n);
  std::vector<float> num(static_cast<size_t>(d), 0.0f);
  float den = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t t = reversed ? n - 1 - i : i;
    const float wt = w[static_cast<size_t>(t)];
    den = den + wt;
    const float* vt = v + t * d;
    for (int64_t c = 0; c < d; ++c) {
      const float product = wt * vt[c];
      num[static_cast<size_t>(c)] = num[static_cast<size_t>(c)] + product;
    }
  }
  divide(num.data(), den, d, o);
}

// Sums tokens [lo, hi) as a halving tree into num / den; scratch holds d floats per level
// below.
void pairwise_tree(const float* w, const float* v, int64_t lo, int64_t hi, int64_t d, float* num,
                   float& den, float* scratch) {
  if (hi - lo == 1) {
    den = w[lo];
    for (int64_t c = 0; c < d; ++c) num[c] = w[lo] * v[lo * d + c];
    return;
  }
  const int64_t mid = lo + (hi - lo) / 2;
  pairwise_tree(w, v, lo, mid, d, num, den, scratch + d);
  float right_den = 0.0f;
  pairwise_tree(w, v, mid, hi, d, scratch, right_den, scratch + d);
  den = den + right_den;
  for (int64_t c = 0; c < d; ++c) num[c] = num[c] + scratch[c];
}

void pairwise_sum(const float* s, const float* v, int64_t n, int64_t d, float* o) {
  const std::vector<float> w = two_pass_weights(s, n);
  int64_t levels = 1;
  while ((int64_t{1} << (levels - 1)) < n) ++levels;
  std::vector<float> num(static_cast<size_t>(d), 0.0f);
  std::vector<float> scratch(static_cast<size_t>((levels + 1) * d), 0.0f);
  float den = 0.0f;
  pairwise_tree(w.data(), v, 0, n, d, num.data(), den, scratch.data());
  divide(num.data(), den, d, o);
}

// Kahan: y = x - comp; t = sum + y; comp = (t - sum) - y; sum = t.
void kahan_sum(const float* s, const float* v, int64_t n, int64_t d, float* o) {
  const std::vector<float> w = two_pass_weights(s, n);
  std::vector<float> num(static_cast<size_t>(d), 0.0f), comp(static_cast<size_t>(d), 0.0f);
  float den = 0.0f, den_comp = 0.0f;
  for (int64_t t = 0; t < n; ++t) {
    const float wt = w[static_cast<size_t>(t)];
    {
      const float y = wt - den_comp;
      const float sum = den + y;
      const float grown = sum - den;
      den_comp = grown - y;
      den = sum;
    }
    const float* vt = v + t * d;
    for (int64_t c = 0; c < d; ++c) {
      const size_t i = static_cast<size_t>(c);
      const float product = wt * vt[c];
      const float y = product - comp[i];
      const float sum = num[i] + y;
      const float grown = sum - num[i];
      comp[i] = grown - y;
      num[i] = sum;
    }
  }
  divide(num.data(), den, d, o);
}

// An online softmax's carried state.
struct OnlineState {
  float m = kNegInf;
  float l = 0.0f;
  std::vector<float> acc;
};

// Tokens [lo, hi) into `st` in blocks of `block` tokens (from lo).
void online_blocks(const float* s, const float* v, int64_t lo, int64_t hi, int64_t d,
                   int64_t block, OnlineState& st) {
  if (st.acc.empty()) st.acc.assign(static_cast<size_t>(d), 0.0f);
  std::vector<float> block_acc(static_cast<size_t>(d));
  for (int64_t b0 = lo; b0 < hi; b0 += block) {
    const int64_t b1 = std::min(hi, b0 + block);
    float block_max = kNegInf;
    for (int64_t t = b0; t < b1; ++t) block_max = larger(block_max, s[t]);
    const float m_new = larger(st.m, block_max);
    const float alpha = st.m == kNegInf ? 0.0f : std::exp(st.m - m_new);
    float block_l = 0.0f;
    std::fill(block_acc.begin(), block_acc.end(), 0.0f);
    for (int64_t t = b0; t < b1; ++t) {
      const float x = s[t] - m_new;
      const float w = std::exp(x);
      block_l = block_l + w;
      const float* vt = v + t * d;
      for (int64_t c = 0; c < d; ++c) {
        const float product = w * vt[c];
        block_acc[static_cast<size_t>(c)] = block_acc[static_cast<size_t>(c)] + product;
      }
    }
    const float scaled_l = alpha * st.l;
    st.l = scaled_l + block_l;
    for (int64_t c = 0; c < d; ++c) {
      const size_t i = static_cast<size_t>(c);
      const float scaled = alpha * st.acc[i];
      st.acc[i] = scaled + block_acc[i];
    }
    st.m = m_new;
  }
}

void online_sum(const float* s, const float* v, int64_t n, int64_t d, int64_t block, float* o) {
  OnlineState st;
  online_blocks(s, v, 0, n, d, block, st);
  divide(st.acc.data(), st.l, d, o);
}

OnlineState merge(const OnlineState& a, const OnlineState& b) {
  OnlineState r;
  r.m = larger(a.m, b.m);
  const float ca = std::exp(a.m - r.m), cb = std::exp(b.m - r.m);
  const float la = ca * a.l, lb = cb * b.l;
  r.l = la + lb;
  r.acc.resize(a.acc.size());
  for (size_t i = 0; i < a.acc.size(); ++i) {
    const float xa = ca * a.acc[i], xb = cb * b.acc[i];
    r.acc[i] = xa + xb;
  }
  return r;
}

// Flash-decoding: `chunks` chunks of whole blocks of `block` tokens, each an online softmax,
// merged as a pairwise tree.
void flash_sum(const float* s, const float* v, int64_t n, int64_t d, int64_t block,
               int64_t chunks, float* o) {
  const int64_t blocks = (n + block - 1) / block;
  std::vector<OnlineState> level;
  for (int64_t i = 0; i < chunks; ++i) {
    const int64_t lo = std::min(n, i * blocks / chunks * block);
    const int64_t hi = std::min(n, (i + 1) * blocks / chunks * block);
    if (lo >= hi) continue;
    OnlineState st;
    online_blocks(s, v, lo, hi, d, block, st);
    level.push_back(std::move(st));
  }
  while (level.size() > 1) {
    std::vector<OnlineState> next;
    for (size_t i = 0; i + 1 < level.size(); i += 2) next.push_back(merge(level[i], level[i + 1]));
    if (level.size() % 2 == 1) next.push_back(std::move(level.back()));
    level = std::move(next);
  }
  divide(level[0].acc.data(), level[0].l, d, o);
}

Float32Member member(std::string name, RowSum sum) {
  return Float32Member{std::move(name), [sum = std::move(sum)](const Inputs& in, const Params& p) {
                         return run_float32(in, p, sum);
                       }};
}

std::vector<Float32Member> make_family() {
  std::vector<Float32Member> f;
  f.push_back(member("sequential", [](const float* s, const float* v, int64_t n, int64_t d,
                                      int64_t, float* o) { ordered_sum(s, v, n, d, false, o); }));
  f.push_back(member("reversed", [](const float* s, const float* v, int64_t n, int64_t d, int64_t,
                                    float* o) { ordered_sum(s, v, n, d, true, o); }));
  f.push_back(member("pairwise", [](const float* s, const float* v, int64_t n, int64_t d, int64_t,
                                    float* o) { pairwise_sum(s, v, n, d, o); }));
  f.push_back(member("kahan", [](const float* s, const float* v, int64_t n, int64_t d, int64_t,
                                 float* o) { kahan_sum(s, v, n, d, o); }));
  // Block sizes: fixed ones, and multiples of the page size (0 stands for S, -16 for 16 S).
  const std::pair<const char*, int64_t> blocks[] = {
      {"online_b1", 1}, {"online_b7", 7}, {"online_bS", 0}, {"online_b16S", -16},
      {"online_b1024", 1024}};
  for (const auto& [name, b] : blocks) {
    f.push_back(member(name, [b = b](const float* s, const float* v, int64_t n, int64_t d,
                                     int64_t page, float* o) {
      const int64_t block = b > 0 ? b : b == 0 ? page : -b * page;
      online_sum(s, v, n, d, block, o);
    }));
  }
  for (int64_t chunks = 2; chunks <= 4; ++chunks) {
    f.push_back(member("flash" + std::to_string(chunks),
                       [chunks](const float* s, const float* v, int64_t n, int64_t d,
                                int64_t page, float* o) { flash_sum(s, v, n, d, page, chunks, o); }));
  }
  f.push_back(Float32Member{"tiled_literal", [](const Inputs& in, const Params& p) {
                              return tiled_attention(in, p, KernelOptions{.literal_schedule = true});
                            }});
  f.push_back(Float32Member{
      "tiled_default", [](const Inputs& in, const Params& p) { return tiled_attention(in, p, {}); }});
  return f;
}

// A portable stream: splitmix64, uniform floats in [-1, 1).
struct Stream {
  uint64_t state;
  float next() {
    const uint64_t z = props::splitmix64(state);
    return static_cast<float>(static_cast<double>(z >> 40) * 0x1p-23 - 1.0);
  }
};

float base_value(int64_t c) {
  static const float kBase[] = {1.0f / 3.0f, 0.1f, 1.0000001f, 0.7f};
  return kBase[c % 4];
}

// The value pattern of V, token t of n, column c. No pattern is dyadic with few bits (a ramp
// t / 1024, or 0.99f + 1.01f == 2 exactly, would sum without any rounding).
float v_value(DriftShape shape, int64_t t, int64_t n, int64_t c) {
  const double frac =
      static_cast<double>((t + 131 * c) % n + 1) / static_cast<double>(n + 1);
  switch (shape) {
    case DriftShape::kEqual: return base_value(c);
    case DriftShape::kStraddleAlternate:
      return (t % 2 == 0 ? 0.99f : 1.02f) + 1e-4f * static_cast<float>(c % 8);
    case DriftShape::kStraddleRamp: return static_cast<float>(0.75 + 0.5 * frac);
    case DriftShape::kRamp: return static_cast<float>(frac);
    case DriftShape::kAlternatingSigns: {
      // Pairs (+a, -a') of magnitudes 1, 0.1 or 3 (by pair): the partial sums stay near 0
      // but land on coarser grids than the small ones they hold, so the roundings stay.
      static const double kMagnitude[] = {1.0, 0.1, 3.0};
      return static_cast<float>((t % 2 == 0 ? 1.0 : -1.0) * kMagnitude[(t / 2) % 3] *
                                (1.0 + 0.001 * static_cast<double>((7 * t + c) % 11)));
    }
    case DriftShape::kDominant: return t == n / 3 ? 1.0f : base_value(c);
    case DriftShape::kGeometric: return base_value(c) * (t % 2 == 0 ? 0.99f : 1.02f);
  }
  return 0.0f;
}

}  // namespace

const std::vector<Float32Member>& float32_family() {
  static const std::vector<Float32Member> family = make_family();
  return family;
}

std::string_view drift_shape_name(DriftShape s) {
  switch (s) {
    case DriftShape::kEqual: return "equal";
    case DriftShape::kStraddleAlternate: return "straddle_alt";
    case DriftShape::kStraddleRamp: return "straddle_ramp";
    case DriftShape::kRamp: return "ramp";
    case DriftShape::kAlternatingSigns: return "alt_signs";
    case DriftShape::kDominant: return "dominant";
    case DriftShape::kGeometric: return "geometric";
  }
  return "?";
}

void PrintTo(DriftShape s, std::ostream* os) { *os << drift_shape_name(s); }

DriftCase drift_case(const DriftSpec& spec) {
  const int64_t n = spec.kv_len, d = spec.head_dim, S = spec.page_size;
  const int64_t pages = (n + S - 1) / S;
  InputsSpec layout;
  layout.seqs = {SeqLens{static_cast<int32_t>(spec.q_len), static_cast<int32_t>(n)}};
  layout.num_q_heads = spec.num_q_heads;
  layout.num_kv_heads = spec.num_kv_heads;
  layout.head_dim = d;
  layout.page_size = S;
  layout.pages_per_seq = std::max<int64_t>(pages, 1);
  layout.max_num_seqs = 1;
  layout.max_num_batched_tokens = spec.q_len;
  layout.total_num_pages = std::max<int64_t>(pages, 1);
  layout.q_dtype = spec.q_dtype;
  layout.kv_dtype = spec.kv_dtype;
  DriftCase out{build_inputs(layout), Params{}};
  out.params.sm_scale = 1.0 / std::sqrt(static_cast<double>(d));
  out.params.soft_cap = spec.soft_cap;

  Stream rng{spec.seed * 0x2545F4914F6CDD1DULL + 7};
  const bool designed = spec.shape == DriftShape::kDominant || spec.shape == DriftShape::kGeometric;
  // q: uniform draws per (head), the same for every row; a designed shape's column 0 is 1.
  for (int64_t h = 0; h < spec.num_q_heads; ++h) {
    std::vector<float> qh(static_cast<size_t>(d));
    for (int64_t c = 0; c < d; ++c) qh[static_cast<size_t>(c)] = rng.next();
    if (designed) qh[0] = 1.0f;
    for (int64_t r = 0; r < spec.q_len; ++r) {
      for (int64_t c = 0; c < d; ++c) {
        out.inputs.q.set_float((r * spec.num_q_heads + h) * d + c, qh[static_cast<size_t>(c)]);
      }
    }
  }
  const PagedKvView view = kv_view(out.inputs);
  const float scale = static_cast<float>(out.params.sm_scale);
  auto kv_store = [&](int64_t at, float x) {
    out.inputs.kv_pages.set_float(at, spec.kv_bf16_values ? round_to(DType::kBFloat16, x) : x);
  };
  for (int64_t h = 0; h < spec.num_kv_heads; ++h) {
    std::vector<float> k0(static_cast<size_t>(d));
    for (int64_t c = 0; c < d; ++c) k0[static_cast<size_t>(c)] = rng.next();
    for (int64_t t = 0; t < n; ++t) {
      // The logit offset of token t (before sm_scale), carried by column 0 (q_0 = 1).
      float delta = 0.0f;
      if (spec.shape == DriftShape::kDominant && t == n / 3) delta = 12.0f / scale;
      if (spec.shape == DriftShape::kGeometric) {
        delta = static_cast<float>(-16.0 * static_cast<double>(t) / static_cast<double>(n)) / scale;
      }
      const int64_t ka = view.k_offset(0, t, h), va = view.v_offset(0, t, h);
      for (int64_t c = 0; c < d; ++c) {
        kv_store(ka + c, c == 0 ? k0[0] + delta : k0[static_cast<size_t>(c)]);
        kv_store(va + c, v_value(spec.shape, t, n, c));
      }
    }
  }
  return out;
}

std::string describe(const DriftSpec& spec) {
  std::ostringstream os;
  os << drift_shape_name(spec.shape) << " kv_len " << spec.kv_len << " D " << spec.head_dim
     << " q_len " << spec.q_len << " S " << spec.page_size << " Hq " << spec.num_q_heads << " Hkv "
     << spec.num_kv_heads << " cap ";
  if (spec.soft_cap) {
    os << *spec.soft_cap;
  } else {
    os << "-";
  }
  os << " q " << dtype_name(spec.q_dtype) << " kv " << dtype_name(spec.kv_dtype)
     << (spec.kv_bf16_values ? "[bf16 values]" : "");
  return os.str();
}

}  // namespace rpa::testing
