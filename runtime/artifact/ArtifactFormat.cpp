//===- ArtifactFormat.cpp - Encode and validate the .txm header -----------===//
#include "txc/artifact/ArtifactFormat.h"
#include "txc/artifact/Hash.h"

#include <cstring>

namespace txc::artifact {
namespace {

constexpr size_t kChecksummedBytes = 48;

void put32(unsigned char *p, uint32_t v) { std::memcpy(p, &v, 4); }
void put64(unsigned char *p, uint64_t v) { std::memcpy(p, &v, 8); }
uint32_t get32(const unsigned char *p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
uint64_t get64(const unsigned char *p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

} // namespace

void encodeArtifactHeader(const ArtifactHeader &header,
                          unsigned char out[kArtifactHeaderBytes]) {
  std::memset(out, 0, kArtifactHeaderBytes);
  std::memcpy(out, kArtifactMagic, sizeof(kArtifactMagic));
  put32(out + 8, header.format_version);
  put32(out + 12, static_cast<uint32_t>(kArtifactHeaderBytes));
  put64(out + 16, header.message_offset);
  put64(out + 24, header.message_bytes);
  put64(out + 32, header.blob_offset);
  put64(out + 40, header.blob_bytes);
  put64(out + 48, xxh64(out, kChecksummedBytes));
}

StatusOr<ArtifactHeader> decodeArtifactHeader(const unsigned char *bytes,
                                              size_t file_size,
                                              const std::string &path) {
  size_t magic_bytes_present =
      file_size < sizeof(kArtifactMagic) ? file_size : sizeof(kArtifactMagic);
  if (magic_bytes_present > 0 &&
      std::memcmp(bytes, kArtifactMagic, magic_bytes_present) != 0)
    return invalidArgument(path +
                           ": not a txc artifact (wrong magic; expected "
                           "\"TXCARTF\\0\" in the first 8 bytes)");
  if (file_size < kArtifactHeaderBytes)
    return dataLoss(path + ": truncated: " + std::to_string(file_size) +
                    " bytes, shorter than the " +
                    std::to_string(kArtifactHeaderBytes) + "-byte header");

  ArtifactHeader header;
  header.format_version = get32(bytes + 8);
  if (header.format_version > kArtifactFormatVersion)
    return unimplemented(
        path + ": format version " + std::to_string(header.format_version) +
        " is newer than this reader supports (" +
        std::to_string(kArtifactFormatVersion) +
        "); use a newer txc or recompile the model");
  if (header.format_version == 0)
    return dataLoss(path + ": corrupt header: format version 0");
  if (get64(bytes + 48) != xxh64(bytes, kChecksummedBytes))
    return dataLoss(path + ": corrupt header: header checksum mismatch");

  uint32_t header_bytes = get32(bytes + 12);
  header.message_offset = get64(bytes + 16);
  header.message_bytes = get64(bytes + 24);
  header.blob_offset = get64(bytes + 32);
  header.blob_bytes = get64(bytes + 40);
  if (header_bytes != kArtifactHeaderBytes ||
      header.message_offset < kArtifactHeaderBytes)
    return dataLoss(path + ": corrupt header: message offset " +
                    std::to_string(header.message_offset) +
                    " overlaps the header");

  // Compare without adding first: a corrupt length near 2^64 must not wrap.
  if (header.message_offset > file_size ||
      header.message_bytes > file_size - header.message_offset)
    return dataLoss(path + ": truncated: " + std::to_string(file_size) +
                    " bytes, but the header says the message ends at byte " +
                    std::to_string(header.message_offset +
                                   header.message_bytes));
  uint64_t message_end = header.message_offset + header.message_bytes;
  if (header.blob_offset != 0 || header.blob_bytes != 0) {
    if (header.blob_offset % kBlobAlignment != 0 ||
        header.blob_offset < message_end)
      return dataLoss(path + ": corrupt header: blob offset " +
                      std::to_string(header.blob_offset) +
                      " is not 64-aligned after the message");
    if (header.blob_offset > file_size ||
        header.blob_bytes > file_size - header.blob_offset)
      return dataLoss(path + ": truncated: " + std::to_string(file_size) +
                      " bytes, but the header says the weight blob ends at "
                      "byte " +
                      std::to_string(header.blob_offset + header.blob_bytes));
  }
  return header;
}

} // namespace txc::artifact
