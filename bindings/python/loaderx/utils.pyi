from typing import Any, Iterable, Union

import numpy.typing as npt

from .zrecord import DICT_TIERS as DICT_TIERS
from .zrecord import DenseStore, RaggedStore

__all__ = ["train_dict", "DICT_TIERS"]

def train_dict(source: Union[npt.ArrayLike, Iterable[Any], DenseStore, RaggedStore],
               tier: str = ...) -> bytes: ...
