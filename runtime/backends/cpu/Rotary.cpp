//===- Rotary.cpp - Rotary frequencies exactly as HF computes them --------===//
#include "runtime/backends/cpu/Rotary.h"

#include <algorithm>
#include <cmath>

namespace txc::cpu {

StatusOr<RopeScaling> parseRopeScaling(const std::string &name) {
  if (name.empty() || name == "default")
    return RopeScaling::kDefault;
  if (name == "linear")
    return RopeScaling::kLinear;
  if (name == "dynamic")
    return RopeScaling::kDynamic;
  if (name == "llama3")
    return RopeScaling::kLlama3;
  if (name == "yarn")
    return RopeScaling::kYarn;
  return unimplemented("rope.scaling '" + name +
                       "' is not supported (default, linear, dynamic, llama3, "
                       "yarn)");
}

int64_t rotaryDim(const RopeParams &params, int64_t head_dim) {
  return params.rotary_dim > 0 ? params.rotary_dim : head_dim;
}

Status validateRopeParams(const RopeParams &params, int64_t head_dim) {
  int64_t dim = rotaryDim(params, head_dim);
  if (dim % 2 != 0 || dim > head_dim || dim < 2)
    return invalidArgument("rope.rotary_dim " + std::to_string(dim) +
                           " must be even, at least 2 and at most head_dim " +
                           std::to_string(head_dim));
  if (!(params.theta > 0.0))
    return invalidArgument("rope.theta must be positive");
  bool scaled = params.scaling != RopeScaling::kDefault;
  if (scaled && !(params.factor > 0.0))
    return invalidArgument("rope.factor must be positive for a scaled rotary");
  bool needs_original = params.scaling == RopeScaling::kDynamic ||
                        params.scaling == RopeScaling::kLlama3 ||
                        params.scaling == RopeScaling::kYarn;
  if (needs_original && params.original_max_position <= 0)
    return invalidArgument("rope.original_max_position must be positive for "
                           "this rope.scaling");
  if (params.scaling == RopeScaling::kDynamic && dim <= 2)
    return invalidArgument("dynamic rotary needs rotary_dim > 2");
  if (params.scaling == RopeScaling::kLlama3 &&
      !(params.high_freq_factor > params.low_freq_factor))
    return invalidArgument("rope.high_freq_factor must exceed "
                           "rope.low_freq_factor for llama3");
  return Status::ok();
}

namespace {

// HF: base ** (arange(0, dim, 2).float() / dim), all in fp32.
float fp32PowFreq(double base, int64_t pair, int64_t dim) {
  float exponent = static_cast<float>(2 * pair) / static_cast<float>(dim);
  return static_cast<float>(std::pow(base, static_cast<double>(exponent)));
}

std::vector<float> defaultInvFreq(double base, int64_t dim) {
  std::vector<float> inv_freq(static_cast<size_t>(dim / 2));
  for (int64_t i = 0; i < dim / 2; ++i)
    inv_freq[i] = 1.0f / fp32PowFreq(base, i, dim);
  return inv_freq;
}

double yarnCorrectionDim(double rotations, int64_t dim, double base,
                         int64_t original_max_position) {
  return (static_cast<double>(dim) *
          std::log(static_cast<double>(original_max_position) /
                   (rotations * 2.0 * M_PI))) /
         (2.0 * std::log(base));
}

} // namespace

RotaryFrequencies computeRotaryFrequencies(const RopeParams &params,
                                           int64_t head_dim, int64_t seq_len) {
  int64_t dim = rotaryDim(params, head_dim);
  RotaryFrequencies result;
  switch (params.scaling) {
  case RopeScaling::kDefault:
    result.inv_freq = defaultInvFreq(params.theta, dim);
    break;
  case RopeScaling::kLinear: {
    result.inv_freq = defaultInvFreq(params.theta, dim);
    float factor = static_cast<float>(params.factor);
    for (float &f : result.inv_freq)
      f /= factor;
    break;
  }
  case RopeScaling::kDynamic: {
    // Below the trained length HF uses the plain frequencies; beyond it the
    // base grows with the sequence (NTK-aware), computed in double.
    double base = params.theta;
    double original = static_cast<double>(params.original_max_position);
    if (seq_len > params.original_max_position)
      base = params.theta *
             std::pow(params.factor * static_cast<double>(seq_len) / original -
                          (params.factor - 1.0),
                      static_cast<double>(dim) / static_cast<double>(dim - 2));
    result.inv_freq = defaultInvFreq(base, dim);
    break;
  }
  case RopeScaling::kLlama3: {
    result.inv_freq = defaultInvFreq(params.theta, dim);
    double original = static_cast<double>(params.original_max_position);
    double low_freq_wavelen = original / params.low_freq_factor;
    double high_freq_wavelen = original / params.high_freq_factor;
    float factor = static_cast<float>(params.factor);
    for (float &f : result.inv_freq) {
      float wavelen = static_cast<float>(2.0 * M_PI) / f;
      if (wavelen > low_freq_wavelen) {
        f = f / factor; // long wavelengths: fully interpolated
      } else if (!(wavelen < high_freq_wavelen)) {
        // In between: blend interpolated and original smoothly.
        float smooth = static_cast<float>(
            (original / wavelen - params.low_freq_factor) /
            (params.high_freq_factor - params.low_freq_factor));
        f = (1.0f - smooth) * f / factor + smooth * f;
      }
    }
    break;
  }
  case RopeScaling::kYarn: {
    double factor = params.factor;
    double beta_fast = params.beta_fast != 0.0 ? params.beta_fast : 32.0;
    double beta_slow = params.beta_slow != 0.0 ? params.beta_slow : 1.0;
    double low = yarnCorrectionDim(beta_fast, dim, params.theta,
                                   params.original_max_position);
    double high = yarnCorrectionDim(beta_slow, dim, params.theta,
                                    params.original_max_position);
    if (params.yarn_truncate) {
      low = std::floor(low);
      high = std::ceil(high);
    }
    low = std::max(low, 0.0);
    high = std::min(high, static_cast<double>(dim - 1));
    if (low == high)
      high += 0.001; // HF's guard against a zero-width ramp
    float factor_f = static_cast<float>(factor);
    result.inv_freq.resize(static_cast<size_t>(dim / 2));
    for (int64_t i = 0; i < dim / 2; ++i) {
      float pos_freq = fp32PowFreq(params.theta, i, dim);
      float extrapolation = 1.0f / pos_freq;
      float interpolation = 1.0f / (factor_f * pos_freq);
      float ramp = (static_cast<float>(i) - static_cast<float>(low)) /
                   (static_cast<float>(high) - static_cast<float>(low));
      ramp = std::min(1.0f, std::max(0.0f, ramp));
      float extrapolation_weight = 1.0f - ramp;
      result.inv_freq[i] = interpolation * (1.0f - extrapolation_weight) +
                           extrapolation * extrapolation_weight;
    }
    double attention = params.attention_factor;
    if (attention == 0.0)
      attention = factor <= 1.0 ? 1.0 : 0.1 * std::log(factor) + 1.0;
    result.attention_scaling = static_cast<float>(attention);
    break;
  }
  }
  return result;
}

void applyRotary(float *x, const RotaryFrequencies &frequencies,
                 int32_t position) {
  size_t half = frequencies.inv_freq.size();
  float pos = static_cast<float>(position);
  for (size_t i = 0; i < half; ++i) {
    float angle = frequencies.inv_freq[i] * pos; // fp32, as HF's matmul
    float cos_value = static_cast<float>(std::cos(static_cast<double>(angle))) *
                      frequencies.attention_scaling;
    float sin_value = static_cast<float>(std::sin(static_cast<double>(angle))) *
                      frequencies.attention_scaling;
    float x1 = x[i], x2 = x[i + half];
    x[i] = x1 * cos_value - x2 * sin_value;
    x[i + half] = x2 * cos_value + x1 * sin_value;
  }
}

} // namespace txc::cpu
