//===- ConfigParser.h - config.json to ModelConfig --------------*- C++ -*-===//
//
// Reads the config.json of a supported architecture (ArchitectureTable.h)
// as transformers 4.x writes it (`rope_theta`, `rope_scaling` with `type` or
// `rope_type`) and as 5.x writes it (`rope_parameters`), fills in
// transformers' defaults for missing keys, and checks that the numbers make
// a model (positive sizes within bounds, heads divisible by kv heads, ...).
// Errors are one line starting with the source name.
//
//===----------------------------------------------------------------------===//
#ifndef TXC_LIB_FRONTEND_CONFIGPARSER_H
#define TXC_LIB_FRONTEND_CONFIGPARSER_H

#include "lib/frontend/ModelConfig.h"
#include "txc/Status.h"

#include <string>
#include <string_view>

namespace txc::frontend {

/// Upper bounds far above any real model; they keep hostile configs from
/// asking for absurd allocations or overflowing shape arithmetic.
inline constexpr int64_t kMaxLayers = 1024;
inline constexpr int64_t kMaxHeads = 4096;
inline constexpr int64_t kMaxDimension = int64_t(1) << 24;

/// Parses config.json text; `sourceName` (usually its path) starts messages.
/// Pure: the fuzzer drives it directly.
StatusOr<ModelConfig> parseModelConfig(std::string_view jsonText, const std::string &sourceName);

/// Reads and parses a config.json file.
StatusOr<ModelConfig> loadModelConfig(const std::string &path);

} // namespace txc::frontend

#endif // TXC_LIB_FRONTEND_CONFIGPARSER_H
