"""loaderx: typed persistent record stores (Zrecord) and an endless,
step-based prefetching data loader, over the loaderx-in-C libraries.

Modules:
  loaderx.zrecord     DenseStore, RaggedStore (persistent typed stores)
  loaderx.zsampler    Sampler (sequential / iid / cyclic, pure f(seed, step))
  loaderx.dataloader  DataLoader (dict of aligned streams -> dict batches)
  loaderx.errors      exception classes and the status -> exception mapping

``__version__`` is the package's version (the same as
``importlib.metadata.version("loaderx")``); ``native_versions()`` gives the
run-time version of each of the five native libraries.
"""

from . import _zr
from . import errors
from ._version import __version__


def native_versions():
    """The run-time versions of the native libraries, as strings:
    {"zrerror": "0.1.0", "zrengine": ..., "zrstore": ..., "zsampler": ...,
    "zloader": ..., "zmrec": ...}."""
    return {
        "zrerror": _zr.zrerror_version_string(),
        "zrengine": _zr.zrengine_version_string(),
        "zrstore": _zr.zrstore_version_string(),
        "zsampler": _zr.zsampler_version_string(),
        "zloader": _zr.zloader_version_string(),
        "zmrec": _zr.zmrec_version(),
    }


__all__ = ["__version__", "native_versions", "errors"]
