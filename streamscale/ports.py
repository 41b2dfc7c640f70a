"""TCP port helpers on loopback: a free port to bind, whether one is taken, whether one answers.

Neutral: the broker, the Spark cluster, the fault proxy and the metrics endpoint all need them.
"""

from __future__ import annotations

import socket


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def port_in_use(host: str, port: int) -> bool:
    """Whether something already listens on host:port (binding it ourselves is the reliable test)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError:
            return True
    return False


def port_open(host: str, port: int, timeout: float = 0.5) -> bool:
    """Whether something accepts a connection on host:port."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False
