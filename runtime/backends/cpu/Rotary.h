//===- Rotary.h - Rotary frequencies exactly as HF computes them -*- C++ -*-===//
//
// Hugging Face transformers builds inv_freq per rope_type in
// modeling_rope_utils.py, in fp32 tensors (the pow, the reciprocal, the
// llama3 / yarn blends), then cos/sin of the fp32 angle inv_freq * position,
// times an attention scaling. We mirror where HF rounds to fp32 so the
// angles agree to the last bit in the common cases, and apply the rotation
// in rotate-half layout (pairs (i, i + R/2) of the first R = rotary_dim
// dimensions; the rest pass through).
//
//===----------------------------------------------------------------------===//
#ifndef TXC_RUNTIME_BACKENDS_CPU_ROTARY_H
#define TXC_RUNTIME_BACKENDS_CPU_ROTARY_H

#include "txc/Status.h"

#include <cstdint>
#include <string>
#include <vector>

namespace txc::cpu {

enum class RopeScaling { kDefault, kLinear, kDynamic, kLlama3, kYarn };

/// "default", "linear", "dynamic", "llama3", "yarn".
StatusOr<RopeScaling> parseRopeScaling(const std::string &name);

/// The launch attributes rope.* (FORMAT.md). Zero means "HF's default" for
/// every optional field.
struct RopeParams {
  double theta = 10000.0;
  RopeScaling scaling = RopeScaling::kDefault;
  double factor = 1.0;
  double low_freq_factor = 1.0;   // llama3
  double high_freq_factor = 4.0;  // llama3
  int64_t original_max_position = 0; // llama3, yarn; dynamic's threshold
  double beta_fast = 0.0;         // yarn; 0 = 32
  double beta_slow = 0.0;         // yarn; 0 = 1
  double attention_factor = 0.0;  // yarn; 0 = 0.1 * ln(factor) + 1
  int64_t rotary_dim = 0;         // 0 = the whole head
  /// yarn: round the correction range outward to whole dimensions (HF's
  /// `truncate`, true unless a config says false, as gpt-oss does).
  bool yarn_truncate = true;
};

/// Checks the parameters for a head of `head_dim`, naming the bad one.
Status validateRopeParams(const RopeParams &params, int64_t head_dim);

/// The rotated dimensions of a head: rotary_dim, or head_dim when 0.
int64_t rotaryDim(const RopeParams &params, int64_t head_dim);

struct RotaryFrequencies {
  std::vector<float> inv_freq; // rotary_dim / 2 entries
  float attention_scaling = 1.0f;
};

/// HF's inv_freq and attention scaling. `seq_len` matters only for
/// `dynamic`: HF recomputes the base for the longest sequence seen, which
/// during generation is the sequence's current length (we use each
/// sequence's own length, so a request's result never depends on its batch).
RotaryFrequencies computeRotaryFrequencies(const RopeParams &params,
                                           int64_t head_dim, int64_t seq_len);

/// Rotates the first 2 * inv_freq.size() elements of `x` (fp32, in place)
/// for `position`: cos and sin are taken of the fp32 angle as HF does.
void applyRotary(float *x, const RotaryFrequencies &frequencies,
                 int32_t position);

} // namespace txc::cpu

#endif // TXC_RUNTIME_BACKENDS_CPU_ROTARY_H
