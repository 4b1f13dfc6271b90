//===- SafetensorsBinding.cpp - A safetensors directory as a WeightSource -===//
#include "SafetensorsBinding.h"

namespace txc::artifact {

#ifndef TXC_HAVE_SAFETENSORS
StatusOr<std::shared_ptr<const WeightSource>>
openSafetensorsWeightSource(const std::string &directory) {
  return unimplemented(directory +
                       ": this build of txc has no safetensors reader "
                       "(runtime/safetensors); pass the weights through "
                       "LoadOptions::weight_source instead");
}
#endif

} // namespace txc::artifact
