from . import errors as errors

__all__ = ["__version__", "native_versions", "errors"]

__version__: str

def native_versions() -> dict[str, str]: ...
