"""numpy memmap: one .npy (dense; fancy indexing) or a flat payload .npy
plus offsets and shapes (ragged; one slice copy per record)."""
import os

import numpy as np

from common import Backend, flat_ragged


class NpyMmap(Backend):
    name = "npy-mmap-raw"

    def write(self, path, wl):
        if wl.kind == "dense":
            np.save(os.path.join(path, "data.npy"), wl.data)
            return
        flat, offsets, shapes = flat_ragged(wl.data)
        np.save(os.path.join(path, "flat.npy"), flat)
        np.save(os.path.join(path, "offsets.npy"), offsets)
        np.save(os.path.join(path, "shapes.npy"), shapes)

    def open(self, path, wl):
        self.kind = wl.kind
        if wl.kind == "dense":
            self.a = np.load(os.path.join(path, "data.npy"), mmap_mode="r")
            return
        self.a = np.load(os.path.join(path, "flat.npy"), mmap_mode="r")
        self.off = np.load(os.path.join(path, "offsets.npy")).tolist()
        self.shapes = [tuple(s) for s in np.load(os.path.join(path, "shapes.npy")).tolist()]

    def gather(self, idx):
        if self.kind == "dense":
            return self.a[idx]
        a, off, shapes = self.a, self.off, self.shapes
        return [np.array(a[off[i]:off[i + 1]]).reshape(shapes[i]) for i in idx.tolist()]

    def close(self):
        self.a = None


BACKENDS = [NpyMmap]
