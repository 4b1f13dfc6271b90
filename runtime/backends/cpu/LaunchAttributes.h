//===- LaunchAttributes.h - Typed access to a Launch's attributes -*- C++ -*-===//
//
// Attributes arrive as the proto's AttributeValue oneof (FORMAT.md: integers
// as int_value, floats as float_value, enums as string_value, unit
// attributes as bool_value = true, absent meaning false). These accessors
// turn a missing or mistyped attribute into a Status naming it.
//
//===----------------------------------------------------------------------===//
#ifndef TXC_RUNTIME_BACKENDS_CPU_LAUNCHATTRIBUTES_H
#define TXC_RUNTIME_BACKENDS_CPU_LAUNCHATTRIBUTES_H

#include "runtime/artifact/artifact.pb.h"
#include "runtime/backends/cpu/Rotary.h"
#include "txc/Status.h"

#include <string>

namespace txc::cpu {

class LaunchAttributes {
public:
  explicit LaunchAttributes(const artifact::pb::Launch &launch)
      : launch_(launch) {}

  bool has(const std::string &name) const;
  StatusOr<int64_t> getInt(const std::string &name) const;
  int64_t getIntOr(const std::string &name, int64_t fallback) const;
  /// Accepts an integer too (a float attribute written as 1 is still 1.0).
  StatusOr<double> getFloat(const std::string &name) const;
  double getFloatOr(const std::string &name, double fallback) const;
  StatusOr<std::string> getString(const std::string &name) const;
  std::string getStringOr(const std::string &name,
                          const std::string &fallback) const;
  /// A unit attribute: true when present with bool_value = true (or a
  /// non-zero integer); `fallback` when absent.
  bool getFlag(const std::string &name, bool fallback = false) const;

  /// The flattened rotary attribute rope.* (FORMAT.md).
  StatusOr<RopeParams> getRope() const;

private:
  const artifact::pb::Launch &launch_;
};

} // namespace txc::cpu

#endif // TXC_RUNTIME_BACKENDS_CPU_LAUNCHATTRIBUTES_H
