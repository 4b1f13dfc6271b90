//===- decode_bf16.cu - Bf16 decode launchers ------------------------------===//
#include "attention/launch_templates.cuh"

namespace txc::kernels {
Status launchPagedDecodeBf16(const AttentionConfig &c, const DecodeParams &p, cudaStream_t s) {
  return detail::launchPagedDecodeTyped<__nv_bfloat16>(c, p, s);
}
Status decodeCtasPerSmBf16(const AttentionConfig &c, int group, int *out) {
  return detail::decodeCtasPerSmTyped<__nv_bfloat16>(c, group, out);
}
} // namespace txc::kernels
