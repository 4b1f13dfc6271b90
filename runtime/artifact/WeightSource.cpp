//===- WeightSource.cpp - In-memory weight source, shape formatting -------===//
#include "txc/artifact/WeightSource.h"

namespace txc::artifact {

void InMemoryWeightSource::addTensor(std::string name, DType dtype,
                                     std::vector<int64_t> shape,
                                     std::vector<unsigned char> bytes) {
  tensors_[std::move(name)] = Stored{dtype, std::move(shape), std::move(bytes)};
}

std::optional<TensorView>
InMemoryWeightSource::findTensor(std::string_view name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end())
    return std::nullopt;
  const Stored &stored = it->second;
  return TensorView{stored.dtype, stored.shape, stored.bytes.data(),
                    stored.bytes.size()};
}

} // namespace txc::artifact
