//===- Tokenizer.cpp - tokenizer.json for tx-run --prompt and text output -===//
#include "Tokenizer.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <climits>

namespace txc::tools {

namespace {

const std::string kMetaspace = "\xE2\x96\x81"; // U+2581 "▁"

// GPT-2's reversible byte -> code point map: printable bytes map to
// themselves, the rest to 256 + n.
std::vector<uint32_t> byteToCodePoint() {
  std::vector<uint32_t> map(256, 0);
  std::vector<bool> direct(256, false);
  for (int b = '!'; b <= '~'; ++b) direct[b] = true;
  for (int b = 0xA1; b <= 0xAC; ++b) direct[b] = true;
  for (int b = 0xAE; b <= 0xFF; ++b) direct[b] = true;
  uint32_t next = 256;
  for (int b = 0; b < 256; ++b)
    map[b] = direct[b] ? static_cast<uint32_t>(b) : next++;
  return map;
}

std::string utf8(uint32_t cp) {
  std::string out;
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return out;
}

// Splits UTF-8 text into characters (invalid bytes stand alone).
std::vector<std::string> utf8Characters(const std::string &text) {
  std::vector<std::string> chars;
  for (size_t i = 0; i < text.size();) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
    len = std::min(len, text.size() - i);
    chars.push_back(text.substr(i, len));
    i += len;
  }
  return chars;
}

bool isByteToken(const std::string &token, unsigned &value) {
  if (token.size() != 6 || token.compare(0, 3, "<0x") != 0 || token[5] != '>')
    return false;
  value = static_cast<unsigned>(std::stoul(token.substr(3, 2), nullptr, 16));
  return std::isxdigit(static_cast<unsigned char>(token[3])) &&
         std::isxdigit(static_cast<unsigned char>(token[4]));
}

int characterClass(unsigned char c) {
  if (std::isalpha(c) || c >= 0x80) return 0;
  if (std::isdigit(c)) return 1;
  if (c == '\n' || c == '\r') return 2;
  if (c == ' ') return 3;
  return 4;
}

} // namespace

StatusOr<Tokenizer> Tokenizer::fromJson(const std::string &json,
                                        const std::string &source) {
  nlohmann::json root = nlohmann::json::parse(json, nullptr, false);
  if (root.is_discarded())
    return invalidArgument(source + ": the embedded tokenizer is not valid JSON");
  Tokenizer tokenizer;
  auto add = [&](const std::string &token, int64_t id) -> Status {
    if (id < 0 || id > INT32_MAX)
      return invalidArgument(source + ": tokenizer id " + std::to_string(id) + " out of range");
    if (tokenizer.id_to_token_.size() <= static_cast<size_t>(id))
      tokenizer.id_to_token_.resize(static_cast<size_t>(id) + 1);
    tokenizer.id_to_token_[id] = token;
    tokenizer.token_to_id_.emplace(token, static_cast<int32_t>(id));
    return Status::ok();
  };
  if (root.is_array()) {
    for (size_t i = 0; i < root.size(); ++i) {
      if (!root[i].is_string())
        return invalidArgument(source + ": tokenizer vocabulary entry " +
                               std::to_string(i) + " is not a string");
      TXC_RETURN_IF_ERROR(add(root[i].get<std::string>(), static_cast<int64_t>(i)));
    }
    tokenizer.unk_id_ = tokenizer.token_to_id_.count("<unk>") ? tokenizer.token_to_id_["<unk>"] : -1;
    // llama2.c spells its specials "<unk>", "\n<s>\n", "\n</s>\n".
    tokenizer.special_.assign(tokenizer.id_to_token_.size(), false);
    for (size_t i = 0; i < tokenizer.id_to_token_.size(); ++i) {
      std::string t = tokenizer.id_to_token_[i];
      t.erase(std::remove(t.begin(), t.end(), '\n'), t.end());
      tokenizer.special_[i] = t == "<s>" || t == "</s>" || t == "<unk>";
    }
    return tokenizer;
  }
  const nlohmann::json *model = root.contains("model") ? &root["model"] : nullptr;
  if (!model || !model->is_object() || !model->contains("vocab") || !(*model)["vocab"].is_object()) {
    // Name the model type where there is one (a Unigram model, say).
    if (model && model->is_object() && model->contains("type") && (*model)["type"].is_string())
      return unimplemented(source + ": the embedded tokenizer's model type '" +
                           (*model)["type"].get<std::string>() +
                           "' is not supported (only BPE vocabularies are)");
    return unimplemented(source + ": tokenizer.json without a model.vocab object "
                         "(only BPE vocabularies are supported)");
  }
  for (const auto &[token, id] : (*model)["vocab"].items()) {
    if (!id.is_number_integer())
      return invalidArgument(source + ": tokenizer vocab id of '" + token + "' is not an integer");
    TXC_RETURN_IF_ERROR(add(token, id.get<int64_t>()));
  }
  std::vector<int64_t> special_ids;
  if (root.contains("added_tokens") && root["added_tokens"].is_array())
    for (const nlohmann::json &added : root["added_tokens"])
      if (added.contains("content") && added["content"].is_string() && added.contains("id") &&
          added["id"].is_number_integer()) {
        TXC_RETURN_IF_ERROR(add(added["content"].get<std::string>(), added["id"].get<int64_t>()));
        if (added.value("special", false))
          special_ids.push_back(added["id"].get<int64_t>());
      }
  tokenizer.special_.assign(tokenizer.id_to_token_.size(), false);
  for (int64_t id : special_ids)
    tokenizer.special_[id] = true;
  if (model->contains("merges") && (*model)["merges"].is_array()) {
    int32_t rank = 0;
    for (const nlohmann::json &merge : (*model)["merges"]) {
      std::string left, right;
      if (merge.is_string()) { // "a b" (tokenizers < 0.20)
        std::string text = merge.get<std::string>();
        size_t space = text.find(' ');
        if (space == std::string::npos) continue;
        left = text.substr(0, space);
        right = text.substr(space + 1);
      } else if (merge.is_array() && merge.size() == 2) { // ["a", "b"]
        left = merge[0].get<std::string>();
        right = merge[1].get<std::string>();
      } else {
        continue;
      }
      tokenizer.merge_rank_.emplace(std::make_pair(left, right), rank++);
    }
  }
  tokenizer.byte_level_ = json.find("\"ByteLevel\"") != std::string::npos;
  tokenizer.metaspace_ = !tokenizer.byte_level_ && json.find(kMetaspace) != std::string::npos;
  if (model->contains("unk_token") && (*model)["unk_token"].is_string()) {
    auto it = tokenizer.token_to_id_.find((*model)["unk_token"].get<std::string>());
    if (it != tokenizer.token_to_id_.end())
      tokenizer.unk_id_ = it->second;
  }
  return tokenizer;
}

std::string Tokenizer::decode(const std::vector<int32_t> &ids) const {
  static const std::vector<uint32_t> byte_map = byteToCodePoint();
  std::unordered_map<std::string, unsigned char> code_point_to_byte;
  if (byte_level_)
    for (int b = 0; b < 256; ++b)
      code_point_to_byte[utf8(byte_map[b])] = static_cast<unsigned char>(b);
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || static_cast<size_t>(ids[i]) >= id_to_token_.size())
      continue;
    if (special_[ids[i]])
      continue;
    std::string token = id_to_token_[ids[i]];
    unsigned byte;
    if (byte_level_) {
      for (const std::string &ch : utf8Characters(token)) {
        auto it = code_point_to_byte.find(ch);
        out += it != code_point_to_byte.end() ? std::string(1, static_cast<char>(it->second)) : ch;
      }
      continue;
    }
    if (isByteToken(token, byte)) {
      out += static_cast<char>(byte);
      continue;
    }
    if (metaspace_)
      for (size_t pos; (pos = token.find(kMetaspace)) != std::string::npos;)
        token.replace(pos, kMetaspace.size(), " ");
    // Sentencepiece drops the space that starts the first word.
    if (out.empty() && !token.empty() && token[0] == ' ')
      token.erase(0, 1);
    out += token;
  }
  return out;
}

std::vector<int32_t> Tokenizer::bpe(const std::vector<std::string> &initial) const {
  std::vector<std::string> symbols = initial;
  for (;;) {
    int32_t best_rank = INT32_MAX;
    size_t best = 0;
    for (size_t i = 0; i + 1 < symbols.size(); ++i) {
      auto it = merge_rank_.find({symbols[i], symbols[i + 1]});
      if (it != merge_rank_.end() && it->second < best_rank) {
        best_rank = it->second;
        best = i;
      }
    }
    if (best_rank == INT32_MAX)
      break;
    symbols[best] += symbols[best + 1];
    symbols.erase(symbols.begin() + static_cast<long>(best) + 1);
  }
  std::vector<int32_t> ids;
  for (const std::string &symbol : symbols) {
    auto it = token_to_id_.find(symbol);
    if (it != token_to_id_.end()) {
      ids.push_back(it->second);
      continue;
    }
    // Byte fallback, else the unknown token.
    bool all_bytes = true;
    std::vector<int32_t> bytes;
    for (unsigned char c : symbol) {
      char name[8];
      std::snprintf(name, sizeof(name), "<0x%02X>", c);
      auto byte = token_to_id_.find(name);
      if (byte == token_to_id_.end()) { all_bytes = false; break; }
      bytes.push_back(byte->second);
    }
    if (all_bytes)
      ids.insert(ids.end(), bytes.begin(), bytes.end());
    else if (unk_id_ >= 0)
      ids.push_back(unk_id_);
  }
  return ids;
}

std::vector<int32_t> Tokenizer::greedy(const std::string &text) const {
  size_t longest = 0;
  for (const std::string &token : id_to_token_)
    longest = std::max(longest, token.size());
  std::vector<int32_t> ids;
  for (size_t i = 0; i < text.size();) {
    size_t taken = 0;
    for (size_t len = std::min(longest, text.size() - i); len > 0; --len) {
      auto it = token_to_id_.find(text.substr(i, len));
      if (it != token_to_id_.end()) {
        ids.push_back(it->second);
        taken = len;
        break;
      }
    }
    if (taken == 0) {
      std::vector<int32_t> fallback = bpe({text.substr(i, 1)});
      ids.insert(ids.end(), fallback.begin(), fallback.end());
      taken = 1;
    }
    i += taken;
  }
  return ids;
}

StatusOr<std::vector<int32_t>>
Tokenizer::encode(const std::string &text, const artifact::pb::ModelConfig &config) const {
  std::vector<int32_t> ids;
  if (!byte_level_ && config.bos_token_ids_size() > 0)
    ids.push_back(static_cast<int32_t>(config.bos_token_ids(0)));
  if (byte_level_) {
    static const std::vector<uint32_t> byte_map = byteToCodePoint();
    // Words: an optional leading space, then a run of one character class.
    for (size_t i = 0; i < text.size();) {
      size_t start = i;
      if (text[i] == ' ' && i + 1 < text.size() && text[i + 1] != ' ')
        ++i;
      int cls = characterClass(static_cast<unsigned char>(text[i]));
      while (i < text.size() && characterClass(static_cast<unsigned char>(text[i])) == cls)
        ++i;
      std::vector<std::string> symbols;
      for (size_t k = start; k < i; ++k)
        symbols.push_back(utf8(byte_map[static_cast<unsigned char>(text[k])]));
      std::vector<int32_t> word = bpe(symbols);
      ids.insert(ids.end(), word.begin(), word.end());
    }
    return ids;
  }
  if (metaspace_) {
    std::string normalized = kMetaspace;
    for (char c : text)
      normalized += c == ' ' ? kMetaspace : std::string(1, c);
    std::vector<int32_t> word = merge_rank_.empty() ? greedy(normalized)
                                                    : bpe(utf8Characters(normalized));
    ids.insert(ids.end(), word.begin(), word.end());
    return ids;
  }
  // A plain vocabulary with literal spaces (llama2.c): the first word gets
  // the leading space sentencepiece adds.
  std::vector<int32_t> word = greedy(" " + text);
  ids.insert(ids.end(), word.begin(), word.end());
  return ids;
}

} // namespace txc::tools
