//===- RandomWeights.cpp - Deterministic weights from a seed --------------===//
#include "txc/artifact/RandomWeights.h"
#include "txc/artifact/Hash.h"
#include "txc/SplitMix64.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <thread>

namespace txc::artifact {
namespace {

// The per-tensor key, so renaming one tensor leaves the others unchanged.
uint64_t tensorKey(uint64_t seed, std::string_view name) {
  return splitMix64(seed ^ xxh64(name.data(), name.size(), 0x7478632D72616E64ULL));
}

// Uniform in [-1, 1) from the top 24 bits: exact in fp32.
float uniformSigned(uint64_t key, uint64_t index) {
  uint64_t bits = splitMix64(key ^ splitMix64(index));
  return static_cast<float>(bits >> 40) * (2.0f / 16777216.0f) - 1.0f;
}

struct ValueScale {
  float offset;
  float amplitude;
};

ValueScale scaleFor(std::string_view name, const std::vector<int64_t> &shape) {
  if (shape.size() >= 2) {
    // Uniform(-a, a) has std a/sqrt(3); a = sqrt(3/fan_in) gives 1/sqrt(fan_in).
    double fan_in = static_cast<double>(std::max<int64_t>(shape.back(), 1));
    return {0.0f, static_cast<float>(std::sqrt(3.0 / fan_in))};
  }
  if (shape.size() == 1)
    return name.find("norm") != std::string_view::npos
               ? ValueScale{1.0f, 0.05f}
               : ValueScale{0.0f, 0.02f};
  return {0.0f, 1.0f};
}

template <typename Encode>
void fillRange(uint64_t key, ValueScale scale, uint64_t first, uint64_t count,
               unsigned char *out, size_t element_bytes, Encode encode) {
  for (uint64_t i = 0; i < count; ++i) {
    float value = scale.offset + scale.amplitude * uniformSigned(key, first + i);
    encode(value, out + i * element_bytes);
  }
}

} // namespace

uint16_t floatToBF16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  if (std::isnan(value))
    return static_cast<uint16_t>((bits >> 16) | 0x40); // keep it a NaN
  uint32_t rounding = 0x7FFF + ((bits >> 16) & 1);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

float bf16ToFloat(uint16_t bits) {
  uint32_t wide = static_cast<uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &wide, 4);
  return value;
}

uint16_t floatToF16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000);
  uint32_t magnitude = bits & 0x7FFFFFFF;
  if (magnitude > 0x7F800000) // NaN
    return sign | 0x7E00;
  if (magnitude >= 0x477FF000) // rounds to >= 65520: overflow to infinity
    return sign | 0x7C00;
  if (magnitude < 0x38800000) { // below the smallest normal half (2^-14)
    // Subnormal half: value / 2^-24, rounded to nearest even.
    float scaled = std::fabs(value) * 16777216.0f;
    return sign | static_cast<uint16_t>(std::nearbyint(scaled));
  }
  // Normal: rebias the exponent (127 -> 15), round the mantissa 23 -> 10.
  uint32_t rebased = magnitude - (112u << 23);
  uint32_t rounding = 0xFFF + ((rebased >> 13) & 1);
  return sign | static_cast<uint16_t>((rebased + rounding) >> 13);
}

float f16ToFloat(uint16_t bits) {
  uint32_t sign = static_cast<uint32_t>(bits & 0x8000) << 16;
  uint32_t exponent = (bits >> 10) & 0x1F;
  uint32_t mantissa = bits & 0x3FF;
  float magnitude;
  if (exponent == 0)
    magnitude = std::ldexp(static_cast<float>(mantissa), -24);
  else if (exponent == 31)
    magnitude = mantissa ? NAN : INFINITY;
  else
    magnitude = std::ldexp(static_cast<float>(mantissa | 0x400), int(exponent) - 25);
  uint32_t out;
  std::memcpy(&out, &magnitude, 4);
  out |= sign;
  float result;
  std::memcpy(&result, &out, 4);
  return result;
}

float elementToFloat(const unsigned char *p, DType dtype) {
  if (dtype == DType::kF32) {
    float value;
    std::memcpy(&value, p, 4);
    return value;
  }
  uint16_t bits;
  std::memcpy(&bits, p, 2);
  return dtype == DType::kBF16 ? bf16ToFloat(bits) : f16ToFloat(bits);
}

void floatToElement(float value, unsigned char *p, DType dtype) {
  if (dtype == DType::kF32) {
    std::memcpy(p, &value, 4);
    return;
  }
  uint16_t bits = dtype == DType::kBF16 ? floatToBF16(value) : floatToF16(value);
  std::memcpy(p, &bits, 2);
}

float randomWeightValue(uint64_t seed, std::string_view name,
                        const std::vector<int64_t> &shape, uint64_t index) {
  ValueScale scale = scaleFor(name, shape);
  return scale.offset + scale.amplitude * uniformSigned(tensorKey(seed, name), index);
}

Status fillRandomWeights(uint64_t seed, std::string_view name, DType dtype,
                         const std::vector<int64_t> &shape,
                         uint64_t first_element, unsigned char *out,
                         size_t out_bytes) {
  size_t element_bytes = dtypeSize(dtype);
  if (dtype != DType::kF32 && dtype != DType::kF16 && dtype != DType::kBF16 &&
      dtype != DType::kF64)
    return unimplemented("random weights: tensor '" + std::string(name) +
                         "' has dtype " + std::string(dtypeName(dtype)) +
                         "; only F32, F16, BF16 and F64 can be generated");
  if (out_bytes % element_bytes != 0)
    return invalidArgument("random weights: tensor '" + std::string(name) +
                           "': buffer of " + std::to_string(out_bytes) +
                           " bytes is not a whole number of elements");
  uint64_t key = tensorKey(seed, name);
  ValueScale scale = scaleFor(name, shape);
  uint64_t count = out_bytes / element_bytes;

  auto fillSpan = [&](uint64_t begin, uint64_t end) {
    unsigned char *span_out = out + begin * element_bytes;
    uint64_t first = first_element + begin, n = end - begin;
    switch (dtype) {
    case DType::kF32:
      fillRange(key, scale, first, n, span_out, 4, [](float v, unsigned char *p) {
        std::memcpy(p, &v, 4);
      });
      break;
    case DType::kF64:
      fillRange(key, scale, first, n, span_out, 8, [](float v, unsigned char *p) {
        double d = v;
        std::memcpy(p, &d, 8);
      });
      break;
    case DType::kBF16:
      fillRange(key, scale, first, n, span_out, 2, [](float v, unsigned char *p) {
        uint16_t h = floatToBF16(v);
        std::memcpy(p, &h, 2);
      });
      break;
    default: // kF16, checked above
      fillRange(key, scale, first, n, span_out, 2, [](float v, unsigned char *p) {
        uint16_t h = floatToF16(v);
        std::memcpy(p, &h, 2);
      });
      break;
    }
  };

  // Billions of elements for an 8B model: spread big tensors over cores.
  constexpr uint64_t kElementsPerThread = uint64_t{1} << 22;
  unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  uint64_t wanted = (count + kElementsPerThread - 1) / kElementsPerThread;
  unsigned used = static_cast<unsigned>(std::min<uint64_t>(threads, wanted));
  if (used <= 1) {
    fillSpan(0, count);
    return Status::ok();
  }
  std::vector<std::thread> workers;
  uint64_t per = (count + used - 1) / used;
  for (unsigned t = 0; t < used; ++t) {
    uint64_t begin = std::min<uint64_t>(count, t * per);
    uint64_t end = std::min<uint64_t>(count, begin + per);
    workers.emplace_back(fillSpan, begin, end);
  }
  for (std::thread &worker : workers)
    worker.join();
  return Status::ok();
}

} // namespace txc::artifact
