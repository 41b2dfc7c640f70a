"""Finding a user's job: ``path/to/file.py:function`` (a file, relative to the spec's folder) or
``package.module:function`` (importable), beside the built-in ``uc1`` ... ``uc4``.

A job file is imported under a module name of its own, with its folder on the path (a helper
module beside it imports as it does when the user runs the job), and registered with PySpark's
cloudpickle to travel *by value*, as is every module its import brought in from its folder: the
UDFs they define reach Spark's Python workers without the files being on the workers' path (on a
cluster master the job's file is also shipped with ``addPyFile``).

A job file may build Spark objects when it is imported that PySpark can only build in a running
session: a UDF at the top of the file whose type is a DDL string (``@udf("string")``,
``@pandas_udf("double")``) has PySpark parse that string in the JVM, and fails with
SESSION_OR_CONTEXT_NOT_EXISTS without one; a column there (``KEY = F.col("user")``) fails
PySpark's assertion of an active SparkContext. A user's own script made its session first. So
does a file that makes one at its top (``spark = SparkSession.builder.getOrCreate()``), which
would start a session of its own here, before the run's and unlike it: while a file is imported
to be checked, PySpark's builder starts none (:func:`_no_session_started`). Such a file is imported
when its job is first called, in the run's session (:class:`Deferred`), where ``getOrCreate``
gives the run's session; until then its function is looked for in the file's source.
"""

from __future__ import annotations

import ast
import contextlib
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


# PySpark's error for a Spark object built with no session running (its errorClass and message)
NO_SESSION = "SESSION_OR_CONTEXT_NOT_EXISTS"


def needs_session(exc: BaseException) -> bool:
    """Whether an import failed only because PySpark had no session to build something in: its
    error saying so, or (a column at the top of the file, ``F.col("user")``) PySpark's own
    assertion that a SparkContext is active."""
    if getattr(exc, "getCondition", lambda: None)() == NO_SESSION:
        return True
    frames = traceback.extract_tb(exc.__traceback__) if isinstance(exc, AssertionError) else []
    return bool(frames) and "_active_spark_context" in (frames[-1].line or "")


@contextlib.contextmanager
def _no_session_started(deferrable: bool):
    """With ``deferrable``: PySpark's ``SparkSession.builder.getOrCreate()`` starts no session
    meanwhile (it fails as PySpark does where one is needed and none runs); one running is given
    as ever."""
    if not deferrable:
        yield
        return
    from pyspark.errors import PySparkRuntimeError
    from pyspark.sql import SparkSession

    original = SparkSession.Builder.getOrCreate

    def refuse(self):
        if SparkSession.getActiveSession() is None:
            raise PySparkRuntimeError(errorClass=NO_SESSION, messageParameters={})
        return original(self)

    SparkSession.Builder.getOrCreate = refuse
    try:
        yield
    finally:
        SparkSession.Builder.getOrCreate = original


def _import_file(path: Path, deferrable: bool = False):
    """The file's module; with ``deferrable``, None where its import needs a running Spark session
    (see the module's notes)."""
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
        with _no_session_started(deferrable):
            spec.loader.exec_module(module)
    except Exception as exc:  # noqa: BLE001 - the user's code: its error, one line
        sys.modules.pop(name, None)
        if deferrable and needs_session(exc):
            _by_value(_imported_from(folder, set(sys.modules) - before))  # not new when imported again
            return None
        raise ConfigError(
            f"job file {path} failed to import{_where_in_file(exc, path)}: {type(exc).__name__}: {_first_line(exc)}"
        ) from None
    # its UDFs travel with the plan, not by import
    _by_value([module, *_imported_from(folder, set(sys.modules) - before)])
    _loaded[key] = module
    return module


def _by_value(modules) -> None:
    """Registers ``modules`` with PySpark's cloudpickle to travel by value."""
    from pyspark import cloudpickle

    for module in modules:
        cloudpickle.register_pickle_by_value(module)


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


class Deferred:
    """A job's function, its file or module imported when the function is first called (in the
    run's Spark session): its import needs a running session (see the module's notes)."""

    def __init__(self, ref: str):
        self.ref = ref
        self._fn = None

    def __call__(self, *args, **kwargs):
        if self._fn is None:
            self._fn = _load(self.ref, deferrable=False)
        return self._fn(*args, **kwargs)


def _source(path: Path) -> ast.Module | None:
    """The file's syntax tree (None: it cannot be read or parsed)."""
    try:
        return ast.parse(path.read_text(), str(path))
    except (OSError, SyntaxError, ValueError):
        return None


def _defined_in_source(tree: ast.Module) -> set[str] | None:
    """The names a file defines or imports at its top level (None: it imports with *: any name
    may be there)."""
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            if any(a.name == "*" for a in node.names):
                return None
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


def _functions_in(tree: ast.Module) -> list[str]:
    """The functions a file defines at its top level (what a missing one's error lists)."""
    return [n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]


def _deferred(ref: str, path: Path | None, label: str) -> Deferred:
    """The function of a job whose import needs a session, looked for in its source (``path``;
    None: not found) meanwhile."""
    func = split(ref)[1]
    tree = _source(path) if path is not None else None
    names = _defined_in_source(tree) if tree is not None else None
    if names is not None and func not in names:
        raise _no_function(label, func, [n for n in _functions_in(tree) if not n.startswith("_")])
    return Deferred(ref)


def load(ref: str):
    """The job's function, or a ConfigError: the file or module missing, failing to import, or
    without that function. A job whose import needs a running Spark session gives a
    :class:`Deferred` function, imported when first called."""
    return _load(ref, deferrable=True)


def _load(ref: str, deferrable: bool):
    where, func, is_file = split(ref)
    if is_file:
        module = _import_file(Path(where), deferrable)
        label = f"job file {where}"
        return _deferred(ref, Path(where), label) if module is None else _function(module, func, label)
    label = f"job module '{where}'"
    try:
        with _no_session_started(deferrable):
            module = importlib.import_module(where)
    except ImportError as exc:
        raise ConfigError(f"{label} cannot be imported: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - the user's code: its error, one line
        if deferrable and needs_session(exc):
            found = importlib.util.find_spec(where)
            return _deferred(ref, Path(found.origin) if found and found.origin else None, label)
        raise ConfigError(f"{label} failed to import: {type(exc).__name__}: {_first_line(exc)}") from None
    return _function(module, func, label)


def _function(module, func: str, label: str):
    """``module``'s function ``func``, or a ConfigError naming what it defines."""
    fn = getattr(module, func, None)
    if fn is None:
        raise _no_function(
            label,
            func,
            [n for n, v in vars(module).items() if callable(v) and getattr(v, "__module__", None) == module.__name__],
        )
    if not callable(fn):
        raise ConfigError(f"{label}: '{func}' is not a function")
    return fn


def _no_function(label: str, func: str, defined: list[str]) -> ConfigError:
    """The error of a job without function ``func``, naming the ones it defines."""
    hint = f" (it defines: {', '.join(sorted(defined))})" if defined else ""
    return ConfigError(f"{label} has no function '{func}'{hint}")


def _first_line(exc: BaseException) -> str:
    """The first line of a user's code's error (its one-line ConfigError)."""
    return (str(exc).strip().splitlines() or [""])[0]


def job_file(ref: str) -> Path | None:
    """The job's file, when it is one (shipped to a cluster's executors)."""
    where, _, is_file = split(ref)
    return Path(where) if is_file else None
