//===- PlanValues.h - shapes of plan operands, for every backend -*- C++ -*-===//
//
// How a launch operand's matrix shape follows from the plan: arena slots
// whose token dimension is -1 take the row count the launch that wrote them
// produced this step; weights are 1-D or 2-D manifest entries. The CPU and
// CUDA executors bind operands to their own memory but share these rules.
//
//===----------------------------------------------------------------------===//

#ifndef TXC_RUNTIME_BACKENDS_CPU_PLANVALUES_H
#define TXC_RUNTIME_BACKENDS_CPU_PLANVALUES_H

#include "runtime/backends/cpu/Kernels.h"
#include "txc/artifact/Artifact.h"

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

} // namespace txc::cpu

#endif // TXC_RUNTIME_BACKENDS_CPU_PLANVALUES_H
