//===- ArtifactSummary.cpp - What is inside a .txm, for people ------------===//
#include "txc/artifact/ArtifactSummary.h"
#include "runtime/safetensors/SafetensorsFile.h"

#include <cstdio>
#include <map>
#include <sstream>

namespace txc::artifact {
namespace {

const char *storageName(pb::WeightStorage storage) {
  switch (storage) {
  case pb::WEIGHTS_EMBEDDED: return "embedded";
  case pb::WEIGHTS_EXTERNAL: return "external (weight-stripped)";
  case pb::WEIGHTS_RANDOM: return "random";
  default: return "unknown";
  }
}

std::string humanBytes(uint64_t bytes) {
  const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024.0 && unit < 4) {
    value /= 1024.0;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof(text), unit == 0 ? "%.0f %s" : "%.2f %s", value,
                units[unit]);
  return text;
}

} // namespace

std::string summarizeArtifact(const pb::Artifact &message,
                              const ArtifactHeader &header,
                              size_t max_weights_listed) {
  std::ostringstream out;
  char hash[19];
  std::snprintf(hash, sizeof(hash), "0x%016llx",
                static_cast<unsigned long long>(message.content_hash()));
  out << "format version " << header.format_version << ", written by txc "
      << message.txc_version() << ", content hash " << hash << "\n";

  const pb::ModelConfig &config = message.config();
  out << "model: " << config.architecture() << " (" << config.model_type()
      << "), " << config.num_layers() << " layers, hidden " << config.hidden_size()
      << ", intermediate " << config.intermediate_size() << ", heads "
      << config.num_attention_heads() << "/" << config.num_key_value_heads()
      << " x " << config.head_dim() << ", vocab " << config.vocab_size() << "\n";
  out << "  rope theta " << config.rope_theta();
  if (config.has_rope_scaling())
    out << ", scaling " << config.rope_scaling().type() << " x"
        << config.rope_scaling().factor();
  out << ", rms eps " << config.rms_norm_eps()
      << (config.qk_norm() ? ", qk-norm" : "")
      << (config.attention_bias() ? ", qkv bias" : "")
      << (config.tie_word_embeddings() ? ", tied embeddings" : "") << "\n";

  const pb::CompileOptions &options = message.options();
  out << "compiled for " << options.target() << ", tp " << options.tensor_parallel()
      << ", max_batch_tokens " << options.max_batch_tokens() << ", max_seq_len "
      << options.max_seq_len() << ", kv page " << options.kv_page_size()
      << " tokens\n";

  for (int p = 0; p < message.plans_size(); ++p) {
    const pb::Plan &plan = message.plans(p);
    std::map<std::string, int> ops;
    for (const pb::Launch &launch : plan.launches())
      ++ops[launch.op()];
    out << "plan " << p << ": " << plan.launches_size() << " launches, arena "
        << humanBytes(plan.arena_bytes()) << "\n";
    for (const auto &[op, count] : ops)
      out << "  " << count << " x " << op << "\n";
  }
  for (const pb::TargetKernels &target : message.kernels()) {
    uint64_t bytes = 0;
    int entries = 0;
    for (const pb::KernelImage &image : target.kernels()) {
      bytes += image.cubin().size() + image.ptx().size();
      entries += image.entry_points_size();
    }
    out << "kernels for " << target.target() << ": " << target.kernels_size()
        << " modules, " << entries << " entry points, " << humanBytes(bytes) << "\n";
  }

  uint64_t weight_bytes = 0;
  for (const pb::WeightEntry &entry : message.weights())
    weight_bytes += entry.bytes();
  out << "weights: " << message.weights_size() << " tensors, "
      << humanBytes(weight_bytes) << ", " << storageName(message.weight_storage());
  if (message.weight_storage() == pb::WEIGHTS_RANDOM)
    out << " (seed " << message.random_weights_seed() << ")";
  out << "\n";
  size_t listed = 0;
  for (const pb::WeightEntry &entry : message.weights()) {
    if (listed++ == max_weights_listed) {
      out << "  ... " << (message.weights_size() - max_weights_listed) << " more\n";
      break;
    }
    out << "  " << entry.name() << " "
        << dtypeName(fromProtoDType(entry.dtype())) << " "
        << formatShape({entry.shape().begin(), entry.shape().end()}) << "\n";
  }
  out << "tokenizer: "
      << (message.tokenizer_json().empty()
              ? std::string("none")
              : humanBytes(message.tokenizer_json().size()) + " of tokenizer.json")
      << "\n";
  return out.str();
}

} // namespace txc::artifact
