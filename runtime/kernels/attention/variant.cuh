//===- variant.cuh - Mask and logit policies of the attention kernels -----===//
//
// A Variant decides which keys a query may see and how a raw q.k product
// becomes a base-2 logit. Kernels ask it for a key range first (so masked
// tiles are never loaded) and for a per-element test only on boundary tiles.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "attention/device_utils.cuh"

namespace txc::kernels {

template <bool kCausalMask, bool kSlidingWindow, bool kLogitSoftCap> struct AttentionVariant {
  static constexpr bool kCausal = kCausalMask;
  static constexpr bool kWindow = kSlidingWindow;
  static constexpr bool kSoftCap = kLogitSoftCap;

  /// Raw q.k -> logit in base 2 (so the softmax can use exp2).
  __device__ __forceinline__ static float logit(float qk, const VariantParams &p) {
    if constexpr (kSoftCap) {
      return p.softcap * tanhf(qk * (p.sm_scale / p.softcap)) * kLog2e;
    } else {
      return qk * p.sm_scale_log2;
    }
  }

  /// First key visible from key position `query_pos`.
  __device__ __forceinline__ static int keyBegin(int query_pos, const VariantParams &p) {
    if constexpr (kWindow) {
      int first = query_pos - p.window_left;
      return first > 0 ? first : 0;
    } else {
      return 0;
    }
  }

  /// One past the last key visible from `query_pos`, given kv_len keys.
  __device__ __forceinline__ static int keyEnd(int query_pos, int kv_len) {
    if constexpr (kCausal) {
      int last = query_pos + 1;
      return last < kv_len ? last : kv_len;
    } else {
      return kv_len;
    }
  }

  __device__ __forceinline__ static bool visible(int query_pos, int key, int kv_len, const VariantParams &p) {
    return key >= keyBegin(query_pos, p) && key < keyEnd(query_pos, kv_len);
  }
};

} // namespace txc::kernels
