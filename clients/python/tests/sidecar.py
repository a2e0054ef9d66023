"""Starts and stops the real `rebound` binary for the client's tests, example runs, benchmark
and chaos driver: `rebound serve` on an ephemeral port or a Unix socket, its address read from
the one JSON ready line it prints on stdout."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import IO, Optional

__all__ = ["Sidecar", "SidecarError", "binary", "REPO"]

REPO = Path(__file__).resolve().parents[3]
"""The repository root (this file is clients/python/tests/sidecar.py)."""
READY_TIMEOUT = 60.0
"""Seconds a start may take: a debug build compiles its patterns before it is ready."""
STOP_TIMEOUT = 15.0
"""Seconds the drain after SIGTERM may take before the process is killed."""
PAUSE_TIMEOUT = 5.0
"""Seconds every thread may take to stop after SIGSTOP."""


class SidecarError(RuntimeError):
    """The sidecar is missing, did not start, or did not stop cleanly."""


def _stopped(pid: int) -> bool:
    """Whether every thread of process `pid` is stopped (state T in /proc/PID/task/*/stat); true
    where there is no /proc to read, which leaves the signal to do what it can."""
    tasks = Path(f"/proc/{pid}/task")
    if not tasks.is_dir():
        return True
    try:
        # The state follows the command's closing parenthesis: "PID (comm) STATE ...".
        return all((t / "stat").read_text().rsplit(")", 1)[1].split()[0] in ("T", "t") for t in tasks.iterdir())
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False  # a thread came or went meanwhile: read again


def binary() -> str:
    """The sidecar binary: $REBOUND_BIN, else the repository's target/debug/rebound."""
    path = Path(os.environ.get("REBOUND_BIN") or REPO / "target" / "debug" / "rebound").resolve()
    if not path.is_file():
        raise SidecarError(f"no sidecar binary at {path}: build it (cargo build) or set REBOUND_BIN")
    if not os.access(path, os.X_OK):
        raise SidecarError(f"{path} is not executable")
    return str(path)


class Sidecar:
    """One running sidecar process."""

    def __init__(self, proc: subprocess.Popen[bytes], grpc: str, metrics: str, log: IO[bytes]) -> None:
        self.proc = proc
        """The process."""
        self.grpc = grpc
        """The address clients dial: host:port or unix:/path."""
        self.metrics = metrics
        """The host:port of the Prometheus endpoint."""
        self._log = log

    @classmethod
    def start(
        cls, listen: str = "127.0.0.1:0", *extra: str, bin: Optional[str] = None, config: Optional[Path] = None
    ) -> Sidecar:
        """Runs `rebound serve --listen LISTEN --metrics-listen 127.0.0.1:0 EXTRA...` and waits
        for its ready line; with `config`, on that config file (which it re-reads when it changes)."""
        if config is not None:
            extra = ("--config", str(config), *extra)
        # stderr goes to a file: a pipe nobody reads would block the sidecar once full.
        log = tempfile.TemporaryFile(prefix="rebound-sidecar-")
        proc = subprocess.Popen(
            [bin or binary(), "serve", "--listen", listen, "--metrics-listen", "127.0.0.1:0", *extra],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=log,
        )
        assert proc.stdout is not None
        stdout = proc.stdout
        lines: list[bytes] = []
        got = threading.Event()

        def read() -> None:
            lines.append(stdout.readline())
            got.set()
            # Keep draining so that the sidecar never blocks on a full pipe.
            for _ in stdout:
                pass

        threading.Thread(target=read, name="rebound-sidecar-stdout", daemon=True).start()
        if not got.wait(READY_TIMEOUT):
            proc.kill()
            proc.wait()
            raise SidecarError(f"no ready line within {READY_TIMEOUT:.0f} s; stderr:\n{_tail(log)}")
        line = lines[0].decode("utf-8", "replace").strip()
        try:
            ready = json.loads(line)
            if ready.get("event") != "ready" or not isinstance(ready.get("grpc"), str):
                raise ValueError("not a ready event")
        except ValueError:
            code = proc.poll()
            if code is None:
                proc.kill()
                proc.wait()
            raise SidecarError(f"expected the ready line on stdout, got {line!r} (exit {code}); stderr:\n{_tail(log)}") from None
        return cls(proc, ready["grpc"], str(ready.get("metrics", "")), log)

    def stop(self) -> None:
        """SIGTERM, then waits for the drain; raises SidecarError unless it exited 0."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise SidecarError(f"did not exit within {STOP_TIMEOUT:.0f} s of SIGTERM; killed") from None
        finally:
            self._close()
        if code != 0:
            raise SidecarError(f"exited {code} after SIGTERM; stderr:\n{_tail(self._log)}")

    def kill(self) -> None:
        """SIGKILL: the sidecar dies at once, as in a crash or an OOM kill."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self._close()

    def pause(self) -> None:
        """SIGSTOP: connections stay open but nothing is answered, like a hung sidecar. Returns once
        every thread of it has stopped: the signal reaches each thread on its own, and one still
        running answered a call made right after (seen once in CI on a loaded machine)."""
        self.proc.send_signal(signal.SIGSTOP)
        deadline = time.monotonic() + PAUSE_TIMEOUT
        while not _stopped(self.proc.pid):
            if time.monotonic() > deadline:
                raise SidecarError(f"sidecar {self.proc.pid}: not stopped {PAUSE_TIMEOUT} s after SIGSTOP")
            time.sleep(0.001)

    def resume(self) -> None:
        """SIGCONT after `pause`."""
        self.proc.send_signal(signal.SIGCONT)

    def metric(self, series: str) -> float:
        """The value of one series on the Prometheus endpoint, named as it prints it
        (`rebound_config_reloads_total{result="ok"}`); raises KeyError when it has none."""
        with urllib.request.urlopen(f"http://{self.metrics}/metrics", timeout=10) as resp:
            text = resp.read().decode("utf-8")
        for line in text.splitlines():
            name, _, value = line.rpartition(" ")
            if name == series:
                return float(value)
        raise KeyError(f"no series {series} on the sidecar's metrics endpoint")

    def logs(self) -> str:
        """The tail of the sidecar's stderr."""
        return _tail(self._log)

    def _close(self) -> None:
        if self.proc.stdout is not None:
            self.proc.stdout.close()

    def __enter__(self) -> Sidecar:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc.poll() is None:
            self.resume()  # a paused process cannot drain
            self.stop()


def _tail(log: IO[bytes], limit: int = 16 * 1024) -> str:
    try:
        log.seek(0, os.SEEK_END)
        size = log.tell()
        log.seek(max(size - limit, 0))
        return log.read().decode("utf-8", "replace").strip()
    except (OSError, ValueError):
        return "(no log)"
