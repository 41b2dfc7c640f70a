"""`streamscale doctor`: what streamscale needs on this machine."""

from __future__ import annotations

import sys

import typer

from streamscale.cli.app import out, root


@root.command("doctor")
def doctor():
    """Check what streamscale needs: Java 17+, PySpark, Apache Kafka's jars for the embedded broker."""
    import platform

    from streamscale.broker.kafka_server import kafka_libs, kafka_version
    from streamscale.sparkio.session import java_version

    ok = True
    for name, check in [
        ("java", lambda: f"Java {java_version()}"),
        ("pyspark", lambda: __import__("pyspark").__version__),
        ("confluent-kafka", lambda: __import__("confluent_kafka").version()[0]),
        ("kafka", lambda: f"Apache Kafka {kafka_version()} in {kafka_libs()}"),
    ]:
        try:
            out.print(f"[green]ok[/]   {name}: {check()}")
        except Exception as exc:  # noqa: BLE001 - report every check
            ok = False
            out.print(f"[red]fail[/] {name}: {exc}")
    out.print(f"python {platform.python_version()} at {sys.executable}")
    if not ok:
        raise typer.Exit(1)
