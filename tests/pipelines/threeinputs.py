"""A spec of three inputs whose job reads two (a join of bids with the auctions they are for,
persons declared for another query), for the tests of unread inputs and of drains."""

from streamscale.benchmark.spec import parse_spec

JOB = """
from pyspark.sql import functions as F


def bids_per_auction(inputs, params):
    bids = inputs["bids"].withColumnRenamed("auction", "bid_auction")
    joined = bids.join(inputs["auctions"], F.expr("bid_auction = auction"))
    return joined.select(F.col("auction").alias("key"), "bid")
"""


def three_inputs(tmp_path, unread: dict | None = None):
    """The three-input spec's benchmark section (its job in ``tmp_path``), ``unread`` inputs marked so."""
    (tmp_path / "q3.py").write_text(JOB)
    seq = {"type": "long", "gen": "sequence"}
    fields = {
        "persons": {"person": seq},
        "auctions": {"auction": seq},
        "bids": {"bid": seq, "auction": {"type": "long", "gen": "ref:auctions.auction,60"}},
    }
    shares = {"persons": 0.2, "auctions": 0.2, "bids": 0.6}
    inputs = {n: {"share": shares[n], "records": {"fields": f}, **(unread or {}).get(n, {})} for n, f in fields.items()}
    spec = {
        "name": "three-inputs",
        "benchmark": {"sut": "q3.py:bids_per_auction", "inputs": inputs, "topics": {"partitions": 1}},
        "execution": {"load": {"type": "rate", "values": [500]}, "resources": {"values": [1]}},
    }
    return parse_spec(spec, folder=tmp_path).benchmark
