"""Native calls waited for in short slices, so that Ctrl-C reaches the
caller at once (the main thread only sees signals between bytecodes)."""

import threading


def interruptible(fn, *args, stop=None):
    """fn(*args) (a native call that releases the GIL) on a helper thread,
    waited for in short slices so that Ctrl-C interrupts the caller at
    once. Without ``stop``, an interrupted call runs on to its end in the
    background and its result is dropped (the native call itself cannot
    stop midway). With ``stop`` (a function asking the native call to end
    at its next safe point), Ctrl-C calls it, waits for the call to end,
    then raises the KeyboardInterrupt."""
    box = {}
    # The call's end is signalled with an Event rather than watched with
    # Thread.join: a join interrupted by KeyboardInterrupt can leave the
    # thread marked stopped while it still runs (CPython 3.11).
    done = threading.Event()

    def run():
        try:
            box["value"] = fn(*args)
        except BaseException as exc:
            box["error"] = exc
        finally:
            done.set()

    threading.Thread(target=run, name="loaderx-native", daemon=True).start()
    try:
        while not done.wait(0.05):
            pass
    except KeyboardInterrupt:
        if stop is None:
            raise
        stop()
        done.wait()
        raise
    if "error" in box:
        raise box["error"]
    return box["value"]
