//===- PlanFusion.cpp - What the CUDA executor may fuse or skip in a plan -===//
#include "runtime/backends/cuda/PlanFusion.h"

namespace txc::cuda {

namespace pb = artifact::pb;

namespace {

bool slotsOverlap(const pb::ValueRef &a, const pb::ValueRef &b) {
  return a.ref_case() == pb::ValueRef::kArena && b.ref_case() == pb::ValueRef::kArena &&
         a.arena().offset() < b.arena().offset() + b.arena().bytes() &&
         b.arena().offset() < a.arena().offset() + a.arena().bytes();
}

/// Whether launch i's result 0 is launch i + 1's operand 0 and no other
/// operand of it or of any later launch reads it before something
/// overwrites the whole slot: then launch i + 1 may take over its work.
bool onlyNextReads(const pb::Plan &plan, int i) {
  const pb::Launch &first = plan.launches(i), &next = plan.launches(i + 1);
  if (first.results_size() < 1 || next.operands_size() == 0)
    return false;
  const pb::ValueRef &slot = first.results(0);
  if (slot.ref_case() != pb::ValueRef::kArena ||
      next.operands(0).ref_case() != pb::ValueRef::kArena ||
      next.operands(0).arena().offset() != slot.arena().offset())
    return false;
  for (int k = 1; k < next.operands_size(); ++k)
    if (slotsOverlap(next.operands(k), slot))
      return false;
  for (int j = i + 2; j < plan.launches_size(); ++j) {
    const pb::Launch &later = plan.launches(j);
    for (const pb::ValueRef &operand : later.operands())
      if (slotsOverlap(operand, slot))
        return false;
    bool overwritten = false;
    for (const pb::ValueRef &result : later.results())
      if (slotsOverlap(result, slot)) {
        bool covers = result.arena().offset() <= slot.arena().offset() &&
                      result.arena().offset() + result.arena().bytes() >=
                          slot.arena().offset() + slot.arena().bytes();
        if (!covers)
          return false;
        overwritten = true;
      }
    if (overwritten)
      break;
  }
  return true;
}

} // namespace

std::set<int> fusableNorms(const pb::Plan &plan) {
  std::set<int> fusable;
  for (int i = 0; i + 1 < plan.launches_size(); ++i) {
    const pb::Launch &norm = plan.launches(i), &next = plan.launches(i + 1);
    if (norm.op() == "txk.rms_norm" && norm.results_size() == 1 &&
        (next.op() == "txk.gemm" || next.op() == "txk.gemm_rope_append") && onlyNextReads(plan, i))
      fusable.insert(i);
  }
  return fusable;
}

std::set<int> fusableRopes(const pb::Plan &plan) {
  std::set<int> fusable;
  for (int i = 0; i + 1 < plan.launches_size(); ++i) {
    const pb::Launch &rope = plan.launches(i), &next = plan.launches(i + 1);
    if ((rope.op() == "txk.rope_append" || rope.op() == "txk.gemm_rope_append") &&
        next.op() == "txk.attention" && onlyNextReads(plan, i))
      fusable.insert(i);
  }
  return fusable;
}

std::set<int> identityGathers(const pb::Plan &plan) {
  std::set<int> found;
  for (int i = 0; i < plan.launches_size(); ++i) {
    const pb::Launch &gather = plan.launches(i);
    if (gather.op() != "txk.gather_last" || gather.operands_size() < 1 || gather.results_size() != 1)
      continue;
    const pb::ValueRef &in = gather.operands(0), &out = gather.results(0);
    if (in.ref_case() != pb::ValueRef::kArena || out.ref_case() != pb::ValueRef::kArena ||
        in.arena().dtype() != out.arena().dtype() || in.arena().shape_size() != 2 ||
        out.arena().shape_size() != 2 || in.arena().shape(1) != out.arena().shape(1))
      continue;
    bool input_written = false, safe = true;
    for (int j = i + 1; safe && j < plan.launches_size(); ++j) {
      const pb::Launch &later = plan.launches(j);
      for (const pb::ValueRef &result : later.results())
        input_written = input_written || slotsOverlap(result, in);
      for (const pb::ValueRef &operand : later.operands())
        if (slotsOverlap(operand, out) &&
            (input_written || operand.arena().offset() != out.arena().offset() ||
             operand.arena().bytes() > out.arena().bytes()))
          safe = false;
      bool overwritten = false;
      for (const pb::ValueRef &result : later.results())
        if (slotsOverlap(result, out)) {
          safe = safe && result.arena().offset() <= out.arena().offset() &&
                 result.arena().offset() + result.arena().bytes() >=
                     out.arena().offset() + out.arena().bytes();
          overwritten = true;
        }
      if (overwritten)
        break;
    }
    if (safe)
      found.insert(i);
  }
  return found;
}

} // namespace txc::cuda
