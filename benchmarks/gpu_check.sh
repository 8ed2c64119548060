#!/usr/bin/env bash
# Issue 43's GPU checks in one call, for a machine with a CUDA GPU (not yet run on one): CUDA graphs' losses
# against eager ones (the CUDA case of tests/run/test_compiled.py), compile reuse and ms a step with and without CUDA
# graphs (benchmarks/compile_reuse.py), and populations against lone runs (benchmarks/population_bench.py).
# Needs gptlab installed (pip install -e ".[test]") over a CUDA torch, and tinyshakespeare under $GPTLAB_DATA_DIR.
# Run from the repository root: bash benchmarks/gpu_check.sh [LOG_DIR]   (each check's output also goes to LOG_DIR)
set -uo pipefail
logs=${1:-gpu_check_logs}
python -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 'no CUDA device: these checks need one')" || exit 2
mkdir -p "$logs"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$logs/gpu.txt"
python -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)" | tee -a "$logs/gpu.txt"
status=0
python -m pytest -q -n0 -p no:cacheprovider tests/run/test_compiled.py 2>&1 | tee "$logs/test_compiled.txt" || status=1
for graphs in "" --cuda-graphs; do
  python benchmarks/compile_reuse.py --device cuda --model default --steps 200 $graphs 2>&1 | tee -a "$logs/compile_reuse.txt" || status=1
done
for model in default tiny; do
  python benchmarks/population_bench.py --device cuda --model "$model" --repeat 3 2>&1 | tee -a "$logs/population_bench.txt" || status=1
done
exit $status
