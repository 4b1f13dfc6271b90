//===- TxAttrs.td - tx attributes and enums ----------------*- tablegen -*-===//

#ifndef TXC_DIALECTS_TX_TXATTRS_TD
#define TXC_DIALECTS_TX_TXATTRS_TD

include "dialects/tx/TxDialect.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

def Tx_RopeScaling : I32EnumAttr<"RopeScaling",
    "how rotary frequencies are rescaled for long contexts", [
      I32EnumAttrCase<"Default", 0, "default">,
      I32EnumAttrCase<"Linear", 1, "linear">,
      I32EnumAttrCase<"Dynamic", 2, "dynamic">,
      I32EnumAttrCase<"Llama3", 3, "llama3">,
      I32EnumAttrCase<"Yarn", 4, "yarn">
    ]> {
  let cppNamespace = "::txc::tx";
  let genSpecializedAttr = 0;
}

// An f64, printed and parsed as a plain float literal.
class Tx_F64Parameter<string desc> : APFloatParameter<desc> {
  let parser = [{ [&]() -> ::mlir::FailureOr<::llvm::APFloat> {
    double v;
    if ($_parser.parseFloat(v))
      return ::mlir::failure();
    return ::llvm::APFloat(v);
  }() }];
}

// The same with a default, which the printer leaves out.
class Tx_F64DefaultParameter<string value, string desc> : Tx_F64Parameter<desc> {
  let defaultValue = "::llvm::APFloat(double(" # value # "))";
}

def Tx_RopeAttr : AttrDef<Tx_Dialect, "Rope"> {
  let mnemonic = "rope";
  let summary = "rotary position embedding parameters, with HF's scalings";
  let description = [{
    The inverse frequencies of dimension pair `i` of a head of size `D`
    (or of `rotary_dim` leading dimensions, when set) are
    `inv_freq[i] = theta ^ (-2i / D)`, then rescaled according to `scaling`,
    exactly as Hugging Face's `ROPE_INIT_FUNCTIONS` do:

    - `default`: unchanged.
    - `linear`: `inv_freq / factor`.
    - `dynamic` (NTK): for a sequence longer than `original_max_position`,
      `theta' = theta * ((factor * len / original_max_position) - (factor - 1))
      ^ (D / (D - 2))`.
    - `llama3`: wavelengths longer than `original_max_position /
      low_freq_factor` are divided by `factor`, shorter than
      `original_max_position / high_freq_factor` are kept, and those between
      are interpolated smoothly.
    - `yarn`: NTK-by-parts between `beta_fast` and `beta_slow`, with the
      attention temperature `attention_factor` (0 means HF's default
      `0.1 * ln(factor) + 1`) applied to cos and sin.

    `theta` is required; the other parameters are printed only when they differ
    from their defaults.

    ```mlir
    #tx.rope<theta = 5.0e+05, scaling = llama3, factor = 8.0,
             low_freq_factor = 1.0, high_freq_factor = 4.0,
             original_max_position = 8192>
    ```
  }];
  let parameters = (ins
    Tx_F64Parameter<"base of the frequencies">:$theta,
    DefaultValuedParameter<"::txc::tx::RopeScaling",
                           "::txc::tx::RopeScaling::Default",
                           "the scaling rule">:$scaling,
    Tx_F64DefaultParameter<"1.0", "scaling factor">:$factor,
    Tx_F64DefaultParameter<"1.0", "llama3 low-frequency factor">:$low_freq_factor,
    Tx_F64DefaultParameter<"4.0", "llama3 high-frequency factor">:$high_freq_factor,
    DefaultValuedParameter<"int64_t", "0",
                           "context length the model was trained at">:$original_max_position,
    Tx_F64DefaultParameter<"32.0", "yarn beta_fast">:$beta_fast,
    Tx_F64DefaultParameter<"1.0", "yarn beta_slow">:$beta_slow,
    Tx_F64DefaultParameter<"0.0", "yarn attention temperature; 0 = default">:$attention_factor,
    DefaultValuedParameter<"int64_t", "0",
                           "leading dimensions rotated; 0 = all">:$rotary_dim
  );
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

#endif // TXC_DIALECTS_TX_TXATTRS_TD
