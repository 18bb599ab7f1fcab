"""Real servers for the remote-store tests and benchmarks, on 127.0.0.1.

- Nginx(root): Debian's nginx serving `root` (static files, byte ranges,
  ETag, If-Match), on a free port, in the foreground of its own process.
- SeaweedFS(dir): `weed server -s3` (built by scripts/seaweedfs.sh into
  ~/.cache, once per version) with one identity, an S3 endpoint on a free
  port; `.env()` gives the AWS variables a client needs.
- FaultProxy(port): a thread-run HTTP/1.1 proxy in front of either, which
  the tests drive: at chosen request numbers it resets the connection,
  stalls, truncates the body, or answers 500/503/429; and it can limit its
  throughput (bytes/s), which the benchmarks use as the throttle where
  tc netem is not allowed.

Run as a script to keep servers up for a benchmark, the Lua and Go
suites, or by hand (the first line printed is the nginx URL; for s3, the
`export` lines of the AWS variables, after the named buckets exist):
    python3 tests/python/remote_servers.py nginx ROOT
    python3 tests/python/remote_servers.py s3 DIR [BUCKET...]
Nothing here downloads anything; every server listens on 127.0.0.1 only
and stops with its context (or Ctrl-C).
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_port(port: int, proc: subprocess.Popen | None, what: str, timeout: float = 60.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode} before listening on {port}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"{what} did not listen on 127.0.0.1:{port} within {timeout:.0f} s")


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class Nginx:
    """nginx serving `root` read-only at http://127.0.0.1:<port>/."""

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root).resolve()
        self.port = free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="zr-nginx-"))
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> "Nginx":
        nginx = shutil.which("nginx") or "/usr/sbin/nginx"
        user = "user root;\n" if os.geteuid() == 0 else ""
        d = self.dir
        (d / "nginx.conf").write_text(
            f"""{user}worker_processes 2;
daemon off;
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections 512; }}
http {{
  access_log off;
  client_body_temp_path {d}/body;
  proxy_temp_path {d}/proxy;
  fastcgi_temp_path {d}/fastcgi;
  uwsgi_temp_path {d}/uwsgi;
  scgi_temp_path {d}/scgi;
  sendfile on;
  keepalive_requests 100000;
  types {{ }}
  default_type application/octet-stream;
  server {{
    listen 127.0.0.1:{self.port};
    root {self.root};
    location / {{ }}
  }}
}}
""")
        self.proc = subprocess.Popen([nginx, "-c", str(d / "nginx.conf"), "-p", str(d)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        _wait_port(self.port, self.proc, "nginx")
        return self

    def __exit__(self, *exc) -> None:
        if self.proc:
            _stop(self.proc)
        shutil.rmtree(self.dir, ignore_errors=True)


def weed_binary() -> str:
    """The cached SeaweedFS binary: scripts/setup.sh --tests builds it
    (scripts/seaweedfs.sh); the script only prints its path then, and
    builds it here only if set-up was skipped."""
    out = subprocess.run(["bash", str(ROOT / "scripts" / "seaweedfs.sh")], check=True,
                         stdout=subprocess.PIPE, text=True).stdout.strip().splitlines()
    return out[-1]


class SeaweedFS:
    """`weed server -s3` on free ports, data under `dir`, one identity."""

    ACCESS = "zrtestaccess"
    SECRET = "zrtestsecret0123456789"

    def __init__(self, dir: str | os.PathLike | None = None):
        self.own = dir is None
        self.dir = Path(dir or tempfile.mkdtemp(prefix="zr-weed-"))
        self.port = free_port()
        self.proc: subprocess.Popen | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def env(self, endpoint: str | None = None) -> dict:
        return {"AWS_ACCESS_KEY_ID": self.ACCESS, "AWS_SECRET_ACCESS_KEY": self.SECRET,
                "AWS_REGION": "us-east-1", "AWS_ENDPOINT_URL": endpoint or self.endpoint}

    def __enter__(self) -> "SeaweedFS":
        weed = weed_binary()
        self.dir.mkdir(parents=True, exist_ok=True)
        cfg = self.dir / "s3.json"
        cfg.write_text('{"identities": [{"name": "zrtest", "credentials": [{"accessKey": "%s", '
                       '"secretKey": "%s"}], "actions": ["Admin", "Read", "Write", "List", '
                       '"Tagging"]}]}' % (self.ACCESS, self.SECRET))
        # Every port explicit (gRPC ones too), all on 127.0.0.1.
        ports = {k: free_port() for k in ("master", "volume", "filer", "mg", "vg", "fg", "sg")}
        args = [weed, "server", "-ip=127.0.0.1", "-ip.bind=127.0.0.1", f"-dir={self.dir}",
                f"-master.port={ports['master']}", f"-master.port.grpc={ports['mg']}",
                f"-volume.port={ports['volume']}", f"-volume.port.grpc={ports['vg']}",
                f"-filer.port={ports['filer']}", f"-filer.port.grpc={ports['fg']}",
                "-s3", f"-s3.port={self.port}", f"-s3.port.grpc={ports['sg']}",
                f"-s3.config={cfg}", "-volume.max=16", "-master.volumeSizeLimitMB=256"]
        self.log = open(self.dir / "weed.log", "wb")
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT)
        _wait_port(self.port, self.proc, "weed server -s3", timeout=120)
        return self

    def make_bucket(self, bucket: str) -> None:
        """PUT the bucket, signed (curl's SigV4), retried while the server warms up."""
        end = time.monotonic() + 60
        while True:
            r = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", "PUT",
                                "--aws-sigv4", "aws:amz:us-east-1:s3",
                                "--user", f"{self.ACCESS}:{self.SECRET}",
                                f"{self.endpoint}/{bucket}"], stdout=subprocess.PIPE, text=True)
            if r.stdout.strip() in ("200", "409"):
                return
            if time.monotonic() > end:
                raise RuntimeError(f"cannot create bucket {bucket}: HTTP {r.stdout.strip()}")
            time.sleep(0.5)

    def __exit__(self, *exc) -> None:
        if self.proc:
            _stop(self.proc)
        if getattr(self, "log", None):
            self.log.close()
        if self.own:
            shutil.rmtree(self.dir, ignore_errors=True)


class FaultProxy:
    """An HTTP/1.1 proxy to 127.0.0.1:`upstream` that injects faults.

    Requests are numbered from 1 in arrival order (over all connections).
    `plan(n, fault, **kw)` makes request n fail, where fault is:
      "reset"     close the client connection with a TCP reset, no response
      "stall"     send the headers, then nothing for kw["seconds"] (default 60)
      "truncate"  send the headers (full Content-Length) and half the body, close
      500, 503, 429, 403...   answer that status (kw["retry_after"] adds Retry-After)
      "etag"      pass the response with a different ETag header (a changed object)
    `always(fault)` applies it to every request from now on; `clear()` undoes
    plans. `rate` (bytes/s, 0 = unlimited) throttles response bodies, all
    connections together (one shared link).
    `requests` lists (method, path, range) of every request seen.
    """

    def __init__(self, upstream: int, rate: int = 0):
        self.upstream = upstream
        self.rate = rate
        self.port = free_port()
        self.requests: list[tuple[str, str, str]] = []
        self._plans: dict[int, tuple[object, dict]] = {}
        self._always: tuple[object, dict] | None = None
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._conns: list[socket.socket] = []
        self._link_free = 0.0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def plan(self, n: int, fault, **kw) -> None:
        with self._lock:
            self._plans[n] = (fault, kw)

    def always(self, fault, **kw) -> None:
        with self._lock:
            self._always = (fault, kw)

    def clear(self) -> None:
        with self._lock:
            self._plans.clear()
            self._always = None

    @property
    def count(self) -> int:
        with self._lock:
            return len(self.requests)

    def __enter__(self) -> "FaultProxy":
        self._sock = socket.socket()
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", self.port))
        self._sock.listen(128)
        self._sock.settimeout(0.2)
        t = threading.Thread(target=self._accept, daemon=True)
        t.start()
        self._threads.append(t)
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._sock:
            self._sock.close()
        with self._lock:
            conns = list(self._conns)
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        for t in self._threads:
            t.join(timeout=5)

    # ------------------------------------------------------------ serving

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                c, _ = self._sock.accept()
            except (socket.timeout, OSError):
                continue
            with self._lock:
                self._conns.append(c)
            t = threading.Thread(target=self._serve, args=(c,), daemon=True)
            t.start()
            self._threads.append(t)

    @staticmethod
    def _read_head(f) -> tuple[bytes, list[tuple[str, str]]] | None:
        line = f.readline(65536)
        if not line:
            return None
        headers = []
        while True:
            h = f.readline(65536)
            if h in (b"\r\n", b"\n", b""):
                break
            k, _, v = h.decode("latin-1").partition(":")
            headers.append((k.strip(), v.strip()))
        return line, headers

    def _send(self, c: socket.socket, data: bytes) -> None:
        """Send response bytes; with `rate`, every connection shares one
        link of `rate` bytes/s (each slice books its time on one timeline)."""
        if not self.rate:
            c.sendall(data)
            return
        step = max(4096, self.rate // 100)
        for i in range(0, len(data), step):
            if self._stop.is_set():
                raise OSError("proxy stopping")
            piece = data[i:i + step]
            with self._lock:
                now = time.monotonic()
                start = max(now, self._link_free)
                self._link_free = start + len(piece) / self.rate
                done = self._link_free
            c.sendall(piece)
            ahead = done - time.monotonic()
            if ahead > 0:
                time.sleep(ahead)

    def _serve(self, c: socket.socket) -> None:
        f = c.makefile("rb")
        up: socket.socket | None = None
        uf = None
        try:
            while not self._stop.is_set():
                head = self._read_head(f)
                if head is None:
                    return
                line, headers = head
                method, path = line.decode("latin-1").split()[:2]
                hmap = {k.lower(): v for k, v in headers}
                body = f.read(int(hmap.get("content-length", "0") or 0)) if "content-length" in hmap else b""
                with self._lock:
                    self.requests.append((method, path, hmap.get("range", "")))
                    n = len(self.requests)
                    fault, kw = self._plans.pop(n, None) or self._always or (None, {})
                if fault == "reset":
                    c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
                    c.close()
                    return
                if isinstance(fault, int):
                    extra = f"Retry-After: {kw['retry_after']}\r\n" if "retry_after" in kw else ""
                    msg = b"injected fault"
                    c.sendall(f"HTTP/1.1 {fault} Injected\r\nContent-Length: {len(msg)}\r\n{extra}"
                              "Content-Type: text/plain\r\n\r\n".encode() + msg)
                    continue
                # Forward to the upstream (one keep-alive connection per client).
                if up is None:
                    up = socket.create_connection(("127.0.0.1", self.upstream))
                    uf = up.makefile("rb")
                # The body is already here: no "Expect: 100-continue" upstream.
                fwd = [(k, v) for k, v in headers if k.lower() != "expect"]
                up.sendall(line + b"".join(f"{k}: {v}\r\n".encode("latin-1") for k, v in fwd)
                           + b"\r\n" + body)
                rhead = self._read_head(uf)
                while rhead is not None and rhead[0].split()[1].startswith(b"1"):
                    rhead = self._read_head(uf)  # interim responses
                if rhead is None:
                    return
                rline, rheaders = rhead
                rmap = {k.lower(): v for k, v in rheaders}
                rbody = b""
                if method != "HEAD" and not rline.split()[1].startswith(b"1") and \
                        rline.split()[1] not in (b"204", b"304"):
                    if "content-length" in rmap:
                        rbody = uf.read(int(rmap["content-length"]))
                    elif rmap.get("transfer-encoding", "").lower() == "chunked":
                        rbody = self._read_chunked(uf)
                        rheaders = [(k, v) for k, v in rheaders if k.lower() != "transfer-encoding"]
                        rheaders.append(("Content-Length", str(len(rbody))))
                if fault == "etag":
                    rheaders = [(k, ('"changed-' + v.strip('"') + '"') if k.lower() == "etag" else v)
                                for k, v in rheaders]
                hb = rline + b"".join(f"{k}: {v}\r\n".encode("latin-1") for k, v in rheaders) + b"\r\n"
                if fault == "stall":
                    c.sendall(hb)
                    self._stop.wait(kw.get("seconds", 60))
                    c.close()
                    return
                if fault == "truncate":
                    c.sendall(hb)
                    self._send(c, rbody[: len(rbody) // 2])
                    c.close()
                    return
                c.sendall(hb)
                self._send(c, rbody)
        except OSError:
            return
        finally:
            with self._lock:
                if c in self._conns:
                    self._conns.remove(c)
            try:
                c.close()
            except OSError:
                pass
            if up is not None:
                up.close()

    @staticmethod
    def _read_chunked(f) -> bytes:
        out = bytearray()
        while True:
            size = int(f.readline().split(b";")[0].strip() or b"0", 16)
            if size == 0:
                while f.readline() not in (b"\r\n", b"\n", b""):
                    pass
                return bytes(out)
            out += f.read(size)
            f.readline()


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] not in ("nginx", "s3") or (argv[1] == "nginx" and len(argv) != 3):
        print(__doc__.split("Run as a script")[1], file=sys.stderr)
        return 2
    if argv[1] == "nginx":
        with Nginx(argv[2]) as n:
            print(n.url, flush=True)
            signal.sigwait({signal.SIGINT, signal.SIGTERM})
    else:
        with SeaweedFS(argv[2]) as s:
            for bucket in argv[3:]:
                s.make_bucket(bucket)
            for k, v in s.env().items():
                print(f"export {k}={v}", flush=True)
            signal.sigwait({signal.SIGINT, signal.SIGTERM})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
