#include "casegen/jax_row_softmax.h"

#include <algorithm>
#include <cmath>

#include "core/dtype.h"
#include "core/jax_kv_view.h"
#include "core/paged_kv_view.h"

namespace rpa::props {

RowSoftmax row_softmax(const Inputs& in, const Params& p, int64_t row, int64_t head, int64_t col) {
  const PagedKvView view = kv_view(in);
  RowSoftmax r;
  while (view.q_start(r.seq + 1) <= row) ++r.seq;
  const int64_t kv_len = view.kv_len(r.seq), d = view.head_dim();
  r.kv_head = head / view.q_heads_per_kv();
  r.q_pos = view.q_position(r.seq, row - view.q_start(r.seq));
  const DType qt = in.q.dtype(), kt = in.kv_pages.dtype();
  for (int64_t t = 0; t < kv_len; ++t) {
    double dot = 0.0, abs = 0.0;
    for (int64_t c = 0; c < d; ++c) {
      const double q = load_float(qt, in.q.data(), view.q_offset(row, head) + c);
      const double k = kv_eff(qt, kt, p.k_scale, true,
                              load_as_float32(kt, in.kv_pages.data(), view.k_offset(r.seq, t, r.kv_head) + c));
      dot += q * k;
      abs += std::fabs(q * k);
    }
    r.logit.push_back(dot * p.sm_scale);
    r.scale.push_back(abs * std::fabs(p.sm_scale));
    r.value.push_back(kv_eff(qt, kt, p.v_scale, false,
                             load_as_float32(kt, in.kv_pages.data(), view.v_offset(r.seq, t, r.kv_head) + col)));
  }
  return r;
}

std::vector<double> row_weights(const RowSoftmax& r, const Params& p, const std::vector<double>& shift) {
  const double mask = static_cast<float>(p.effective_mask_value());
  std::vector<double> z(r.logit.size());
  double top = -INFINITY;
  for (size_t t = 0; t < z.size(); ++t) {
    double y = r.logit[t] + (shift.empty() ? 0.0 : shift[t]);
    if (p.soft_cap) y = *p.soft_cap * std::tanh(y / *p.soft_cap);
    const auto ti = static_cast<int64_t>(t);
    if (r.q_pos < ti || (p.sliding_window && r.q_pos - *p.sliding_window >= ti)) y += mask;
    z[t] = y;
    top = std::max(top, y);
  }
  double sum = 0.0;
  for (double& y : z) sum += (y = std::exp(y - top));
  for (double& y : z) y /= sum;
  return z;
}

double row_output(const RowSoftmax& r, const std::vector<double>& weights) {
  double acc = 0.0;
  for (size_t t = 0; t < weights.size(); ++t) acc += weights[t] * r.value[t];
  return acc;
}

}  // namespace rpa::props
