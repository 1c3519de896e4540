# Sourced by the research/scripts/device_*.sh scripts (a lent device machine, the device tool; DEVELOPERS.md): on a machine
# whose python lacks the CLI's dependencies, install the wheels carried in .whl/ into /tmp/site; unbuffered output;
# `at` runs the autotuner CLI from the working tree (the device image has no venv).
if [ -d .whl ] && ! python3 -c "import pydantic, typer, platformdirs" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || { echo "wheel install failed"; exit 2; }
  export PYTHONPATH=/tmp/site:$PWD
fi
export PYTHONUNBUFFERED=1
at() { python3 -c "import sys; from autotuner.cli import main; sys.exit(main())" "$@"; }
