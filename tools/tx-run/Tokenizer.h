//===- Tokenizer.h - tokenizer.json for tx-run --prompt and text output -*- C++ -*-===//
//
// Enough of a tokenizer for a command-line tool, not a replacement for HF
// `tokenizers`:
//   - decode: exact for byte-level BPE (GPT-2 byte alphabet: Qwen, Llama 3)
//     and sentencepiece-style vocabularies ("▁" or plain spaces, <0xNN>
//     byte tokens, the space after BOS dropped);
//   - encode: BPE by merge rank when the file has merges (sentencepiece
//     style: "▁"-normalised, byte fallback; byte-level: GPT-2 bytes over
//     words split at spaces, letters, digits and punctuation, a simplified
//     version of the models' regex pre-tokenizer, so ids can differ from HF
//     on unusual text). A bare vocabulary (a JSON list, id -> text, as
//     llama2.c models carry) encodes by greedy longest match: it always
//     round-trips the text but may split differently from the original
//     sentencepiece model.
//
//===----------------------------------------------------------------------===//
#ifndef TXC_TOOLS_TX_RUN_TOKENIZER_H
#define TXC_TOOLS_TX_RUN_TOKENIZER_H

#include "runtime/artifact/artifact.pb.h"
#include "txc/Status.h"

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

namespace txc::tools {

class Tokenizer {
public:
  /// Parses tokenizer.json (HF) or a JSON list of token texts; `source`
  /// names the file in errors.
  static StatusOr<Tokenizer> fromJson(const std::string &json,
                                      const std::string &source);

  std::string decode(const std::vector<int32_t> &ids) const;
  /// Text to ids; BOS first when the model has one and the vocabulary is
  /// sentencepiece-style (Llama's convention).
  StatusOr<std::vector<int32_t>>
  encode(const std::string &text, const artifact::pb::ModelConfig &config) const;

  bool byteLevel() const { return byte_level_; }

private:
  std::vector<int32_t> bpe(const std::vector<std::string> &symbols) const;
  std::vector<int32_t> greedy(const std::string &text) const;

  std::vector<std::string> id_to_token_;
  std::unordered_map<std::string, int32_t> token_to_id_;
  // BOS/EOS/pad and other special tokens: never printed in decoded text.
  std::vector<bool> special_;
  std::map<std::pair<std::string, std::string>, int32_t> merge_rank_;
  bool byte_level_ = false;
  bool metaspace_ = false; // "▁" stands for a space
  int32_t unk_id_ = -1;
};

} // namespace txc::tools

#endif
