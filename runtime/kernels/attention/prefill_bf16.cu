//===- prefill_bf16.cu - Bf16 prefill launchers ----------------------------===//
#include "attention/launch_templates.cuh"

namespace txc::kernels {
Status launchPrefillBf16(const AttentionConfig &c, const PrefillParams &p, cudaStream_t s) {
  return detail::launchPrefillTyped<__nv_bfloat16>(c, p, s);
}
} // namespace txc::kernels
