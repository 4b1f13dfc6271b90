//===- SafetensorsFileTest.cpp - One safetensors file: good and broken ----===//
//
// Every malformed-input class gets its own test and its own message; every
// message must be one line that names the file (and the tensor, if any).
//
//===----------------------------------------------------------------------===//

#include "runtime/safetensors/SafetensorsFile.h"
#include "test/unit/safetensors/SafetensorsTestFiles.h"

#include <gtest/gtest.h>

#include <cstring>
#include <sys/stat.h>

namespace txc {
namespace {

using testing::FakeTensor;
using testing::ScratchDirectory;

/// Parses bytes as a file named "test.safetensors" would be.
StatusOr<SafetensorsHeader> parseBytes(const std::string &bytes) {
  return parseSafetensors(reinterpret_cast<const std::byte *>(bytes.data()), bytes.size(),
                          "test.safetensors");
}

StatusOr<SafetensorsHeader> parseHeader(const nlohmann::json &header, const std::string &data) {
  return parseBytes(testing::safetensorsBytes(header.dump(), data));
}

/// The error of a parse that must fail; checks the one-line, names-the-file
/// rule on the way.
std::string errorOf(const StatusOr<SafetensorsHeader> &result) {
  EXPECT_FALSE(result.isOk());
  if (result.isOk())
    return "";
  const std::string &message = result.status().message();
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  EXPECT_EQ(message.rfind("test.safetensors: ", 0), 0u) << message;
  return message;
}

nlohmann::json oneTensor(const std::string &dtype, const std::vector<int64_t> &shape,
                         uint64_t begin, uint64_t end) {
  return {{"w", {{"dtype", dtype}, {"shape", shape}, {"data_offsets", {begin, end}}}}};
}

TEST(SafetensorsFile, ParsesTensorsSortedWithMetadata) {
  nlohmann::json header =
      testing::contiguousHeader({{"b", "BF16", {2, 3}}, {"a", "F32", {4}}, {"c", "F16", {}}});
  header["__metadata__"] = {{"format", "pt"}};
  auto result = parseHeader(header, std::string(12 + 16 + 2, '\0'));
  ASSERT_TRUE(result.isOk()) << result.status().toString();
  const SafetensorsHeader &parsed = result.value();
  ASSERT_EQ(parsed.tensors.size(), 3u);
  EXPECT_EQ(parsed.tensors[0].name, "a");
  EXPECT_EQ(parsed.tensors[0].dtype, DType::kF32);
  EXPECT_EQ(parsed.tensors[0].dataBegin, 12u);
  EXPECT_EQ(parsed.tensors[1].shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(parsed.tensors[1].numElements(), 6u);
  EXPECT_EQ(parsed.tensors[2].shape, std::vector<int64_t>{}); // a scalar
  EXPECT_EQ(parsed.tensors[2].byteSize(), 2u);
  EXPECT_EQ(parsed.metadata.at("format"), "pt");
  EXPECT_EQ(parsed.dataSectionOffset, 8 + header.dump().size());
}

TEST(SafetensorsFile, AcceptsEmptyHeaderPaddedHeaderAndEmptyTensors) {
  EXPECT_TRUE(parseBytes(testing::safetensorsBytes("{}", "")).isOk());
  // Writers pad the header with spaces to align the data section.
  EXPECT_TRUE(parseHeader(oneTensor("F32", {1}, 0, 4), std::string(4, '\0')).isOk());
  std::string padded = oneTensor("F32", {1}, 0, 4).dump() + "      ";
  EXPECT_TRUE(parseBytes(testing::safetensorsBytes(padded, std::string(4, '\0'))).isOk());
  auto empty = parseHeader(oneTensor("BF16", {0, 7}, 0, 0), "");
  ASSERT_TRUE(empty.isOk()) << empty.status().toString();
  EXPECT_EQ(empty.value().tensors[0].byteSize(), 0u);
}

TEST(SafetensorsFile, RejectsFileShorterThanLengthPrefix) {
  EXPECT_NE(errorOf(parseBytes("")).find("too short for the 8-byte header"), std::string::npos);
  EXPECT_NE(errorOf(parseBytes("1234567")).find("7 bytes, too short"), std::string::npos);
}

TEST(SafetensorsFile, RejectsHeaderLengthPastEndOfFile) {
  std::string bytes = testing::lengthPrefixed("{}", 3);
  EXPECT_NE(errorOf(parseBytes(bytes))
                .find("header length 3 runs past the end "
                      "of the 10-byte file"),
            std::string::npos);
}

TEST(SafetensorsFile, RejectsHugeHeaderLengthBeforeLookingFurther) {
  std::string bytes = testing::lengthPrefixed("{}", uint64_t(1) << 62);
  EXPECT_NE(errorOf(parseBytes(bytes)).find("exceeds the 100000000-byte limit"), std::string::npos);
}

TEST(SafetensorsFile, RejectsInvalidJson) {
  std::string message = errorOf(parseBytes(testing::safetensorsBytes("{\"w\": [1, 2", "")));
  EXPECT_NE(message.find("invalid JSON"), std::string::npos) << message;
  // Not UTF-8: the header must be text.
  message = errorOf(parseBytes(testing::safetensorsBytes("{\"\xff\": 1}", "")));
  EXPECT_NE(message.find("invalid JSON"), std::string::npos) << message;
}

TEST(SafetensorsFile, RejectsJsonThatIsNotAnObject) {
  EXPECT_NE(errorOf(parseBytes(testing::safetensorsBytes("[1, 2]", "")))
                .find("header is JSON but not an object"),
            std::string::npos);
}

TEST(SafetensorsFile, RejectsDeepNestingWithoutRecursing) {
  std::string deep = "{\"w\": " + std::string(100000, '[') + std::string(100000, ']') + "}";
  EXPECT_NE(errorOf(parseBytes(testing::safetensorsBytes(deep, ""))).find("nests deeper than 32"),
            std::string::npos);
}

TEST(SafetensorsFile, RejectsDuplicateKeys) {
  // The second entry would silently replace the first in a plain parser.
  std::string text = R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},)"
                     R"( "w": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})";
  EXPECT_NE(errorOf(parseBytes(testing::safetensorsBytes(text, std::string(8, '\0'))))
                .find("key 'w' appears twice"),
            std::string::npos);
}

TEST(SafetensorsFile, RejectsUnknownDTypeByName) {
  EXPECT_NE(
      errorOf(parseHeader(oneTensor("Q7", {1}, 0, 1), "x")).find("tensor 'w': unknown dtype 'Q7'"),
      std::string::npos);
}

TEST(SafetensorsFile, RejectsKnownButUnsupportedDTypeByName) {
  EXPECT_NE(errorOf(parseHeader(oneTensor("I64", {1}, 0, 8), std::string(8, '\0')))
                .find("tensor 'w': dtype I64 is not supported (txc reads BF16, "
                      "F16, F32)"),
            std::string::npos);
}

TEST(SafetensorsFile, RejectsEntryWithoutDType) {
  nlohmann::json header = {{"w", {{"shape", {1}}, {"data_offsets", {0, 4}}}}};
  EXPECT_NE(
      errorOf(parseHeader(header, std::string(4, '\0'))).find("missing or non-string \"dtype\""),
      std::string::npos);
}

TEST(SafetensorsFile, RejectsEntryThatIsNotAnObject) {
  EXPECT_NE(errorOf(parseHeader({{"w", 5}}, ""))
                .find("tensor 'w': entry is "
                      "not a JSON object"),
            std::string::npos);
}

TEST(SafetensorsFile, RejectsEmptyTensorName) {
  nlohmann::json header = {{"", oneTensor("F32", {1}, 0, 4)["w"]}};
  EXPECT_NE(errorOf(parseHeader(header, std::string(4, '\0'))).find("a tensor has an empty name"),
            std::string::npos);
}

TEST(SafetensorsFile, RejectsBadShapes) {
  nlohmann::json header = oneTensor("F32", {1}, 0, 4);
  header["w"]["shape"] = {2, -1};
  EXPECT_NE(errorOf(parseHeader(header, std::string(4, '\0')))
                .find("shape holds '-1', not a non-negative integer"),
            std::string::npos);
  header["w"]["shape"] = {1.5};
  EXPECT_NE(errorOf(parseHeader(header, std::string(4, '\0'))).find("not a non-negative integer"),
            std::string::npos);
  header["w"]["shape"] = "4";
  EXPECT_NE(
      errorOf(parseHeader(header, std::string(4, '\0'))).find("missing or non-array \"shape\""),
      std::string::npos);
  header["w"]["shape"] = std::vector<int>(9, 1);
  EXPECT_NE(errorOf(parseHeader(header, std::string(4, '\0'))).find("rank 9 exceeds 8"),
            std::string::npos);
}

TEST(SafetensorsFile, RejectsMalformedDataOffsets) {
  nlohmann::json header = oneTensor("F32", {1}, 0, 4);
  for (nlohmann::json offsets : {nlohmann::json{0, 4, 8}, nlohmann::json{-1, 3}, nlohmann::json{0},
                                 nlohmann::json("0-4"), nlohmann::json{0.0, 4.0}}) {
    header["w"]["data_offsets"] = offsets;
    EXPECT_NE(errorOf(parseHeader(header, std::string(4, '\0')))
                  .find("\"data_offsets\" must be two non-negative integers"),
              std::string::npos)
        << offsets.dump();
  }
}

TEST(SafetensorsFile, RejectsOffsetsThatEndBeforeTheyBegin) {
  EXPECT_NE(errorOf(parseHeader(oneTensor("F32", {1}, 4, 0), std::string(4, '\0')))
                .find("data_offsets [4, 0) ends before it begins"),
            std::string::npos);
}

TEST(SafetensorsFile, RejectsOffsetsPastTheDataSection) {
  EXPECT_NE(errorOf(parseHeader(oneTensor("F32", {2}, 0, 8), std::string(4, '\0')))
                .find("tensor 'w': data_offsets [0, 8) run past the data "
                      "section (4 bytes)"),
            std::string::npos);
  // Offsets near 2^64 must not wrap around.
  EXPECT_NE(errorOf(parseHeader(oneTensor("F32", {1}, ~uint64_t(0) - 3, ~uint64_t(0)),
                                std::string(4, '\0')))
                .find("run past the data section"),
            std::string::npos);
}

TEST(SafetensorsFile, RejectsByteSizeThatDisagreesWithShape) {
  EXPECT_NE(errorOf(parseHeader(oneTensor("BF16", {3, 2}, 0, 8), std::string(8, '\0')))
                .find("data_offsets [0, 8) hold 8 bytes but shape [3, 2] of "
                      "BF16 needs 12"),
            std::string::npos);
}

TEST(SafetensorsFile, RejectsShapeWhoseSizeOverflows) {
  EXPECT_NE(errorOf(parseHeader(oneTensor("F32", {int64_t(1) << 40, int64_t(1) << 40}, 0, 4),
                                std::string(4, '\0')))
                .find("overflows 64-bit byte counts"),
            std::string::npos);
}

TEST(SafetensorsFile, RejectsOverlappingTensors) {
  nlohmann::json header = {{"a", {{"dtype", "F32"}, {"shape", {2}}, {"data_offsets", {0, 8}}}},
                           {"b", {{"dtype", "F32"}, {"shape", {2}}, {"data_offsets", {4, 12}}}}};
  EXPECT_NE(errorOf(parseHeader(header, std::string(12, '\0')))
                .find("tensor 'b': data_offsets [4, 12) overlap tensor 'a' "
                      "[0, 8)"),
            std::string::npos);
}

TEST(SafetensorsFile, RejectsHolesInTheDataSection) {
  nlohmann::json header = {{"a", {{"dtype", "F32"}, {"shape", {1}}, {"data_offsets", {0, 4}}}},
                           {"b", {{"dtype", "F32"}, {"shape", {1}}, {"data_offsets", {8, 12}}}}};
  EXPECT_NE(errorOf(parseHeader(header, std::string(12, '\0')))
                .find("tensor 'b': data_offsets begin at 8, leaving bytes "
                      "[4, 8) of the data section to no tensor"),
            std::string::npos);
}

TEST(SafetensorsFile, RejectsTrailingBytesAfterTheLastTensor) {
  EXPECT_NE(errorOf(parseHeader(oneTensor("F32", {1}, 0, 4), std::string(6, '\0')))
                .find("2 bytes after the last tensor ends at 4"),
            std::string::npos);
}

TEST(SafetensorsFile, RejectsMalformedMetadata) {
  nlohmann::json header = oneTensor("F32", {1}, 0, 4);
  header["__metadata__"] = {1, 2};
  EXPECT_NE(errorOf(parseHeader(header, std::string(4, '\0')))
                .find("\"__metadata__\" is not a JSON object"),
            std::string::npos);
  header["__metadata__"] = {{"format", 3}};
  EXPECT_NE(errorOf(parseHeader(header, std::string(4, '\0')))
                .find("\"__metadata__\" entry 'format' is not a string"),
            std::string::npos);
}

TEST(SafetensorsFile, KeepsMessagesOnOneLineWhateverTheName) {
  nlohmann::json header = {{"evil\nname", oneTensor("Q7", {1}, 0, 1)["w"]}};
  EXPECT_NE(errorOf(parseHeader(header, "x")).find("'evil\\x0aname'"), std::string::npos);
}

TEST(SafetensorsFile, OpensAMappedFileAndExposesItsBytes) {
  ScratchDirectory scratch("open");
  std::string path = scratch.file("model.safetensors");
  float values[3] = {1.5f, -2.0f, 3.25f};
  nlohmann::json header = oneTensor("F32", {3}, 0, 12);
  testing::writeBytes(
      path, testing::safetensorsBytes(
                header.dump(), std::string(reinterpret_cast<char *>(values), sizeof(values))));
  auto file = SafetensorsFile::open(path);
  ASSERT_TRUE(file.isOk()) << file.status().toString();
  const TensorInfo *tensor = file.value()->find("w");
  ASSERT_NE(tensor, nullptr);
  EXPECT_EQ(file.value()->find("v"), nullptr);
  float readBack[3];
  std::memcpy(readBack, file.value()->data(*tensor), sizeof(readBack));
  EXPECT_EQ(readBack[0], 1.5f);
  EXPECT_EQ(readBack[2], 3.25f);
  EXPECT_EQ(file.value()->path(), path);
}

TEST(SafetensorsFile, ReportsMissingFilesAndNonFiles) {
  ScratchDirectory scratch("missing");
  auto missing = SafetensorsFile::open(scratch.file("absent.safetensors"));
  ASSERT_FALSE(missing.isOk());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("absent.safetensors: cannot open"), std::string::npos);

  auto directory = SafetensorsFile::open(scratch.path());
  ASSERT_FALSE(directory.isOk());
  EXPECT_NE(directory.status().message().find("not a regular file"), std::string::npos);

  // A FIFO with no writer would block a plain open() forever.
  std::string fifo = scratch.file("fifo.safetensors");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto pipe = SafetensorsFile::open(fifo);
  ASSERT_FALSE(pipe.isOk());
  EXPECT_NE(pipe.status().message().find("not a regular file"), std::string::npos);
}

TEST(SafetensorsFile, ReportsTruncatedFileOnDisk) {
  ScratchDirectory scratch("truncated");
  std::string path = scratch.file("model.safetensors");
  std::string whole =
      testing::safetensorsBytes(oneTensor("F32", {4}, 0, 16).dump(), std::string(16, '\0'));
  // Cut inside the header: the length prefix promises more than is there.
  testing::writeBytes(path, whole.substr(0, 20));
  auto file = SafetensorsFile::open(path);
  ASSERT_FALSE(file.isOk());
  EXPECT_EQ(file.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(file.status().message().find(path + ": header length"), std::string::npos);
  // Cut inside the data: the tensor runs past the end.
  testing::writeBytes(path, whole.substr(0, whole.size() - 3));
  file = SafetensorsFile::open(path);
  ASSERT_FALSE(file.isOk());
  EXPECT_NE(file.status().message().find("tensor 'w': data_offsets [0, 16) run "
                                         "past the data section (13 bytes)"),
            std::string::npos);
}

} // namespace
} // namespace txc
