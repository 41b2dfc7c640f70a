"""Click attribution: each click joined with the impression it refers to (a stream-stream inner join
of two inputs), at most ``within_s`` seconds after that impression was shown.

Both inputs carry an event time (``shown``, ``clicked``) with a watermark ``lateness_s`` behind it,
so that Spark keeps each impression's state only as long as a click may still refer to it. Its
output row: the click, its impression and the campaign that paid for it, keyed by the campaign.
"""

from pyspark.sql import functions as F


def attribution(inputs, params):
    within = int(params.get("within_s", 60))
    lateness = f"{int(params.get('lateness_s', 30))} seconds"
    shown = inputs["impressions"].withWatermark("shown", lateness)
    clicks = inputs["clicks"].withWatermark("clicked", lateness).withColumnRenamed("impression", "clicked_impression")
    joined = clicks.join(
        shown,
        F.expr(
            f"clicked_impression = impression AND clicked >= shown AND clicked <= shown + interval {within} seconds"
        ),
        "inner",
    )
    return joined.select(
        F.col("campaign").alias("key"),
        "click",
        "impression",
        "campaign",
        F.unix_millis("shown").alias("shown_ms"),
        F.unix_millis("clicked").alias("clicked_ms"),
    )
