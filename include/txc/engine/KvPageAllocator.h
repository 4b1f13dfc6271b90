//===- KvPageAllocator.h - Paged KV-cache bookkeeping ----------*- C++ -*-===//
//
// The KV cache is a pool of fixed-size pages (page_size tokens each, every
// layer's K and V for those tokens). A sequence owns a block table: the
// pages holding its tokens 0..n-1 in order. Pages are allocated when a
// sequence grows past its last page and return to the free list when it
// finishes. Pages carry reference counts so sequences can share a prompt
// prefix (only whole, full pages are shared, so no sequence ever writes
// into a page another one reads).
//
// This is host-side bookkeeping only; the backends own the page memory and
// read block tables and slot mappings from each Batch.
//
//===----------------------------------------------------------------------===//
#ifndef TXC_ENGINE_KVPAGEALLOCATOR_H
#define TXC_ENGINE_KVPAGEALLOCATOR_H

#include "txc/Status.h"

#include <cstdint>
#include <unordered_map>
#include <vector>

namespace txc::engine {

using SequenceId = int64_t;

class KvPageAllocator {
public:
  KvPageAllocator(int32_t num_pages, int32_t page_size);

  int32_t numPages() const { return static_cast<int32_t>(ref_counts_.size()); }
  int32_t pageSize() const { return page_size_; }
  int32_t numFreePages() const { return static_cast<int32_t>(free_pages_.size()); }
  /// Pages needed to hold `tokens` tokens.
  int32_t pagesFor(int64_t tokens) const;

  /// Pages `sequence` must gain to grow by `tokens` (0 when it fits in its
  /// last page). Unknown sequences count as empty.
  int32_t pagesNeededToAppend(SequenceId sequence, int32_t tokens) const;
  /// Reserves KV slots for `tokens` more tokens of `sequence`, creating it on
  /// first use and allocating pages as needed. All or nothing: when pages run
  /// out nothing changes and the error names the shortfall.
  Status append(SequenceId sequence, int32_t tokens);
  /// Pages for `tokens` more tokens of `sequence` without reserving their
  /// slots (numTokens stays): a later append of them takes no page. All or
  /// nothing, as append.
  Status reservePages(SequenceId sequence, int32_t tokens);
  /// Drops the sequence; each of its pages loses a reference and returns to
  /// the free list at zero. Unknown sequences are ignored.
  void release(SequenceId sequence);
  /// Starts `child` with the pages holding the first `tokens` tokens of
  /// `parent`, rounded down to whole pages (the rest must be recomputed).
  /// Returns how many tokens are shared.
  StatusOr<int32_t> sharePrefix(SequenceId parent, SequenceId child,
                                int32_t tokens);

  bool contains(SequenceId sequence) const;
  /// Tokens with reserved slots; 0 for unknown sequences.
  int32_t numTokens(SequenceId sequence) const;
  /// Pages of the sequence in token order; empty for unknown sequences.
  const std::vector<int32_t> &blockTable(SequenceId sequence) const;
  /// Flat KV slot (page * page_size + offset) of token `position`, which
  /// must be below numTokens(sequence).
  int32_t slotOf(SequenceId sequence, int32_t position) const;
  int32_t refCount(int32_t page) const { return ref_counts_[page]; }

private:
  struct SequencePages {
    std::vector<int32_t> pages;
    int32_t num_tokens = 0;
  };

  int32_t page_size_;
  std::vector<int32_t> free_pages_; // a stack; back() is handed out next
  std::vector<int32_t> ref_counts_;
  std::unordered_map<SequenceId, SequencePages> sequences_;
};

/// What sizes a backend's KV cache; every layer gets the same pages.
struct KvCacheSizing {
  int32_t requested_pages = 0;    // > 0: exactly this many
  uint64_t budget_bytes = 0;      // else as many as this holds
  uint64_t bytes_per_page = 0;    // of one page of every layer's K and V
  int64_t max_num_seqs = 0;       // capped at what this many sequences
  int64_t max_seq_len = 0;        // of this many tokens can use
  int32_t page_size = 16;         // tokens a page
};

/// Pages in each layer's cache: the requested count, or as many as the
/// budget holds capped at the useful pages and at 2^30; without KV layers
/// (bytes_per_page 0) the useful pages, at most 2^20. The error names the
/// budget and a page's bytes when the budget holds no page.
StatusOr<int32_t> kvCachePages(const KvCacheSizing &sizing);

} // namespace txc::engine

#endif // TXC_ENGINE_KVPAGEALLOCATOR_H
