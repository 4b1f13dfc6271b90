//===- ThreadPool.cpp - parallelFor over rows and heads -------------------===//
#include "runtime/backends/cpu/ThreadPool.h"

#include <algorithm>

namespace txc::cpu {

ThreadPool::ThreadPool(int num_threads) {
  if (num_threads <= 0)
    num_threads = std::max(1u, std::thread::hardware_concurrency());
  for (int i = 1; i < num_threads; ++i)
    workers_.emplace_back([this] { workerLoop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  work_ready_.notify_all();
  for (std::thread &worker : workers_)
    worker.join();
}

void ThreadPool::runChunks() {
  for (;;) {
    int64_t begin = next_begin_.fetch_add(chunk_);
    if (begin >= count_)
      return;
    (*body_)(begin, std::min(count_, begin + chunk_));
  }
}

void ThreadPool::workerLoop() {
  uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      work_ready_.wait(lock, [&] { return stopping_ || generation_ != seen; });
      if (stopping_)
        return;
      seen = generation_;
    }
    runChunks();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (--busy_workers_ == 0)
        work_done_.notify_one();
    }
  }
}

void ThreadPool::parallelFor(
    int64_t count, int64_t min_chunk,
    const std::function<void(int64_t, int64_t)> &body) {
  if (count <= 0)
    return;
  min_chunk = std::max<int64_t>(1, min_chunk);
  int64_t threads = numThreads();
  if (threads == 1 || count <= min_chunk) {
    body(0, count);
    return;
  }
  // About four chunks per thread balances uneven rows (attention over
  // sequences of different lengths) without much scheduling overhead.
  int64_t chunk = std::max(min_chunk, (count + threads * 4 - 1) / (threads * 4));
  {
    std::lock_guard<std::mutex> lock(mutex_);
    body_ = &body;
    count_ = count;
    chunk_ = chunk;
    next_begin_.store(0);
    busy_workers_ = static_cast<int>(workers_.size());
    ++generation_;
  }
  work_ready_.notify_all();
  runChunks();
  std::unique_lock<std::mutex> lock(mutex_);
  work_done_.wait(lock, [&] { return busy_workers_ == 0; });
  body_ = nullptr;
}

} // namespace txc::cpu
