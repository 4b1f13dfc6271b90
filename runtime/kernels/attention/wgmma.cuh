//===- wgmma.cuh - Hopper warpgroup MMA (wgmma) wrappers ------------------===//
//
// sm_90a only. Shared-memory operands are described by 64-bit descriptors;
// both operands here are K-major with the 128-byte swizzle: a tile is stored
// as column blocks of 64 elements (128 bytes per row), rows 128 bytes apart,
// 16-byte chunk c of row r at chunk (c ^ (r % 8)), every block 1024-byte
// aligned. That is the layout wgmmaTileOffset produces. The accumulator
// fragment of m64nNk16 gives warp w of the warpgroup rows 16w..16w+15 in the
// same per-n8-tile register order as mma.sync m16n8, so softmax code written
// for mma.sync fragments works on it unchanged. The m64n{32,64}k16 wrappers
// below are generated (one operand list per accumulator register).
//
//===----------------------------------------------------------------------===//
#pragma once

namespace txc::kernels {

/// Element offset of 16-byte chunk `chunk` of row `row` in a tile of `rows`
/// rows laid out for K-major, 128-byte-swizzled wgmma operands.
__device__ __forceinline__ int wgmmaTileOffset(int rows, int row, int chunk) {
  return (chunk >> 3) * rows * 64 + row * 64 + (((chunk & 7) ^ (row & 7)) << 3);
}

/// Descriptor of a K-major, 128-byte-swizzled operand starting at `smem_addr`
/// (8-row groups 1024 bytes apart; the leading offset is unused).
__device__ __forceinline__ unsigned long long wgmmaDescriptorK128(unsigned smem_addr) {
  unsigned long long desc = (unsigned long long)((smem_addr & 0x3FFFF) >> 4);
  desc |= 1ull << 16;                          // leading byte offset (unused): 16 B
  desc |= (unsigned long long)(1024 >> 4) << 32; // stride byte offset: 8 rows x 128 B
  desc |= 1ull << 62;                          // 128-byte swizzle
  return desc;
}

__device__ __forceinline__ void wgmmaFence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmmaCommit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmmaWaitAll() { asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory"); }
/// Generic-proxy shared-memory writes (cp.async, st.shared) must be fenced
/// before the async proxy (wgmma) reads them.
__device__ __forceinline__ void fenceProxyAsyncShared() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
/// Keeps the compiler from moving accesses to accumulator registers across
/// the asynchronous MMA that owns them.
template <int kN> __device__ __forceinline__ void pinRegisters(float (&d)[kN][4]) {
#pragma unroll
  for (int i = 0; i < kN; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e)
      asm volatile("" : "+f"(d[i][e])::"memory");
}

__device__ __forceinline__ void wgmmaSS_m64n32k16_bf16(float (&d)[4][4], unsigned long long desc_a,
                                                        unsigned long long desc_b, int accumulate) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}, %16, %17, p, 1, 1, 0, 0;\n}\n"
               : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3])
               : "l"(desc_a), "l"(desc_b), "r"(accumulate));
}

__device__ __forceinline__ void wgmmaSS_m64n32k16_f16(float (&d)[4][4], unsigned long long desc_a,
                                                        unsigned long long desc_b, int accumulate) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n32k16.f32.f16.f16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}, %16, %17, p, 1, 1, 0, 0;\n}\n"
               : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3])
               : "l"(desc_a), "l"(desc_b), "r"(accumulate));
}

__device__ __forceinline__ void wgmmaSS_m64n64k16_bf16(float (&d)[8][4], unsigned long long desc_a,
                                                        unsigned long long desc_b, int accumulate) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, %32, %33, p, 1, 1, 0, 0;\n}\n"
               : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3])
               : "l"(desc_a), "l"(desc_b), "r"(accumulate));
}

__device__ __forceinline__ void wgmmaSS_m64n64k16_f16(float (&d)[8][4], unsigned long long desc_a,
                                                        unsigned long long desc_b, int accumulate) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, %32, %33, p, 1, 1, 0, 0;\n}\n"
               : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3])
               : "l"(desc_a), "l"(desc_b), "r"(accumulate));
}

} // namespace txc::kernels
