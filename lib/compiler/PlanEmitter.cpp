//===- PlanEmitter.cpp - txk step function -> artifact plan ------------------===//

#include "lib/compiler/PlanEmitter.h"

#include "dialects/tx/TxOps.h"
#include "dialects/txk/TxkOps.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
namespace pb = txc::artifact::pb;

namespace txc {

namespace {

std::string locationOf(Operation *op) {
  std::string text;
  llvm::raw_string_ostream os(text);
  op->getLoc().print(os);
  return text;
}

pb::DType protoDType(Type element) {
  if (element.isBF16())
    return pb::DTYPE_BF16;
  if (element.isF16())
    return pb::DTYPE_F16;
  if (element.isF32())
    return pb::DTYPE_F32;
  if (element.isInteger(32))
    return pb::DTYPE_I32;
  return pb::DTYPE_INVALID;
}

void setRope(google::protobuf::Map<std::string, pb::AttributeValue> &attrs, tx::RopeAttr rope) {
  auto number = [&](const char *key, double v) { attrs[key].set_float_value(v); };
  number("rope.theta", rope.getTheta().convertToDouble());
  attrs["rope.scaling"].set_string_value(tx::stringifyRopeScaling(rope.getScaling()).str());
  number("rope.factor", rope.getFactor().convertToDouble());
  number("rope.low_freq_factor", rope.getLowFreqFactor().convertToDouble());
  number("rope.high_freq_factor", rope.getHighFreqFactor().convertToDouble());
  attrs["rope.original_max_position"].set_int_value(rope.getOriginalMaxPosition());
  number("rope.beta_fast", rope.getBetaFast().convertToDouble());
  number("rope.beta_slow", rope.getBetaSlow().convertToDouble());
  number("rope.attention_factor", rope.getAttentionFactor().convertToDouble());
  attrs["rope.rotary_dim"].set_int_value(rope.getRotaryDim());
}

Status setAttributes(Operation *op, pb::Launch &launch) {
  auto &attrs = *launch.mutable_attributes();
  for (NamedAttribute named : op->getAttrs()) {
    StringRef name = named.getName().strref();
    Attribute attr = named.getValue();
    if (name == "arena_offsets" || name == "arena_bytes" || name == "operandSegmentSizes")
      continue;
    pb::AttributeValue &value = attrs[name.str()];
    if (auto i = dyn_cast<IntegerAttr>(attr))
      value.set_int_value(i.getInt());
    else if (auto f = dyn_cast<FloatAttr>(attr))
      value.set_float_value(f.getValueAsDouble());
    else if (auto s = dyn_cast<StringAttr>(attr))
      value.set_string_value(s.str());
    else if (isa<UnitAttr>(attr))
      value.set_bool_value(true);
    else if (auto list = dyn_cast<DenseI64ArrayAttr>(attr))
      for (int64_t x : list.asArrayRef())
        value.mutable_int_list()->add_values(x);
    else if (auto epilogue = dyn_cast<txk::GemmEpilogueAttr>(attr))
      value.set_string_value(txk::stringifyGemmEpilogue(epilogue.getValue()).str());
    else if (auto family = dyn_cast<txk::AttentionFamilyAttr>(attr))
      value.set_string_value(txk::stringifyAttentionFamily(family.getValue()).str());
    else if (auto rope = dyn_cast<tx::RopeAttr>(attr)) {
      attrs.erase(name.str());
      setRope(attrs, rope);
    } else
      return internalError(locationOf(op) + ": no artifact encoding for attribute '" +
                           name.str() + "' of " + op->getName().getStringRef().str());
  }
  return Status::ok();
}

class LaunchBuilder {
public:
  LaunchBuilder(func::FuncOp step, int64_t rank, int64_t tp, WeightManifest &weights)
      : rank(rank), tp(tp), weights(weights) {
    int i32Args = 0;
    for (BlockArgument arg : step.getArguments())
      if (auto t = dyn_cast<RankedTensorType>(arg.getType()); t && t.getElementType().isInteger(32))
        tokenArgKind[arg] = i32Args++ == 0 ? pb::STEP_INPUT_TOKEN_IDS : pb::STEP_INPUT_POSITIONS;
    for (Value v : step.getBody().front().getTerminator()->getOperands())
      returned.insert(v);
  }

  Status operand(Operation *op, Value v, pb::ValueRef &ref) {
    if (auto arg = dyn_cast<BlockArgument>(v)) {
      pb::StepInput *input = ref.mutable_step_input();
      if (isa<tx::KvCacheType>(arg.getType())) {
        input->set_kind(pb::STEP_INPUT_KV_CACHE);
        auto layer = op->getAttrOfType<IntegerAttr>("layer");
        if (!layer)
          return internalError(locationOf(op) + ": KV cache operand without a layer");
        input->set_layer(int32_t(layer.getInt()));
      } else if (isa<tx::BatchType>(arg.getType())) {
        input->set_kind(pb::STEP_INPUT_BATCH);
      } else if (auto it = tokenArgKind.find(arg); it != tokenArgKind.end()) {
        input->set_kind(it->second);
      } else {
        return internalError(locationOf(op) + ": step argument #" +
                             std::to_string(arg.getArgNumber()) + " is not a step input");
      }
      return Status::ok();
    }
    Operation *def = v.getDefiningOp();
    if (isa<tx::WeightOp, tx::ConcatOp, tx::ScaleColumnsOp>(def)) {
      TXC_ASSIGN_OR_RETURN(uint32_t index, weights.indexOf(v, rank, tp));
      ref.set_weight_index(index);
      return Status::ok();
    }
    return result(def, v, ref);
  }

  Status result(Operation *def, Value v, pb::ValueRef &ref) {
    if (returned.count(v)) {
      ref.mutable_step_input()->set_kind(pb::STEP_INPUT_LOGITS);
      return Status::ok();
    }
    auto offsets = def->getAttrOfType<DenseI64ArrayAttr>("arena_offsets");
    auto bytes = def->getAttrOfType<DenseI64ArrayAttr>("arena_bytes");
    unsigned index = cast<OpResult>(v).getResultNumber();
    if (!offsets || !bytes || offsets.size() <= index)
      return failedPrecondition(locationOf(def) + ": " + def->getName().getStringRef().str() +
                                " has no arena slot; run txk-plan-memory first");
    pb::ArenaSlot *slot = ref.mutable_arena();
    slot->set_offset(uint64_t(offsets[index]));
    slot->set_bytes(uint64_t(bytes[index]));
    auto type = cast<RankedTensorType>(v.getType());
    for (int64_t d : type.getShape())
      slot->add_shape(ShapedType::isDynamic(d) ? -1 : d);
    slot->set_dtype(protoDType(type.getElementType()));
    return Status::ok();
  }

  Status launch(Operation *op, pb::Launch &launch) {
    launch.set_op(op->getName().getStringRef().str());
    launch.set_location(locationOf(op));
    TXC_RETURN_IF_ERROR(setAttributes(op, launch));
    // Absent optional operands keep their position as an empty ValueRef.
    SmallVector<int32_t> segments;
    std::optional<Attribute> sizes = op->getInherentAttr("operandSegmentSizes");
    if (auto array = sizes ? dyn_cast_or_null<DenseI32ArrayAttr>(*sizes) : nullptr)
      segments.assign(array.asArrayRef().begin(), array.asArrayRef().end());
    else
      segments.assign(op->getNumOperands(), 1);
    unsigned next = 0;
    for (int32_t size : segments) {
      if (size == 0) {
        launch.add_operands();
        continue;
      }
      for (int32_t i = 0; i < size; ++i)
        TXC_RETURN_IF_ERROR(operand(op, op->getOperand(next++), *launch.add_operands()));
    }
    for (Value v : op->getResults())
      TXC_RETURN_IF_ERROR(result(op, v, *launch.add_results()));
    return Status::ok();
  }

private:
  int64_t rank, tp;
  WeightManifest &weights;
  llvm::DenseMap<Value, pb::StepInputKind> tokenArgKind;
  llvm::DenseSet<Value> returned;
};

} // namespace

StatusOr<pb::Plan> emitPlan(func::FuncOp step, int64_t rank, int64_t tp,
                            WeightManifest &weights) {
  auto arena = step->getAttrOfType<IntegerAttr>("txk.arena_size");
  if (!arena)
    return failedPrecondition("@" + step.getName().str() +
                              " has no txk.arena_size; run txk-plan-memory first");
  pb::Plan plan;
  plan.set_arena_bytes(uint64_t(arena.getInt()));
  LaunchBuilder builder(step, rank, tp, weights);
  for (Operation &op : step.getBody().front()) {
    if (isa<tx::WeightOp, tx::ConcatOp, tx::ScaleColumnsOp, func::ReturnOp>(op))
      continue;
    if (!isa<txk::TxkDialect>(op.getDialect()))
      return failedPrecondition(locationOf(&op) + ": '" + op.getName().getStringRef().str() +
                                "' is not a txk launch; lower the module first");
    TXC_RETURN_IF_ERROR(builder.launch(&op, *plan.add_launches()));
  }
  return plan;
}

} // namespace txc
