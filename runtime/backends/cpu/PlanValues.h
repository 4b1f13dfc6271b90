//===- PlanValues.h - shapes of plan operands, for every backend -*- C++ -*-===//
//
// What every backend checks the same way. How a launch operand's matrix
// shape follows from the plan: arena slots
// whose token dimension is -1 take the row count the launch that wrote them
// produced this step; weights are 1-D or 2-D manifest entries. The CPU and
// CUDA executors bind operands to their own memory but share these rules.
//
//===----------------------------------------------------------------------===//

#ifndef TXC_RUNTIME_BACKENDS_CPU_PLANVALUES_H
#define TXC_RUNTIME_BACKENDS_CPU_PLANVALUES_H

#include "runtime/backends/cpu/Kernels.h"
#include "txc/artifact/Artifact.h"
#include "txc/engine/Batch.h"
#include "txc/engine/Engine.h"

#include <string>
#include <unordered_map>

namespace txc::cpu {

struct MatrixShape {
  DType dtype = DType::kInvalid;
  int64_t rows = 0, cols = 0;
};

/// Arena offset -> rows written there during the current step.
using RowsAtOffset = std::unordered_map<uint64_t, int64_t>;

/// The shape of arena operand `index`, checked against its slot and an
/// arena of `arenaBytes`.
inline StatusOr<MatrixShape> arenaOperandShape(const artifact::pb::ArenaSlot &slot,
                                               const RowsAtOffset &rowsAtOffset, int index,
                                               uint64_t arenaBytes) {
  std::string operand = "operand " + std::to_string(index);
  if (slot.shape_size() == 0 || slot.shape_size() > 2)
    return invalidArgument(operand + ": arena values must be 1-D or 2-D");
  MatrixShape shape;
  shape.cols = slot.shape(slot.shape_size() - 1);
  shape.rows = slot.shape_size() == 2 ? slot.shape(0) : 1;
  if (slot.shape_size() == 1 && shape.cols == -1) {
    shape.rows = -1;
    shape.cols = 1;
  }
  if (shape.rows == -1) {
    auto it = rowsAtOffset.find(slot.offset());
    if (it == rowsAtOffset.end())
      return failedPrecondition(operand + " reads arena offset " +
                                std::to_string(slot.offset()) +
                                " before any launch of this step wrote it");
    shape.rows = it->second;
  }
  shape.dtype = artifact::fromProtoDType(slot.dtype());
  uint64_t bytes = static_cast<uint64_t>(shape.rows * shape.cols) * dtypeSize(shape.dtype);
  if (bytes > slot.bytes() || slot.offset() + bytes > arenaBytes)
    return outOfRange(operand + " of " + shapeString(shape.rows, shape.cols) +
                      " overruns its arena slot");
  return shape;
}

/// The shape of the manifest weight operand `index` names.
inline StatusOr<MatrixShape> weightOperandShape(const artifact::LoadedArtifact &artifact,
                                                uint32_t weightIndex, int index) {
  if (weightIndex >= artifact.weights().size())
    return outOfRange("operand " + std::to_string(index) + " names weight " +
                      std::to_string(weightIndex) + " beyond the manifest");
  const artifact::BoundWeight &weight = artifact.weights()[weightIndex];
  if (weight.shape.empty() || weight.shape.size() > 2)
    return invalidArgument("weight '" + weight.entry->name() + "' must be 1-D or 2-D");
  return MatrixShape{weight.dtype, weight.shape.size() == 2 ? weight.shape[0] : 1,
                     weight.shape.back()};
}

/// The engine's limits from the artifact's compile options (where set), the
/// backend's KV geometry and the model's EOS ids.
inline engine::EngineConfig engineConfigFor(const artifact::LoadedArtifact &artifact,
                                            int32_t page_size, int32_t num_pages) {
  const artifact::pb::Artifact &message = artifact.message();
  const artifact::pb::CompileOptions &compile = message.options();
  engine::EngineConfig config;
  if (compile.max_batch_tokens() > 0)
    config.scheduler.max_batch_tokens = static_cast<int32_t>(compile.max_batch_tokens());
  if (compile.max_num_seqs() > 0)
    config.scheduler.max_num_seqs = static_cast<int32_t>(compile.max_num_seqs());
  if (compile.max_seq_len() > 0)
    config.scheduler.max_seq_len = static_cast<int32_t>(compile.max_seq_len());
  config.scheduler.page_size = page_size;
  config.scheduler.num_pages = num_pages;
  for (int64_t id : message.config().eos_token_ids())
    config.eos_token_ids.push_back(static_cast<int32_t>(id));
  return config;
}

/// Checks a step's batch against the model and the KV cache before any
/// launch reads it: shapes, token ids, slots and pages in range.
inline Status validateBatch(const engine::Batch &b, const std::string &artifactPath,
                            int64_t vocab_size, int64_t num_pages, int64_t page_size) {
  const std::string prefix = artifactPath + ": batch: ";
  int32_t tokens = b.numTokens(), seqs = b.numSequences();
  if (tokens == 0 || seqs == 0)
    return invalidArgument(prefix + "empty");
  if (static_cast<int32_t>(b.positions.size()) != tokens ||
      static_cast<int32_t>(b.slot_mapping.size()) != tokens)
    return invalidArgument(prefix + "positions and slot_mapping must have one "
                           "entry per token (" + std::to_string(tokens) + ")");
  if (static_cast<int32_t>(b.query_start_offsets.size()) != seqs + 1 ||
      b.query_start_offsets.front() != 0 || b.query_start_offsets.back() != tokens)
    return invalidArgument(prefix + "query_start_offsets must hold num_seqs + 1 "
                           "offsets from 0 to num_tokens");
  for (int32_t s = 0; s < seqs; ++s) {
    int32_t new_tokens = b.query_start_offsets[s + 1] - b.query_start_offsets[s];
    if (new_tokens <= 0 || b.context_lens[s] < new_tokens)
      return invalidArgument(prefix + "sequence " + std::to_string(s) + " has " +
                             std::to_string(new_tokens) + " new tokens and context " +
                             std::to_string(b.context_lens[s]));
  }
  if (b.max_pages_per_seq <= 0 ||
      b.block_tables.size() != static_cast<size_t>(seqs) * b.max_pages_per_seq)
    return invalidArgument(prefix + "block_tables must be num_seqs x "
                           "max_pages_per_seq");
  for (int32_t t = 0; t < tokens; ++t) {
    if (b.token_ids[t] < 0 || b.token_ids[t] >= vocab_size)
      return outOfRange(prefix + "token " + std::to_string(t) + " has id " +
                        std::to_string(b.token_ids[t]) + " outside the vocabulary of " +
                        std::to_string(vocab_size));
    if (b.slot_mapping[t] >= static_cast<int64_t>(num_pages) * page_size)
      return outOfRange(prefix + "token " + std::to_string(t) + " maps to KV slot " +
                        std::to_string(b.slot_mapping[t]) + " beyond the " +
                        std::to_string(static_cast<int64_t>(num_pages) * page_size) +
                        " slots of the cache");
  }
  for (int32_t s = 0; s < seqs; ++s) {
    int64_t pages = (b.context_lens[s] + page_size - 1) / page_size;
    if (pages > b.max_pages_per_seq)
      return outOfRange(prefix + "sequence " + std::to_string(s) + " needs " +
                        std::to_string(pages) + " pages, its block table holds " +
                        std::to_string(b.max_pages_per_seq));
    for (int64_t i = 0; i < pages; ++i) {
      int32_t page = b.block_tables[static_cast<size_t>(s) * b.max_pages_per_seq + i];
      if (page < 0 || page >= num_pages)
        return outOfRange(prefix + "sequence " + std::to_string(s) +
                          " uses page " + std::to_string(page) + " outside the " +
                          std::to_string(num_pages) + " pages of the cache");
    }
  }
  return Status::ok();
}

} // namespace txc::cpu

#endif // TXC_RUNTIME_BACKENDS_CPU_PLANVALUES_H
