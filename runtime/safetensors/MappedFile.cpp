//===- MappedFile.cpp - A read-only mmap of a whole file ------------------===//

#include "runtime/safetensors/MappedFile.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace txc {

namespace {
/// Closes the descriptor on every return path; the mapping outlives it.
struct FileDescriptor {
  int fd;
  ~FileDescriptor() {
    if (fd >= 0)
      ::close(fd);
  }
};
} // namespace

StatusOr<std::unique_ptr<MappedFile>> MappedFile::open(const std::string &path) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer.
  FileDescriptor file{::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC)};
  if (file.fd < 0) {
    int error = errno;
    std::string message = path + ": cannot open: " + std::strerror(error);
    return error == ENOENT ? notFound(message) : ioError(message);
  }
  struct stat info;
  if (::fstat(file.fd, &info) != 0)
    return ioError(path + ": cannot stat: " + std::strerror(errno));
  if (!S_ISREG(info.st_mode))
    return invalidArgument(path + ": not a regular file");

  uint64_t size = static_cast<uint64_t>(info.st_size);
  if (size == 0)
    return std::unique_ptr<MappedFile>(new MappedFile(path, nullptr, 0));
  void *mapping = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, file.fd, 0);
  if (mapping == MAP_FAILED)
    return ioError(path + ": cannot mmap " + std::to_string(size) +
                   " bytes: " + std::strerror(errno));
  return std::unique_ptr<MappedFile>(
      new MappedFile(path, static_cast<const std::byte *>(mapping), size));
}

MappedFile::~MappedFile() {
  if (data_)
    ::munmap(const_cast<std::byte *>(data_), size_);
}

} // namespace txc
