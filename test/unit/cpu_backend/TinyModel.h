//===- TinyModel.h - A hand-built plan of a two-layer Llama-like model -----===//
//
// embedding -> per layer [rms_norm -> gemm_rope_append -> attention ->
// gemm residual -> rms_norm -> gemm swiglu -> gemm residual] -> gather_last
// -> rms_norm -> gemm logits, written with ArtifactWriter exactly as
// FORMAT.md says the compiler writes launches. With tp = 2 the weights are
// sharded Megatron-style (heads and intermediate columns split, row-parallel
// GEMMs with residual_on_first_rank followed by all_reduce), from the same
// full weights, so tp = 1 and tp = 2 compute the same function.
//
// Every GEMM carries a bias (Qwen2-style): validateArtifactMessage still
// rejects the empty ValueRef FORMAT.md prescribes for an absent optional
// operand, so a plan with a residual GEMM and no bias cannot be written yet.
//
//===----------------------------------------------------------------------===//
#ifndef TXC_TEST_UNIT_CPU_BACKEND_TINYMODEL_H
#define TXC_TEST_UNIT_CPU_BACKEND_TINYMODEL_H

#include "txc/DType.h"
#include "txc/Status.h"

#include <cstdint>
#include <string>

namespace txc::cpu::testing {

inline constexpr int64_t kTinyVocab = 64;
inline constexpr int64_t kTinyHidden = 32;
inline constexpr int64_t kTinyHeads = 4;
inline constexpr int64_t kTinyKvHeads = 2;
inline constexpr int64_t kTinyHeadDim = 8;
inline constexpr int64_t kTinyIntermediate = 48;

struct TinyModelOptions {
  DType dtype = DType::kF32;
  int tp = 1;
  int num_layers = 2;
  bool qk_norm = false;
  int64_t sliding_window = 0;
  double logit_softcap = 0.0;
  /// rope.scaling; scaled variants use factor 4 and original_max_position
  /// 16, so sequences in the tests cross the trained length.
  std::string rope_scaling = "default";
  int64_t max_batch_tokens = 64;
  int64_t max_seq_len = 128;
  uint64_t seed = 1;
  /// The shape (the kTiny* constants unless a test needs kernel-sized heads).
  int64_t vocab = kTinyVocab, hidden = kTinyHidden, heads = kTinyHeads, kv_heads = kTinyKvHeads,
          head_dim = kTinyHeadDim, intermediate = kTinyIntermediate;
};

Status writeTinyModel(const std::string &path, const TinyModelOptions &options);

} // namespace txc::cpu::testing

#endif
