"""One host of a cluster on this machine: a network namespace (its address on the cluster's bridge),
a private ``/tmp`` (a mount namespace whose ``/tmp`` is a folder of the host's own, so that no host
reaches another's local files by accident, the driver's included) and, for a worker, the CPUs its
processes may use. :meth:`Host.command` wraps a command line to run there."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

# runs as the host's first process, in a mount namespace of its own (private: its mounts reach no
# other host): the machine's /tmp is set aside at $1, /tmp becomes the host's own folder $2, the
# folders under /tmp every host needs (the install, when it lies there) come back at their paths,
# then the command runs in its place
_PRIVATE_TMP = """
set -e
aside=$1 own=$2
shift 2
mount --bind /tmp "$aside"
mount --bind "$own" /tmp
while [ "$1" != "--" ]; do mkdir -p "/tmp/$1"; mount --bind "$aside/$1" "/tmp/$1"; shift; done
shift
exec "$@"
"""


# where a host sets the machine's /tmp aside: an empty folder outside /tmp (the host's own folders
# may lie under /tmp), mounted on in each host's namespace only
ASIDE = Path("/run/streamscale-tmp-aside")


def under_tmp(paths) -> list[str]:
    """Of ``paths``, the ones under /tmp, relative to it: what a host must still see there."""
    tmp, out = Path("/tmp").resolve(), []
    for p in paths:
        p = Path(p).resolve()
        if p.is_relative_to(tmp) and p != tmp:
            out.append(str(p.relative_to(tmp)))
    return sorted(set(out))


@dataclass
class Host:
    role: str  # master, worker or broker
    name: str  # master, worker-1, broker-2: its folders' and logs' name
    ip: str
    netns: str
    folder: Path  # the host's own: its /tmp, its work folder
    cpus: list[int] = field(default_factory=list)  # a worker's CPUs (empty: it floats)
    visible: list[str] = field(default_factory=list)  # under /tmp, what it still sees (under_tmp)
    pid: int | None = None  # its daemon's process, once started

    @property
    def tmp(self) -> Path:
        return self.folder / "tmp"

    def prepare(self) -> Host:
        self.tmp.mkdir(parents=True, exist_ok=True)
        ASIDE.mkdir(parents=True, exist_ok=True)
        return self

    def command(self, args: list[str]) -> list[str]:
        """``args`` run on this host: in its network namespace, with its private /tmp, pinned to its CPUs."""
        pinned = ["taskset", "-c", ",".join(map(str, self.cpus))] if self.cpus else []
        return [
            *("ip", "netns", "exec", self.netns),
            *("unshare", "--mount", "--propagation", "private"),
            *("sh", "-c", _PRIVATE_TMP, "host", str(ASIDE), str(self.tmp), *self.visible, "--"),
            *pinned,
            *args,
        ]

    def describe(self) -> dict:
        return {
            "role": self.role,
            "name": self.name,
            "address": self.ip,
            "netns": self.netns,
            "pid": self.pid,
            "cpus": ",".join(map(str, self.cpus)) or "any",
        }
