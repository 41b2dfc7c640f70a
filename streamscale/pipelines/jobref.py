"""Finding a user's job: ``path/to/file.py:function`` (a file, relative to the spec's folder) or
``package.module:function`` (importable), beside the built-in ``uc1`` ... ``uc4``.

A job file is imported under a module name of its own, with its folder on the path (a helper
module beside it imports as it does when the user runs the job), and registered with PySpark's
cloudpickle to travel *by value*, as is every module its import brought in from its folder: the
UDFs they define reach Spark's Python workers without the files being on the workers' path (on a
cluster master the job's file is also shipped with ``addPyFile``).
"""

from __future__ import annotations

import importlib
import importlib.util
import re
import sys
import traceback
from pathlib import Path

from streamscale.errors import ConfigError

BUILT_IN = ("uc1", "uc2", "uc3", "uc4")
_MODULE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
_loaded: dict[tuple[str, float], object] = {}  # a file's module per (path, mtime): imported once


def is_job(sut: str) -> bool:
    """Whether ``sut`` names a user's job (``FILE.py:FUNC`` or ``module:FUNC``), not a task sample."""
    return ":" in str(sut) and str(sut).lower() not in BUILT_IN


def split(ref: str) -> tuple[str, str, bool]:
    """(where, function, is_file) of a job reference, or a ConfigError saying how to write one."""
    where, _, func = str(ref).rpartition(":")
    if not where or not func.isidentifier():
        raise ConfigError(f"job '{ref}': write FILE.py:FUNCTION or package.module:FUNCTION")
    is_file = where.endswith(".py") or "/" in where or "\\" in where
    if not is_file and not _MODULE.match(where):
        raise ConfigError(f"job '{ref}': '{where}' is neither a .py file nor a module name")
    return where, func, is_file


def resolve(ref: str, base_dir: str | Path | None = None) -> str:
    """The reference with a relative file made absolute (from ``base_dir``, default the working
    directory), so that it means the same wherever it is read again."""
    where, func, is_file = split(ref)
    if not is_file:
        return ref
    path = Path(where).expanduser()
    if not path.is_absolute():
        path = (Path(base_dir or ".") / path).resolve()
    return f"{path}:{func}"


def display_name(sut: str) -> str:
    """How answers name a SUT: UC2, or a job's function name."""
    return split(sut)[1] if is_job(sut) else str(sut).upper()


def _where_in_file(exc: BaseException, path: Path) -> str:
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        if Path(frame.filename) == path:
            return f" (line {frame.lineno})"
    if isinstance(exc, SyntaxError) and exc.lineno:
        return f" (line {exc.lineno})"
    return ""


def _import_file(path: Path):
    if not path.is_file():
        raise ConfigError(f"job file {path} does not exist")
    key = (str(path), path.stat().st_mtime)
    if key in _loaded:
        return _loaded[key]
    name = f"streamscale_job_{re.sub(r'[^A-Za-z0-9_]', '_', path.stem)}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # cloudpickle finds a function's module here
    folder = str(path.parent.resolve())
    if folder not in sys.path:
        sys.path.append(folder)  # after the installed packages: a helper never shadows one of them
    before = set(sys.modules)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # noqa: BLE001 - the user's code: its error, one line
        sys.modules.pop(name, None)
        first = (str(exc).strip().splitlines() or [""])[0]
        raise ConfigError(
            f"job file {path} failed to import{_where_in_file(exc, path)}: {type(exc).__name__}: {first}"
        ) from None
    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(module)  # its UDFs travel with the plan, not by import
    for helper in _imported_from(folder, set(sys.modules) - before):
        cloudpickle.register_pickle_by_value(helper)
    _loaded[key] = module
    return module


def _imported_from(folder: str, names: set[str]) -> list:
    """The modules among ``names`` whose file lies in ``folder`` (or below it), installed packages
    left out: a job at the top of a project may have its virtualenv beside it, and pandas or
    pyspark pickled by value would be shipped with every task."""
    installed = {Path(p).resolve() for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    found = []
    for name in sorted(names):
        module = sys.modules.get(name)
        where = getattr(module, "__file__", None)
        if not where:
            continue
        file = Path(where).resolve()
        if not file.is_relative_to(folder) or any(file.is_relative_to(p) for p in installed):
            continue
        if {"site-packages", "dist-packages"} & set(file.parts):
            continue
        found.append(module)
    return found


def load(ref: str):
    """The job's function, or a ConfigError: the file or module missing, failing to import, or
    without that function."""
    where, func, is_file = split(ref)
    if is_file:
        module = _import_file(Path(where))
        label = f"job file {where}"
    else:
        try:
            module = importlib.import_module(where)
        except ImportError as exc:
            raise ConfigError(f"job module '{where}' cannot be imported: {exc}") from None
        except Exception as exc:  # noqa: BLE001 - the user's code: its error, one line
            first = (str(exc).strip().splitlines() or [""])[0]
            raise ConfigError(f"job module '{where}' failed to import: {type(exc).__name__}: {first}") from None
        label = f"job module '{where}'"
    fn = getattr(module, func, None)
    if fn is None:
        defined = sorted(
            n for n, v in vars(module).items() if callable(v) and getattr(v, "__module__", None) == module.__name__
        )
        hint = f" (it defines: {', '.join(defined)})" if defined else ""
        raise ConfigError(f"{label} has no function '{func}'{hint}")
    if not callable(fn):
        raise ConfigError(f"{label}: '{func}' is not a function")
    return fn


def job_file(ref: str) -> Path | None:
    """The job's file, when it is one (shipped to a cluster's executors)."""
    where, _, is_file = split(ref)
    return Path(where) if is_file else None
