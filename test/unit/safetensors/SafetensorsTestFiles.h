//===- SafetensorsTestFiles.h - Writes safetensors files for tests -*- C++ -*-===//
//
// Tests build their own checkpoints, well-formed or broken on purpose, in a
// fresh temporary directory. Header-only: the frontend tests use it too.
//
//===----------------------------------------------------------------------===//
#ifndef TXC_TEST_UNIT_SAFETENSORS_SAFETENSORSTESTFILES_H
#define TXC_TEST_UNIT_SAFETENSORS_SAFETENSORSTESTFILES_H

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <cstdlib>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <unistd.h>
#include <vector>

namespace txc::testing {

struct FakeTensor {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
};

inline uint64_t fakeDTypeSize(const std::string &dtype) {
  if (dtype == "F32" || dtype == "I32")
    return 4;
  if (dtype == "I64" || dtype == "F64")
    return 8;
  return 2; // BF16, F16
}

inline uint64_t fakeByteSize(const FakeTensor &tensor) {
  uint64_t bytes = fakeDTypeSize(tensor.dtype);
  for (int64_t extent : tensor.shape)
    bytes *= static_cast<uint64_t>(extent);
  return bytes;
}

/// A header laying the tensors out back to back, in the order given.
inline nlohmann::json contiguousHeader(const std::vector<FakeTensor> &tensors) {
  nlohmann::json header = nlohmann::json::object();
  uint64_t offset = 0;
  for (const FakeTensor &tensor : tensors) {
    uint64_t end = offset + fakeByteSize(tensor);
    header[tensor.name] = {
        {"dtype", tensor.dtype}, {"shape", tensor.shape}, {"data_offsets", {offset, end}}};
    offset = end;
  }
  return header;
}

inline uint64_t dataSectionBytes(const nlohmann::json &header) {
  uint64_t end = 0;
  for (const auto &[key, value] : header.items())
    if (key != "__metadata__")
      end = std::max(end, value["data_offsets"][1].get<uint64_t>());
  return end;
}

/// The 8-byte little-endian length, then the header text as given.
inline std::string lengthPrefixed(const std::string &headerText, uint64_t declaredLength) {
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i)
    bytes[i] = static_cast<char>((declaredLength >> (8 * i)) & 0xff);
  return bytes + headerText;
}

inline std::string safetensorsBytes(const std::string &headerText, const std::string &data) {
  return lengthPrefixed(headerText, headerText.size()) + data;
}

inline void writeBytes(const std::string &path, const std::string &bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out)
    throw std::runtime_error("cannot write " + path);
}

/// A well-formed file; the data section is `fill` repeated, or a hole (a
/// sparse file: nothing is written, so even 16 GB cost no disk) when sparse.
inline void writeSafetensors(const std::string &path, const std::vector<FakeTensor> &tensors,
                             bool sparse = false, char fill = '\x01') {
  nlohmann::json header = contiguousHeader(tensors);
  uint64_t dataBytes = dataSectionBytes(header);
  std::string headerText = header.dump();
  if (!sparse) {
    writeBytes(path, safetensorsBytes(headerText, std::string(dataBytes, fill)));
    return;
  }
  writeBytes(path, safetensorsBytes(headerText, ""));
  if (::truncate(path.c_str(), static_cast<off_t>(8 + headerText.size() + dataBytes)) != 0)
    throw std::runtime_error("cannot extend " + path);
}

/// A fresh directory under the test temp dir, removed with everything in it
/// when the test ends.
class ScratchDirectory {
public:
  explicit ScratchDirectory(const std::string &stem) {
    std::string pattern = ::testing::TempDir() + "/txc-" + stem + "-XXXXXX";
    if (!::mkdtemp(pattern.data()))
      throw std::runtime_error("mkdtemp failed for " + pattern);
    path_ = pattern;
  }
  ~ScratchDirectory() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  ScratchDirectory(const ScratchDirectory &) = delete;
  ScratchDirectory &operator=(const ScratchDirectory &) = delete;

  const std::string &path() const { return path_; }
  std::string file(const std::string &name) const { return path_ + "/" + name; }

private:
  std::string path_;
};

} // namespace txc::testing

#endif // TXC_TEST_UNIT_SAFETENSORS_SAFETENSORSTESTFILES_H
