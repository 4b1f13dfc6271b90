//===- MappedFile.h - A read-only mmap of a whole file ---------*- C++ -*-===//
//
// Checkpoints are tens of gigabytes: they are mapped, never read, so opening
// one touches only the pages of its header and the OS pages weights in (or
// never, for a header-only import) on demand.
//
//===----------------------------------------------------------------------===//
#ifndef TXC_RUNTIME_SAFETENSORS_MAPPEDFILE_H
#define TXC_RUNTIME_SAFETENSORS_MAPPEDFILE_H

#include "txc/Status.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace txc {

class MappedFile {
public:
  /// Maps `path` read-only. Refuses anything but a regular file: a FIFO or a
  /// device could block or never end.
  static StatusOr<std::unique_ptr<MappedFile>> open(const std::string &path);

  ~MappedFile();
  MappedFile(const MappedFile &) = delete;
  MappedFile &operator=(const MappedFile &) = delete;

  const std::string &path() const { return path_; }
  /// nullptr for an empty file, which mmap cannot map.
  const std::byte *data() const { return data_; }
  uint64_t size() const { return size_; }

private:
  MappedFile(std::string path, const std::byte *data, uint64_t size)
      : path_(std::move(path)), data_(data), size_(size) {}

  std::string path_;
  const std::byte *data_;
  uint64_t size_;
};

} // namespace txc

#endif // TXC_RUNTIME_SAFETENSORS_MAPPEDFILE_H
