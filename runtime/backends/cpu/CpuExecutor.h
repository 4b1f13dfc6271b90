//===- CpuExecutor.h - Run an artifact's plan on the CPU --------*- C++ -*-===//
//
// The reference backend: it runs the same plan the GPU runs, launch by
// launch, with the C++ kernels of Kernels.h. It owns, per tensor-parallel
// rank, one activation arena (Plan.arena_bytes) and one paged KV cache (per
// layer, pages of kv_page_size tokens laid out [2][page][kv_heads][head_dim]),
// and binds each step's inputs from the engine's Batch.
//
// An artifact compiled with tp = N holds N plans. All N ranks run in this
// process, in lockstep: launch i runs on rank 0, 1, ... N-1 before launch
// i + 1, so a txk.all_reduce is a plain fp32 sum over the ranks' buffers.
// The ranks together are one StepExecutor; rank 0 writes the logits.
//
//   auto artifact = LoadedArtifact::load("model.txm");
//   auto executor = CpuExecutor::create(**artifact, {});
//   auto engine = Engine::create(**executor, (*executor)->engineConfig());
//
//===----------------------------------------------------------------------===//
#ifndef TXC_RUNTIME_BACKENDS_CPU_CPUEXECUTOR_H
#define TXC_RUNTIME_BACKENDS_CPU_CPUEXECUTOR_H

#include "txc/artifact/Artifact.h"
#include "txc/engine/Batch.h"
#include "txc/engine/Engine.h"

#include <memory>

namespace txc::cpu {

struct CpuExecutorOptions {
  /// Threads for the kernels, the caller included; 0 = all cores.
  int num_threads = 0;
  /// Pages in each layer's cache; 0 = as many as kv_cache_budget_bytes
  /// holds over all layers and ranks, capped at what max_num_seqs sequences
  /// of max_seq_len tokens could use.
  int32_t num_kv_pages = 0;
  uint64_t kv_cache_budget_bytes = uint64_t{1} << 30;
};

class CpuExecutor : public engine::StepExecutor {
public:
  /// Checks the plans (known ops, ranks in lockstep, KV geometry) and
  /// allocates arenas and caches. `artifact` must be loaded with weights and
  /// outlive the executor, whose weight views point into it.
  static StatusOr<std::unique_ptr<CpuExecutor>>
  create(const artifact::LoadedArtifact &artifact,
         const CpuExecutorOptions &options = {});
  ~CpuExecutor() override;

  int32_t vocabSize() const override;
  Status execute(const engine::Batch &batch, float *logits) override;

  int numRanks() const;
  int32_t numKvPages() const;
  int32_t kvPageSize() const;
  int numThreads() const;
  /// Scheduler limits from the artifact's compile options and this cache,
  /// and the model's EOS ids: what Engine::create needs.
  engine::EngineConfig engineConfig() const;

private:
  struct State;
  explicit CpuExecutor(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

} // namespace txc::cpu

#endif // TXC_RUNTIME_BACKENDS_CPU_CPUEXECUTOR_H
