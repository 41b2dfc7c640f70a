"""Pure logic of the source: read limits, option parsing, value decoding."""

import pyarrow as pa
import pytest

from streamscale.errors import ConfigError
from streamscale.sparkio import formats
from streamscale.sparkio.kafka import SourceConfig, limit_offsets

SCHEMA = formats.parse_ddl("identifier STRING, timestamp BIGINT, valueInW DOUBLE")


def test_limit_offsets_proportional_and_exact_total():
    start = {"t": {"0": 0, "1": 100, "2": 50}}
    end = {"t": {"0": 1000, "1": 200, "2": 50}}
    out = limit_offsets(start, end, 550)
    took = {p: out["t"][p] - start["t"][p] for p in out["t"]}
    assert sum(took.values()) == 550
    assert took == {"0": 500, "1": 50, "2": 0}


def test_limit_offsets_nothing_to_cap():
    end = {"t": {"0": 10}}
    assert limit_offsets({"t": {"0": 5}}, end, 100) == end


def test_limit_offsets_always_progresses():
    out = limit_offsets({"t": {"0": 0, "1": 0, "2": 0}}, {"t": {"0": 1, "1": 1, "2": 1}}, 2)
    assert sum(out["t"].values()) == 2


def test_source_config_errors():
    with pytest.raises(ConfigError, match="kafka.bootstrap.servers"):
        SourceConfig.from_options({"subscribe": "t"})
    with pytest.raises(ConfigError, match="subscribe"):
        SourceConfig.from_options({"kafka.bootstrap.servers": "x:1"})
    with pytest.raises(ConfigError, match="valueSchema"):
        SourceConfig.from_options({"kafka.bootstrap.servers": "x:1", "subscribe": "t", "valueFormat": "json"})
    with pytest.raises(ConfigError, match="valueFormat"):
        SourceConfig.from_options({"kafka.bootstrap.servers": "x:1", "subscribe": "t", "valueFormat": "xml"})
    with pytest.raises(ConfigError, match="cannot read field"):
        formats.parse_ddl("a STRING, b MAP")
    with pytest.raises(ConfigError, match="claimGroups must be true or false, not 'yes'"):
        SourceConfig.from_options({"kafka.bootstrap.servers": "x:1", "subscribe": "t", "claimGroups": "yes"})
    base = {"kafka.bootstrap.servers": "x:1", "subscribe": "t"}
    assert not SourceConfig.from_options(base).claim_groups  # only read_kafka on a local master turns it on
    assert SourceConfig.from_options({**base, "claimgroups": " TRUE"}).claim_groups


def test_decoded_columns_do_not_clash_with_kafka_metadata():
    cfg = SourceConfig.from_options(
        {
            "kafka.bootstrap.servers": "x:1",
            "subscribe": "t",
            "valueFormat": "json",
            "valueSchema": "identifier STRING, timestamp BIGINT, valueInW DOUBLE",
        }
    )
    names = cfg.arrow_schema().names
    assert names[:4] == ["kafka_key", "kafka_value", "kafka_topic", "kafka_partition"]
    assert "timestamp" in names and "kafka_timestamp" in names and len(set(names)) == len(names)


def test_json_block_fast_path():
    vals = [b'{"identifier":"s_%d","timestamp":%d,"valueInW":%d.25}' % (i, i, i) for i in range(100)]
    cols, errors = formats.decode(vals, "json", SCHEMA)
    assert errors == [None] * 100
    assert cols[0].to_pylist()[7] == "s_7" and cols[1].to_pylist()[7] == 7 and cols[2].to_pylist()[7] == 7.25


def test_json_newlines_inside_documents_are_fine():
    cols, errors = formats.decode([b'{"identifier":"a",\n"timestamp":1,\r\n"valueInW":2}'], "json", SCHEMA)
    assert errors == [None] and cols[0].to_pylist() == ["a"]


@pytest.mark.parametrize(
    "bad,reason",
    [
        (b"garbage", "JSONDecodeError"),
        (b"[1]", "not a JSON object"),
        (b'{"identifier":"a","timestamp":1}', "valueInW"),
        (b'{"identifier":"a","timestamp":"x","valueInW":1}', "timestamp"),
        (b'{"identifier":true,"timestamp":1,"valueInW":1}', "identifier"),
    ],
)
def test_json_malformed_rows_are_found(bad, reason):
    vals = [
        b'{"identifier":"ok","timestamp":1,"valueInW":1.5}',
        bad,
        b'{"identifier":"ok2","timestamp":2,"valueInW":2}',
    ]
    cols, errors = formats.decode(vals, "json", SCHEMA)
    assert errors[0] is None and errors[2] is None
    assert reason in errors[1]
    assert cols[0].to_pylist() == ["ok", None, "ok2"]
    assert cols[2].to_pylist() == [1.5, None, 2.0]


def test_csv_decode():
    cols, errors = formats.decode([b"s_1,10,2.5", b"s_2,x,1", b"s_3,30,3"], "csv", SCHEMA)
    assert errors[0] is None and errors[2] is None and "timestamp" in errors[1]
    assert cols[1].to_pylist() == [10, None, 30]
    assert cols[1].type == pa.int64()


def test_the_accumulator_servers_end_of_session_error_goes_to_the_spark_log(tmp_path, monkeypatch, capsys):
    # PySpark prints it (EOFError) to stderr when a session stops: what the demo showed a newcomer
    from pyspark.accumulators import AccumulatorTCPServer

    from streamscale.sparkio import session

    monkeypatch.setenv("STREAMSCALE_SPARK_LOG", str(tmp_path / "spark.log"))
    monkeypatch.setattr(session, "_JVM_LOG", [None])
    session._quiet_accumulator_servers()
    try:
        raise EOFError
    except EOFError:
        AccumulatorTCPServer.handle_error(None, None, ("127.0.0.1", 45822))
    assert "EOFError" in (tmp_path / "spark.log").read_text()
    assert "Traceback" not in capsys.readouterr().err


def test_the_progress_report_reuses_the_end_offsets_the_batch_was_planned_with():
    # reportLatestOffset follows latestOffset in every trigger: a second read of the end offsets
    # would cost a broker round trip per micro-batch for a progress report
    from streamscale.sparkio.source import KafkaStreamReader

    class Access:
        calls = 0

        def end_offsets(self, topic, isolation):
            Access.calls += 1
            return {0: 10 * Access.calls, 1: 5}

    r = KafkaStreamReader({"kafka.bootstrap.servers": "x:1", "subscribe": "t"})
    r._access = Access()
    assert r.latestOffset({"t": {"0": 0, "1": 0}}, None) == {"t": {"0": 10, "1": 5}}
    assert r.reportLatestOffset() == {"t": {"0": 10, "1": 5}} and Access.calls == 1
    assert r.reportLatestOffset() == {"t": {"0": 20, "1": 5}} and Access.calls == 2  # not twice the same


def test_a_session_on_another_master_is_refused_not_handed_back(monkeypatch):
    # getOrCreate returns the running session whatever master is asked for: a run asking for a
    # cluster would measure the local session (and stop it at its end)
    from pyspark import SparkContext

    from streamscale.errors import SparkError
    from streamscale.sparkio.session import build_session

    class Running:
        master = "local[2]"

    monkeypatch.setattr(SparkContext, "_active_spark_context", Running())
    with pytest.raises(SparkError, match=r"a Spark session on local\[2\] already runs in this process.*spark://h:7077"):
        build_session("spark://h:7077")


class _Recorder:
    """Stands in for a DataStreamReader or DataFrameWriter: keeps the options it is given."""

    def __init__(self):
        self.options: dict = {}

    def format(self, name):
        self.options["format"] = name
        return self

    def mode(self, _mode):
        return self

    def option(self, k, v):
        self.options[k] = v
        return self

    def load(self):
        return dict(self.options)

    def save(self):
        pass


class _Registry:
    """Stands in for a session's data source registry: keeps the names registered."""

    def __init__(self):
        self.registered: list = []

    def register(self, source):
        self.registered.append(source.name())


def test_read_kafka_claims_groups_on_local_masters_only():
    from streamscale.sparkio.io import read_kafka

    def session(master: str):
        class Context:
            defaultParallelism = 2

        Context.master = master

        class Spark:
            readStream = _Recorder()
            sparkContext = Context()
            dataSource = _Registry()
            _jsparkSession = object()

        return Spark()

    # the Python source is registered on a session when it is first read with, and only then
    spark = session("local[2]")
    read_kafka(spark, "x:1", "t", impl="spark")
    assert spark.dataSource.registered == []
    read_kafka(spark, "x:1", "t", impl="python")
    read_kafka(spark, "x:1", "t", impl="python")
    assert spark.dataSource.registered == ["streamscale-kafka"]

    assert read_kafka(session("local[2]"), "x:1", "t", impl="python")["claimGroups"] == "true"
    assert "claimGroups" not in read_kafka(session("spark://h:7077"), "x:1", "t", impl="python")
    assert (
        read_kafka(session("local[2]"), "x:1", "t", impl="python", options={"claimGroups": "false"})["claimGroups"]
        == "false"
    )
    with pytest.raises(ConfigError, match="claimGroups=true needs a local master"):
        read_kafka(session("spark://h:7077"), "x:1", "t", impl="python", options={"claimGroups": "true"})

    # Spark's connector reads in larger polls and fetches than kafka-clients' defaults, unless the
    # user's own properties say otherwise; the Python source has its own settings
    from streamscale.broker.connection import KafkaConnection

    tuned = read_kafka(session("local[2]"), "x:1", "t", impl="spark")
    assert (tuned["kafka.max.poll.records"], tuned["kafka.max.partition.fetch.bytes"]) == ("20000", str(8 << 20))
    assert tuned["kafka.fetch.max.wait.ms"] == "10"  # no stall on the batch that reaches the log's end
    own = read_kafka(
        session("local[2]"),
        KafkaConnection.of("x:1", {"max.poll.records": "50"}),
        "t",
        impl="spark",
        options={"kafka.fetch.max.wait.ms": "500"},
    )
    assert (own["kafka.max.poll.records"], own["kafka.fetch.max.wait.ms"]) == ("50", "500")
    assert "kafka.max.poll.records" not in read_kafka(session("local[2]"), "x:1", "t", impl="python")


def test_spark_connector_writes_in_larger_batches_unless_told_otherwise():
    # Spark's Kafka sink produces in batches of up to 256 KiB that wait up to 5 ms to fill; the
    # connection's properties and the caller's options override that, the Python sink has its own
    from streamscale.broker.connection import KafkaConnection
    from streamscale.sparkio.io import write_kafka_batch

    class Session:
        _jsparkSession = object()
        dataSource = _Registry()

    class Frame:
        sparkSession = Session()

        def __init__(self):
            self.write = _Recorder()

    def written(bootstrap, impl, options=None):
        df = Frame()
        write_kafka_batch(df, bootstrap, "out", impl, options)
        return df.write.options

    tuned = written("x:1", "spark")
    assert (tuned["kafka.batch.size"], tuned["kafka.linger.ms"], tuned["topic"]) == (str(256 << 10), "5", "out")
    assert written(KafkaConnection.of("x:1", {"linger.ms": "0"}), "spark")["kafka.linger.ms"] == "0"
    assert written("x:1", "spark", {"kafka.batch.size": "16384"})["kafka.batch.size"] == "16384"
    own = written("x:1", "python")
    assert "kafka.batch.size" not in own and "kafka.linger.ms" not in own
