//===- CompileCommand.cpp - txc compile MODEL -o model.txm ---------------------===//
//
// Imports a Hugging Face model directory (or reads a tx module from a .mlir
// file), runs the txc pipeline for the target, and writes one artifact.
// Progress goes to stderr, one line per phase, with timings.
//
//===----------------------------------------------------------------------===//

#include "tools/txc/Commands.h"

#include "lib/compiler/ConfigProto.h"
#include "lib/frontend/ConfigParser.h"
#include "lib/frontend/Importer.h"
#include "runtime/artifact/artifact.pb.h"
#include "txc/Compiler.h"
#include "txc/InitAllTxc.h"
#include "txc/artifact/ArtifactFormat.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <sstream>

namespace txc::tools {

llvm::cl::SubCommand compileCommand("compile",
                                    "Compile a Hugging Face model directory into a .txm artifact");

namespace {

namespace cl = llvm::cl;

cl::opt<std::string> modelPath(cl::Positional, cl::Required,
                               cl::desc("<model directory, or a tx .mlir file>"),
                               cl::sub(compileCommand));
cl::opt<std::string> outputPath("o",
                                cl::desc("Artifact to write (required unless --emit or --stats)"),
                                cl::value_desc("model.txm"), cl::sub(compileCommand));
cl::opt<std::string> target("target", cl::desc("cpu or sm_90a (default cpu)"), cl::init("cpu"),
                            cl::sub(compileCommand));
cl::opt<int64_t> tensorParallel("tp", cl::desc("Tensor-parallel ranks (default 1)"), cl::init(1),
                                cl::sub(compileCommand));
cl::opt<int64_t> maxBatchTokens("max-batch-tokens",
                                cl::desc("Most tokens in one step (default 2048)"),
                                cl::init(2048), cl::sub(compileCommand));
cl::opt<int64_t>
    maxSeqs("max-seqs",
            cl::desc("Most sequences in one step, at most --max-batch-tokens (default 256)"),
            cl::init(256), cl::sub(compileCommand));
cl::opt<int64_t> maxSeqLen("max-seq-len",
                           cl::desc("Longest sequence served (default 4096, or the model's "
                                    "max_position_embeddings where that is shorter)"),
                           cl::init(4096), cl::sub(compileCommand));
const std::string pageSizeHelp =
    "Tokens per KV-cache page, 1 to " + std::to_string(artifact::kMaxKvPageSize) +
    " (default 16); on sm_90a a size that is not a power of two runs the slower generic "
    "attention kernel";
cl::opt<int64_t> pageSize("kv-page-size", cl::desc(pageSizeHelp), cl::init(16),
                          cl::sub(compileCommand));
cl::opt<bool> noWeights("no-weights",
                        cl::desc("Leave weights out; tx-run binds them with --weights DIR"),
                        cl::sub(compileCommand));
cl::opt<uint64_t> randomWeights("random-weights",
                                cl::desc("Leave weights out; the runtime generates them from "
                                         "this seed (benchmarks of real shapes)"),
                                cl::sub(compileCommand));
cl::opt<std::string> weightsDir("weights",
                                cl::desc("Checkpoint directory for a .mlir input (default: the "
                                         "model directory)"),
                                cl::sub(compileCommand));
cl::opt<std::string> emit("emit", cl::desc("Print the IR instead of writing: tx (fused and "
                                           "sharded) or txk (lowered and planned)"),
                          cl::sub(compileCommand));
cl::opt<bool> stats("stats", cl::desc("Print launches per decoder layer, arena size and weight "
                                      "bytes"),
                    cl::sub(compileCommand));
cl::opt<std::string> computeDType("dtype",
                                  cl::desc("Compute dtype: auto (the checkpoint's), f32, bf16 "
                                           "or f16"),
                                  cl::init("auto"), cl::sub(compileCommand));
cl::opt<bool> verifyEach("verify-each", cl::desc("Verify the IR after every pass"),
                         cl::sub(compileCommand));
cl::opt<bool> noFoldNormWeights("no-fold-norm-weights",
                                cl::desc("Keep RMSNorm weights in the norms instead of folding "
                                         "them into the projections after them (for comparison)"),
                                cl::sub(compileCommand));

using Clock = std::chrono::steady_clock;

struct Progress {
  Clock::time_point start = Clock::now();
  void operator()(const std::string &line) const {
    double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    llvm::errs() << llvm::format("txc compile [%7.1f ms] ", ms) << line << "\n";
  }
};

int fail(const std::string &message) {
  llvm::errs() << "txc compile: error: " << message << "\n";
  return 1;
}

bool isMlirFile(const std::string &path) { return llvm::sys::path::extension(path) == ".mlir"; }

/// The longest sequence the artifact serves: --max-seq-len, else 4096 capped
/// at the context the model was trained for (a sequence that reaches it ends
/// with finish_reason "length" instead of running on past the positions the
/// model knows, as vLLM's max_model_len does).
int64_t servedSeqLen(mlir::ModuleOp module) {
  auto trained = module->getAttrOfType<mlir::IntegerAttr>("tx.max_position_embeddings");
  const int64_t positions = trained ? trained.getInt() : 0;
  if (maxSeqLen.getNumOccurrences()) {
    if (positions > 0 && maxSeqLen > positions)
      llvm::errs() << "txc compile: warning: --max-seq-len " << maxSeqLen
                   << " is past the model's max_position_embeddings (" << positions
                   << "): later positions are extrapolated\n";
    return maxSeqLen;
  }
  return positions > 0 ? std::min<int64_t>(maxSeqLen, positions) : maxSeqLen;
}

} // namespace

int runCompile() {
  if (outputPath.empty() && emit.empty() && !stats)
    return fail("name the artifact with -o (or ask for --emit=tx|txk or --stats)");
  if (!emit.empty() && emit != "tx" && emit != "txk")
    return fail("--emit must be tx or txk, got '" + emit + "'");
  // --emit prints to stdout and returns before the artifact is written: an
  // -o beside it would be ignored, leaving no file where one was asked for.
  if (!emit.empty() && !outputPath.empty())
    return fail("--emit prints the IR to stdout and writes no artifact; drop -o " + outputPath +
                " (or redirect stdout)");
  if (noWeights && randomWeights.getNumOccurrences())
    return fail("--no-weights and --random-weights exclude each other");
  // The runtime reads 0 or less in the artifact as "use the default" (4096
  // tokens, 16-token pages), so a bad value here would be served silently as
  // something the user did not ask for.
  if (maxSeqLen.getNumOccurrences() && maxSeqLen < 1)
    return fail("--max-seq-len must be at least 1, got " + std::to_string(maxSeqLen));
  if (pageSize < 1)
    return fail("--kv-page-size must be at least 1, got " + std::to_string(pageSize));
  // The backends size a page in 32 bits (2 * page_size * kv_heads *
  // head_dim); the artifact validation refuses more as well.
  if (pageSize > artifact::kMaxKvPageSize)
    return fail("--kv-page-size must be at most " + std::to_string(artifact::kMaxKvPageSize) +
                ", got " + std::to_string(pageSize));
  // txk-plan-memory sizes the arena for these and needs
  // 0 < max-seqs <= max-batch-tokens (each sequence in a step brings at least
  // one token); refused here, naming the flag, instead of deep in the pass.
  if (maxBatchTokens < 1)
    return fail("--max-batch-tokens must be at least 1, got " + std::to_string(maxBatchTokens));
  if (maxSeqs < 1 || maxSeqs > maxBatchTokens)
    return fail("--max-seqs must be between 1 and --max-batch-tokens (" +
                std::to_string(maxBatchTokens) + "), got " + std::to_string(maxSeqs));
  Progress progress;

  mlir::DialectRegistry registry;
  registerAllTxcDialects(registry);
  mlir::MLIRContext context(registry);
  context.loadAllAvailableDialects();

  // 1. The tx module and the model's config.
  std::string checkpointDir = weightsDir.empty() ? modelPath.getValue() : weightsDir.getValue();
  if (isMlirFile(modelPath) && weightsDir.empty())
    checkpointDir.clear();
  mlir::OwningOpRef<mlir::ModuleOp> module;
  if (isMlirFile(modelPath)) {
    llvm::SourceMgr sources;
    module = mlir::parseSourceFile<mlir::ModuleOp>(modelPath, sources, &context);
    if (!module)
      return fail(modelPath + ": not a valid tx module");
  } else {
    frontend::ImportOptions options;
    options.kvPageSize = pageSize;
    if (computeDType == "f32")
      options.computeDType = DType::kF32;
    else if (computeDType == "bf16")
      options.computeDType = DType::kBF16;
    else if (computeDType == "f16")
      options.computeDType = DType::kF16;
    else if (computeDType != "auto")
      return fail("--dtype must be auto, f32, bf16 or f16, got '" + computeDType + "'");
    std::vector<Status> problems;
    auto imported = frontend::importModel(context, modelPath, options, &problems);
    if (!imported.isOk()) {
      for (const Status &problem : problems)
        llvm::errs() << "txc compile: error: " << problem.message() << "\n";
      return 1;
    }
    module = std::move(imported.value());
  }
  artifact::pb::Artifact message;
  if (!checkpointDir.empty()) {
    auto config = frontend::loadModelConfig(checkpointDir + "/config.json");
    if (!config.isOk())
      return fail(config.status().message());
    *message.mutable_config() = toProto(*config);
    // tokenizer.json, or failing that a plain id -> token list (llama2.c
    // conversions such as stories260K ship vocab.json), which tx-run reads too.
    for (const char *name : {"/tokenizer.json", "/vocab.json"}) {
      std::ifstream tokenizer(checkpointDir + name, std::ios::binary);
      if (!tokenizer)
        continue;
      std::stringstream text;
      text << tokenizer.rdbuf();
      // A damaged file is a mistake in the model directory: embedded, it
      // would leave tx-run unable to encode any --prompt, so it fails here,
      // naming the file, instead.
      if (llvm::Expected<llvm::json::Value> parsed = llvm::json::parse(text.str()); !parsed)
        return fail(checkpointDir + name + ": invalid JSON: " + llvm::toString(parsed.takeError()));
      message.set_tokenizer_json(text.str());
      break;
    }
  }
  progress("imported " + modelPath);

  // 2. The pipeline.
  CompileOptions options;
  options.target = target;
  options.tensorParallel = tensorParallel;
  options.maxBatchTokens = maxBatchTokens;
  options.maxSeqs = maxSeqs;
  options.maxSeqLen = servedSeqLen(*module);
  options.kvPageSize = pageSize;
  options.verifyEach = verifyEach;
  options.foldNormWeights = !noFoldNormWeights;
  if (emit == "tx") {
    // Fusion and sharding only: everything the pipeline does before lowering.
    CompileOptions txOnly = options;
    if (Status status = runTxPipeline(*module, txOnly); !status.isOk())
      return fail(status.message());
    module->print(llvm::outs());
    llvm::outs() << "\n";
    return 0;
  }
  if (Status status = runPipeline(*module, options); !status.isOk())
    return fail(status.message());
  progress("ran " + std::string(target == "cpu" ? "txc-to-cpu" : "txc-to-cuda") +
           " (tp=" + std::to_string(tensorParallel) +
           ", max_seq_len=" + std::to_string(options.maxSeqLen) + ")");
  if (emit == "txk") {
    module->print(llvm::outs());
    llvm::outs() << "\n";
    return 0;
  }
  if (stats) {
    auto planStats = computePlanStats(*module);
    if (!planStats.isOk())
      return fail(planStats.status().message());
    llvm::outs() << "layers: " << planStats->layers << "\n"
                 << "launches per decoder layer: " << planStats->launchesPerLayer << "\n"
                 << "launches per step: " << planStats->launches << "\n"
                 << "arena bytes: " << planStats->arenaBytes << "\n"
                 << "weight bytes per rank: " << planStats->weightBytes << "\n";
    if (outputPath.empty())
      return 0;
  }

  // 3. The artifact.
  WeightOptions weights;
  weights.checkpoint = checkpointDir;
  weights.stripped = noWeights || randomWeights.getNumOccurrences() || checkpointDir.empty();
  if (randomWeights.getNumOccurrences())
    weights.randomSeed = randomWeights.getValue();
  if (checkpointDir.empty() && !noWeights && !randomWeights.getNumOccurrences())
    return fail("a .mlir input needs --weights DIR, --no-weights or --random-weights SEED");
  if (Status status = writeArtifact(*module, std::move(message), options, weights, outputPath,
                                    progress);
      !status.isOk())
    return fail(status.message());
  progress("done");
  return 0;
}

} // namespace txc::tools
