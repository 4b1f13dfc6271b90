//===- TxRun.cpp - tx-run: generate from a compiled artifact --------------===//
//
// Loads model.txm, builds the backend's StepExecutor, submits every prompt
// to one Engine (so they are batched together) and prints the results: one
// JSON object per request with --json, text otherwise. The flags are
// Options.cpp's.
//
//===----------------------------------------------------------------------===//
#include "Tokenizer.h"
#include "tools/tx-run/Options.h"

#include "runtime/backends/cpu/CpuExecutor.h"
#include "runtime/backends/cpu/LogitsRecorder.h"
#include "tools/tx-run/StepTimer.h"
#ifdef TXC_HAVE_CUDA_BACKEND
#include "runtime/backends/cuda/CudaExecutor.h"
#endif
#include "txc/artifact/Artifact.h"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

using txc::txrun::fail;
using txc::txrun::Options;

namespace {

std::string formatBytes(double bytes) {
  char text[32];
  if (bytes >= 1e9)
    std::snprintf(text, sizeof text, "%.2f GB", bytes / 1e9);
  else if (bytes >= 1e6)
    std::snprintf(text, sizeof text, "%.1f MB", bytes / 1e6);
  else
    std::snprintf(text, sizeof text, "%.1f KB", bytes / 1e3);
  return text;
}

double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Loading a large checkpoint, uploading it and capturing the decode graphs
// take seconds: a phase that took over this long says so on stderr (with
// --timing both phases do, on one "tx-run startup:" line instead).
constexpr double kReportSeconds = 2.0;

} // namespace


int main(int argc, char **argv) {
  Options options = txc::txrun::parseArguments(argc, argv);
#ifndef TXC_HAVE_CUDA_BACKEND
  if (options.device == "cuda")
    fail("--device cuda: this build has no CUDA backend (configure with "
         "-DTXC_ENABLE_CUDA=ON); use --device cpu");
#endif

  txc::artifact::LoadOptions load_options;
  load_options.weights_dir = options.weights_dir;
  load_options.random_weights_seed = options.random_weights_seed;
  const auto load_started = std::chrono::steady_clock::now();
  auto artifact = txc::artifact::LoadedArtifact::load(options.model, load_options);
  if (!artifact.isOk())
    fail(artifact.status().message());
  const double load_seconds = secondsSince(load_started);
  double weight_bytes = 0;
  for (const txc::artifact::BoundWeight &weight : (*artifact)->weights())
    weight_bytes += static_cast<double>(weight.bytes);
  if (!options.timing && load_seconds > kReportSeconds)
    std::fprintf(stderr, "tx-run: %s loaded in %.1f s (%s of weights, %s)\n", options.model.c_str(), load_seconds,
                 formatBytes(weight_bytes).c_str(), (*artifact)->weightOrigin().c_str());

  // Only --prompt needs the tokenizer: one this tool cannot read (a Unigram
  // model, say) fails --prompt, naming the problem, and otherwise leaves the
  // output as ids, as for an artifact that carries none.
  std::optional<txc::tools::Tokenizer> tokenizer;
  txc::Status tokenizer_status = txc::Status::ok();
  const std::string &tokenizer_json = (*artifact)->message().tokenizer_json();
  if (!tokenizer_json.empty()) {
    auto parsed = txc::tools::Tokenizer::fromJson(tokenizer_json, options.model);
    if (parsed.isOk())
      tokenizer = std::move(*parsed);
    else
      tokenizer_status = parsed.status();
  }

  std::vector<std::vector<int32_t>> prompts = options.prompt_ids;
  for (const std::string &text : options.prompts) {
    if (!tokenizer_status.isOk())
      fail("--prompt: " + tokenizer_status.message() + "; use --prompt-ids");
    if (!tokenizer)
      fail("--prompt: " + options.model + " carries no tokenizer; use --prompt-ids");
    auto ids = tokenizer->encode(text, (*artifact)->config());
    if (!ids.isOk())
      fail("--prompt: " + ids.status().message());
    prompts.push_back(*ids);
  }

  std::unique_ptr<txc::engine::StepExecutor> executor;
  std::function<float()> gpu_step_ms = [] { return -1.0f; };
  const auto backend_started = std::chrono::steady_clock::now();
#ifdef TXC_HAVE_CUDA_BACKEND
  txc::cuda::CudaExecutor *cuda_backend = nullptr;
#endif
  txc::engine::EngineConfig engine_config;
#ifdef TXC_HAVE_CUDA_BACKEND
  if (options.device == "cuda") {
    txc::cuda::CudaExecutorOptions cuda_options = options.cuda;
    cuda_options.num_kv_pages = options.kv_pages;
    using Ablation = txc::cuda::CudaExecutorOptions::DecodeAttentionAblation;
    if (cuda_options.ablate_decode_attention != Ablation::kNone)
      std::fprintf(stderr, "tx-run: --ablate-decode-attention: the outputs are wrong (for timing only)\n");
    if (cuda_options.ablate_decode_out_proj)
      std::fprintf(stderr,
                   "tx-run: --ablate-decode-out-proj: the outputs are wrong (for timing only)\n");
    auto cuda_executor = txc::cuda::CudaExecutor::create(**artifact, cuda_options);
    if (!cuda_executor.isOk())
      fail("--device cuda: " + cuda_executor.status().message());
    engine_config = (*cuda_executor)->engineConfig();
    cuda_backend = cuda_executor->get();
    gpu_step_ms = [cuda = cuda_backend] { return cuda->lastStepMs(); };
    executor = std::move(*cuda_executor);
  }
#endif
  if (!executor) {
    txc::cpu::CpuExecutorOptions executor_options;
    executor_options.num_threads = options.threads;
    executor_options.num_kv_pages = options.kv_pages;
    auto cpu_executor = txc::cpu::CpuExecutor::create(**artifact, executor_options);
    if (!cpu_executor.isOk())
      fail(cpu_executor.status().message());
    engine_config = (*cpu_executor)->engineConfig();
    executor = std::move(*cpu_executor);
  }
  const double backend_seconds = secondsSince(backend_started);
  if (!options.timing && backend_seconds > kReportSeconds)
    std::fprintf(stderr, "tx-run: the %s backend was ready in %.1f s%s\n", options.device.c_str(), backend_seconds,
                 options.device == "cuda" ? " (weights uploaded, warm-up steps run, decode graphs captured)" : "");
  if (options.timing)
    std::fprintf(stderr, "tx-run startup: %s loaded in %.3f s (%s of weights), the %s backend ready in %.3f s\n",
                 options.model.c_str(), load_seconds, formatBytes(weight_bytes).c_str(), options.device.c_str(),
                 backend_seconds);
  txc::tools::StepTimer timer(*executor, gpu_step_ms);
  txc::cpu::LogitsRecorder recorder(timer);
  auto engine = txc::engine::Engine::create(recorder, engine_config);
  if (!engine.isOk())
    fail(engine.status().message());

  std::vector<txc::engine::Request> requests;
  for (size_t i = 0; i < prompts.size(); ++i) {
    requests.push_back({prompts[i], options.sampling});
    // Copying every vocabulary-sized row costs time; only when asked.
    if (options.return_logits)
      recorder.expectRequest(static_cast<txc::engine::RequestId>(i),
                             static_cast<int32_t>(prompts[i].size()));
  }
  auto started = std::chrono::steady_clock::now();
  auto results = (*engine)->generate(requests);
  if (!results.isOk())
    fail(results.status().message());
  if (options.timing) {
    double total =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started)
            .count();
    size_t generated = 0;
    for (const auto &result : *results)
      generated += result.output_ids.size();
    auto t = timer.summary();
    std::fprintf(stderr,
                 "tx-run timing: %zu decode steps, median %.3f ms wall, %.3f ms GPU stream; "
                 "%zu prefill steps, median %.3f ms wall, %.3f ms GPU stream; "
                 "whole run %.1f ms for %zu tokens\n",
                 t.decodeSteps, t.decodeWallMs, t.decodeGpuMs, t.prefillSteps, t.prefillWallMs,
                 t.prefillGpuMs, total, generated);
#ifdef TXC_HAVE_CUDA_BACKEND
    if (cuda_backend) {
      auto describe = [](const txc::cuda::DecodeAttentionSetup &s) {
        return std::string(s.rope_in_attention ? "rope folded in" : "rope kernel") + ", " +
               (s.cluster_combine ? "cluster merge" : "global-memory merge") + ", " +
               std::to_string(s.split_min_tokens) + "-token chunks";
      };
      const txc::cuda::DecodeAttentionTuning tuning = cuda_backend->decodeAttentionTuning();
      const std::string wide =
          options.cuda.decode_wide_cta ? "; one wide CTA a KV head up to " +
                                             std::to_string(options.cuda.decode_wide_cta_max_keys) +
                                             " keys of context"
                                       : "";
      std::fprintf(stderr, "tx-run timing: decode attention: %s%s",
                   describe(cuda_backend->decodeAttention()).c_str(), wide.c_str());
      if (tuning.tuned)
        std::fprintf(
            stderr, " (tuned over %d set-ups at batch 1: %.3f ms a step; the rule's %s: %.3f)",
            tuning.candidates, tuning.chosen_ms, describe(tuning.rule).c_str(), tuning.rule_ms);
      std::fprintf(stderr, "\n");
    }
    if (cuda_backend && options.cuda.decode_lookahead)
      std::fprintf(stderr,
                   "tx-run timing: lookahead: %lld of %zu decode steps ran on a step queued ahead "
                   "(%lld queued)\n",
                   static_cast<long long>(cuda_backend->decodeStepsRunAhead()), t.decodeSteps,
                   static_cast<long long>(cuda_backend->decodeStepsQueuedAhead()));
    if (cuda_backend && options.cuda.trace_decode_steps)
      std::fprintf(stderr, "%s", txc::cuda::formatDecodeTrace(cuda_backend->lastDecodeTrace()).c_str());
    if (cuda_backend)
      for (const auto &entry : cuda_backend->launchProfile())
        std::fprintf(stderr,
                     "tx-run timing: %-7s %-24s %6lld launches %9.3f ms total %8.4f ms each\n",
                     entry.decode ? "decode" : "prefill", entry.op.c_str(),
                     static_cast<long long>(entry.launches), entry.total_ms,
                     entry.total_ms / static_cast<double>(entry.launches));
#endif
  }

  for (size_t i = 0; i < prompts.size(); ++i) {
    const txc::engine::RequestResult &result = (*results)[i];
    std::string text;
    if (tokenizer)
      text = tokenizer->decode(result.output_ids);
    if (options.json) {
      nlohmann::json object;
      object["request"] = i;
      object["prompt_ids"] = prompts[i];
      object["output_ids"] = result.output_ids;
      object["finish_reason"] = txc::engine::finishReasonName(result.finish_reason);
      if (tokenizer)
        object["text"] = text;
      if (options.return_logits)
        object["logits"] = recorder.rows(static_cast<txc::engine::RequestId>(i));
      std::cout << object.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    } else if (tokenizer) {
      std::vector<int32_t> all = prompts[i];
      all.insert(all.end(), result.output_ids.begin(), result.output_ids.end());
      std::cout << tokenizer->decode(all) << "\n";
    } else {
      for (size_t k = 0; k < result.output_ids.size(); ++k)
        std::cout << (k ? " " : "") << result.output_ids[k];
      std::cout << "\n";
    }
  }
  return 0;
}
