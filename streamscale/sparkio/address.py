"""The address a Spark driver gives its executors: on a cluster they run on other hosts and reach
the driver over the network, so the driver's loopback (what a local master uses) will not do."""

from __future__ import annotations

import ipaddress
import socket
from urllib.parse import urlsplit

from streamscale.errors import ConfigError


def master_host(master: str) -> str | None:
    """The host of a cluster master's URL (``spark://h:7077``, ``spark://h1:7077,h2:7077``,
    ``k8s://https://h:6443``); None for a local master."""
    if master.startswith("local"):
        return None
    rest = master.split("://", 1)[1] if "://" in master else master
    if master.startswith("k8s://"):
        rest = urlsplit(rest if "://" in rest else f"https://{rest}").netloc
    first = rest.split(",")[0]
    host = first.rsplit(":", 1)[0] if first.count(":") == 1 or first.startswith("[") else first
    return host.strip("[]") or None


def on_loopback(master: str) -> bool:
    """Whether a cluster master lies on this machine's loopback (every host of its cluster is this
    machine); a local master is no cluster."""
    host = master_host(master)
    if host is None or host == "localhost":
        return host is not None
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name
        return False


def route_address(host: str, port: int = 7077) -> str:
    """This machine's address on the route towards ``host``: where a process there reaches it
    (asked of the kernel's routing table; no packet is sent)."""
    try:
        family = socket.getaddrinfo(host, port, proto=socket.IPPROTO_UDP)[0]
    except socket.gaierror as exc:
        raise ConfigError(f"master host {host}: not found ({exc.strerror})") from None
    with socket.socket(family[0], socket.SOCK_DGRAM) as s:
        try:
            s.connect(family[4])  # a datagram socket's connect only picks the route
        except OSError as exc:
            raise ConfigError(f"master host {host}: no route to it ({exc.strerror})") from None
        return s.getsockname()[0]


def driver_conf(master: str, driver_host: str | None = None) -> dict:
    """The settings that make a cluster's executors reach the driver: its address (``driver_host``,
    else this machine's on the route towards the master) and where it listens; none on a local
    master (the session's defaults keep it on loopback)."""
    host = master_host(master)
    if host is None:
        return {}
    address = driver_host or route_address(host)
    return {"spark.driver.host": address, "spark.driver.bindAddress": address}
