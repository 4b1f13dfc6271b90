//===- ArtifactFormat.h - The fixed header of a .txm file ------*- C++ -*-===//
//
// A .txm file is: a 64-byte header, the serialized txc.artifact.pb.Artifact
// message, zero padding to a 64-byte boundary, the weight blob. The header
// is fixed-size and self-describing so a reader can refuse a file (wrong
// magic, newer version, truncated) before it parses anything. See
// runtime/artifact/FORMAT.md.
//
//===----------------------------------------------------------------------===//
#ifndef TXC_ARTIFACT_ARTIFACTFORMAT_H
#define TXC_ARTIFACT_ARTIFACTFORMAT_H

#include "txc/Status.h"

#include <cstddef>
#include <cstdint>
#include <string>

namespace txc::artifact {

inline constexpr char kArtifactMagic[8] = {'T', 'X', 'C', 'A',
                                           'R', 'T', 'F', '\0'};
/// Bumped whenever a reader of the previous version would run a newer
/// artifact incorrectly; readers refuse versions above their own.
inline constexpr uint32_t kArtifactFormatVersion = 1;
inline constexpr size_t kArtifactHeaderBytes = 64;
/// Blob and every weight inside it start on this boundary, so the mmapped
/// weights suit vector loads and cp.async/TMA-friendly uploads.
inline constexpr uint64_t kBlobAlignment = 64;
/// The most tokens a KV-cache page may hold (CompileOptions::kv_page_size):
/// `txc compile --kv-page-size` and the artifact validation both refuse more.
/// The backends size a page as 2 * page_size * kv_heads * head_dim with a
/// 32-bit page_size, which a page size near INT32_MAX overflows; 4096 (a
/// whole default-length sequence in one page) keeps that far from the limit.
inline constexpr int64_t kMaxKvPageSize = 4096;

inline constexpr uint64_t alignUp(uint64_t value, uint64_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

/// The decoded header. All offsets are from the start of the file.
struct ArtifactHeader {
  uint32_t format_version = kArtifactFormatVersion;
  uint64_t message_offset = kArtifactHeaderBytes;
  uint64_t message_bytes = 0;
  uint64_t blob_offset = 0; // 0 when there is no blob
  uint64_t blob_bytes = 0;
};

/// Little-endian layout:
///   [0, 8)   magic "TXCARTF\0"      [8, 12)  format version (u32)
///   [12, 16) header bytes (u32, 64) [16, 24) message offset (u64)
///   [24, 32) message bytes (u64)    [32, 40) blob offset (u64)
///   [40, 48) blob bytes (u64)       [48, 56) XXH64 of bytes [0, 48)
///   [56, 64) reserved, zero
void encodeArtifactHeader(const ArtifactHeader &header,
                          unsigned char out[kArtifactHeaderBytes]);

/// Checks, in this order, so each fault gets its own message naming `path`:
/// magic, truncation of the header, format version, header checksum, and
/// that message and blob lie inside `file_size` bytes.
StatusOr<ArtifactHeader> decodeArtifactHeader(const unsigned char *bytes,
                                              size_t file_size,
                                              const std::string &path);

} // namespace txc::artifact

#endif // TXC_ARTIFACT_ARTIFACTFORMAT_H
