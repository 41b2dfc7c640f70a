"""Spark's connector's record values decoded on the executors by the one decoding contract
(:func:`streamscale.sparkio.formats.decode`, the Python source's own), in an Arrow UDF.

Spark's ``from_json`` keeps other rules: it reads ``NaN``, ``1e400`` and ``Infinity`` as
non-finite doubles, any JSON value of a STRING field as its text, and ignores what follows the
object. The UDF hands only the value column to the Python workers (the other Kafka columns stay in
the JVM), where Arrow's C++ reader decodes whole batches: as fast as ``from_json`` within the
machine's drift on a UC2-like query (``benchmarks/decode_throughput.py``).

The UDF and the modules it calls are pickled by value: executors need pyarrow (as any Arrow
function of PySpark does), not streamscale.
"""

from __future__ import annotations

import pyarrow as pa

from streamscale.sparkio.formats import decode, parse_ddl


class StructDecoder:
    """Values -> one struct per value: the schema's fields, and ``error_column`` (None, or why the
    value breaks the contract)."""

    def __init__(self, value_format: str, value_ddl: str, error_column: str):
        self.value_format = value_format
        self.value_ddl = value_ddl
        self.error_column = error_column

    def __call__(self, values: pa.Array) -> pa.Array:
        schema = parse_ddl(self.value_ddl)
        cols, errors = decode(values, self.value_format, schema)
        return pa.StructArray.from_arrays(
            [*cols, pa.array(errors, pa.string())], names=[*schema.names, self.error_column]
        )


def decoding_udf(value_format: str, value_ddl: str, error_column: str, return_type):
    """A scalar Arrow UDF of the value column (``return_type``: the struct's Spark type)."""
    from pyspark.sql.functions import arrow_udf

    pickle_by_value()
    decoder = StructDecoder(value_format, value_ddl, error_column)

    def decode_values(values: pa.Array) -> pa.Array:  # PySpark reads the UDF's kind from these hints
        return decoder(values)

    return arrow_udf(decode_values, return_type)


def pickle_by_value() -> None:
    """Ship the decoder's code with the query instead of importing streamscale on the executors."""
    import importlib

    from pyspark import cloudpickle

    for name in (
        "streamscale.errors",
        "streamscale.sparkio.valuecheck",
        "streamscale.sparkio.valuecsv",
        "streamscale.sparkio.formats",
        "streamscale.sparkio.arrowdecode",
    ):
        cloudpickle.register_pickle_by_value(importlib.import_module(name))
