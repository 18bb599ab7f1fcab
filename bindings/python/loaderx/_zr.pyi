# The private native extension: untyped on purpose (use the public modules).
from typing import Any

def __getattr__(name: str) -> Any: ...
