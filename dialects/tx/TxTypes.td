//===- TxTypes.td - tx types -------------------------------*- tablegen -*-===//

#ifndef TXC_DIALECTS_TX_TXTYPES_TD
#define TXC_DIALECTS_TX_TXTYPES_TD

include "dialects/tx/TxDialect.td"
include "mlir/IR/AttrTypeBase.td"

class Tx_Type<string name, string typeMnemonic> : TypeDef<Tx_Dialect, name> {
  let mnemonic = typeMnemonic;
}

def Tx_KvCacheType : Tx_Type<"KvCache", "kv_cache"> {
  let summary = "a paged key/value cache for every layer of a model";
  let description = [{
    Keys and values live in fixed-size pages of `page` tokens. Each layer
    holds, per page, `[2, page, kv_heads, head_dim]` elements of
    `element_type`; a sequence owns a list of pages (its block table, part of
    `!tx.batch`). Ops that append to the cache write through this value.

    ```mlir
    !tx.kv_cache<layers = 28, kv_heads = 8, head_dim = 128, page = 16, bf16>
    ```
  }];
  let parameters = (ins "int64_t":$layers, "int64_t":$kvHeads,
                        "int64_t":$headDim, "int64_t":$pageSize,
                        "::mlir::Type":$elementType);
  let assemblyFormat = [{
    `<` `layers` `=` $layers `,` `kv_heads` `=` $kvHeads `,`
        `head_dim` `=` $headDim `,` `page` `=` $pageSize `,` $elementType `>`
  }];
  let genVerifyDecl = 1;
}

def Tx_BatchType : Tx_Type<"Batch", "batch"> {
  let summary = "the metadata of a ragged batch of sequences";
  let description = [{
    For each sequence in the step: where its new tokens start in the flat
    token axis (`cu_seqlens`), how many tokens it already has in the KV
    cache, and its block table. Token positions travel separately as a
    `tensor<?xi32>`.

    ```mlir
    !tx.batch
    ```
  }];
}

#endif // TXC_DIALECTS_TX_TXTYPES_TD
