//===- TmaDescriptorTest.cpp - The prefill's TMA descriptors and inputs ---===//
//
// Host-side checks of what the prefill launcher needs before it launches:
// the K/V tensor's alignment and box shape (named in the error), the rows of
// contiguous K/V and the pages of a paged cache (required: the TMA reads
// whole boxes against them). The first two need no GPU; encoding a valid
// descriptor needs the driver.
//
//===----------------------------------------------------------------------===//
#include "attention/attention.h"
#include "attention/tma_descriptor.h"

#include "GpuTest.h"

#include <string>

namespace txc::kernels {
namespace {

TileTensorShape contiguousKV(const void *base) {
  TileTensorShape shape;
  shape.base = base;
  shape.head_dim = 128;
  shape.heads = 8;
  shape.rows = 4096;
  shape.row_stride = 8 * 128;
  shape.head_stride = 128;
  return shape;
}

TEST(TmaDescriptorTest, MisalignedOrOversizedTensorsAreRefusedByName) {
  alignas(16) static unsigned char buffer[64];
  TmaDescriptor desc;
  const Status misaligned = encodeTileDescriptor(&desc, contiguousKV(buffer + 2), 128, "K");
  EXPECT_EQ(misaligned.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(misaligned.message().find("TMA descriptor of K"), std::string::npos) << misaligned.message();
  EXPECT_NE(misaligned.message().find("16-byte aligned"), std::string::npos) << misaligned.message();

  TileTensorShape paged = contiguousKV(buffer);
  paged.rows = 16; // a 16-token page cannot hold a 128-row box
  paged.pages = 100;
  paged.page_stride = 2 * 16 * 8 * 128;
  const Status oversized = encodeTileDescriptor(&desc, paged, 128, "V");
  EXPECT_EQ(oversized.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(oversized.message().find("TMA descriptor of V"), std::string::npos) << oversized.message();
  EXPECT_NE(oversized.message().find("boxes of 128 rows"), std::string::npos) << oversized.message();
}

TEST(TmaDescriptorTest, PrefillNeedsTheRowsOrPagesTheBoxesAreCheckedAgainst) {
  alignas(16) static unsigned char buffer[64];
  static const int lengths[2] = {0, 16};
  PrefillParams p;
  p.q = p.o = buffer;
  p.kv.k = p.kv.v = buffer;
  p.cu_seqlens_q = lengths;
  p.batch = 1;
  p.num_qo_heads = p.num_kv_heads = 1;
  p.max_seqlen_q = 16;
  p.kv.maybe_cu_seqlens_k = lengths; // contiguous, but num_tokens unset
  AttentionConfig config;
  Status status = launchPrefill(config, p, nullptr);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("contiguous K/V need cu_seqlens_k and num_tokens"), std::string::npos)
      << status.message();

  p.kv.maybe_cu_seqlens_k = nullptr; // paged, but num_pages unset
  p.kv.page_table = lengths;
  p.kv.page_size = 16;
  p.kv.page_size_log2 = 4;
  p.maybe_kv_lens = lengths + 1;
  status = launchPrefill(config, p, nullptr);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("paged K/V need maybe_kv_lens and num_pages"), std::string::npos)
      << status.message();
}

TEST(TmaDescriptorTest, EncodesContiguousAndPagedKV) {
  TXC_SKIP_WITHOUT_GPU();
  void *kv = nullptr;
  ASSERT_EQ(cudaMalloc(&kv, size_t{4096} * 8 * 128 * 2), cudaSuccess);
  TmaDescriptor desc;
  const Status contiguous = encodeTileDescriptor(&desc, contiguousKV(kv), 128, "K");
  EXPECT_TRUE(contiguous.isOk()) << contiguous.message();
  TileTensorShape paged = contiguousKV(kv);
  paged.rows = 128; // pages of 128 tokens: one box a key block
  paged.pages = 16;
  paged.page_stride = 2 * 128 * 8 * 128;
  const Status pages = encodeTileDescriptor(&desc, paged, 128, "V");
  EXPECT_TRUE(pages.isOk()) << pages.message();
  cudaFree(kv);
}

} // namespace
} // namespace txc::kernels
