//===- KvPageAllocatorTest.cpp - Pages, block tables, sharing -------------===//
#include "txc/engine/KvPageAllocator.h"

#include <gtest/gtest.h>

namespace txc::engine {
namespace {

TEST(KvPageAllocatorTest, AllocatesOnAppendAcrossPageBoundaries) {
  KvPageAllocator pages(/*num_pages=*/8, /*page_size=*/4);
  EXPECT_EQ(pages.numFreePages(), 8);
  EXPECT_EQ(pages.pagesNeededToAppend(1, 5), 2);
  ASSERT_TRUE(pages.append(1, 5).isOk());
  EXPECT_EQ(pages.blockTable(1), (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(pages.numTokens(1), 5);
  EXPECT_EQ(pages.numFreePages(), 6);
  // Three more tokens fit in page 1; the ninth needs a third page.
  EXPECT_EQ(pages.pagesNeededToAppend(1, 3), 0);
  ASSERT_TRUE(pages.append(1, 3).isOk());
  EXPECT_EQ(pages.numFreePages(), 6);
  ASSERT_TRUE(pages.append(2, 1).isOk());
  ASSERT_TRUE(pages.append(1, 1).isOk());
  EXPECT_EQ(pages.blockTable(1), (std::vector<int32_t>{0, 1, 3}));
  EXPECT_EQ(pages.blockTable(2), (std::vector<int32_t>{2}));
  EXPECT_EQ(pages.slotOf(1, 0), 0);
  EXPECT_EQ(pages.slotOf(1, 5), 1 * 4 + 1);
  EXPECT_EQ(pages.slotOf(1, 8), 3 * 4 + 0);
  EXPECT_EQ(pages.slotOf(2, 0), 2 * 4);
}

// reservePages takes the pages without the slots: numTokens stays, the
// append of those tokens takes no page and slots follow in the reserved one;
// out of pages it changes nothing.
TEST(KvPageAllocatorTest, ReservedPagesHoldNoSlotsUntilAppended) {
  KvPageAllocator pages(/*num_pages=*/3, /*page_size=*/4);
  ASSERT_TRUE(pages.append(1, 4).isOk());
  ASSERT_TRUE(pages.reservePages(1, 1).isOk());
  EXPECT_EQ(pages.numTokens(1), 4);
  EXPECT_EQ(pages.blockTable(1), (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(pages.numFreePages(), 1);
  EXPECT_EQ(pages.pagesNeededToAppend(1, 4), 0);
  ASSERT_TRUE(pages.append(1, 1).isOk());
  EXPECT_EQ(pages.numFreePages(), 1);
  EXPECT_EQ(pages.slotOf(1, 4), 1 * 4);
  ASSERT_TRUE(pages.append(2, 4).isOk());
  Status refused = pages.reservePages(2, 1);
  EXPECT_EQ(refused.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(pages.numTokens(2), 4);
  EXPECT_EQ(pages.blockTable(2), (std::vector<int32_t>{2}));
}

TEST(KvPageAllocatorTest, RunningOutIsAClearErrorThatChangesNothing) {
  KvPageAllocator pages(3, 16);
  ASSERT_TRUE(pages.append(7, 40).isOk()); // 3 pages
  Status status = pages.append(8, 20);
  EXPECT_EQ(status.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(status.message(), "KV cache out of pages: sequence 8 needs 2 more "
                              "pages of 16 tokens, 0 of 3 are free");
  EXPECT_FALSE(pages.contains(8));
  EXPECT_TRUE(pages.append(7, 8).isOk()) << "room left in the last page";
  EXPECT_FALSE(pages.append(7, 1).isOk());
  EXPECT_EQ(pages.numTokens(7), 48);
}

TEST(KvPageAllocatorTest, ReleaseReturnsPagesForReuse) {
  KvPageAllocator pages(4, 2);
  ASSERT_TRUE(pages.append(1, 4).isOk());
  ASSERT_TRUE(pages.append(2, 4).isOk());
  EXPECT_EQ(pages.numFreePages(), 0);
  pages.release(1);
  EXPECT_EQ(pages.numFreePages(), 2);
  EXPECT_FALSE(pages.contains(1));
  EXPECT_TRUE(pages.blockTable(1).empty());
  ASSERT_TRUE(pages.append(3, 3).isOk());
  EXPECT_EQ(pages.blockTable(3), (std::vector<int32_t>{0, 1}));
  pages.release(99); // unknown: ignored
  EXPECT_EQ(pages.numFreePages(), 0);
}

TEST(KvPageAllocatorTest, SharedPrefixPagesAreRefCounted) {
  KvPageAllocator pages(6, 4);
  ASSERT_TRUE(pages.append(1, 10).isOk()); // pages 0, 1, 2 (2 half full)
  auto shared = pages.sharePrefix(1, 2, 10);
  ASSERT_TRUE(shared.isOk());
  EXPECT_EQ(*shared, 8) << "only whole pages are shared";
  EXPECT_EQ(pages.blockTable(2), (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(pages.refCount(0), 2);
  EXPECT_EQ(pages.refCount(2), 1);
  // The child grows into its own page, never into the parent's.
  ASSERT_TRUE(pages.append(2, 3).isOk());
  EXPECT_EQ(pages.blockTable(2), (std::vector<int32_t>{0, 1, 3}));
  pages.release(1);
  EXPECT_EQ(pages.refCount(0), 1);
  EXPECT_EQ(pages.numFreePages(), 3) << "page 2 freed, 0 and 1 still shared";
  pages.release(2);
  EXPECT_EQ(pages.numFreePages(), 6);

  EXPECT_FALSE(pages.sharePrefix(42, 43, 1).isOk());
  ASSERT_TRUE(pages.append(5, 4).isOk());
  EXPECT_EQ(pages.sharePrefix(5, 6, 5).status().code(), StatusCode::kOutOfRange);
}

TEST(KvCachePagesTest, RequestedBudgetedCappedOrRefused) {
  KvCacheSizing sizing;
  sizing.budget_bytes = 1000;
  sizing.bytes_per_page = 100;
  sizing.max_num_seqs = 4;
  sizing.max_seq_len = 40; // 3 pages of 16 tokens a sequence: 12 useful
  sizing.page_size = 16;
  StatusOr<int32_t> pages = kvCachePages(sizing);
  ASSERT_TRUE(pages.isOk()) << pages.status().toString();
  EXPECT_EQ(pages.value(), 10); // the budget holds 10 of the 12 useful pages

  sizing.budget_bytes = 100000; // room for 1000: capped at the useful 12
  EXPECT_EQ(kvCachePages(sizing).value(), 12);

  sizing.requested_pages = 7; // asked for: exactly that, whatever the budget
  EXPECT_EQ(kvCachePages(sizing).value(), 7);

  sizing.requested_pages = 0;
  sizing.bytes_per_page = 0; // no KV layers: the useful pages
  EXPECT_EQ(kvCachePages(sizing).value(), 12);

  sizing.bytes_per_page = 100;
  sizing.budget_bytes = 99; // not one page
  StatusOr<int32_t> refused = kvCachePages(sizing);
  ASSERT_FALSE(refused.isOk());
  EXPECT_EQ(refused.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(refused.status().message().find("budget of 99 bytes does not hold one page (100 bytes"),
            std::string::npos)
      << refused.status().message();
}

} // namespace
} // namespace txc::engine
