//===- KvPageAllocator.cpp - Paged KV-cache bookkeeping -------------------===//
#include "txc/engine/KvPageAllocator.h"

#include <algorithm>
#include <string>

namespace txc::engine {

KvPageAllocator::KvPageAllocator(int32_t num_pages, int32_t page_size)
    : page_size_(page_size > 0 ? page_size : 1),
      ref_counts_(num_pages > 0 ? num_pages : 0, 0) {
  // Hand out page 0 first: deterministic block tables make traces readable.
  for (int32_t page = numPages() - 1; page >= 0; --page)
    free_pages_.push_back(page);
}

int32_t KvPageAllocator::pagesFor(int64_t tokens) const {
  return static_cast<int32_t>((tokens + page_size_ - 1) / page_size_);
}

int32_t KvPageAllocator::pagesNeededToAppend(SequenceId sequence,
                                             int32_t tokens) const {
  auto it = sequences_.find(sequence);
  int32_t have_tokens = it == sequences_.end() ? 0 : it->second.num_tokens;
  int32_t have_pages =
      it == sequences_.end() ? 0 : static_cast<int32_t>(it->second.pages.size());
  int32_t need = pagesFor(int64_t{have_tokens} + tokens) - have_pages;
  return need > 0 ? need : 0;
}

Status KvPageAllocator::reservePages(SequenceId sequence, int32_t tokens) {
  const int32_t have = numTokens(sequence);
  TXC_RETURN_IF_ERROR(append(sequence, tokens));
  sequences_[sequence].num_tokens = have;
  return Status::ok();
}

Status KvPageAllocator::append(SequenceId sequence, int32_t tokens) {
  if (tokens < 0)
    return invalidArgument("KV cache: cannot append " + std::to_string(tokens) +
                           " tokens to sequence " + std::to_string(sequence));
  int32_t needed = pagesNeededToAppend(sequence, tokens);
  if (needed > numFreePages())
    return resourceExhausted(
        "KV cache out of pages: sequence " + std::to_string(sequence) +
        " needs " + std::to_string(needed) + " more pages of " +
        std::to_string(page_size_) + " tokens, " +
        std::to_string(numFreePages()) + " of " + std::to_string(numPages()) +
        " are free");
  SequencePages &state = sequences_[sequence];
  for (int32_t i = 0; i < needed; ++i) {
    int32_t page = free_pages_.back();
    free_pages_.pop_back();
    ref_counts_[page] = 1;
    state.pages.push_back(page);
  }
  state.num_tokens += tokens;
  return Status::ok();
}

void KvPageAllocator::release(SequenceId sequence) {
  auto it = sequences_.find(sequence);
  if (it == sequences_.end())
    return;
  // Return pages in reverse so a released sequence's first page is reused
  // first, like a stack of recently freed (cache-warm) pages.
  const std::vector<int32_t> &pages = it->second.pages;
  for (auto page = pages.rbegin(); page != pages.rend(); ++page)
    if (--ref_counts_[*page] == 0)
      free_pages_.push_back(*page);
  sequences_.erase(it);
}

StatusOr<int32_t> KvPageAllocator::sharePrefix(SequenceId parent,
                                               SequenceId child,
                                               int32_t tokens) {
  auto it = sequences_.find(parent);
  if (it == sequences_.end())
    return invalidArgument("KV cache: cannot share from unknown sequence " +
                           std::to_string(parent));
  if (sequences_.count(child) != 0)
    return invalidArgument("KV cache: sequence " + std::to_string(child) +
                           " already holds pages; share into a new one");
  if (tokens < 0 || tokens > it->second.num_tokens)
    return outOfRange("KV cache: sequence " + std::to_string(parent) + " has " +
                      std::to_string(it->second.num_tokens) +
                      " tokens, cannot share " + std::to_string(tokens));
  int32_t whole_pages = tokens / page_size_;
  SequencePages shared;
  shared.pages.assign(it->second.pages.begin(),
                      it->second.pages.begin() + whole_pages);
  shared.num_tokens = whole_pages * page_size_;
  for (int32_t page : shared.pages)
    ++ref_counts_[page];
  sequences_.emplace(child, std::move(shared));
  return whole_pages * page_size_;
}

bool KvPageAllocator::contains(SequenceId sequence) const {
  return sequences_.count(sequence) != 0;
}

int32_t KvPageAllocator::numTokens(SequenceId sequence) const {
  auto it = sequences_.find(sequence);
  return it == sequences_.end() ? 0 : it->second.num_tokens;
}

const std::vector<int32_t> &KvPageAllocator::blockTable(SequenceId sequence) const {
  static const std::vector<int32_t> kEmpty;
  auto it = sequences_.find(sequence);
  return it == sequences_.end() ? kEmpty : it->second.pages;
}

int32_t KvPageAllocator::slotOf(SequenceId sequence, int32_t position) const {
  const std::vector<int32_t> &pages = blockTable(sequence);
  return pages[position / page_size_] * page_size_ + position % page_size_;
}

StatusOr<int32_t> kvCachePages(const KvCacheSizing &sizing) {
  if (sizing.requested_pages > 0)
    return sizing.requested_pages;
  const int64_t page_size = sizing.page_size > 0 ? sizing.page_size : 1;
  const int64_t useful_pages = sizing.max_num_seqs * ((sizing.max_seq_len + page_size - 1) / page_size);
  if (sizing.bytes_per_page == 0)
    return static_cast<int32_t>(std::min<int64_t>(useful_pages, int64_t{1} << 20));
  const uint64_t fit = sizing.budget_bytes / sizing.bytes_per_page;
  if (fit == 0)
    return resourceExhausted("the KV cache budget of " + std::to_string(sizing.budget_bytes) +
                             " bytes does not hold one page (" + std::to_string(sizing.bytes_per_page) +
                             " bytes over all layers)");
  return static_cast<int32_t>(
      std::min<uint64_t>({fit, static_cast<uint64_t>(useful_pages), uint64_t{1} << 30}));
}

} // namespace txc::engine
