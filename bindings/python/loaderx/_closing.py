"""Private: the context-manager and finalizer boilerplate shared by the
classes that own a native handle and have an idempotent ``close()``."""


class Closing:
    """Mixin for a class with an idempotent ``close()``: ``with obj:``
    closes on leaving the block (also on an exception), and garbage
    collection closes quietly (errors at that point have nowhere to go)."""

    __slots__ = ()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass
