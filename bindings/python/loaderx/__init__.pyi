from . import errors as errors

__version__: str

def native_versions() -> dict[str, str]: ...
