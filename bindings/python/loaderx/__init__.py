"""loaderx: typed persistent record stores (Zrecord) and an endless,
step-based prefetching data loader, over the loaderx-in-C libraries.

Modules:
  loaderx.zrecord     DenseStore, RaggedStore (persistent typed stores)
  loaderx.zsampler    Sampler (sequential / iid / cyclic, pure f(seed, step))
  loaderx.dataloader  DataLoader (dict of aligned streams -> dict batches)
  loaderx.errors      exception classes and the status -> exception mapping

``__version__`` is the package's own version; ``native_versions()``
gives the version of every native library it runs on.
"""

from . import _zr
from . import errors

__version__ = "0.1.0"


def native_versions():
    """The runtime versions of the four native libraries, as strings."""
    return {
        "zrengine": _zr.zrengine_version_string(),
        "zrstore": _zr.zrstore_version_string(),
        "zsampler": _zr.zsampler_version_string(),
        "zloader": _zr.zloader_version_string(),
    }


__all__ = ["__version__", "native_versions", "errors"]
