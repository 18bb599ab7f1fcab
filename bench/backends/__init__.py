"""Storage backends of the benchmark, one module per family. ALL lists
every backend class in table order."""
from . import arrayrecord, arrow, blosc2_, hdf5, lmdb_, numpy_mmap, tiledb_, zarr_, zrecord

ALL = (zrecord.BACKENDS + numpy_mmap.BACKENDS + hdf5.BACKENDS + lmdb_.BACKENDS
       + arrow.BACKENDS + arrayrecord.BACKENDS + tiledb_.BACKENDS + blosc2_.BACKENDS
       + zarr_.BACKENDS)
