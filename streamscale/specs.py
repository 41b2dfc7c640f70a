"""Reading YAML specs: the file, the strict base model, and one ConfigError naming every wrong field.

Neutral: the benchmark's, the reliability tester's and the Kafka connection's sections share it.
"""

from __future__ import annotations

from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from streamscale.errors import ConfigError


class StrictModel(BaseModel):
    # allow_inf_nan=False: a YAML .inf or .nan in any number is refused with the field named
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


def _explain(exc: ValidationError, source: str) -> str:
    lines = []
    for e in exc.errors():
        loc = ".".join(str(x) for x in e["loc"]) or "(top level)"
        msg = e["msg"].removeprefix("Value error, ")
        lines.append(f"  {loc}: {msg}")
    if len(lines) == 1:  # one wrong field: one line
        return f"{source}: {lines[0].strip()}"
    return f"{source}: invalid spec\n" + "\n".join(lines)


def base_dir(info) -> Path:
    """The folder relative file names in a spec are read from (a validator's ``info``): the spec's
    folder when it was read from a file, else the working directory."""
    ctx = getattr(info, "context", None) or {}
    return Path(ctx.get("base_dir") or ".")


def read_yaml(path: str | Path):
    """A spec file's content, or a ConfigError naming the file (missing, or not YAML)."""
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"spec file {path} does not exist")
    try:
        return yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from None


def validate(model, data, source: str, top_level: str, base_dir: str | Path | None = None):
    """``model`` from parsed YAML, or a ConfigError that names every wrong field. ``base_dir``: where
    files the spec names by a relative path lie (the spec's folder)."""
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: the spec must be a mapping with {top_level}")
    try:
        return model.model_validate(data, context={"base_dir": str(base_dir) if base_dir else None})
    except ValidationError as exc:
        raise ConfigError(_explain(exc, source)) from None
