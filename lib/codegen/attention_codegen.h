//===- attention_codegen.h - Attention kernel specializations for NVRTC ---===//
//
// Turns the constants of one model's attention (kind, element type, head_dim,
// GQA group, page size, mask variant) into the source of one kernel
// specialization of the templates in runtime/kernels/attention, plus the
// name expression NVRTC needs to find the kernel's lowered symbol. The source
// also defines two __constant__ ints, txc_kernel_threads and
// txc_kernel_smem_bytes, which the runtime reads from the loaded module to
// launch the kernel with the block size and dynamic shared memory the Traits
// derived, so the host never duplicates the template's arithmetic.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <string>

#include "status.h"

namespace txc::codegen {

using kernels::Status;

enum class AttentionKernelKind { kDecode, kPrefill };
enum class AttentionDType { kBf16, kFp16 };

struct AttentionKernelSpec {
  AttentionKernelKind kind = AttentionKernelKind::kDecode;
  AttentionDType dtype = AttentionDType::kBf16;
  int head_dim = 128;
  int group_size = 1; // query heads per kv head (decode only picks the kernel by it)
  int page_size = 0;  // 0: read at run time from the KV cache view
  bool causal = false;
  bool sliding_window = false;
  bool softcap = false;
};

/// Rejects values no template instantiation exists for, naming the value.
Status validateSpec(const AttentionKernelSpec &spec);

/// A readable, unique name, e.g. "decode_bf16_d128_g4_p16_window".
std::string specName(const AttentionKernelSpec &spec);

/// The C++ expression naming the kernel, for nvrtcAddNameExpression.
std::string kernelNameExpression(const AttentionKernelSpec &spec);

/// The complete translation unit of the specialization.
std::string specializationSource(const AttentionKernelSpec &spec);

} // namespace txc::codegen
