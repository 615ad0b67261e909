#!/usr/bin/env bash
# Side-by-side of kvsight's cpu paged-decode kernels and llama.cpp's CPU flash
# attention (issue #15 item 7): ggml's `test-backend-ops perf -o FLASH_ATTN_EXT`
# at head_dim 128, 8 KV / 32 Q heads, 32K tokens, batch 1 and 4, F16, on
# THREADS threads, then kvsight's probe on the same shape, then the stream
# probe, all in one run. llama.cpp is the copy vendored in the llama-cpp-python
# sdist, built under $WORK (default /tmp/kvsight-peer), never in the repo.
#
# Usage: scripts/peer-llamacpp-cpu.sh [path/to/kvsight]   (THREADS=2 WORK=/tmp/...)
# Two patches to test-backend-ops.cpp, both in the copy under $WORK:
#  - its CPU backend runs hardware_concurrency/2 threads; KVS_PEER_THREADS sets it;
#  - make_test_cases_perf has no flash-attention case; four are added:
#    test_flash_attn_ext(hsk 128, hsv 128, nh 8 KV heads, nr23 {4 (GQA), 1 or 4
#    (sequences)}, kv 32768, nb 1 query token, mask, F16 K/V), with the
#    default layout (each head's rows contiguous: a view of a [128, 2 x kv]
#    buffer) and permute {0, 2, 1, 3} (heads of a token adjacent, as llama.cpp's
#    KV cache).
set -euo pipefail
KVSIGHT=${1:-build/kvsight}
THREADS=${THREADS:-2}
WORK=${WORK:-/tmp/kvsight-peer}
mkdir -p "$WORK"
cd "$WORK"
if [ ! -d llama-src ]; then
  pip download --no-deps --no-binary :all: llama-cpp-python -d sdist >/dev/null
  mkdir llama-src && tar xzf sdist/llama_cpp_python-*.tar.gz -C llama-src --strip-components=1
fi
SRC=$WORK/llama-src/vendor/llama.cpp
TBO=$SRC/tests/test-backend-ops.cpp
if ! grep -q KVS_PEER_THREADS "$TBO"; then
  sed -i 's|ggml_backend_set_n_threads_fn(backend.get(), std::max<int>(1, N_THREADS/2));|ggml_backend_set_n_threads_fn(backend.get(), getenv("KVS_PEER_THREADS") ? atoi(getenv("KVS_PEER_THREADS")) : std::max<int>(1, N_THREADS/2));|' "$TBO"
  python3 - "$TBO" <<'PY'
import sys
path = sys.argv[1]
text = open(path).read()
anchor = "static std::vector<std::unique_ptr<test_case>> make_test_cases_perf() {\n    std::vector<std::unique_ptr<test_case>> test_cases;\n"
assert anchor in text, "make_test_cases_perf not found"
cases = """    // kvsight peer cases (scripts/peer-llamacpp-cpu.sh)
    for (int seqs : {1, 4}) {
        for (std::array<int32_t, 4> perm : {std::array<int32_t, 4>{0, 1, 2, 3}, std::array<int32_t, 4>{0, 2, 1, 3}}) {
            test_cases.emplace_back(new test_flash_attn_ext(128, 128, 8, {4, seqs}, 32768, 1, true, false, 0, 0,
                                                            GGML_PREC_F32, GGML_TYPE_F16, GGML_TYPE_F16, perm));
        }
    }
"""
open(path, "w").write(text.replace(anchor, anchor + cases))
PY
  grep -q KVS_PEER_THREADS "$TBO" && grep -q "kvsight peer cases" "$TBO"
fi
if [ ! -x bin/test-backend-ops ]; then
  cmake -S "$SRC" -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DLLAMA_BUILD_TESTS=OFF -DLLAMA_CURL=OFF \
    -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DGGML_NATIVE=ON -DLLAMA_OPENSSL=OFF >/dev/null
  ninja -C build ggml ggml-base ggml-cpu >/dev/null
  mkdir -p bin
  # test-backend-ops needs ggml only (its CMake target also links libllama).
  g++ -O2 -std=c++17 -I"$SRC/ggml/include" "$TBO" -o bin/test-backend-ops -Lbuild/bin -lggml -lggml-base \
    -Wl,-rpath,"$WORK/build/bin" -lpthread
fi
cd - >/dev/null
echo "== ggml CPU flash attention, $THREADS threads"
# Only the four cases added above: ggml's own perf list also has kv=32768 cases (nb=4096 ones
# take about a minute each on 2 threads).
KVS_PEER_THREADS=$THREADS "$WORK/bin/test-backend-ops" perf -b CPU -o FLASH_ATTN_EXT -p 'hsk=128,hsv=128,nh=8,nr23=\[4,[14]\],kv=32768,nb=1,' 2>&1 |
  grep -E "FLASH_ATTN_EXT|threads" || true
for batch in 1 4; do
  for dtype in fp16 bf16; do
    echo "== kvsight splitkv batch $batch $dtype, $THREADS threads"
    "$KVSIGHT" probe attention --backend cpu --threads "$THREADS" --kernel splitkv --context 32768 --batch "$batch" \
      --kv-heads 8 --q-heads 32 --head-dim 128 --dtype "$dtype" --max-mem 3GiB --format json |
      python3 -c 'import json,sys; j=json.load(sys.stdin); r=j["results"][0] if "results" in j else j; print(json.dumps(r, indent=None)[:2000])'
  done
done
echo "== kvsight probe bandwidth, $THREADS threads"
"$KVSIGHT" probe bandwidth --backend cpu --threads "$THREADS" --format json
