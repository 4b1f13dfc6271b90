//===- ThreadPool.h - parallelFor over rows and heads -----------*- C++ -*-===//
//
// The reference kernels split their outer loop (tokens, heads, weight rows)
// into contiguous chunks and run them on a small pool of persistent workers;
// the calling thread works too, so a pool of N threads uses N cores. Chunks
// are independent and write disjoint outputs, so results do not depend on
// the thread count (each output element is computed by exactly one thread in
// a fixed order).
//
//===----------------------------------------------------------------------===//
#ifndef TXC_RUNTIME_BACKENDS_CPU_THREADPOOL_H
#define TXC_RUNTIME_BACKENDS_CPU_THREADPOOL_H

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace txc::cpu {

class ThreadPool {
public:
  /// `num_threads` counts the caller; 0 means std::thread::hardware_concurrency.
  explicit ThreadPool(int num_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool &) = delete;
  ThreadPool &operator=(const ThreadPool &) = delete;

  int numThreads() const { return static_cast<int>(workers_.size()) + 1; }

  /// Calls body(begin, end) on disjoint chunks covering [0, count), at least
  /// `min_chunk` items each (small loops are not worth a wake-up), and
  /// returns when all are done. Not reentrant: a body must not call
  /// parallelFor on the same pool.
  void parallelFor(int64_t count, int64_t min_chunk,
                   const std::function<void(int64_t, int64_t)> &body);

private:
  void workerLoop();
  void runChunks();

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable work_ready_;
  std::condition_variable work_done_;
  uint64_t generation_ = 0;
  bool stopping_ = false;
  int busy_workers_ = 0;

  // The loop being run.
  const std::function<void(int64_t, int64_t)> *body_ = nullptr;
  int64_t count_ = 0;
  int64_t chunk_ = 1;
  std::atomic<int64_t> next_begin_{0};
};

} // namespace txc::cpu

#endif // TXC_RUNTIME_BACKENDS_CPU_THREADPOOL_H
