//===- Binding.cpp - Plan operands to device matrices; step inputs ---------===//
// First, on its own: it settles the TXC_RETURN_IF_ERROR clash (see there).
#include "runtime/backends/cuda/ExecutorState.h"

#include <algorithm>
#include <cstring>

namespace txc::cuda {

using cpu::arenaOperandShape;
using cpu::MatrixShape;
using cpu::weightOperandShape;

// --- binding ---------------------------------------------------------------

StatusOr<Bound> CudaExecutor::State::bindOperand(const pb::Launch &launch, int i, bool required) {
  Bound bound;
  if (i >= launch.operands_size() || launch.operands(i).ref_case() == pb::ValueRef::REF_NOT_SET) {
    if (required)
      return invalidArgument("operand " + std::to_string(i) + " is missing");
    return bound;
  }
  const pb::ValueRef &ref = launch.operands(i);
  switch (ref.ref_case()) {
  case pb::ValueRef::kArena: {
    const pb::ArenaSlot &slot = ref.arena();
    if (auto alias = gather_aliases.find(slot.offset()); alias != gather_aliases.end()) {
      bound.kind = Bound::Kind::kMatrix;
      bound.matrix = alias->second;
      return bound;
    }
    TXC_ASSIGN_OR_RETURN(MatrixShape shape,
                         arenaOperandShape(slot, rows_at_offset, i, arena_bytes));
    bound.kind = Bound::Kind::kMatrix;
    bound.matrix = {arena + slot.offset(), shape.dtype, shape.rows, shape.cols};
    return bound;
  }
  case pb::ValueRef::kWeightIndex: {
    TXC_ASSIGN_OR_RETURN(MatrixShape shape, weightOperandShape(*artifact, ref.weight_index(), i));
    bound.kind = Bound::Kind::kMatrix;
    bound.matrix = {weights[ref.weight_index()], shape.dtype, shape.rows, shape.cols};
    return bound;
  }
  case pb::ValueRef::kStepInput:
    switch (ref.step_input().kind()) {
    case pb::STEP_INPUT_TOKEN_IDS:
      bound.kind = Bound::Kind::kTokenIds;
      return bound;
    case pb::STEP_INPUT_POSITIONS:
      bound.kind = Bound::Kind::kPositions;
      return bound;
    case pb::STEP_INPUT_BATCH:
      bound.kind = Bound::Kind::kBatch;
      return bound;
    case pb::STEP_INPUT_KV_CACHE:
      if (!caches.count(ref.step_input().layer()))
        return invalidArgument("operand " + std::to_string(i) + " is the KV cache of layer " +
                               std::to_string(ref.step_input().layer()) +
                               ", which no launch's layer attribute names");
      bound.kind = Bound::Kind::kCache;
      bound.layer = ref.step_input().layer();
      return bound;
    default:
      return unimplemented("operand " + std::to_string(i) + " is step input " +
                           pb::StepInputKind_Name(ref.step_input().kind()) +
                           ", which no txk op takes on the GPU");
    }
  default:
    return invalidArgument("operand " + std::to_string(i) + " is empty");
  }
}

StatusOr<DMatrix> CudaExecutor::State::floatOperand(const pb::Launch &launch, int i,
                                                    bool required) {
  TXC_ASSIGN_OR_RETURN(Bound bound, bindOperand(launch, i, required));
  if (bound.kind == Bound::Kind::kAbsent)
    return DMatrix{};
  if (bound.kind != Bound::Kind::kMatrix)
    return invalidArgument("operand " + std::to_string(i) +
                           " must be a tensor (arena value or weight)");
  TXC_RETURN_IF_ERROR(etype(bound.matrix.dtype, "operand " + std::to_string(i)).status());
  return bound.matrix;
}

StatusOr<DMatrix> CudaExecutor::State::bindResult(const pb::Launch &launch, int i, int64_t rows) {
  if (i >= launch.results_size())
    return invalidArgument("result " + std::to_string(i) + " is missing");
  const pb::ValueRef &ref = launch.results(i);
  if (ref.ref_case() == pb::ValueRef::kStepInput &&
      ref.step_input().kind() == pb::STEP_INPUT_LOGITS) {
    if (rows != batch->numSequences())
      return invalidArgument("the logits have " + std::to_string(rows) +
                             " rows, one per sequence (" + std::to_string(batch->numSequences()) +
                             ") expected");
    wrote_logits = true;
    return DMatrix{device_logits, DType::kF32, rows, vocab_size};
  }
  if (ref.ref_case() != pb::ValueRef::kArena)
    return invalidArgument("result " + std::to_string(i) + " must be an arena slot or the logits");
  const pb::ArenaSlot &slot = ref.arena();
  if (slot.shape_size() != 2)
    return invalidArgument("result " + std::to_string(i) + " must be 2-D");
  if (slot.shape(0) != -1 && slot.shape(0) != rows)
    return invalidArgument("result " + std::to_string(i) + " has " + std::to_string(slot.shape(0)) +
                           " rows, the op makes " + std::to_string(rows));
  int64_t cols = slot.shape(1);
  DType dtype = artifact::fromProtoDType(slot.dtype());
  TXC_RETURN_IF_ERROR(etype(dtype, "result " + std::to_string(i)).status());
  uint64_t bytes = static_cast<uint64_t>(rows * cols) * dtypeSize(dtype);
  if (bytes > slot.bytes() || slot.offset() + bytes > arena_bytes)
    return outOfRange("result " + std::to_string(i) + " of " + shapeString(rows, cols) + " (" +
                      std::to_string(bytes) + " bytes) does not fit its arena slot of " +
                      std::to_string(slot.bytes()) +
                      " bytes: the batch exceeds what the plan was compiled for");
  rows_at_offset[slot.offset()] = rows;
  for (auto alias = gather_aliases.begin(); alias != gather_aliases.end();)
    if (overlaps(arena + alias->first, alias->second.bytes(), arena + slot.offset(), slot.bytes()))
      alias = gather_aliases.erase(alias);
    else
      ++alias;
  return DMatrix{arena + slot.offset(), dtype, rows, cols};
}

StatusOr<DMatrix> CudaExecutor::State::copyToScratch(const DMatrix &input) {
  uint64_t bytes = (input.bytes() + 255) / 256 * 256;
  if (copy_scratch_used + bytes > copy_scratch_bytes)
    return resourceExhausted("copy scratch of " + std::to_string(copy_scratch_bytes) +
                             " bytes is too small");
  DMatrix copy = input;
  copy.data = copy_scratch + copy_scratch_used;
  copy_scratch_used += bytes;
  CU(cudaMemcpyAsync(copy.data, input.data, input.bytes(), cudaMemcpyDeviceToDevice, stream),
     "copying an aliased input");
  return copy;
}

// Inputs sharing bytes with a result are copied first, unless they are the
// exact same rows (row-wise kernels read a row completely before writing it).
Status CudaExecutor::State::unalias(std::vector<DMatrix *> inputs, std::vector<DMatrix> results) {
  for (DMatrix *input : inputs) {
    if (!input->present())
      continue;
    bool aliased = false;
    for (const DMatrix &result : results)
      if (overlaps(input->data, input->bytes(), result.data, result.bytes()) &&
          !(input->data == result.data && input->cols == result.cols &&
            input->dtype == result.dtype))
        aliased = true;
    if (aliased) {
      TXC_ASSIGN_OR_RETURN(*input, copyToScratch(*input));
    }
  }
  return Status::ok();
}

Status CudaExecutor::State::validateBatch(const engine::Batch &b) const {
  return cpu::validateBatch(b, path, vocab_size, num_pages, page_size);
}

// One pinned staging buffer in two halves (input_half: the copy of a step
// queued ahead may still be waiting for the GPU while the next step's
// inputs are written), one host-to-device copy per step; the first
// `device_token_ids` token ids are left on the device as they are (a step
// queued ahead whose ids the argmax before it wrote in place); the padding
// rows' after them are copied like the rest, so a queued step's inputs are
// those of the same step run alone.
Status CudaExecutor::State::uploadInputs(const engine::Batch &b, int32_t device_token_ids) {
  size_t t = b.token_ids.size(), s = b.context_lens.size();
  size_t need = 3 * t + (s + 1) + s + b.block_tables.size();
  if (need > inputs_capacity && device_token_ids > 0)
    return internalError(path + ": a step queued ahead outgrew the step inputs its token ids are in");
  if (need > inputs_capacity) {
    // Growing is rare; wait for whatever is queued (a step ahead reads the
    // old buffers), then free them.
    CU(cudaStreamSynchronize(stream), path + ": growing the step inputs");
    ahead.pending = false;
    if (host_inputs)
      cudaFreeHost(host_inputs);
    host_inputs = nullptr;
    for (auto &[key, graph] : decode_graphs) // they captured the old address
      cudaGraphExecDestroy(graph);
    decode_graphs.clear();
    size_t capacity = std::max<size_t>(need * 2, 4096);
    CU(cudaMallocHost(&host_inputs, 2 * capacity * 4), path + ": pinned step inputs");
    TXC_ASSIGN_OR_RETURN(void *d, allocate(capacity * 4, "step inputs"));
    device_inputs = static_cast<int32_t *>(d);
    inputs_capacity = capacity;
  }
  input_half ^= 1;
  int32_t *h = host_inputs + input_half * inputs_capacity;
  size_t offset = 0;
  auto put = [&](const std::vector<int32_t> &v) {
    const int32_t *device = device_inputs + offset;
    std::memcpy(h + offset, v.data(), v.size() * 4);
    offset += v.size();
    return device;
  };
  d_tokens = put(b.token_ids);
  d_positions = put(b.positions);
  d_slots = put(b.slot_mapping);
  d_qso = put(b.query_start_offsets);
  d_context = put(b.context_lens);
  d_tables = put(b.block_tables);
  max_new_tokens = 0;
  max_context = 0;
  for (size_t i = 0; i < s; ++i) {
    max_new_tokens =
        std::max(max_new_tokens, b.query_start_offsets[i + 1] - b.query_start_offsets[i]);
    max_context = std::max(max_context, b.context_lens[i]);
  }
  const size_t skip = static_cast<size_t>(device_token_ids);
  return cudaStatus(cudaMemcpyAsync(device_inputs + skip, h + skip, (offset - skip) * 4,
                                    cudaMemcpyHostToDevice, stream),
                    path + ": copying the step inputs");
}

} // namespace txc::cuda
