//===- AttentionCodegenTest.cpp - Specialization source, cache keys, NVRTC ===//
#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "lib/codegen/attention_codegen.h"
#include "lib/codegen/kernel_sources.h"
#include "lib/codegen/nvrtc_compiler.h"

using namespace txc::codegen;

namespace {

AttentionKernelSpec decodeSpec() {
  AttentionKernelSpec s;
  s.kind = AttentionKernelKind::kDecode;
  s.head_dim = 128;
  s.group_size = 4;
  s.page_size = 16;
  return s;
}

TEST(AttentionCodegen, SourceCarriesTheModelConstants) {
  const std::string src = specializationSource(decodeSpec());
  EXPECT_NE(src.find("#include \"attention/decode_mma.cuh\""), std::string::npos);
  EXPECT_NE(src.find("DecodeMmaTraits<__nv_bfloat16, 128, 4, 16>"), std::string::npos) << src;
  EXPECT_NE(src.find("AttentionVariant<false, false, false>"), std::string::npos);
  EXPECT_NE(src.find("txc_kernel_smem_bytes = TxcTraits::kSmemBytes"), std::string::npos);

  AttentionKernelSpec mha = decodeSpec();
  mha.group_size = 1; // below the tensor-core threshold: the CUDA-core kernel
  EXPECT_NE(specializationSource(mha).find("DecodeTraits<__nv_bfloat16, 128, 1, 16>"), std::string::npos);
  EXPECT_NE(specializationSource(mha).find("txc_kernel_smem_bytes = 0"), std::string::npos);

  AttentionKernelSpec prefill;
  prefill.kind = AttentionKernelKind::kPrefill;
  prefill.dtype = AttentionDType::kFp16;
  prefill.head_dim = 256;
  prefill.causal = true;
  prefill.sliding_window = true;
  EXPECT_NE(specializationSource(prefill).find("PrefillTraits<__half, 256, 0>"), std::string::npos);
  EXPECT_NE(kernelNameExpression(prefill).find("AttentionVariant<true, true, false>"), std::string::npos);
}

TEST(AttentionCodegen, EverySpecHasItsOwnName) {
  std::set<std::string> names;
  int count = 0;
  for (auto kind : {AttentionKernelKind::kDecode, AttentionKernelKind::kPrefill})
    for (auto dtype : {AttentionDType::kBf16, AttentionDType::kFp16})
      for (int dim : {64, 128, 256})
        for (int page : {0, 16})
          for (bool window : {false, true}) {
            AttentionKernelSpec s = decodeSpec();
            s.kind = kind;
            s.dtype = dtype;
            s.head_dim = dim;
            s.page_size = page;
            s.sliding_window = window;
            names.insert(specName(s));
            ++count;
          }
  EXPECT_EQ((int)names.size(), count);
}

TEST(AttentionCodegen, RejectsUnsupportedValuesByName) {
  AttentionKernelSpec s = decodeSpec();
  s.head_dim = 96;
  Status st = validateSpec(s);
  EXPECT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("96"), std::string::npos);
  s = decodeSpec();
  s.page_size = 24;
  EXPECT_NE(validateSpec(s).message().find("24"), std::string::npos);
  s = decodeSpec();
  s.group_size = 17;
  EXPECT_NE(validateSpec(s).message().find("17"), std::string::npos);
  EXPECT_TRUE(validateSpec(decodeSpec()).isOk());
}

TEST(AttentionCodegen, EmbedsTheKernelHeaders) {
  std::set<std::string> names;
  for (const auto &h : embeddedKernelHeaders()) {
    names.insert(h.name);
    EXPECT_GT(h.text.size(), 100u) << h.name;
  }
  for (const char *needed : {"attention/params.h", "attention/decode.cuh", "attention/decode_mma.cuh", "attention/rope.cuh",
                             "attention/prefill.cuh", "attention/variant.cuh", "attention/device_utils.cuh"})
    EXPECT_TRUE(names.count(needed)) << needed;
}

TEST(KernelCompiler, CacheKeyFollowsEveryInput) {
  NvrtcOptions opts;
  const std::string src = specializationSource(decodeSpec());
  const std::string expr = kernelNameExpression(decodeSpec());
  const std::string key = KernelCompiler::cacheKey(src, expr, opts);
  EXPECT_EQ(key.size(), 64u);
  EXPECT_EQ(key, KernelCompiler::cacheKey(src, expr, opts));
  EXPECT_NE(key, KernelCompiler::cacheKey(src + " ", expr, opts));
  EXPECT_NE(key, KernelCompiler::cacheKey(src, expr + " ", opts));
  NvrtcOptions other = opts;
  other.extra_flags.push_back("-lineinfo");
  EXPECT_NE(key, KernelCompiler::cacheKey(src, expr, other));
  other = opts;
  other.arch = "sm_100a";
  EXPECT_NE(key, KernelCompiler::cacheKey(src, expr, other));
}

TEST(KernelCompiler, CompilesForSm90aAndCaches) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                    ("txc_codegen_test_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()));
  std::filesystem::remove_all(dir);
  KernelCompiler compiler(dir.string());
  NvrtcOptions opts;
  for (AttentionKernelSpec spec : {decodeSpec(), AttentionKernelSpec{AttentionKernelKind::kPrefill}}) {
    if (spec.kind == AttentionKernelKind::kPrefill)
      spec.causal = true;
    CompiledKernel first;
    Status st = compiler.compile(specializationSource(spec), kernelNameExpression(spec), opts, &first);
    ASSERT_TRUE(st.isOk()) << st.message();
    EXPECT_FALSE(first.from_cache);
    ASSERT_GT(first.cubin.size(), 4u);
    EXPECT_EQ(first.cubin.substr(0, 4), std::string("\x7f" "ELF"));
    EXPECT_EQ(first.lowered_name.rfind("_Z", 0), 0u) << first.lowered_name;
    EXPECT_TRUE(std::filesystem::exists(dir / (first.cache_key + ".cubin")));

    CompiledKernel second;
    ASSERT_TRUE(compiler.compile(specializationSource(spec), kernelNameExpression(spec), opts, &second).isOk());
    EXPECT_TRUE(second.from_cache);
    EXPECT_EQ(second.cubin, first.cubin);
    EXPECT_EQ(second.lowered_name, first.lowered_name);
  }
  std::filesystem::remove_all(dir);
}

// The warp-specialized prefill issues its wgmmas asynchronously and waits
// for them later; where an issue and its wait lie in different branches,
// ptxas waits after every wgmma of the kernel instead (performance note
// C7518, only with -v) and the prefill ran ~25% slower on the H200
// (bench/RUNLOG.md, device run 138). The d128 kernels, causal (pairs) and
// full (the persistent walk whose consecutive tiles overlap), compiled as
// the runtime compiles them, must not carry that note.
TEST(KernelCompiler, PrefillWgmmasAreNotSerialized) {
  KernelCompiler compiler;
  NvrtcOptions opts;
  opts.extra_flags.push_back("--ptxas-options=-v");
  for (bool causal : {false, true}) {
    AttentionKernelSpec spec{AttentionKernelKind::kPrefill};
    spec.causal = causal;
    spec.page_size = 16;
    CompiledKernel out;
    Status st = compiler.compile(specializationSource(spec), kernelNameExpression(spec), opts, &out);
    ASSERT_TRUE(st.isOk()) << st.message();
    EXPECT_NE(out.log.find("Used"), std::string::npos) << "no ptxas -v report in the log:\n" << out.log;
    EXPECT_EQ(out.log.find("C7518"), std::string::npos) << specName(spec) << ":\n" << out.log;
    EXPECT_EQ(out.log.find("serialized"), std::string::npos) << specName(spec) << ":\n" << out.log;
  }
}

TEST(KernelCompiler, ReportsCompileErrorsWithTheLog) {
  KernelCompiler compiler;
  CompiledKernel out;
  Status st = compiler.compile("__global__ void k() { this_is_not_declared(); }", "k", NvrtcOptions(), &out);
  EXPECT_FALSE(st.isOk());
  EXPECT_EQ(st.code(), txc::kernels::StatusCode::kCompileError);
  EXPECT_NE(st.message().find("this_is_not_declared"), std::string::npos) << st.message();
}

} // namespace
