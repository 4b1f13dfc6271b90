//===- TxDialect.td - the model-level tx dialect -----------*- tablegen -*-===//
//
// `tx` describes one decoder step of a transformer LLM at the level a model
// author thinks in: weights by checkpoint name, norms, projections, rotary
// embeddings, attention over a paged KV cache. Passes fuse and shard it, then
// lower it to `txk`, where every op is one kernel launch.
//
//===----------------------------------------------------------------------===//

#ifndef TXC_DIALECTS_TX_TXDIALECT_TD
#define TXC_DIALECTS_TX_TXDIALECT_TD

include "mlir/IR/OpBase.td"

def Tx_Dialect : Dialect {
  let name = "tx";
  let cppNamespace = "::txc::tx";
  let summary = "Model-level IR for decoder-only transformer LLMs";
  let description = [{
    The `tx` dialect models one forward step over a flat, ragged batch of
    tokens (vLLM style), so prefill, decode and chunked prefill are the same
    graph. Activations are 2-D tensors `[tokens, features]` whose token
    dimension is dynamic; heads are packed along the feature axis
    (`[tokens, heads * head_dim]`). Weights are referenced by their
    checkpoint name and keep Hugging Face's `[out_features, in_features]`
    layout. The KV cache and the batch metadata are opaque SSA values whose
    types carry the static facts kernels are specialised on.
  }];
  let useDefaultTypePrinterParser = 1;
  let useDefaultAttributePrinterParser = 1;
  let extraClassDeclaration = [{
    void registerTypes();
    void registerAttributes();
  }];
}

class Tx_Op<string mnemonic, list<Trait> traits = []>
    : Op<Tx_Dialect, mnemonic, traits>;

#endif // TXC_DIALECTS_TX_TXDIALECT_TD
