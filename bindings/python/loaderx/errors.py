"""Exceptions raised by loaderx, and the one zr_status -> exception mapping.

Every native call that fails returns a negative ``zr_status``; the binding
(``loaderx._zr``) turns it into the exception built by :func:`from_status`,
with the thread's detail message (``zr_last_error()``) as text. The mapping:

=================  ============================================  =========
status             exception                                     base(s)
=================  ============================================  =========
ZR_EINVAL          ValueError
ZR_ENOMEM          MemoryError
ZR_EIO             OSError
ZR_EBUSY           :class:`StoreBusy`                            BlockingIOError
ZR_EEXIST          FileExistsError
ZR_ENOTSTORE       :class:`NotAStoreError`                       ValueError
                   (:class:`StoreNotFoundError` when the path    (also FileNotFoundError)
                   does not exist)
ZR_ERANGE          IndexError
ZR_ECORRUPT        :class:`CorruptStoreError`                    OSError
ZR_ETOOBIG         ValueError
ZR_EUNSUPPORTED    NotImplementedError
ZR_ECLOSED         :class:`ClosedError`                          ValueError
ZR_ESTATE          RuntimeError
ZR_EINTR           KeyboardInterrupt (a Ctrl-C stopped a long call)
=================  ============================================  =========

Every exception raised this way carries the native code as ``.status``.
A failure the operating system reported (ZR_EIO with ENOSPC, EACCES,
ENOENT...) also carries its ``.errno`` and is raised as the matching
``OSError`` subclass (``PermissionError``, ``FileNotFoundError``, ...).
The loaderx-specific classes also derive from :class:`ZrError`, so
``except loaderx.errors.ZrError`` catches exactly those.

Why these bases: a path that is not a store (or has a malformed identity)
is a bad *value* handed to ``open`` — the same family as a bad dtype — so
:class:`NotAStoreError` is a ``ValueError``. A store locked by another
handle is a would-block condition of the OS lock, hence ``BlockingIOError``.
Corrupt bytes on disk are an I/O-level failure, hence ``OSError``. Using a
closed object follows Python's file objects: ``ValueError``.
"""

import errno

# Values of zr_status in zrerror.h, the C libraries' one status table (a test
# compares every code and name, and the class table, with loaderx._zr).
ZR_OK = 0
ZR_EINVAL = -1
ZR_ENOMEM = -2
ZR_EIO = -3
ZR_EBUSY = -4
ZR_EEXIST = -5
ZR_ENOTSTORE = -6
ZR_ERANGE = -7
ZR_ECORRUPT = -8
ZR_ETOOBIG = -9
ZR_EUNSUPPORTED = -10
ZR_ECLOSED = -11
ZR_ESTATE = -12
ZR_EINTR = -13


class ZrError(Exception):
    """Mixin base of the loaderx-specific exceptions; ``.status`` is the
    native ``zr_status`` code (or None when raised from Python)."""

    status = None


class NotAStoreError(ZrError, ValueError):
    """``open`` of a path that is not a store: missing, not a directory, or
    with a missing/malformed ``store.zr`` or engine files."""


class StoreNotFoundError(NotAStoreError, FileNotFoundError):
    """``open`` of a path that does not exist: both a
    :class:`NotAStoreError` and a ``FileNotFoundError`` (``errno`` ENOENT,
    ``filename`` the path when known)."""


class StoreBusy(ZrError, BlockingIOError):
    """The store is locked by another open handle (this or another process)."""


class CorruptStoreError(ZrError, OSError):
    """Stored bytes are inconsistent or fail to decode (names the index)."""


class ClosedError(ZrError, ValueError):
    """An operation on a closed store or loader."""


_CLASSES = {
    ZR_EINVAL: ValueError,
    ZR_ENOMEM: MemoryError,
    ZR_EIO: OSError,
    ZR_EBUSY: StoreBusy,
    ZR_EEXIST: FileExistsError,
    ZR_ENOTSTORE: NotAStoreError,
    ZR_ERANGE: IndexError,
    ZR_ECORRUPT: CorruptStoreError,
    ZR_ETOOBIG: ValueError,
    ZR_EUNSUPPORTED: NotImplementedError,
    ZR_ECLOSED: ClosedError,
    ZR_ESTATE: RuntimeError,
    ZR_EINTR: KeyboardInterrupt,
}


def exception_class(status):
    """The exception class for a negative ``zr_status`` (RuntimeError for
    an unknown code)."""
    return _CLASSES.get(int(status), RuntimeError)


def from_status(status, message, os_errno=0):
    """Build (not raise) the exception for ``status`` with ``message``.

    Called by the native module on every failing call; also usable from
    Python. The returned instance has ``.status`` set to the code. When the
    operating system gave an error number (``os_errno``, from
    ``zr_last_errno()``), an ``OSError``-family exception carries it as
    ``.errno`` and becomes the matching subclass (``PermissionError`` for
    EACCES, ``FileNotFoundError`` for ENOENT, ...), as ``OSError(errno,
    message)`` does.
    """
    cls = exception_class(status)
    if cls is ClosedError and "closed" not in message:
        message = message + " (closed)"
    if cls is NotAStoreError and os_errno == errno.ENOENT:
        exc = StoreNotFoundError(message)
        exc.errno, exc.status = errno.ENOENT, int(status)
        return exc
    if os_errno and cls in (OSError, FileExistsError):
        exc = OSError(int(os_errno), message)
    elif os_errno and issubclass(cls, OSError):
        exc = cls(int(os_errno), message)
    else:
        exc = cls(message)
    try:
        exc.status = int(status)
    except AttributeError:  # pragma: no cover - builtins all take attributes
        pass
    return exc


def closed(what="store"):
    """The exception for using a closed object from Python."""
    return ClosedError(f"{what} is closed")
