"""Pipelines concern: Theodolite's task samples UC1-UC4 as PySpark Structured Streaming jobs, and a
user's own job (a function over the decoded records: streamscale.pipelines.job) under the same runs."""

from streamscale.errors import ConfigError
from streamscale.pipelines.base import Pipeline, PipelineParams
from streamscale.pipelines.run import PipelineRun
from streamscale.pipelines.uc1 import UC1, UC1Params
from streamscale.pipelines.uc2 import UC2, UC2Params
from streamscale.pipelines.uc3 import UC3, UC3Params
from streamscale.pipelines.uc4 import UC4, UC4Params

PIPELINES: dict[str, type[Pipeline]] = {"uc1": UC1, "uc2": UC2, "uc3": UC3, "uc4": UC4}


def make_pipeline(
    name: str, params: dict | None = None, connector: str | None = None, records=None, job=None
) -> Pipeline:
    """A pipeline by name with its parameters; ``connector`` ("spark" or "python") overrides the
    parameter of that name (the Kafka connector its runs read and write with). ``name``: uc1-uc4
    or a user's job (``FILE.py:FUNC``, ``module:FUNC``: streamscale.pipelines.job), which reads
    ``records`` (a RecordsSpec; None: sensor readings) as its ``job`` setup says (a
    :class:`~streamscale.pipelines.jobsetup.JobSetup`; None: the records' fields into the output
    topic)."""
    from pydantic import ValidationError

    from streamscale.pipelines import jobref

    if connector is not None:
        params = {**(params or {}), "connector": connector}
    if jobref.is_job(name):
        from streamscale.pipelines.job import UserJob

        try:
            return UserJob(name, params or {}, records, job)
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or name}: {e['msg']}" for e in exc.errors())
            raise ConfigError(f"job parameters: {problems}") from None
    cls = PIPELINES.get(name.lower())
    if cls is None:
        raise ConfigError(
            f"unknown pipeline '{name}': choose one of {sorted(PIPELINES)} or name your job as FILE.py:FUNCTION"
        )
    if records is not None:
        raise ConfigError(f"{name} reads Theodolite's sensor readings: a records section is for your own job")
    if job is not None and not job.is_default():
        raise ConfigError(f"{name} is a task sample: decode, sink and py_files are for your own job")
    try:
        return cls(params or {})
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or name}: {e['msg']}" for e in exc.errors())
        raise ConfigError(f"{name} parameters: {problems}") from None


__all__ = [
    "PIPELINES",
    "Pipeline",
    "PipelineParams",
    "PipelineRun",
    "UC1",
    "UC1Params",
    "UC2",
    "UC2Params",
    "UC3",
    "UC3Params",
    "UC4",
    "UC4Params",
    "make_pipeline",
]
