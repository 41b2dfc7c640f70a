"""Child-process hygiene: children that die with their parent (``PR_SET_PDEATHSIG``), and a stop
that ends in SIGKILL when a child does not go.

Neutral: every concern that starts a child (broker, Spark cluster, fault proxy, reliability
pipeline driver) passes one of these as ``preexec_fn``, so a SIGKILLed streamscale leaves nothing.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import threading

_PR_SET_PDEATHSIG = 1


def _pdeathsig() -> None:
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except OSError:
        pass


def die_with_parent() -> None:
    """``preexec_fn``: SIGKILL when the parent dies, and a process group of its own — the child must
    not receive the terminal's Ctrl-C before the parent has decided to stop it; the parent stops it
    explicitly."""
    _pdeathsig()
    os.setpgrp()


def die_with_parent_in_own_session() -> None:
    """For a child that is stopped as a whole process group (os.killpg): a session of its own
    (setsid, not setpgrp: the group is then the session's) and SIGKILL when its parent dies.
    The parent must start it from a thread that lives as long as the child should: the signal
    follows the thread that forked."""
    _pdeathsig()
    os.setsid()


def sigterm_ends_like_ctrl_c():
    """SIGTERM ends this program as Ctrl-C does: its clean-up runs (``finally`` blocks and context
    managers: brokers stopped, a cluster's network namespaces removed, the load generator's
    shared counters released), where Python's default would end it on the spot. Returns the
    handler it replaced."""

    def terminated(signum, _frame):
        raise SystemExit(128 + signum)

    return signal.signal(signal.SIGTERM, terminated)


def stop_process(proc: subprocess.Popen, sig: int = signal.SIGTERM, timeout: float = 20.0) -> None:
    """Send ``sig`` to ``proc`` if it still runs and wait for it; SIGKILL after ``timeout`` s."""
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout)


# The guardian's whole program: it reads "watch PID START" lines until "release" (then exits and
# leaves them running) or the end of its input (its parent died, by whatever signal: then it kills
# every watched process that is still the one it was told about, by its start time).
_GUARDIAN = r"""
import os, signal, sys
for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
    signal.signal(s, signal.SIG_IGN)
watched, folders, nets = {}, [], []
for line in sys.stdin:
    word, _, rest = line.strip().partition(" ")
    if word == "release":
        sys.exit(0)
    if word == "watch":
        pid, start = rest.split()
        watched[int(pid)] = start
    if word == "remove":
        folders.append(rest)
    if word == "net":
        nets.append(rest)
for pid, start in watched.items():
    try:
        with open(f"/proc/{pid}/stat") as f:
            now = f.read().rsplit(")", 1)[1].split()[19]
        if now == start:
            os.kill(pid, signal.SIGKILL)
    except (OSError, IndexError):
        pass
if nets:
    import subprocess
    for item in reversed(nets):  # a namespace's processes first (no host outlives its maker), then it
        kind, name = item.split(":", 1)
        if kind == "netns":
            found = subprocess.run(["ip", "netns", "pids", name], capture_output=True, text=True).stdout
            for pid in found.split():
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except (OSError, ValueError):
                    pass
            subprocess.run(["ip", "netns", "del", name], capture_output=True)
        else:
            subprocess.run(["ip", "link", "del", name], capture_output=True)
if folders:
    import shutil, time
    time.sleep(1)  # the killed processes' last writes
    for folder in folders:
        shutil.rmtree(folder, ignore_errors=True)
"""


def child_pids(pid: int | None = None) -> set[int]:
    """The children of process ``pid`` (this one by default) now (Linux: every thread's
    ``children`` list in /proc: a child is listed under the thread that forked it)."""
    import glob

    pids: set[int] = set()
    for listed in glob.glob(f"/proc/{pid or os.getpid()}/task/*/children"):
        try:
            with open(listed) as f:
                pids.update(int(p) for p in f.read().split())
        except OSError:  # a thread that ended meanwhile
            pass
    return pids


def command_line(pid: int) -> list[str]:
    """A process's arguments, an empty one included ([] once it is gone, or while it has none)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            data = f.read()
    except OSError:
        return []
    return [a.decode(errors="replace") for a in data.removesuffix(b"\0").split(b"\0")] if data else []


def stat_fields(pid: int) -> list[str]:
    """/proc/PID/stat's fields after the command name (which may hold spaces and parentheses):
    the state first, the parent's pid second; OSError once the process is gone."""
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()


def running(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie does not)."""
    try:
        return stat_fields(pid)[0] != "Z"
    except (OSError, IndexError):
        return False


def _settled_command_line(pid: int, tries: int = 100) -> list[str]:
    """A process's arguments, read again while they are empty: a process in the middle of an exec
    (a launcher script replacing itself with a JVM) shows none for a moment ([]: gone, or none
    after ``tries`` readings 10 ms apart)."""
    import time

    for _ in range(tries):
        got = command_line(pid)
        if got or not running(pid):
            return got
        time.sleep(0.01)
    return []


@contextlib.contextmanager
def new_children_killed_on_error(last_argument: str, kept=frozenset):
    """Children this process starts inside the block whose last argument is ``last_argument`` are
    killed, by their process ids, if the block ends in an exception (Ctrl-C and SIGTERM included),
    except those ``kept()`` names. For a library that starts a child and is interrupted before it
    holds it: no one else knows that child, and nothing would ever stop it."""
    before = child_pids()
    try:
        yield
    except BaseException:
        for pid in child_pids() - before - set(kept()):
            if _settled_command_line(pid)[-1:] == [last_argument]:
                with contextlib.suppress(ProcessLookupError, ChildProcessError):
                    os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)  # no zombie left either: its Popen object is gone with the library's frame
        raise


def start_time(pid: int) -> str:
    """A process's start time in clock ticks since boot (/proc/PID/stat field 22): with its pid,
    what tells it from a later process that got the same pid."""
    return stat_fields(pid)[19]


class Guardian:
    """Kills the processes it watches if this process dies before :meth:`release` — of anything,
    SIGKILL or an abort inside a C library included (a pipe closes when its writer dies, however).
    For daemons started on purpose in sessions of their own (``broker start``): until they are
    recorded as running, nothing else would ever stop them.

    >>> with Guardian() as g:
    ...     g.watch(daemon.pid)
    ...     record_state(daemon)
    ...     g.release()
    """

    def __init__(self) -> None:
        self.proc: subprocess.Popen | None = None
        self.released = False

    def __enter__(self) -> Guardian:
        import sys

        # a session of its own: the terminal's Ctrl-C must not stop it before it has done its job
        self.proc = subprocess.Popen(
            [sys.executable, "-I", "-c", _GUARDIAN],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            text=True,
        )
        return self

    def watch(self, pid: int) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        try:
            self.proc.stdin.write(f"watch {pid} {start_time(pid)}\n")
            self.proc.stdin.flush()
        except OSError:  # the process is already gone: nothing to guard
            pass

    def remove(self, folder) -> None:
        """Also remove ``folder`` (a temporary storage) if this process dies before the release."""
        self.tell([f"remove {folder}"])

    def tell(self, lines: list[str]) -> None:
        """What to do when this process dies before the release: ``remove FOLDER``, ``net netns:NAME``."""
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write("".join(f"{line}\n" for line in lines))
        self.proc.stdin.flush()

    def release(self) -> None:
        """The watched processes are recorded: let them run."""
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write("release\n")
        self.proc.stdin.flush()
        self.released = True
        self._close()

    def _close(self) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        try:
            self.proc.stdin.close()  # without a release: the guardian kills what it watches
        except OSError:
            pass
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()

    def __exit__(self, *exc) -> None:
        if not self.released:
            self._close()


_janitor: Guardian | None = None
_janitor_lock = threading.Lock()


def remove_network_at_exit(items: list[str]) -> None:
    """Remove network namespaces and links (``netns:NAME``, ``link:NAME``, in the order they are
    made) when this process ends, however it ends, killing first what still runs in a namespace:
    a SIGKILLed cluster's hosts would otherwise outlive it. What is already gone is no error."""
    _tell_janitor([f"net {item}" for item in items])


def remove_at_exit(folder) -> None:
    """Remove ``folder`` (a temporary storage of this process: a broker's log, a checkpoint) when
    this process ends, however it ends — a SIGKILLed benchmark left its broker's gigabytes in
    $TMPDIR. Harmless for a folder removed before: one guardian per process removes what is left."""
    _tell_janitor([f"remove {os.fspath(folder)}"])


def _tell_janitor(lines: list[str]) -> None:
    """Hand ``lines`` to this process's guardian (started on first use, never released: its end of
    input is this process's end)."""
    global _janitor
    with _janitor_lock:
        if _janitor is None or _janitor.proc is None or _janitor.proc.poll() is not None:
            _janitor = Guardian().__enter__()
        try:
            _janitor.tell(lines)
        except OSError:  # the guardian is gone (its pipe broke): the normal stop still removes it
            _janitor = None
