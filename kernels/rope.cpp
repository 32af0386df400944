#include "kernels/rope.hpp"

#include <algorithm>
#include <cmath>

namespace burst::kernels {

namespace {
double yarn_mscale(double scale) { return scale <= 1.0 ? 1.0 : 0.1 * std::log(scale) + 1.0; }
double yarn_correction_dim(double num_rot, long dim, double base, double max_pos) {
  return (double(dim) * std::log(max_pos / (num_rot * 2.0 * M_PI))) / (2.0 * std::log(base));
}
}  // namespace

RopeTable rope_table(const RopeConfig& cfg, long seq_len) {
  const long d = cfg.head_dim;
  BURST_CHECK_CONFIG(d >= 2 && d % 2 == 0, "rope: head_dim = ", d, " must be even and >= 2");
  BURST_CHECK_CONFIG(cfg.theta > 1.0, "rope: rope_theta = ", cfg.theta, " must be > 1");
  const RopeScaling& sc = cfg.scaling;
  const std::string& type = sc.type;
  BURST_CHECK_CONFIG(type == "default" || type == "linear" || type == "dynamic" || type == "llama3" || type == "yarn",
                     "rope_scaling type '", type, "' is not supported (default, linear, dynamic, llama3, yarn)");
  if (type != "default") BURST_CHECK_CONFIG(sc.factor >= 1.0, "rope_scaling.factor = ", sc.factor, " must be >= 1");
  RopeTable t;
  double base = cfg.theta;
  const long orig = sc.original_max_position_embeddings > 0 ? sc.original_max_position_embeddings : cfg.max_position_embeddings;
  if (type == "dynamic" && orig > 0 && seq_len > orig) {
    // Hugging Face _compute_dynamic_ntk_parameters.
    base = cfg.theta * std::pow(sc.factor * double(seq_len) / double(orig) - (sc.factor - 1.0), double(d) / double(d - 2));
  }
  const long half = d / 2;
  t.inv_freq.resize(half);
  for (long e = 0; e < half; ++e) t.inv_freq[e] = 1.0 / std::pow(base, double(2 * e) / double(d));
  if (type == "linear") {
    for (auto& f : t.inv_freq) f /= sc.factor;
  } else if (type == "llama3") {
    BURST_CHECK_CONFIG(orig > 0, "rope_scaling llama3 needs original_max_position_embeddings");
    BURST_CHECK_CONFIG(sc.high_freq_factor > sc.low_freq_factor, "rope_scaling llama3: high_freq_factor = ",
                       sc.high_freq_factor, " must exceed low_freq_factor = ", sc.low_freq_factor);
    const double low_wavelen = double(orig) / sc.low_freq_factor, high_wavelen = double(orig) / sc.high_freq_factor;
    for (auto& f : t.inv_freq) {
      const double wavelen = 2.0 * M_PI / f;
      if (wavelen > low_wavelen) {
        f = f / sc.factor;  // low frequencies: interpolate
      } else if (wavelen >= high_wavelen) {
        const double smooth = (double(orig) / wavelen - sc.low_freq_factor) / (sc.high_freq_factor - sc.low_freq_factor);
        f = (1.0 - smooth) * f / sc.factor + smooth * f;
      }  // high frequencies: unchanged
    }
  } else if (type == "yarn") {
    BURST_CHECK_CONFIG(orig > 0, "rope_scaling yarn needs original_max_position_embeddings");
    // 0 or less made the ramp's bounds infinite or NaN: other frequencies than Hugging Face's (which refuses them)
    BURST_CHECK_CONFIG(sc.beta_fast > 0 && sc.beta_slow > 0 && std::isfinite(sc.beta_fast) && std::isfinite(sc.beta_slow),
                       "rope_scaling yarn: beta_fast = ", sc.beta_fast, " and beta_slow = ", sc.beta_slow, " must be > 0");
    t.attention_factor = sc.attention_factor > 0 ? sc.attention_factor : yarn_mscale(sc.factor);
    double low = yarn_correction_dim(sc.beta_fast, d, base, double(orig));
    double high = yarn_correction_dim(sc.beta_slow, d, base, double(orig));
    if (sc.truncate) low = std::floor(low), high = std::ceil(high);
    low = std::max(low, 0.0);
    high = std::min(high, double(d - 1));
    if (low == high) high += 0.001;  // avoid a zero-width ramp
    for (long e = 0; e < half; ++e) {
      const double ramp = std::clamp((double(e) - low) / (high - low), 0.0, 1.0);
      const double extrapolation_weight = 1.0 - ramp;
      const double extrap = t.inv_freq[e], interp = t.inv_freq[e] / sc.factor;
      t.inv_freq[e] = interp * (1.0 - extrapolation_weight) + extrap * extrapolation_weight;
    }
  }
  return t;
}

}  // namespace burst::kernels
