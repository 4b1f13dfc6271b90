//===- MappedFile.h - Read-only mmap of a whole file -----------*- C++ -*-===//
//
// The weight blob is never read into memory: the runtime maps the artifact
// and hands out pointers into the mapping, so loading a 16 GB model costs
// page faults on first touch only, and pages stay shareable between
// processes serving the same file.
//
//===----------------------------------------------------------------------===//
#ifndef TXC_RUNTIME_ARTIFACT_MAPPEDFILE_H
#define TXC_RUNTIME_ARTIFACT_MAPPEDFILE_H

#include "txc/Status.h"

#include <cstddef>
#include <memory>
#include <string>

namespace txc::artifact {

class MappedFile {
public:
  static StatusOr<std::unique_ptr<MappedFile>> open(const std::string &path);
  ~MappedFile();
  MappedFile(const MappedFile &) = delete;
  MappedFile &operator=(const MappedFile &) = delete;

  const unsigned char *data() const { return data_; }
  size_t size() const { return size_; }
  const std::string &path() const { return path_; }

private:
  MappedFile(std::string path, const unsigned char *data, size_t size)
      : path_(std::move(path)), data_(data), size_(size) {}
  std::string path_;
  const unsigned char *data_;
  size_t size_;
};

} // namespace txc::artifact

#endif // TXC_RUNTIME_ARTIFACT_MAPPEDFILE_H
