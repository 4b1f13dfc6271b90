//===- decode_fp16.cu - Fp16 decode launchers ------------------------------===//
#include "attention/launch_templates.cuh"

namespace txc::kernels {
Status launchPagedDecodeFp16(const AttentionConfig &c, const DecodeParams &p, cudaStream_t s) {
  return detail::launchPagedDecodeTyped<__half>(c, p, s);
}
Status decodeCtasPerSmFp16(const AttentionConfig &c, int group, int *out) {
  return detail::decodeCtasPerSmTyped<__half>(c, group, out);
}
} // namespace txc::kernels
