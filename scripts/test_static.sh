#!/usr/bin/env bash
# The static build (KILN_BUILD_SHARED=OFF: no libkiln.so.0, the Python extension embeds the runtime)
# in its own virtual environment, which sees the torch, numpy and pytest of the environment running
# it, and its Python tests; tests of the shared runtime and C++ SDK are skipped, as reported.
# The default tier runs the tests of the Python API and of what the static module embeds (runtime,
# registries, the quantized and LLM extensions); with KILN_TEST_TIER=full (scripts/test.sh --full)
# every test file runs. Arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
venv=build/static-venv
[ -x "$venv/bin/python" ] || "$PYTHON" -m venv "$venv"
# The static venv sees the packages of the environment running this script
# (torch, pytest, ...), whether that is the system interpreter or a venv: a
# .pth file lists that environment's site directories. They come after the
# static venv's own, so its static kiln shadows the shared one.
"$PYTHON" -c "import sys; print('\n'.join(p for p in sys.path if p.endswith(('site-packages', 'dist-packages'))))" \
  > "$("$venv/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")/kiln_test_parent_env.pth"
if [ -f build/ccache/ccache.conf ] && command -v ccache >/dev/null; then  # scripts/setup.sh's compiler cache
  export CCACHE_DIR="$PWD/build/ccache" CMAKE_CXX_COMPILER_LAUNCHER=ccache
fi
KILN_BUILD_SHARED=OFF "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
  --config-settings=build-dir=build/static \
  --force-reinstall --no-deps .
if [ "${KILN_TEST_TIER:-}" = full ]; then
  tests=(tests)
else
  # Some of these run here only, the whole-SmolLM2 ones (whole_llm) included: scripts/test.sh leaves
  # them out of the shared pass (its list), for the balance of the passes; the code they reach is the
  # same in both builds, and the shared pass's C++ example drives the shared BatchRunner.
  # No other file here has whole_llm tests; the shared pass runs those it has (tests/conftest.py).
  tests=(tests/test_llm_batch.py tests/test_serve.py
         tests/test_static_build.py tests/test_no_torch.py tests/test_errors.py tests/test_inputs.py
         tests/test_registry.py tests/test_kernel_tiers.py tests/test_missing_kernel.py tests/test_models.py
         tests/test_state.py tests/test_threads.py tests/test_buffers_and_files.py tests/test_corrupt_files.py
         tests/test_hostile_sizes_and_state.py tests/test_program_metadata.py tests/test_quantized.py
         tests/test_llm.py tests/test_llm_tokenizer.py tests/test_llm_files.py tests/test_first_hour.py
         tests/test_llm_architectures.py)
fi
# A base directory of its own: this pass runs beside the shared one (scripts/test.sh).
"$venv/bin/python" -m pytest "${tests[@]}" --basetemp="${TMPDIR:-/tmp}/kiln-static-pytest" "$@"
