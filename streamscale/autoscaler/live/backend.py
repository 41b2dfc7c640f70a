"""Consumer "deployments": where the controller creates and deletes consumers.

The paper's controller created one Kubernetes deployment per consumer; :class:`LocalProcessBackend`
starts one local process per consumer instead. Consumers are deliberately *not* tied to the
controller's lifetime (a controller crash must not take the group down), so the backend records
their process ids in ``<state_dir>/consumers.json``; a restarted controller adopts them from there.
A pid is trusted only while ``/proc/<pid>/cmdline`` still names that consumer of that state dir.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Protocol

from streamscale.processes import command_line


class ConsumerBackend(Protocol):
    def create(self, consumer: int) -> None: ...
    def alive(self, consumer: int) -> bool: ...
    def running(self) -> list[int]: ...
    def delete(self, consumer: int, timeout: float = 10.0) -> None: ...


class LocalProcessBackend:
    def __init__(self, state_dir: Path):
        self.state_dir = Path(state_dir).resolve()
        self.registry = self.state_dir / "consumers.json"
        self.log_dir = self.state_dir / "logs"

    def _load(self) -> dict[int, int]:
        try:
            return {int(c): int(pid) for c, pid in json.loads(self.registry.read_text()).items()}
        except (OSError, ValueError):
            return {}

    def _save(self, pids: dict[int, int]) -> None:
        tmp = self.registry.with_suffix(".tmp")
        tmp.write_text(json.dumps({str(c): pid for c, pid in sorted(pids.items())}))
        tmp.replace(self.registry)

    def _cmd(self, consumer: int) -> list[str]:
        return [
            sys.executable,
            "-m",
            "streamscale.autoscaler.live.consumer",
            "--state-dir",
            str(self.state_dir),
            "--consumer-id",
            str(consumer),
        ]

    def _is_ours(self, consumer: int, pid: int) -> bool:
        try:
            os.waitpid(pid, os.WNOHANG)  # reap it if it is our exited child
        except ChildProcessError:
            pass
        want = self._cmd(consumer)[1:]  # the interpreter path may differ (symlinks); the rest may not
        return command_line(pid)[1 : len(want) + 1] == want

    def create(self, consumer: int) -> None:
        pids = self._load()
        if consumer in pids and self._is_ours(consumer, pids[consumer]):
            return
        self.log_dir.mkdir(parents=True, exist_ok=True)
        with open(self.log_dir / f"consumer-{consumer}.log", "ab") as logf:
            proc = subprocess.Popen(
                self._cmd(consumer),
                stdout=logf,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        pids[consumer] = proc.pid
        self._save(pids)

    def alive(self, consumer: int) -> bool:
        pid = self._load().get(consumer)
        return pid is not None and self._is_ours(consumer, pid)

    def running(self) -> list[int]:
        # read-only: observers (status, tests) must not race the controller's registry writes
        return sorted(c for c, pid in self._load().items() if self._is_ours(c, pid))

    def delete(self, consumer: int, timeout: float = 10.0) -> None:
        pids = self._load()
        pid = pids.get(consumer)
        if pid is not None and self._is_ours(consumer, pid):
            os.kill(pid, signal.SIGTERM)  # the consumer finishes its cycle and exits
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline and self._is_ours(consumer, pid):
                time.sleep(0.05)
            if self._is_ours(consumer, pid):
                os.kill(pid, signal.SIGKILL)
        pids.pop(consumer, None)
        self._save(pids)

    def delete_all(self, timeout: float = 10.0) -> list[int]:
        ids = self.running()
        for c in ids:
            self.delete(c, timeout)
        return ids
