//===- InspectCommand.cpp - txc inspect ---------------------------------------===//

#include "tools/txc/Commands.h"

#include "txc/artifact/Artifact.h"
#include "txc/artifact/ArtifactSummary.h"

#include "llvm/Support/raw_ostream.h"

using namespace llvm;

namespace txc::tools {

cl::SubCommand inspectCommand("inspect", "Show what a .txm artifact holds");

static cl::opt<std::string> inspectPath(cl::Positional, cl::desc("<model.txm>"), cl::Required,
                                        cl::sub(inspectCommand));
static cl::opt<unsigned> listWeights("list-weights", cl::desc("How many weights to list"),
                                     cl::init(16), cl::sub(inspectCommand));

int runInspect() {
  artifact::LoadOptions options;
  options.bind_weights = false;
  options.verify_weight_checksums = false;
  auto loaded = artifact::LoadedArtifact::load(inspectPath, options);
  if (!loaded.isOk()) {
    errs() << "txc inspect: " << loaded.status().message() << "\n";
    return 1;
  }
  outs() << artifact::summarizeArtifact((*loaded)->message(), (*loaded)->header(), listWeights);
  return 0;
}

} // namespace txc::tools
