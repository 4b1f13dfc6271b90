//===- LaunchAttributes.cpp - Typed access to a Launch's attributes -------===//
#include "runtime/backends/cpu/LaunchAttributes.h"

namespace txc::cpu {

using artifact::pb::AttributeValue;

bool LaunchAttributes::has(const std::string &name) const {
  return launch_.attributes().count(name) != 0;
}

StatusOr<int64_t> LaunchAttributes::getInt(const std::string &name) const {
  auto it = launch_.attributes().find(name);
  if (it == launch_.attributes().end())
    return invalidArgument("missing attribute '" + name + "'");
  if (it->second.kind_case() != AttributeValue::kIntValue)
    return invalidArgument("attribute '" + name + "' must be an integer");
  return it->second.int_value();
}

int64_t LaunchAttributes::getIntOr(const std::string &name,
                                   int64_t fallback) const {
  if (!has(name))
    return fallback;
  StatusOr<int64_t> value = getInt(name);
  return value.isOk() ? *value : fallback;
}

StatusOr<double> LaunchAttributes::getFloat(const std::string &name) const {
  auto it = launch_.attributes().find(name);
  if (it == launch_.attributes().end())
    return invalidArgument("missing attribute '" + name + "'");
  if (it->second.kind_case() == AttributeValue::kFloatValue)
    return it->second.float_value();
  if (it->second.kind_case() == AttributeValue::kIntValue)
    return static_cast<double>(it->second.int_value());
  return invalidArgument("attribute '" + name + "' must be a float");
}

double LaunchAttributes::getFloatOr(const std::string &name,
                                    double fallback) const {
  if (!has(name))
    return fallback;
  StatusOr<double> value = getFloat(name);
  return value.isOk() ? *value : fallback;
}

StatusOr<std::string>
LaunchAttributes::getString(const std::string &name) const {
  auto it = launch_.attributes().find(name);
  if (it == launch_.attributes().end())
    return invalidArgument("missing attribute '" + name + "'");
  if (it->second.kind_case() != AttributeValue::kStringValue)
    return invalidArgument("attribute '" + name + "' must be a string");
  return it->second.string_value();
}

std::string LaunchAttributes::getStringOr(const std::string &name,
                                          const std::string &fallback) const {
  if (!has(name))
    return fallback;
  StatusOr<std::string> value = getString(name);
  return value.isOk() ? *value : fallback;
}

bool LaunchAttributes::getFlag(const std::string &name, bool fallback) const {
  auto it = launch_.attributes().find(name);
  if (it == launch_.attributes().end())
    return fallback;
  if (it->second.kind_case() == AttributeValue::kBoolValue)
    return it->second.bool_value();
  if (it->second.kind_case() == AttributeValue::kIntValue)
    return it->second.int_value() != 0;
  return fallback;
}

StatusOr<RopeParams> LaunchAttributes::getRope() const {
  RopeParams rope;
  TXC_ASSIGN_OR_RETURN(rope.theta, getFloat("rope.theta"));
  TXC_ASSIGN_OR_RETURN(rope.scaling,
                       parseRopeScaling(getStringOr("rope.scaling", "default")));
  rope.factor = getFloatOr("rope.factor", 1.0);
  if (rope.factor == 0.0)
    rope.factor = 1.0;
  rope.low_freq_factor = getFloatOr("rope.low_freq_factor", 1.0);
  rope.high_freq_factor = getFloatOr("rope.high_freq_factor", 4.0);
  rope.original_max_position = getIntOr("rope.original_max_position", 0);
  rope.beta_fast = getFloatOr("rope.beta_fast", 0.0);
  rope.beta_slow = getFloatOr("rope.beta_slow", 0.0);
  rope.attention_factor = getFloatOr("rope.attention_factor", 0.0);
  rope.rotary_dim = getIntOr("rope.rotary_dim", 0);
  // HF truncates unless a config says `truncate: false`; the attribute is
  // only written when it differs, so absence means true here.
  rope.yarn_truncate = getFlag("rope.truncate", true);
  return rope;
}

} // namespace txc::cpu
