"""A job written for the answer check, as a user new to streamscale would write it (not an example
of the project's): a pandas UDF that tidies a free-text note, and a filter on the amount."""

import pandas as pd
from pyspark.sql import functions as F
from pyspark.sql.functions import pandas_udf


@pandas_udf("string")
def tidy(notes: pd.Series) -> pd.Series:
    return notes.str.strip().str.lower().str.replace(r"\s+", " ", regex=True)


def text_udf(records, params):
    kept = records.where(F.col("amount") > 10)
    return kept.select(F.col("user").alias("key"), tidy(F.col("note")).alias("note"), "amount")
