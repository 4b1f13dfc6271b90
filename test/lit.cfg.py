# lit configuration for txc. Tests that need a GPU carry `REQUIRES: gpu`;
# the feature is present only when nvidia-smi sees a device.
import os
import shutil
import subprocess
import sys

import lit.formats

config.name = "txc"
config.test_format = lit.formats.ShTest()
config.suffixes = [".mlir", ".test"]
config.excludes = ["Inputs", "fixtures", "unit", "gpu", "CMakeLists.txt", "lit.cfg.py"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.txc_obj_root, "test")

config.environment["PATH"] = os.pathsep.join(
    [config.txc_tools_dir, config.llvm_tools_dir, config.environment.get("PATH", "")])

config.substitutions.append(("%txc_src", config.txc_src_root))
config.substitutions.append(("%python", sys.executable))
config.substitutions.append(("%tx_run", os.path.join(config.txc_tools_dir, "tx-run")))
config.substitutions.append(("%check_goldens",
                             os.path.join(config.txc_src_root, "test", "e2e", "check_goldens.py")))
config.substitutions.append(("%fixtures", os.path.join(config.txc_src_root, "test", "fixtures")))
shared_models = os.path.join(os.path.dirname(config.txc_src_root), "shared", "models")
config.substitutions.append(("%shared_models", shared_models))
if os.path.isdir(os.path.join(shared_models, "stories260K")):
    config.available_features.add("stories260K")

if config.txc_enable_cuda:
    config.available_features.add("cuda-toolkit")
smi = shutil.which("nvidia-smi")
if smi and subprocess.run([smi, "-L"], capture_output=True).returncode == 0:
    config.available_features.add("gpu")
