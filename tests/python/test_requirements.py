"""Every distribution a test imports is pinned in a requirements list, and
installed at that pin.

A suite that passes only because the machine happens to have a package is no
check. scripts/setup.sh makes the project venv without the interpreter's own
site-packages and installs requirements/run.txt and requirements/test.txt into
it; this test reads every module of this folder, collects the top-level names of its `import`
statements and of its `pytest.importorskip("...")` calls, and requires:

- each name outside the standard library and this project maps to an
  installed distribution (a name nothing provides fails: pin it);
- that distribution is named in requirements/run.txt or requirements/test.txt
  (or a list they include with `-r`);
- the installed version is the pinned one, so an importorskip cannot skip in
  the venv that scripts/test.sh runs.
"""
import ast
import importlib.metadata as md
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
LISTS = [ROOT / "requirements" / "run.txt", ROOT / "requirements" / "test.txt"]
# This project's own modules: the package, the wheel's `zr` launcher, and the
# helper modules beside the tests and in bench/ (test_bench_quick.py puts
# bench/ on sys.path; the benchmark peers it imports are optional, each
# checked by bench/run.py, and pinned in requirements/bench.txt), and the
# examples that a test runs in process (test_spark_shards.py puts examples/
# on sys.path).
OWN = {"loaderx", "_loaderx_zr"} | {p.stem for p in HERE.glob("*.py")} \
    | {p.stem for p in (ROOT / "bench").glob("*.py")} | {"backends"} \
    | {p.stem for p in (ROOT / "examples").glob("*.py")}


def _canon(name):
    """PEP 503 normalized distribution name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def pinned(paths=LISTS):
    """{normalized name: version} of the `name==version` lines of the lists,
    following `-r FILE` includes."""
    pins, todo, seen = {}, list(paths), set()
    while todo:
        path = Path(todo.pop())
        if path in seen:
            continue
        seen.add(path)
        for raw in path.read_text().splitlines():
            line = raw.split("#", 1)[0].strip()
            if not line:
                continue
            if line.startswith("-r"):
                todo.append(path.parent / line[2:].strip())
                continue
            m = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)\s*==\s*([^\s;]+)", line)
            assert m, f"{path.name}: '{raw}' is not pinned as name==version"
            pins[_canon(m.group(1))] = m.group(2)
    return pins


def imported_names(source):
    """Top-level module names a module imports, by `import`, absolute
    `from ... import` or a literal `pytest.importorskip("name")`."""
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr == "importorskip" and node.args
              and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            names.add(node.args[0].value.split(".")[0])
    return names


def third_party(names):
    return sorted(n for n in names if n not in sys.stdlib_module_names and n not in OWN)


def problems(modules, pins, providers):
    """One line per import that breaks a rule; `modules` maps a file name to
    its source, `providers` a module name to the distributions providing it."""
    out = []
    for fname, source in sorted(modules.items()):
        for name in third_party(imported_names(source)):
            dists = providers.get(name, [])
            if not dists:
                out.append(f"{fname} imports '{name}', which no installed distribution provides "
                           f"(pin it in requirements/test.txt)")
                continue
            for dist in dists:
                want = pins.get(_canon(dist))
                if want is None:
                    out.append(f"{fname} imports '{name}' from '{dist}', which no requirements list names")
                elif md.version(dist) != want:
                    out.append(f"{fname} imports '{name}': '{dist}' {md.version(dist)} is installed, "
                               f"the lists pin {want}")
    return out


def test_every_imported_distribution_is_pinned_and_installed():
    modules = {p.name: p.read_text() for p in sorted(HERE.glob("*.py"))}
    found = problems(modules, pinned(), md.packages_distributions())
    assert not found, "\n".join(found)


def test_the_check_catches_an_unpinned_or_missing_import():
    # The rule itself, on made-up sources: a pinned import passes, an
    # unlisted one, a missing one and an importorskip of a missing one fail.
    pins = {"numpy": md.version("numpy")}
    providers = {"numpy": ["numpy"], "pytest": ["pytest"]}
    assert problems({"ok.py": "import numpy as np\nimport os\nimport loaderx\n"}, pins, providers) == []
    found = problems({"a.py": "import pytest\n",
                      "b.py": "from lmdb import open\n",
                      "c.py": "import pytest\nx = pytest.importorskip('h5py')\n"}, pins, providers)
    assert any("a.py imports 'pytest' from 'pytest', which no requirements list names" in f for f in found)
    assert any("b.py imports 'lmdb', which no installed distribution provides" in f for f in found)
    assert any("c.py imports 'h5py'" in f for f in found)
    bad = {"numpy": "0.0.1"}
    assert any("the lists pin 0.0.1" in f for f in problems({"d.py": "import numpy\n"}, bad, providers))
