//===- nvrtc_compiler.cpp - NVRTC compilation with a content-hash cache ---===//
#include <nvrtc.h>

#include "lib/codegen/nvrtc_compiler.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "lib/codegen/kernel_sources.h"
#include "lib/codegen/sha256.h"

namespace txc::codegen {
namespace {

bool readFile(const std::filesystem::path &path, std::string *out) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return false;
  std::ostringstream ss;
  ss << in.rdbuf();
  *out = ss.str();
  return true;
}

/// Writes to a temporary name, then renames: a reader never sees half a file,
/// and two processes compiling the same kernel both leave a whole one.
Status writeFileAtomically(const std::filesystem::path &path, const std::string &bytes) {
  std::filesystem::path tmp = path;
  tmp += ".tmp" + std::to_string(reinterpret_cast<uintptr_t>(&bytes));
  {
    std::ofstream out(tmp, std::ios::binary);
    out.write(bytes.data(), (std::streamsize)bytes.size());
    if (!out)
      return Status(kernels::StatusCode::kIoError, "codegen: cannot write " + tmp.string());
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec)
    return Status(kernels::StatusCode::kIoError, "codegen: cannot rename to " + path.string() + ": " + ec.message());
  return Status::ok();
}

struct ProgramDeleter {
  void operator()(nvrtcProgram *p) const {
    nvrtcDestroyProgram(p);
    delete p;
  }
};

} // namespace

KernelCompiler::KernelCompiler(std::string cache_dir) : cache_dir_(std::move(cache_dir)) {}

std::vector<std::string> KernelCompiler::commandLine(const NvrtcOptions &options) {
  const std::string include = options.cuda_include_dir.empty() ? TXC_CUDA_INCLUDE_DIR : options.cuda_include_dir;
  std::vector<std::string> args = {"--gpu-architecture=" + options.arch, "-std=c++17", "-DNDEBUG",
                                   "-I" + include};
  // CUDA 13 keeps the CCCL headers (pulled in by cuda_fp16.h) in include/cccl.
  if (std::filesystem::exists(include + "/cccl"))
    args.push_back("-I" + include + "/cccl");
  for (const auto &flag : options.extra_flags)
    args.push_back(flag);
  return args;
}

std::string KernelCompiler::cacheKey(const std::string &source, const std::string &name_expression,
                                     const NvrtcOptions &options) {
  Sha256 h;
  auto field = [&](const std::string &s) {
    h.update(std::to_string(s.size()));
    h.update(":");
    h.update(s);
  };
  int major = 0, minor = 0;
  nvrtcVersion(&major, &minor);
  field("nvrtc " + std::to_string(major) + "." + std::to_string(minor));
  field(source);
  field(name_expression);
  for (const auto &arg : commandLine(options))
    field(arg);
  for (const auto &header : embeddedKernelHeaders()) {
    field(header.name);
    field(header.text);
  }
  return h.hexDigest();
}

Status KernelCompiler::compile(const std::string &source, const std::string &name_expression,
                               const NvrtcOptions &options, CompiledKernel *out) const {
  out->cache_key = cacheKey(source, name_expression, options);
  out->from_cache = false;
  out->log.clear();
  std::filesystem::path cubin_path, name_path;
  if (!cache_dir_.empty()) {
    cubin_path = std::filesystem::path(cache_dir_) / (out->cache_key + ".cubin");
    name_path = std::filesystem::path(cache_dir_) / (out->cache_key + ".symbol");
    if (readFile(cubin_path, &out->cubin) && readFile(name_path, &out->lowered_name) && !out->cubin.empty() &&
        !out->lowered_name.empty()) {
      out->from_cache = true;
      return Status::ok();
    }
  }

  const auto &headers = embeddedKernelHeaders();
  std::vector<const char *> header_texts, header_names;
  for (const auto &h : headers) {
    header_texts.push_back(h.text.c_str());
    header_names.push_back(h.name.c_str());
  }
  std::unique_ptr<nvrtcProgram, ProgramDeleter> program(new nvrtcProgram(nullptr));
  TXC_NVRTC_CHECK(nvrtcCreateProgram(program.get(), source.c_str(), "txc_specialization.cu", (int)headers.size(),
                                     header_texts.data(), header_names.data()));
  TXC_NVRTC_CHECK(nvrtcAddNameExpression(*program, name_expression.c_str()));
  const std::vector<std::string> args = commandLine(options);
  std::vector<const char *> arg_ptrs;
  for (const auto &a : args)
    arg_ptrs.push_back(a.c_str());
  nvrtcResult result = nvrtcCompileProgram(*program, (int)arg_ptrs.size(), arg_ptrs.data());
  size_t log_size = 0;
  nvrtcGetProgramLogSize(*program, &log_size);
  std::string log(log_size, '\0');
  nvrtcGetProgramLog(*program, log.data());
  while (!log.empty() && log.back() == '\0')
    log.pop_back();
  if (result != NVRTC_SUCCESS)
    return Status(kernels::StatusCode::kCompileError,
                  std::string("codegen: NVRTC failed (") + nvrtcGetErrorString(result) + "):\n" + log);
  out->log = std::move(log);
  const char *lowered = nullptr;
  TXC_NVRTC_CHECK(nvrtcGetLoweredName(*program, name_expression.c_str(), &lowered));
  out->lowered_name = lowered;
  size_t cubin_size = 0;
  TXC_NVRTC_CHECK(nvrtcGetCUBINSize(*program, &cubin_size));
  out->cubin.resize(cubin_size);
  TXC_NVRTC_CHECK(nvrtcGetCUBIN(*program, out->cubin.data()));

  if (!cache_dir_.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(cache_dir_, ec);
    TXC_RETURN_IF_ERROR(writeFileAtomically(cubin_path, out->cubin));
    TXC_RETURN_IF_ERROR(writeFileAtomically(name_path, out->lowered_name));
  }
  return Status::ok();
}

} // namespace txc::codegen
