"""The console script as a user runs it: clear one-line errors, broker lifecycle, generate."""

import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from streamscale.broker import BrokerAccess
from streamscale.experiment.cpus import children_map, process_tree
from streamscale.processes import running
from tests.cli.helpers import EXE, run


@pytest.mark.spark
def test_a_property_given_once_reaches_every_client_of_a_run(state, broker, tmp_path):
    # -X once on the command line: the command's own clients, the load generator's worker
    # processes and the Spark application's Python workers (source readers, sink producers) all
    # get it. Every client is made by broker.connection, which traces what each one got.
    trace = tmp_path / "clients.jsonl"
    env = {**state, "STREAMSCALE_KAFKA_TRACE": str(trace), "STREAMSCALE_METRICS_PORT": "-1"}
    p = subprocess.Popen(
        # the Python connector: its source's and sink's clients are made (and traced) here; Spark's
        # connector gets the same properties as kafka.* options (broker.connection.spark_options)
        [EXE, "run-sut", "uc1", "-p", "sink=kafka", "-p", "connector=python", "-d", "3", "--partitions", "2"]
        + ["-b", broker.bootstrap, "-X", "client.id=probe-7"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **env},
    )
    try:
        _, err = p.communicate(timeout=300)
    finally:
        p.kill()
    assert p.returncode == 0, err
    clients = [json.loads(line) for line in trace.read_text().splitlines()]
    assert clients and all(c["properties"] == {"client.id": "probe-7"} for c in clients), clients
    assert {"producer", "consumer", "admin"} <= {c["kind"] for c in clients}
    spark_workers = {c["pid"] for c in clients if "pyspark" in c["argv0"]}
    # multiprocessing's spawned workers take over their parent's sys.argv
    generator_workers = {c["pid"] for c in clients if c["argv0"] == EXE} - {p.pid}
    assert p.pid in {c["pid"] for c in clients}
    assert spark_workers and generator_workers, {(c["pid"], c["argv0"][-40:]) for c in clients}
    kinds_in_spark = {c["kind"] for c in clients if c["pid"] in spark_workers}
    assert {"consumer", "producer"} <= kinds_in_spark  # the source's readers and the sink's producers


def test_no_broker_is_one_clear_line(state):
    r = run("generate", "-n", "5", env=state)
    assert r.returncode == 3  # a Kafka-side error (streamscale.errors): no broker
    assert "no broker" in r.stderr and "Traceback" not in r.stderr


def test_bad_option_value(state):
    r = run("generate", "--period", "-1", "-n", "1", "-b", "127.0.0.1:1", env=state)
    assert r.returncode == 2 and "period must be a positive" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.parametrize(
    "args, named",
    [
        (["--period", "nan"], "period"),
        (["--period", "inf"], "period"),
        (["-d", "inf"], "duration"),
        (["-d", "nan"], "duration"),
        (["-s", "1000000000000"], "sensors"),
        (["-t", "bad topic!"], "topic"),
        (["-t", "x" * 250], "topic"),
    ],
)
def test_non_finite_out_of_range_and_bad_names_are_one_line(state, args, named):
    # before any broker is contacted (127.0.0.1:1 is closed): a clear line naming the option, exit 2
    r = run("generate", *args, "-b", "127.0.0.1:1", env=state, timeout=30)
    assert r.returncode == 2, (r.stdout, r.stderr)
    errors = [line for line in r.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and named in errors[0] and "Traceback" not in r.stderr


def test_yaml_infinity_in_a_spec_is_refused(tmp_path):
    from streamscale.benchmark.spec import load_spec
    from streamscale.errors import ConfigError

    good = Path(__file__).parents[2] / "examples" / "uc1-small.yaml"
    text = good.read_text()
    spec = tmp_path / "inf.yaml"
    spec.write_text(text.replace("duration_s:", "duration_s: .inf #", 1))
    assert "duration_s: .inf" in spec.read_text()
    with pytest.raises(ConfigError, match="duration_s"):
        load_spec(spec)


def test_broker_lifecycle_topic_and_generate(state):
    assert run("broker", "status", env=state).returncode == 1
    r = run("broker", "start", env=state)
    assert r.returncode == 0, r.stderr
    info = json.loads((Path(state["STREAMSCALE_STATE_DIR"]) / "broker.json").read_text())
    assert run("broker", "status", env=state).returncode == 0
    r = run("broker", "start", env=state)
    assert r.returncode != 0 and "already running" in r.stderr and "Traceback" not in r.stderr
    assert run("topic", "create", "input", "-p", "3", env=state).returncode == 0
    r = run("generate", "-n", "3000", "-s", "1000", "-w", "2", "--unthrottled", env=state)
    assert r.returncode == 0, r.stderr
    assert "3,000 delivered" in r.stderr
    r = run("topic", "offsets", "input", env=state)
    assert re.search(r"total\s+end=3000", r.stdout), r.stdout
    assert run("broker", "stop", env=state).returncode == 0
    assert run("broker", "status", env=state).returncode == 1
    assert not running(info["pid"])  # gone (or only not yet reaped)
    assert not os.path.exists(info["data_dir"])  # its temporary storage with it


def test_registry_command(tmp_path, state):
    r = run("registry", "--levels", "3", "--out", str(tmp_path / "reg.json"), env=state)
    assert r.returncode == 0 and "64 sensors" in r.stdout
    assert (tmp_path / "reg.json").exists()


def test_doctor(state):
    r = run("doctor", env=state)
    assert r.returncode == 0, r.stdout
    assert "Java" in r.stdout and "Apache Kafka 4." in r.stdout


def test_benchmark_validate_and_bad_spec(tmp_path, state):
    root = Path(__file__).parents[2]
    r = run("benchmark", "validate", str(root / "examples" / "uc4-small.yaml"), env=state)
    assert r.returncode == 0 and "1,024 sensors" in r.stdout
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "name: x\nbenchmark: {sut: uc1}\nexecution:\n  load: {values: [1]}\n"
        "  resources: {values: [1]}\n  duration_s: 10\n  warmup_s: 30\n"
    )
    r = run("benchmark", "run", str(bad), env=state)
    assert r.returncode == 2 and "warmup_s" in r.stderr and "Traceback" not in r.stderr
    window = tmp_path / "window.yaml"  # UC3 windows shorter than their slide: refused before any broker starts
    window.write_text(
        "name: w\nbenchmark: {sut: uc3, params: {slide_s: 60}}\n"
        "execution: {load: {type: window_s, values: [30, 600]}, resources: {values: [1]}}\n"
    )
    for cmd in ("validate", "run"):
        r = (
            run("benchmark", cmd, str(window), "--out", str(tmp_path / "w"), env=state)
            if cmd == "run"
            else run("benchmark", cmd, str(window), env=state)
        )
        assert r.returncode == 2 and r.stderr.strip().startswith("error: execution.load.values: 30: "), r.stderr
        assert "valid" not in r.stdout and not (tmp_path / "w").exists()
    r = run("demo", "--budget", "30", "--out", str(tmp_path / "demo"), env=state)  # refused before anything starts
    assert r.returncode == 2 and "at least 90 s" in r.stderr and not (tmp_path / "demo").exists()


def test_broker_start_on_a_taken_port_fails_with_the_reason(state):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        r = run("broker", "start", "--port", str(port), env=state, timeout=60)
    assert r.returncode == 3 and f"port {port}" in r.stderr and "already in use" in r.stderr
    assert "broker running" not in r.stdout
    assert "no broker running" in run("broker", "status", env=state).stdout + run("broker", "status", env=state).stderr


def test_every_command_takes_the_bootstrap_from_the_environment_and_the_properties_from_x(monkeypatch, tmp_path):
    # benchmark run, run-sut and reliability run used to start an embedded broker regardless; -X
    # and --kafka-config reach what they run (the connection or the properties they hand on)
    from typer.testing import CliRunner

    import streamscale.benchmark.execution as bench_runner
    import streamscale.experiment.sut as sut
    import streamscale.reliability.campaign as rel_runner
    from streamscale.cli.main import root

    seen: dict[str, object] = {}

    class Stop(Exception):
        pass

    def grab(name, pos):
        def f(*args, **kwargs):
            context = next((a for a in args if hasattr(a, "bootstrap") and hasattr(a, "sessions")), None)
            if context is not None:  # a run's Context (streamscale.experiment.sut)
                kwargs = {"bootstrap": context.bootstrap, "properties": context.properties}
            b = kwargs.get("bootstrap", args[pos] if len(args) > pos else None)
            props = {**dict(getattr(b, "properties", ())), **(kwargs.get("properties") or {})}
            seen[name] = (str(b) if b is not None else None, props)
            raise Stop

        return f

    monkeypatch.setattr(bench_runner, "run_execution", grab("bench", 2))
    monkeypatch.setattr(sut, "run_sut", grab("sut", 99))
    monkeypatch.setattr(rel_runner, "run_spec", grab("rel", 2))
    import streamscale.broker.access as access_mod

    monkeypatch.setattr(access_mod, "ensure_reachable", lambda *a, **k: None)  # no such cluster here
    monkeypatch.setenv("STREAMSCALE_BOOTSTRAP_SERVERS", "kafka.example:9092")
    monkeypatch.setenv("STREAMSCALE_METRICS_PORT", "0")
    conf = tmp_path / "client.properties"
    conf.write_text("client.id=from-file\nsocket.timeout.ms=7000\n")
    monkeypatch.setenv("STREAMSCALE_KAFKA_CONFIG", str(conf))
    examples = Path(__file__).parents[2] / "examples"
    runner = CliRunner()
    x = ["-X", "client.id=from-x"]
    runner.invoke(root, ["benchmark", "run", str(examples / "uc1-small.yaml"), "--out", str(tmp_path / "b"), *x])
    runner.invoke(root, ["run-sut", "uc1", "-d", "5", *x])
    rel = sorted((examples / "reliability").glob("*.yaml"))[0]
    runner.invoke(root, ["reliability", "run", str(rel), "--out", str(tmp_path / "r"), *x])
    want = ("kafka.example:9092", {"client.id": "from-x", "socket.timeout.ms": "7000"})
    assert seen == {"bench": want, "sut": want, "rel": want}
    monkeypatch.setenv("STREAMSCALE_BOOTSTRAP_SERVERS", "")
    monkeypatch.delenv("STREAMSCALE_KAFKA_CONFIG")
    seen.clear()
    runner.invoke(root, ["run-sut", "uc1", "-d", "5", "-b", "given:1"])
    assert seen == {"sut": ("given:1", {})}  # the option wins
    seen.clear()
    r = runner.invoke(root, ["run-sut", "uc1", "-d", "5", "-X", "no.such.property=1"])
    assert r.exit_code != 0 and "no.such.property" in str(r.exception) and seen == {}


def _children(pid: int) -> set[int]:
    return set(children_map().get(pid, []))


def _alive(pid: int) -> bool:
    try:
        return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _last_records(bootstrap: str, topic: str, ends: dict) -> list:
    """The newest record of each partition that has one."""
    from confluent_kafka import Consumer, TopicPartition

    from streamscale.waiting import wait_for

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "last", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, p, end - 1) for p, end in ends.items() if end])
    got: dict = {}
    try:
        wait_for(
            lambda: (
                got.update({m.partition(): m for m in c.consume(10, 0.5) if m.error() is None})
                or len(got) == len([e for e in ends.values() if e])
            ),
            30,
            "the newest records",
        )
    finally:
        c.close()
    return list(got.values())


def test_sigkilled_generate_leaves_no_worker_producing(state, broker, topic_factory):
    import signal
    import time

    from streamscale.waiting import wait_for

    topic = topic_factory(2)
    p = subprocess.Popen(
        [EXE, "generate", "-t", topic, "-s", "200", "-w", "2", "-b", broker.bootstrap],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, **state},
    )
    workers: set[int] = set()
    access = BrokerAccess(broker.bootstrap)
    try:
        wait_for(lambda: len(_children(p.pid)) >= 2, 60, "the generator's worker processes")
        workers = _children(p.pid)
        # endless mode: 200 records/s, so a few hundred records say the workers are producing
        wait_for(lambda: sum(access.end_offsets(topic).values()) >= 300, 60, "the workers to produce")
        p.send_signal(signal.SIGKILL)
        p.wait()
        wait_for(lambda: not any(_alive(w) for w in workers), 10, "the orphaned workers to exit")
        gone_ms = time.time() * 1000
        ends = access.end_offsets(topic)
        # nothing was produced once they were gone: the newest record was made before
        newest = [m.timestamp()[1] for m in _last_records(broker.bootstrap, topic, ends)]
        assert len(newest) == 2 and max(newest) <= gone_ms
        assert access.end_offsets(topic) == ends
    finally:
        access.close()
        for pid in [p.pid, *workers]:  # whatever the outcome, nothing of this test keeps running
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        p.wait()


@pytest.mark.parametrize(
    "args", [["topic", "create", "t1"], ["topic", "list"], ["generate", "-n", "5"], ["run-sut", "uc1", "-d", "5"]]
)
def test_unreachable_broker_is_one_line_within_the_timeout(state, args):

    # the command gives up after its connect timeout: one that hung instead would run into the
    # 60 s bound of run() and fail the test (how long the start-up takes is the machine's business)
    env = {**state, "STREAMSCALE_CONNECT_TIMEOUT": "3"}
    r = run(*args, "-b", "127.0.0.1:1", env=env, timeout=60)
    assert r.returncode == 3, (r.stdout, r.stderr)  # BrokerUnreachable
    assert "cannot reach the Kafka broker at 127.0.0.1:1" in r.stderr
    assert "Traceback" not in r.stderr and "|FAIL|" not in r.stderr and "rdkafka" not in r.stderr


def _descendants(root: int) -> set[int]:
    return set(process_tree(root)) - {root}


def _cmdline(pid: int) -> bytes:
    try:
        return (Path("/proc") / str(pid) / "cmdline").read_bytes()
    except OSError:
        return b""


def _sigkill_and_expect_nothing_left(
    cmd: list[str], env: dict, ready, what: str, start_s: float = 180, exit_s: float = 60
) -> None:
    """Start ``cmd``, wait until ``ready(cmdlines of its descendants)``, SIGKILL it alone and wait
    for every process it had started to exit; whatever happens, kill what is left."""
    import signal

    from streamscale.waiting import wait_for

    err = tempfile.TemporaryFile()
    scratch = Path(tempfile.mkdtemp(prefix="sigkill-"))  # its $TMPDIR: what it leaves there is seen
    p = subprocess.Popen(
        [EXE, *cmd], stdout=subprocess.DEVNULL, stderr=err, env={**os.environ, **env, "TMPDIR": str(scratch)}
    )
    tree: set[int] = set()

    def started() -> bool:
        if p.poll() is not None:  # ended before it was ready: say why, not "timed out"
            err.seek(0)
            raise AssertionError(f"{cmd[:2]} exited with {p.returncode}: {err.read()[-2000:].decode(errors='replace')}")
        return ready([_cmdline(x) for x in _descendants(p.pid)])

    try:
        wait_for(started, start_s, what)
        tree = _descendants(p.pid)
        p.send_signal(signal.SIGKILL)
        p.wait()
        wait_for(lambda: not any(_alive(x) for x in tree), exit_s, "every process the command started to exit")
        # nor its temporary storage: the broker's log and the query's checkpoint (logs stay, to read)
        stored = [f.name for f in scratch.iterdir() if re.match(r"streamscale-(kafka|uc\d|job)", f.name)]
        assert not stored, f"left in $TMPDIR: {stored}"
    finally:
        for pid in [p.pid, *tree, *_descendants(p.pid)]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        p.wait()
        err.close()
        shutil.rmtree(scratch, ignore_errors=True)


def _spark(cmds) -> bool:
    return any(b"org.apache.spark.deploy.SparkSubmit" in c for c in cmds)


def _spark_and_generator(cmds) -> bool:
    return _spark(cmds) and any(b"multiprocessing.spawn" in c for c in cmds)


@pytest.mark.spark
def test_sigkilled_benchmark_run_leaves_no_process_behind(state, tmp_path):
    # broker, Spark's JVM and Python workers, generator workers: all go with the command
    spec = Path(__file__).parents[2] / "examples" / "uc1-small.yaml"
    _sigkill_and_expect_nothing_left(
        ["benchmark", "run", str(spec), "--out", str(tmp_path / "res")],
        state,
        _spark_and_generator,
        "the experiment's broker, JVM and generator workers",
    )


@pytest.mark.spark
# run-sut's and the demo's processes are those of `benchmark run` above (broker, JVM, Python and
# generator workers): long experiments, on request (-m slow)
@pytest.mark.parametrize(
    "command",
    [
        pytest.param("run-sut", marks=pytest.mark.slow),
        pytest.param("demo", marks=pytest.mark.slow),
        "reliability pipeline",
    ],
)
def test_sigkilled_spark_commands_leave_no_process_behind(state, tmp_path, broker, command):
    cmd, ready = {
        "run-sut": (["run-sut", "uc1", "-d", "300", "--partitions", "2"], _spark_and_generator),
        # the demo's probe: the broker and the JVM (its generator runs before the JVM starts)
        "demo": (
            ["demo", "--out", str(tmp_path / "demo")],
            lambda cmds: _spark(cmds) and any(b"kafka.Kafka" in c for c in cmds),
        ),
        # the pipeline runs in a process of its own session (stopped as a group by the command)
        "reliability pipeline": (
            ["reliability", "pipeline", "-n", "200000", "--out", str(tmp_path / "rp"), "-b", broker.bootstrap],
            lambda cmds: any(b"streamscale.reliability.pipeline" in c for c in cmds) and _spark(cmds),
        ),
    }[command]
    _sigkill_and_expect_nothing_left(cmd, state, ready, f"{command}: its Spark application running")


def test_sigkilled_reliability_run_leaves_no_process_behind(state, tmp_path):
    spec = Path(__file__).parents[2] / "examples" / "reliability" / "reliability-small.yaml"
    _sigkill_and_expect_nothing_left(
        ["reliability", "run", str(spec), "--out", str(tmp_path / "rel")],
        state,
        lambda cmds: (
            any(b"kafka.Kafka" in c for c in cmds) and any(b"streamscale.reliability.proxy" in c for c in cmds)
        ),
        "the broker and the fault proxy",
    )


def test_sigkilled_autoscale_run_leaves_no_consumer_consuming(state, broker, topic_factory, tmp_path):
    # consumers are processes of their own (they survive a controller restart), held by the
    # controller's lease: killed outright, the controller stops renewing and they stop
    from streamscale.autoscaler.live.load import PartitionLoad

    topic = topic_factory(2)
    load = PartitionLoad(broker.bootstrap, topic, 2, value_bytes=200)
    load.set_rate(20)
    load.start()
    try:
        _sigkill_and_expect_nothing_left(
            [
                "autoscale",
                "run",
                "-t",
                topic,
                "--consumer-capacity",
                "20KB",
                "--state-dir",
                str(tmp_path / "st"),
                "--group",
                f"g-{tmp_path.name}"[:60],
                "--interval",
                "1",
                "--window",
                "2",
                "--sample-interval",
                "0.25",
                "--wait-time",
                "0.2",
                "--controller-lease",
                "2",
                "-b",
                broker.bootstrap,
            ],
            state,
            lambda cmds: any(b"streamscale.autoscaler.live.consumer" in c for c in cmds),
            "a consumer of the group",
            start_s=60,
            exit_s=30,
        )
    finally:
        load.stop()


def test_autoscale_runs_side_by_side_and_in_a_row(state, broker, topic_factory, tmp_path):
    # two groups on one broker at once (topics namespaced by group), then the first again: each run
    # gets its consumers going, reads its records and exits cleanly
    from streamscale.autoscaler.live.load import PartitionLoad
    from streamscale.autoscaler.live.sink import SQLiteSink

    topic = topic_factory(2)
    load = PartitionLoad(broker.bootstrap, topic, 2, value_bytes=200)
    load.set_rate(20)
    load.start()

    def autoscale(name: str) -> subprocess.Popen:
        # 12 s: on a machine busy with other tests, a consumer process takes seconds to start and
        # join its group before it reads
        args = ["autoscale", "run", "-t", topic, "--consumer-capacity", "20KB", "--duration", "12"]
        args += ["--state-dir", str(tmp_path / name), "--group", f"{name}-{tmp_path.name}"[:60], "-b", broker.bootstrap]
        args += ["--interval", "1", "--window", "2", "--sample-interval", "0.25", "--wait-time", "0.2"]
        e = {**os.environ, **state, "STREAMSCALE_METRICS_PORT": "-1"}
        return subprocess.Popen([EXE, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=e)

    def read_by(name: str) -> int:
        sink = SQLiteSink(tmp_path / name / "sink.sqlite")
        try:
            return len(sink.rows(topic))
        finally:
            sink.close()

    procs = []
    try:
        procs = [autoscale("a"), autoscale("b")]
        outs = [p.communicate(timeout=120) for p in procs]
        assert [p.returncode for p in procs] == [0, 0], [err for _, err in outs]
        first = read_by("a")
        assert first > 0 and read_by("b") > 0
        again = autoscale("a")
        procs.append(again)
        _, err = again.communicate(timeout=120)
        assert again.returncode == 0, err
        assert read_by("a") > first  # the same group resumed and read on
    finally:
        load.stop()
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()


def test_lines_are_whole_when_the_output_is_not_a_terminal(tmp_path):
    # a log file, CI, `| tee`: rich would wrap at 80 columns and break the path in two
    long = tmp_path / ("a" * 70) / ("b" * 70) / "spec.yaml"
    r = run("benchmark", "run", str(long), env={"STREAMSCALE_METRICS_PORT": "-1", "COLUMNS": ""})
    assert r.returncode != 0
    assert f"error: spec file {long} does not exist" in r.stderr.splitlines(), r.stderr
