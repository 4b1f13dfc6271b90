//===- prefill_fp16.cu - Fp16 prefill launchers ----------------------------===//
#include "attention/launch_templates.cuh"

namespace txc::kernels {
Status launchPrefillFp16(const AttentionConfig &c, const PrefillParams &p, cudaStream_t s) {
  return detail::launchPrefillTyped<__half>(c, p, s);
}
} // namespace txc::kernels
