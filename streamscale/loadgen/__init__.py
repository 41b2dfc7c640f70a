"""Load generator concern: Theodolite's simulated power sensors, records a user describes field by
field or replays from a sample (streamscale.loadgen.recordspec), and UC4's sensor registry."""

from streamscale.loadgen.config import GeneratorConfig
from streamscale.loadgen.generator import LoadGenerator, generate
from streamscale.loadgen.records import ACTIVE_POWER_DDL, ActivePowerRecord, Encoder, ValueDistribution
from streamscale.loadgen.registry import SensorRegistry

__all__ = [
    "ACTIVE_POWER_DDL",
    "ActivePowerRecord",
    "Encoder",
    "GeneratorConfig",
    "LoadGenerator",
    "SensorRegistry",
    "ValueDistribution",
    "generate",
]
