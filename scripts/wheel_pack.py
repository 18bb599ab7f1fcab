#!/usr/bin/env python3
"""Pack one binary wheel of loaderx from a zig build's install tree.

    python3 scripts/wheel_pack.py DESTDIR SDIST TAG OUTDIR

DESTDIR is `meson install --destdir` of a -Dpython_cross build
(scripts/wheel.sh): loaderx/ holds the package, the extension module, the
five libraries and zr, and _loaderx_zr.py is beside it. The wheel takes:

- loaderx/*.py, *.pyi, py.typed; the extension (_zr.abi3.so, _zr.pyd); zr
  (zr.exe); each library once, under the name the others load it by (the
  soname lib<name>.so.<major> on Linux, lib<name>.<major>.dylib on macOS,
  the DLL on Windows): a wheel holds no symlinks, and the other names of a
  library are for linking against it, which a wheel is not for;
- _loaderx_zr.py, the `zr` console script's module;
- .dist-info: METADATA is the sdist's PKG-INFO (the same core metadata,
  written once by meson-python), entry_points.txt from pyproject.toml's
  [project.scripts], WHEEL with TAG (e.g. cp311-abi3-manylinux_2_17_x86_64),
  RECORD with every file's sha256.

Import libraries (.a, .lib), headers, pkg-config files and the manual stay
out. Prints the wheel's path.
"""
import base64
import hashlib
import os
import re
import stat
import sys
import tarfile
import tomllib
import zipfile

# The run-time files of the package directory; anything else there is a
# build-time file (import library, .def) and stays out.
KEEP = re.compile(r"""(
      [A-Za-z_][A-Za-z0-9_]*\.pyi?      # the package's modules and stubs
    | py\.typed
    | _zr\.abi3\.so | _zr\.pyd          # the extension module
    | zr | zr\.exe                      # the tool
    | lib[a-z]+\.so\.[0-9]+             # a library by its soname (Linux)
    | lib[a-z]+\.[0-9]+\.dylib          # by its install name (macOS)
    | lib[a-z]+(-[0-9]+)?\.dll          # (Windows)
)$""", re.X)


def sha256(data):
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def pkg_info(sdist):
    """The core metadata of the sdist (its top-level PKG-INFO)."""
    with tarfile.open(sdist) as tf:
        for m in tf.getmembers():
            parts = m.name.split("/")
            if len(parts) == 2 and parts[1] == "PKG-INFO":
                return tf.extractfile(m).read()
    raise SystemExit(f"wheel_pack: {sdist} has no PKG-INFO")


def main(destdir, sdist, tag, outdir):
    meta = pkg_info(sdist)
    fields = dict(re.findall(r"^(Name|Version): (.+)$", meta.decode(), re.M))
    name, version = fields["Name"], fields["Version"]
    with open("pyproject.toml", "rb") as f:
        scripts = tomllib.load(f)["project"].get("scripts", {})
    pkg = os.path.join(destdir, "loaderx")
    files = []  # (archive name, bytes, executable)
    for fn in sorted(os.listdir(pkg)):
        path = os.path.join(pkg, fn)
        if not KEEP.match(fn) or not os.path.isfile(path):
            continue
        # A library's soname is a symlink in the install tree: the wheel
        # holds the bytes under that name, once.
        with open(path, "rb") as f:
            data = f.read()
        files.append((f"loaderx/{fn}", data, fn in ("zr", "zr.exe") or os.access(path, os.X_OK)
                      and not fn.endswith((".py", ".pyi", ".typed"))))
    with open(os.path.join(destdir, "_loaderx_zr.py"), "rb") as f:
        files.append(("_loaderx_zr.py", f.read(), False))
    di = f"{name}-{version}.dist-info"
    wheel_meta = (f"Wheel-Version: 1.0\nGenerator: loaderx scripts/wheel_pack.py\n"
                  f"Root-Is-Purelib: false\nTag: {tag}\n").encode()
    entry = "".join(f"{k} = {v}\n" for k, v in scripts.items())
    files += [(f"{di}/METADATA", meta, False), (f"{di}/WHEEL", wheel_meta, False)]
    if entry:
        files.append((f"{di}/entry_points.txt", ("[console_scripts]\n" + entry).encode(), False))
    record = "".join(f"{n},{sha256(d)},{len(d)}\n" for n, d, _ in files) + f"{di}/RECORD,,\n"
    files.append((f"{di}/RECORD", record.encode(), False))

    os.makedirs(outdir, exist_ok=True)
    out = os.path.join(outdir, f"{name}-{version}-{tag}.whl")
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        for n, data, exe in files:
            zi = zipfile.ZipInfo(n, date_time=(2020, 1, 1, 0, 0, 0))
            zi.external_attr = ((0o755 if exe else 0o644) | stat.S_IFREG) << 16
            zi.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(zi, data)
    print(out)


if __name__ == "__main__":
    if len(sys.argv) != 5:
        raise SystemExit(__doc__.split("\n\n")[1])
    main(*sys.argv[1:])
