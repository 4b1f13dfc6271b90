//===- StrictJson.h - JSON parsing for untrusted headers --------*- C++ -*-===//
//
// Checkpoint headers, shard indexes and config.json come from the internet.
// nlohmann-json alone would take the last of two equal keys silently and
// reports errors by throwing; this wrapper rejects duplicate keys (a second
// "data_offsets" could hide an overlap), bounds the nesting depth before
// parsing, and turns every failure into a returned one-line Status.
//
//===----------------------------------------------------------------------===//
#ifndef TXC_RUNTIME_SAFETENSORS_STRICTJSON_H
#define TXC_RUNTIME_SAFETENSORS_STRICTJSON_H

#include "txc/Status.h"

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

namespace txc {

/// Deeper than any header or config txc reads (config.json nests 3 levels).
inline constexpr int kMaxJsonDepth = 32;

/// Parses `text`; `sourceName` (usually a path) starts every error message.
StatusOr<nlohmann::json> parseStrictJson(std::string_view text, const std::string &sourceName);

/// 'name' for an error message: quoted, control bytes escaped as \xNN (a
/// tensor name may hold a newline; messages stay one line) and cut at 160
/// bytes.
std::string quoteForMessage(std::string_view name);

} // namespace txc

#endif // TXC_RUNTIME_SAFETENSORS_STRICTJSON_H
