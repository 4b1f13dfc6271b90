//===- TxkDialect.td - the kernel-level txk dialect --------*- tablegen -*-===//
//
// In `txk` every op is exactly one kernel launch or one library call, and
// carries its tactic (kernel family, tiles, split-KV factor, GEMM epilogue)
// as attributes. txk-plan-memory gives every result an offset in one
// activation arena; the artifact's plan is the txk ops in order.
//
//===----------------------------------------------------------------------===//

#ifndef TXC_DIALECTS_TXK_TXKDIALECT_TD
#define TXC_DIALECTS_TXK_TXKDIALECT_TD

include "mlir/IR/OpBase.td"

def Txk_Dialect : Dialect {
  let name = "txk";
  let cppNamespace = "::txc::txk";
  let summary = "Kernel-level IR: one op per launch, tactics as attributes";
  let description = [{
    `txk` is what the runtime executes. Operands and results are tensors
    like in `tx` (the token axis dynamic, bounded by the function's
    `txk.max_batch_tokens`); after `txk-plan-memory` each result carries its
    byte offset in the activation arena (`arena_offsets`). Weights stay
    `tx.weight` references, and the KV cache and batch stay `tx` types.
  }];
  let dependentDialects = ["::txc::tx::TxDialect"];
  let useDefaultAttributePrinterParser = 1;
}

class Txk_Op<string mnemonic, list<Trait> traits = []>
    : Op<Txk_Dialect, mnemonic, traits>;

#endif // TXC_DIALECTS_TXK_TXKDIALECT_TD
