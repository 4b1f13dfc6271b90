//===- attention.cpp - Element-type dispatch and split planning -----------===//
#include "attention/attention.h"

#include <string>

namespace txc::kernels {

const char *elementTypeName(ElementType t) { return t == ElementType::kBf16 ? "bf16" : "fp16"; }

DecodeWorkspaceLayout decodeWorkspaceLayout(int batch, int num_qo_heads, int num_kv_heads, int head_dim,
                                            int num_splits) {
  auto align = [](size_t n) { return (n + 255) / 256 * 256; };
  DecodeWorkspaceLayout w;
  const size_t rows = (size_t)num_splits * batch * num_qo_heads;
  w.partial_o_offset = 0;
  w.partial_lse_offset = align(rows * head_dim * sizeof(float));
  w.counters_offset = w.partial_lse_offset + align(rows * sizeof(float));
  w.total_bytes = w.counters_offset + align((size_t)batch * num_kv_heads * sizeof(unsigned));
  return w;
}

Status decodeCtasPerSm(const AttentionConfig &config, int group_size, int *ctas_per_sm) {
  switch (config.dtype) {
  case ElementType::kBf16: return decodeCtasPerSmBf16(config, group_size, ctas_per_sm);
  case ElementType::kFp16: return decodeCtasPerSmFp16(config, group_size, ctas_per_sm);
  }
  return Status::unsupported("decode: unsupported element type");
}

Status planDecodeSplits(const AttentionConfig &config, int batch, int num_qo_heads, int num_kv_heads,
                        int max_kv_len, int *num_splits, int min_tokens_per_split,
                        int max_splits, int min_splits) {
  if (num_kv_heads <= 0 || num_qo_heads % num_kv_heads != 0)
    return Status::invalidArgument("decode: bad head counts");
  DecodeSplitInputs in;
  in.batch = batch;
  in.num_kv_heads = num_kv_heads;
  in.max_kv_len = max_kv_len;
  in.min_tokens_per_split = min_tokens_per_split;
  in.max_splits = max_splits;
  in.min_splits = min_splits;
  int device = 0;
  TXC_CUDA_CHECK(cudaGetDevice(&device));
  TXC_CUDA_CHECK(cudaDeviceGetAttribute(&in.num_sms, cudaDevAttrMultiProcessorCount, device));
  TXC_RETURN_IF_ERROR(decodeCtasPerSm(config, num_qo_heads / num_kv_heads, &in.ctas_per_sm));
  *num_splits = chooseDecodeSplits(in);
  return Status::ok();
}

Status launchPagedDecode(const AttentionConfig &config, const DecodeParams &params, cudaStream_t stream) {
  switch (config.dtype) {
  case ElementType::kBf16: return launchPagedDecodeBf16(config, params, stream);
  case ElementType::kFp16: return launchPagedDecodeFp16(config, params, stream);
  }
  return Status::unsupported("decode: unsupported element type");
}

PrefillKernel defaultPrefillKernel() { return PrefillKernel::kWarpSpecialized; }

Status launchPrefill(const AttentionConfig &config, const PrefillParams &params, cudaStream_t stream) {
  switch (config.dtype) {
  case ElementType::kBf16: return launchPrefillBf16(config, params, stream);
  case ElementType::kFp16: return launchPrefillFp16(config, params, stream);
  }
  return Status::unsupported("prefill: unsupported element type");
}

} // namespace txc::kernels
