#!/usr/bin/env bash
# Install PyTorch 2.13.0 (CPU) and build Horovod 0.28.1 with PyTorch + Gloo into the active venv.
#
# Horovod 0.28.1's CMake asks for -std=c++14, but torch >= 2.1 headers need C++17
# (Horovod issue #3996). A tiny compiler wrapper rewrites the flag. It also drops -g: Horovod's setup.py builds
# CMake's RelWithDebInfo (setup.py, custom_build_ext: -O3 -g after CMakeLists.txt's -O2 -> -O3), and the debug
# information of every unit that includes torch's headers costs build time and nothing at run time (on this
# project's 2-core CI machines: 17 min with -g, 7.6 min without): GCC's code is the same with or
# without -g (same -O3, only no symbols for gdb). Uses the system cmake (3.25);
# pip's cmake 4.x rejects Horovod's old CMake files.
# Idempotent: does nothing if `import horovod.torch` already works.
# Usage: . .venv/bin/activate && bash scripts/install_horovod.sh
set -euo pipefail

if [ -z "${VIRTUAL_ENV:-}" ]; then
    echo "error: activate the project's venv first (. .venv/bin/activate)" >&2
    exit 2
fi
if python -c "import horovod.torch" >/dev/null 2>&1; then
    echo "horovod already installed: $(python -c 'import horovod; print(horovod.__version__)')"
    exit 0
fi
command -v cmake >/dev/null || { echo "error: cmake not found on PATH (need cmake 3.x)" >&2; exit 2; }

python -m pip install --quiet torch==2.13.0 numpy setuptools wheel
python -m pip install --quiet 'cloudpickle' 'psutil' 'pyyaml' 'packaging' 'cffi>=1.4.0'

wrapper_dir="$VIRTUAL_ENV/lib/horovod-cxx17"
mkdir -p "$wrapper_dir"
cat > "$wrapper_dir/c++" <<'WRAP'
#!/usr/bin/env bash
args=()
for a in "$@"; do
    if [ "$a" = "-std=c++14" ]; then a="-std=c++17"; fi
    if [ "$a" = "-g" ]; then continue; fi
    args+=("$a")
done
exec /usr/bin/c++ "${args[@]}"
WRAP
chmod +x "$wrapper_dir/c++"

# The system cmake must win over any pip-installed cmake in the venv.
PATH="/usr/bin:$PATH" \
CXX="$wrapper_dir/c++" \
HOROVOD_WITH_PYTORCH=1 HOROVOD_WITHOUT_TENSORFLOW=1 HOROVOD_WITHOUT_MXNET=1 \
HOROVOD_WITH_GLOO=1 HOROVOD_WITHOUT_MPI=1 HOROVOD_CPU_OPERATIONS=GLOO \
MAKEFLAGS="-j$(nproc)" \
    python -m pip install --no-build-isolation --no-cache-dir --quiet horovod==0.28.1

horovodrun --check-build
