from typing import Optional

ZR_OK: int
ZR_EINVAL: int
ZR_ENOMEM: int
ZR_EIO: int
ZR_EBUSY: int
ZR_EEXIST: int
ZR_ENOTSTORE: int
ZR_ERANGE: int
ZR_ECORRUPT: int
ZR_ETOOBIG: int
ZR_EUNSUPPORTED: int
ZR_ECLOSED: int
ZR_ESTATE: int
ZR_EINTR: int

class ZrError(Exception):
    status: Optional[int]

class NotAStoreError(ZrError, ValueError): ...
class StoreNotFoundError(NotAStoreError, FileNotFoundError): ...
class StoreBusy(ZrError, BlockingIOError): ...
class CorruptStoreError(ZrError, OSError): ...
class ClosedError(ZrError, ValueError): ...

def exception_class(status: int) -> type[BaseException]: ...
def from_status(status: int, message: str, os_errno: int = ...) -> BaseException: ...
def closed(what: str = ...) -> ClosedError: ...
