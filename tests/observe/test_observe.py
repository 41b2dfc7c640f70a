"""Prometheus metrics during a real run, the HTML report in a headless browser, the live page."""

from __future__ import annotations

import csv
import json
import re
import threading
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from streamscale.benchmark.environment import environment
from streamscale.benchmark.execution import Execution
from streamscale.benchmark.plan import resolve
from streamscale.benchmark.report import write_report
from streamscale.benchmark.results import ExperimentResult
from streamscale.benchmark.spec import parse_spec
from streamscale.observe import prometheus
from streamscale.observe.live import LiveServer, LiveState
from tests.observe.conftest import ARTIFACTS, render, skip_rendering


def _spec():
    return parse_spec(
        {
            "name": "report-test",
            "benchmark": {"sut": "uc1", "params": {"sink": "none"}},
            "execution": {
                "load": {"type": "sensors", "values": [1000, 2000]},
                "resources": {"type": "cores", "values": [1]},
                "duration_s": 10,
                "warmup_s": 2,
                "strategy": {"name": "full", "lower_bound": False},
            },
        }
    )


def _fake_runner(out_dir):
    from streamscale.benchmark.plots import plot_lag

    def run(load, res, rep, on_lag=None):
        valid = load < 2000
        r = ExperimentResult(
            f"load{load:g}_res{res}_rep{rep}",
            load,
            res,
            rep,
            load,
            load * (1 if valid else 0.5),
            valid,
            valid,
            3.0,
            load * 0.01,
            True,
            0,
            0.0,
            True,
            valid,
            10,
            1000,
            0.5,
            10.0,
            "" if valid else "generator fell short of its target rate: experiment invalid",
        )
        (out_dir / "lag").mkdir(exist_ok=True)
        plot_lag(list(range(10)), [5 * t for t in range(10)], 2, r, out_dir / "lag" / f"{r.exp_id}.png")
        return r

    return run


def test_report_renders_every_plot_and_table(tmp_path, chromium):
    spec = _spec()
    Execution(spec, tmp_path, _fake_runner(tmp_path)).run()
    (tmp_path / "environment.json").write_text(json.dumps(environment(resolve(spec).runs, "127.0.0.1:9092")))
    page = write_report(tmp_path)
    text = page.read_text()
    assert "http://" not in text.replace("http://www.w3.org", "") and "https://" not in text  # self-contained
    assert "INVALID: generator fell short" in text and "load2000_res1_rep0" in text
    dom = render(chromium, page.as_uri(), screenshot=ARTIFACTS / "report.png")
    body = re.search(r"<body[^>]*>", dom).group(0)
    loaded = int(re.search(r'data-images-loaded="(\d+)"', body).group(1))
    total = int(re.search(r'data-images-total="(\d+)"', body).group(1))
    assert total == 3 and loaded == total  # demand plot + two lag plots, all decoded
    # the answer's two (demand, capacity), then metric, experiments, environment
    assert int(re.search(r'data-tables="(\d+)"', body).group(1)) == 5
    opening = text[: text.index("<h2>Details")]  # the answer comes before the details
    # 2,000 records/s fell short of its load (invalid): no failure, so it is not said to need more
    said = "UC1 needs 1 core up to ~1,000 records/s; ~2,000 records/s was not delivered (the generator fell short)"
    assert said + " on this machine" in opening
    assert '<table class="demand">' in opening and '<table class="capacity">' in opening and "demand plot" in opening
    assert (ARTIFACTS / "report.png").stat().st_size > 20_000


def _scrape(port: int) -> dict[str, float]:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if not s.labels:
                out[s.name] = s.value
    return out


@pytest.mark.spark
def test_metrics_endpoint_and_live_page_follow_a_real_run(tmp_path, broker, access, spark, chromium_if_any):
    from streamscale.experiment.sut import Context, StopPolicy, Workload, run_sut, warm_up_workers

    # the run is given the tests' session, which run_sut does not warm: its first micro-batch on a
    # cold connector could take most of the run on a busy machine
    warm_up_workers(spark, access, broker.bootstrap, "observe-test")
    port = prometheus.serve(0)
    live = LiveState()
    server = LiveServer(live).start()
    base = _scrape(port)
    scrapes: list[dict] = []
    doms: list[str] = []
    stop = threading.Event()

    def scraper():
        while not stop.is_set():
            scrapes.append(_scrape(port))
            stop.wait(0.3)

    def browser():
        # two looks at the live page while the experiment runs, the second after three more samples
        for need in (2, 3):
            target = len(live.snapshot()["samples"]) + need
            while len(live.snapshot()["samples"]) < target and not stop.is_set():
                stop.wait(0.2)
            if stop.is_set():
                return
            doms.append(render(chromium_if_any, server.url, budget_ms=2500))

    live.start_experiment(exp_id="live-test")
    threads = [threading.Thread(target=scraper)]
    if chromium_if_any is not None:  # without it, the metrics are checked and the page is not
        threads.append(threading.Thread(target=browser))
    for t in threads:
        t.start()
    try:
        result = run_sut(
            Workload("uc1", {"sink": "none"}, sensors=1000, partitions=2),
            policy=StopPolicy(14),
            context=Context(
                bootstrap=broker.bootstrap,
                spark=spark,
                out_dir=tmp_path,
                on_lag=lambda s: live.add_sample(s.t_s, s.lag),
            ),
        )
    finally:
        stop.set()
        for t in threads:
            t.join(60)
        server.stop()
    final = _scrape(port)
    lag_csv = [int(r["lag"]) for r in csv.DictReader(open(tmp_path / "lag.csv"))]
    seen = {
        int(s["streamscale_consumer_lag_total_records"])
        for s in scrapes
        if s["streamscale_lag_samples_total"] > base["streamscale_lag_samples_total"]
    }
    assert len(seen) >= 3 and seen <= set(lag_csv)  # every scraped lag is one of the run's samples
    assert final["streamscale_consumer_lag_total_records"] == lag_csv[-1]
    assert final["streamscale_lag_samples_total"] - base["streamscale_lag_samples_total"] == len(lag_csv)
    assert (
        final["streamscale_processed_records_total"] - base["streamscale_processed_records_total"]
        == result.processed_records
    )
    batch_rates = {round(float(r["processed_rate"]), 3) for r in csv.DictReader(open(tmp_path / "batches.csv"))}
    scraped_rates = {
        round(s["streamscale_processed_records_per_second"], 3)
        for s in scrapes
        if s["streamscale_processed_records_total"] > base["streamscale_processed_records_total"]
    }
    assert scraped_rates and scraped_rates <= batch_rates
    assert max(s["streamscale_generated_records_per_second"] for s in scrapes) > 500
    # the live page showed the experiment and more lag samples the second time
    skip_rendering(chromium_if_any)
    assert len(doms) == 2
    counts = [int(re.search(r'id="n">(\d+)<', d).group(1)) for d in doms]
    assert all('id="exp">live-test<' in d for d in doms)
    assert 0 < counts[0] < counts[1]
