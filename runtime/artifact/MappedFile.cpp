//===- MappedFile.cpp - Read-only mmap of a whole file --------------------===//
#include "MappedFile.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace txc::artifact {

StatusOr<std::unique_ptr<MappedFile>> MappedFile::open(const std::string &path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    std::string message = path + ": cannot open: " + std::strerror(err);
    return err == ENOENT ? notFound(message) : ioError(message);
  }
  struct stat info;
  if (::fstat(fd, &info) != 0) {
    std::string message = path + ": cannot stat: " + std::strerror(errno);
    ::close(fd);
    return ioError(message);
  }
  if (!S_ISREG(info.st_mode)) {
    ::close(fd);
    return invalidArgument(path + ": not a regular file");
  }
  size_t size = static_cast<size_t>(info.st_size);
  // mmap of zero bytes fails; an empty file is still a well-defined
  // (truncated) input, so give it an empty mapping.
  const unsigned char *data = nullptr;
  if (size > 0) {
    void *mapped = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (mapped == MAP_FAILED) {
      std::string message = path + ": cannot mmap " + std::to_string(size) +
                            " bytes: " + std::strerror(errno);
      ::close(fd);
      return ioError(message);
    }
    data = static_cast<const unsigned char *>(mapped);
  }
  ::close(fd); // the mapping keeps the file alive
  return std::unique_ptr<MappedFile>(new MappedFile(path, data, size));
}

MappedFile::~MappedFile() {
  if (data_ != nullptr)
    ::munmap(const_cast<unsigned char *>(data_), size_);
}

} // namespace txc::artifact
