//===- ArtifactValidation.cpp - Structural checks of a parsed artifact ----===//
//
// A message that parses can still point outside the blob or the arena; the
// backends index memory with these numbers, so they are checked once here
// instead of trusted at every launch.
//
//===----------------------------------------------------------------------===//
#include "txc/artifact/Artifact.h"
#include "runtime/safetensors/SafetensorsFile.h"

#include <climits>
#include <set>
#include <tuple>

namespace txc::artifact {
namespace {

Status checkValueRef(const pb::ValueRef &ref, const pb::Artifact &message,
                     const pb::Plan &plan, const std::string &where) {
  switch (ref.ref_case()) {
  case pb::ValueRef::kWeightIndex:
    if (ref.weight_index() >= static_cast<uint32_t>(message.weights_size()))
      return dataLoss(where + " refers to weight " +
                      std::to_string(ref.weight_index()) + ", but the manifest has " +
                      std::to_string(message.weights_size()));
    return Status::ok();
  case pb::ValueRef::kArena: {
    const pb::ArenaSlot &slot = ref.arena();
    if (slot.offset() > plan.arena_bytes() ||
        slot.bytes() > plan.arena_bytes() - slot.offset())
      return dataLoss(where + " uses arena bytes [" +
                      std::to_string(slot.offset()) + ", " +
                      std::to_string(slot.offset() + slot.bytes()) +
                      "), beyond the arena of " +
                      std::to_string(plan.arena_bytes()) + " bytes");
    if (fromProtoDType(slot.dtype()) == DType::kInvalid)
      return dataLoss(where + " has an arena slot without a valid dtype");
    return Status::ok();
  }
  case pb::ValueRef::kStepInput:
    if (ref.step_input().kind() == pb::STEP_INPUT_INVALID)
      return dataLoss(where + " refers to an unspecified step input");
    return Status::ok();
  case pb::ValueRef::REF_NOT_SET:
    return dataLoss(where + " refers to nothing");
  }
  return dataLoss(where + " has an unknown reference kind");
}

} // namespace

Status validateArtifactMessage(const pb::Artifact &message, uint64_t blob_bytes,
                               const std::string &path) {
  // The backends and the scheduler hold these in 32 bits (0 or less means
  // their default): a larger value would be truncated silently, e.g.
  // max_seq_len 4294967297 served as 1. A page's size in elements
  // (2 * page_size * kv_heads * head_dim) is computed from a 32-bit page_size
  // as well, so kv_page_size has the tighter bound txc compile applies.
  const pb::CompileOptions &options = message.options();
  for (const auto &[name, value, limit] :
       {std::tuple<const char *, int64_t, int64_t>{"max_batch_tokens", options.max_batch_tokens(),
                                                   INT32_MAX},
        {"max_num_seqs", options.max_num_seqs(), INT32_MAX},
        {"max_seq_len", options.max_seq_len(), INT32_MAX},
        {"kv_page_size", options.kv_page_size(), kMaxKvPageSize}})
    if (value > limit)
      return invalidArgument(path + ": compile option " + name + " is " + std::to_string(value) +
                             "; the runtime takes at most " + std::to_string(limit));
  bool embedded = message.weight_storage() == pb::WEIGHTS_EMBEDDED;
  std::set<std::string> names;
  for (int i = 0; i < message.weights_size(); ++i) {
    const pb::WeightEntry &entry = message.weights(i);
    std::string where = path + ": weight '" + entry.name() + "'";
    if (!names.insert(entry.name()).second)
      return dataLoss(where + " appears twice in the manifest");
    DType dtype = fromProtoDType(entry.dtype());
    if (dtype == DType::kInvalid)
      return dataLoss(where + " has no valid dtype");
    std::vector<int64_t> shape(entry.shape().begin(), entry.shape().end());
    std::optional<uint64_t> elements = numElements(shape);
    if (!elements || *elements * dtypeSize(dtype) != entry.bytes())
      return dataLoss(where + ": " + std::to_string(entry.bytes()) +
                      " bytes do not fit " + std::string(dtypeName(dtype)) + " " +
                      formatShape(shape));
    if (embedded) {
      if (entry.offset() % kBlobAlignment != 0)
        return dataLoss(where + " starts at blob offset " +
                        std::to_string(entry.offset()) + ", not 64-aligned");
      if (entry.offset() > blob_bytes || entry.bytes() > blob_bytes - entry.offset())
        return dataLoss(where + " lies at blob bytes [" +
                        std::to_string(entry.offset()) + ", " +
                        std::to_string(entry.offset() + entry.bytes()) +
                        "), beyond the blob of " + std::to_string(blob_bytes) +
                        " bytes");
    }
  }

  for (int p = 0; p < message.plans_size(); ++p) {
    const pb::Plan &plan = message.plans(p);
    for (int l = 0; l < plan.launches_size(); ++l) {
      const pb::Launch &launch = plan.launches(l);
      std::string where = path + ": plan " + std::to_string(p) + " launch " +
                          std::to_string(l) + " (" + launch.op() + ")";
      if (launch.op().empty())
        return dataLoss(where + " has no op name");
      for (int i = 0; i < launch.operands_size(); ++i) {
        // An empty operand is an absent optional one (FORMAT.md); a
        // result always refers to something.
        if (launch.operands(i).ref_case() == pb::ValueRef::REF_NOT_SET)
          continue;
        TXC_RETURN_IF_ERROR(checkValueRef(launch.operands(i), message, plan,
                                          where + " operand " + std::to_string(i)));
      }
      for (int i = 0; i < launch.results_size(); ++i)
        TXC_RETURN_IF_ERROR(checkValueRef(launch.results(i), message, plan,
                                          where + " result " + std::to_string(i)));
    }
  }
  return Status::ok();
}

bool planWritesLogits(const pb::Plan &plan) {
  for (const pb::Launch &launch : plan.launches())
    for (const pb::ValueRef &result : launch.results())
      if (result.ref_case() == pb::ValueRef::kStepInput &&
          result.step_input().kind() == pb::STEP_INPUT_LOGITS)
        return true;
  return false;
}

} // namespace txc::artifact
