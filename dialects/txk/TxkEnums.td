//===- TxkEnums.td - txk tactic enums ----------------------*- tablegen -*-===//
//
// Kept apart from TxkOps.td so that enum generation sees only txk's enums,
// not the tx ones TxkOps.td includes.
//
//===----------------------------------------------------------------------===//

#ifndef TXC_DIALECTS_TXK_TXKENUMS_TD
#define TXC_DIALECTS_TXK_TXKENUMS_TD

include "dialects/txk/TxkDialect.td"
include "mlir/IR/EnumAttr.td"

def Txk_GemmEpilogue : I32EnumAttr<"GemmEpilogue", "what a GEMM does to its accumulator", [
    I32EnumAttrCase<"None", 0, "none">,
    I32EnumAttrCase<"ResidualAdd", 1, "residual_add">,
    I32EnumAttrCase<"Swiglu", 2, "swiglu">
  ]> {
  let cppNamespace = "::txc::txk";
  let genSpecializedAttr = 0;
}
def Txk_GemmEpilogueAttr : EnumAttr<Txk_Dialect, Txk_GemmEpilogue, "epilogue">;

def Txk_AttentionFamily : I32EnumAttr<"AttentionFamily", "which attention kernel runs", [
    I32EnumAttrCase<"Reference", 0, "reference">,
    I32EnumAttrCase<"Sm90Prefill", 1, "sm90_prefill">,
    I32EnumAttrCase<"PagedDecode", 2, "paged_decode">
  ]> {
  let cppNamespace = "::txc::txk";
  let genSpecializedAttr = 0;
}
def Txk_AttentionFamilyAttr : EnumAttr<Txk_Dialect, Txk_AttentionFamily, "family">;

#endif // TXC_DIALECTS_TXK_TXKENUMS_TD
