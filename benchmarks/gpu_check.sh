#!/usr/bin/env bash
# One prepared device run, bounded to TOTAL_S seconds (default 560; a device call may run 600 s): the CuPy tests,
# the flash-linear-attention comparison, then the FAVOR+ rooflines.
#
#   OUT=/some/dir bash benchmarks/gpu_check.sh          # from the repository root, on a machine with a GPU
#
# 1. the wheels carried in .whl/ installed into /tmp/site (no index, no dependencies), PYTHONPATH=/tmp/site:.;
# 2. the tests that run on CuPy: tests/accel and tests/attention selected by `-k cupy` (the `xp` fixture's
#    CuPy parameter, tests/accel/test_cupy*.py -- chunk-parallel scans, the frames kernels, FAVOR+ and a
#    training step under accel.use("cupy") -- and test_compare's CuPy kernels), at most TESTS_S seconds;
# 3. benchmarks/gpu.py --sections fla at L = 16384, m = 64, at most FLA_S seconds: fla's Triton autotuner
#    compiles about 30 configurations per kernel before the first timed call (over 4 minutes on an H200), so
#    the compiled kernels go to $OUT/triton-cache, seeded from .triton-cache when a previous run's cache is
#    carried (copy $OUT/triton-cache to .triton-cache and add it to the call's carry);
# 4. benchmarks/gpu.py --L 16384,65536 --dtypes float32 --repeat 10 --sections ceilings,favor,roofline in the
#    time left (its favor and roofline sections time the causal FAVOR+ forward and backward under
#    accel.use("cupy")).
#
# Writes $OUT/env.txt, $OUT/tests.log, $OUT/fla.log, $OUT/fla.md, $OUT/gpu.log, $OUT/gpu.md (tables, rewritten
# after every section, so a run cut short keeps what it measured) and prints a summary at the end.
set -u
OUT=${OUT:-$PWD/gpu_out}
TOTAL_S=${TOTAL_S:-560}
TESTS_S=${TESTS_S:-60}
FLA_S=${FLA_S:-330}
mkdir -p "$OUT"
T0=$(date +%s)
left() { echo $(( TOTAL_S - ($(date +%s) - T0) )); }

{
    timeout 10 nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
    python3 --version
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
        .whl/*.whl
} > "$OUT/env.txt" 2>&1
export PYTHONPATH=/tmp/site:.
timeout 60 python3 -c "
import cupy, numpy, array_api_compat, accel
print('cupy', cupy.__version__, 'numpy', numpy.__version__, 'array_api_compat', array_api_compat.__version__)
print('accel.available()', accel.available())" >> "$OUT/env.txt" 2>&1

opts=(-q -p no:cacheprovider -rfE --maxfail=10 --durations=10)
python3 -c "import xdist" 2>/dev/null && opts+=(-n 8)
python3 -c "import pytest_timeout" 2>/dev/null && opts+=(--timeout 60)
budget=$(( $(left) - 100 < TESTS_S ? $(left) - 100 : TESTS_S ))
budget=$(( budget < 20 ? 20 : budget ))
timeout -s INT -k 10 "$budget" python3 -m pytest "${opts[@]}" tests/accel tests/attention -k cupy \
    > "$OUT/tests.log" 2>&1
echo "pytest exit status $? (limit ${budget} s; 124: cut there by SIGINT, the summary covers what ran;" \
    "137: killed 10 s later)" >> "$OUT/tests.log"

[ -d .triton-cache ] && cp -r .triton-cache "$OUT/triton-cache"
budget=$(( $(left) - 60 < FLA_S ? $(left) - 60 : FLA_S ))
budget=$(( budget < 30 ? 30 : budget ))
TRITON_CACHE_DIR="$OUT/triton-cache" TRITON_PRINT_AUTOTUNING=1 timeout -k 5 "$budget" python3 -u \
    benchmarks/gpu.py --L 16384 --dtypes float32 --repeat 10 --fla-m 64 --sections fla --out "$OUT/fla.md" \
    > "$OUT/fla.log" 2>&1
echo "gpu.py --sections fla exit status $? (limit ${budget} s; 124: cut at the limit)" >> "$OUT/fla.log"

budget=$(( $(left) - 10 ))
budget=$(( budget < 30 ? 30 : budget ))
timeout -k 5 "$budget" python3 -u benchmarks/gpu.py --L 16384,65536 --dtypes float32 --repeat 10 \
    --sections ceilings,favor,roofline --out "$OUT/gpu.md" > "$OUT/gpu.log" 2>&1
echo "gpu.py exit status $? (limit ${budget} s; 124: cut at the limit)" >> "$OUT/gpu.log"

echo "== env ($(( $(date +%s) - T0 )) s in all)"
cat "$OUT/env.txt"
echo "== tests"
grep -E "^(FAILED|ERROR)|passed|failed|pytest exit status" "$OUT/tests.log" | tail -30
echo "== fla"
grep -v "^Autotuning kernel" "$OUT/fla.log" | tail -25
echo "== gpu.md tables"
[ -f "$OUT/gpu.md" ] && sed -n '/^## log/q;p' "$OUT/gpu.md"
echo "== gpu.log (tail)"
tail -15 "$OUT/gpu.log"
