//===- Passes.td - txc passes ------------------------------*- tablegen -*-===//
//
// Every txc pass, with its documentation; docs/passes/ is generated from
// this file. Flags carry the prefix of the dialect they work on.
//
//===----------------------------------------------------------------------===//

#ifndef TXC_PASSES_PASSES_TD
#define TXC_PASSES_PASSES_TD

include "mlir/Pass/PassBase.td"

def TxFuseSwigluPass : Pass<"tx-fuse-swiglu", "mlir::func::FuncOp"> {
  let summary = "Fuse silu(gate) * up into tx.swiglu";
  let description = [{
    Rewrites `tx.mul(tx.silu(%gate), %up)` (in either operand order) into
    `tx.swiglu %gate, %up`, which lowers to one kernel instead of two and
    never materialises silu(gate). The rewrite does not fire when the silu
    result has other uses, since those would still need it.

    ```mlir
    %s = tx.silu %g : tensor<?x172xf32>
    %m = tx.mul %s, %u : tensor<?x172xf32>
    // becomes
    %m = tx.swiglu %g, %u : tensor<?x172xf32>
    ```
  }];
  let dependentDialects = ["::txc::tx::TxDialect"];
}

#endif // TXC_PASSES_PASSES_TD
