//===- StrictJson.cpp - JSON parsing for untrusted headers ----------------===//

#include "runtime/safetensors/StrictJson.h"

#include <cstdio>
#include <set>
#include <vector>

namespace txc {

namespace {

/// The deepest nesting of objects and arrays outside strings, stopping as
/// soon as it passes `limit`. Unbalanced brackets are left to the parser.
int nestingDepthUpTo(std::string_view text, int limit) {
  int depth = 0, deepest = 0;
  bool inString = false, escaped = false;
  for (char c : text) {
    if (inString) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        inString = false;
      continue;
    }
    if (c == '"') {
      inString = true;
    } else if (c == '{' || c == '[') {
      if (++depth > deepest && (deepest = depth) > limit)
        return deepest;
    } else if ((c == '}' || c == ']') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

} // namespace

std::string quoteForMessage(std::string_view name) {
  constexpr size_t kMaxShown = 160;
  std::string quoted = "'";
  for (size_t i = 0; i < name.size() && i < kMaxShown; ++i) {
    unsigned char c = static_cast<unsigned char>(name[i]);
    if (c < 0x20 || c == 0x7f || c == '\'' || c == '\\') {
      char escape[8];
      std::snprintf(escape, sizeof(escape), "\\x%02x", c);
      quoted += escape;
    } else {
      quoted += static_cast<char>(c);
    }
  }
  if (name.size() > kMaxShown)
    quoted += "...";
  return quoted + "'";
}

StatusOr<nlohmann::json> parseStrictJson(std::string_view text, const std::string &sourceName) {
  if (nestingDepthUpTo(text, kMaxJsonDepth) > kMaxJsonDepth)
    return invalidArgument(sourceName + ": JSON nests deeper than " +
                           std::to_string(kMaxJsonDepth) + " levels");

  // One key set per open object; the depth bound above bounds this stack.
  std::vector<std::set<std::string>> keysPerObject;
  std::string duplicateKey;
  auto rejectDuplicates = [&](int, nlohmann::json::parse_event_t event, nlohmann::json &parsed) {
    using Event = nlohmann::json::parse_event_t;
    if (event == Event::object_start) {
      keysPerObject.emplace_back();
    } else if (event == Event::object_end) {
      if (!keysPerObject.empty())
        keysPerObject.pop_back();
    } else if (event == Event::key && !keysPerObject.empty() && duplicateKey.empty()) {
      const std::string &key = parsed.get_ref<const std::string &>();
      if (!keysPerObject.back().insert(key).second)
        duplicateKey = key;
    }
    return true;
  };

  nlohmann::json value;
  try {
    value = nlohmann::json::parse(text.begin(), text.end(), rejectDuplicates,
                                  /*allow_exceptions=*/true,
                                  /*ignore_comments=*/false);
  } catch (const nlohmann::json::exception &error) {
    // what() reads "[json.exception.parse_error.101] parse error at line 1,
    // column 5: ..."; drop the bracketed id, keep the position.
    std::string what = error.what();
    size_t idEnd = what.find("] ");
    if (idEnd != std::string::npos)
      what = what.substr(idEnd + 2);
    // The message quotes the bytes it last read, which may be anything.
    for (char &c : what)
      if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
        c = ' ';
    return invalidArgument(sourceName + ": invalid JSON: " + what);
  }
  if (!duplicateKey.empty())
    return invalidArgument(sourceName + ": JSON key " + quoteForMessage(duplicateKey) +
                           " appears twice");
  return value;
}

} // namespace txc
