//===- SafetensorsBinding.cpp - A checkpoint as a WeightSource ------------===//
#include "SafetensorsBinding.h"

#include "runtime/safetensors/Checkpoint.h"

namespace txc::artifact {
namespace {

class SafetensorsWeightSource : public WeightSource {
public:
  explicit SafetensorsWeightSource(Checkpoint checkpoint)
      : checkpoint_(std::move(checkpoint)) {}

  std::string description() const override {
    return "safetensors checkpoint " + checkpoint_.source();
  }

  std::optional<TensorView> findTensor(std::string_view name) const override {
    const CheckpointTensor *tensor = checkpoint_.find(name);
    if (tensor == nullptr)
      return std::nullopt;
    return TensorView{tensor->dtype(), tensor->shape(),
                      reinterpret_cast<const unsigned char *>(tensor->data()),
                      static_cast<size_t>(tensor->byteSize())};
  }

private:
  Checkpoint checkpoint_;
};

} // namespace

StatusOr<std::shared_ptr<const WeightSource>>
openSafetensorsWeightSource(const std::string &path) {
  TXC_ASSIGN_OR_RETURN(Checkpoint checkpoint, Checkpoint::open(path));
  return std::shared_ptr<const WeightSource>(
      std::make_shared<SafetensorsWeightSource>(std::move(checkpoint)));
}

} // namespace txc::artifact
