"""`streamscale topology describe`: a pipeline's logical plan, repartitions and sub-topologies."""

from __future__ import annotations

from pathlib import Path

import typer

from streamscale.cli.app import out, parse_params, topo_app
from streamscale.errors import ConfigError


@topo_app.command("describe")
def topology_describe(
    name: str = typer.Argument(..., help="uc1, uc2, uc3, uc4 or blog (the paper's example)"),
    optimize: bool | None = typer.Option(
        None,
        "--optimize/--no-optimize",
        help="Merge repartitions (Bejeck and Wang, Optimizing Kafka Streams Applications) always / never; "
        "default: where it pays on Spark",
    ),
    out_dir: Path = typer.Option(Path("results/topology"), "--out"),
    params: list[str] = typer.Option([], "--param", "-p", help="Pipeline parameter KEY=VALUE"),
):
    """Print sub-topologies like Kafka Streams' Topology#describe() and write DOT and PNG graphs."""
    from streamscale.pipelines.plans import plan_for
    from streamscale.topology.physical import describe, physical_plan, render_png, to_dot

    if name.lower() not in ("uc1", "uc2", "uc3", "uc4", "blog"):
        raise ConfigError(f"unknown topology '{name}': choose uc1, uc2, uc3, uc4 or blog")
    phys = physical_plan(plan_for(name.lower(), **parse_params(params)), optimize)
    text = describe(phys)
    out.print(text, markup=False, highlight=False)
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = out_dir / f"{name.lower()}-{'optimized' if phys.optimized else 'unoptimized'}"
    stem.with_suffix(".txt").write_text(text + "\n")
    stem.with_suffix(".dot").write_text(to_dot(phys))
    render_png(phys, stem.with_suffix(".png"))
    out.print(
        f"{len(phys.subtopologies)} sub-topologies, {len(phys.repartitions)} repartition topics; "
        f"wrote {stem}.txt, .dot, .png"
    )
