"""Cells of repeated trials: α and β with their range, and trials that disagree in kind said so
rather than averaged away; what a producer sent, from librdkafka's counters."""

import pandas as pd

from streamscale.reliability.campaign import agreement, range_text, summary_lines
from streamscale.reliability.spec import NoFault
from streamscale.reliability.tester import Trial, run_trial


def trials(alphas, betas, acked, acks="all"):
    return pd.DataFrame({"alpha": alphas, "beta": betas, "acked": acked, "acks": [acks] * len(alphas)})


def test_trials_that_agree_say_nothing_more():
    assert agreement(trials([0.0, 0.0, 0.0], [0.01, 0.02, 0.015], [100, 100, 100])) == ""
    assert agreement(trials([0.5], [0.0], [0])) == ""  # one trial: nothing to disagree with


def test_a_bimodal_cell_says_what_splits_it():
    # two trials lost nothing; one lost 68.6 % and had no record acknowledged
    said = agreement(trials([0.0, 0.0, 0.686], [0.63, 0.61, 0.47], [50_000, 50_000, 0]))
    assert said == "2 of 3 lost nothing, 1 lost 68.6 % of what they sent; 1 of 3 had no record acknowledged"
    # acks=0 acknowledges nothing by design: not a split
    assert (
        agreement(trials([0.0, 0.1], [0.0, 0.0], [0, 0], acks="0"))
        == "1 of 2 lost nothing, 1 lost 10 % of what they sent"
    )


def test_a_cell_reads_mean_and_range():
    assert range_text(0.229, 0.0, 0.686) == "0.229 [0–0.686]"
    assert range_text(0.0, 0.0, 0.0) == "0"
    row = {
        "semantics": "at-least-once", "fault": "proxy reset 5%", "trials": 3, "alpha": 0.229, "alpha_min": 0.0,
        "alpha_max": 0.686, "beta": 0.57, "beta_min": 0.47, "beta_max": 0.63, "acked_but_lost": 0,
        "unacked_lost": 34_314, "agreement": "2 of 3 lost nothing, 1 lost 68.6 % of what they sent",
    }  # fmt: skip
    [line] = summary_lines(pd.DataFrame([row]))
    assert "α 0.229 [0–0.686]" in line and "β 0.57 [0.47–0.63]" in line
    assert "0 acknowledged lost, 34,314 unacknowledged" in line and "[trials disagree: 2 of 3 lost nothing" in line
    [none] = summary_lines(pd.DataFrame([{**row, "semantics": "at-most-once"}]))
    assert "n/a (no acknowledgements)" in none


def test_a_trial_records_what_its_producer_sent(tmp_path):
    from streamscale.reliability.testbeds import ProxyTestbed

    bed = ProxyTestbed(tmp_path, seed=3)
    try:
        r = run_trial(bed, Trial("at-least-once", 5000, 100, NoFault(), partitions=2, send_timeout_s=30))
    finally:
        bed.close()
    # no fault: every record transmitted once, in batches of several records each
    assert r.acked == 5000 and r.transmitted == 5000 and r.resets_response == 0
    assert 1 < r.mean_batch_records <= 5000 and 100 * r.mean_batch_records <= r.mean_batch_bytes


def test_a_transactional_sender_keeps_its_id_across_sessions():
    # a new session after a fatal error must fence the old one (same transactional.id), so that
    # its open transaction is aborted at once rather than holding the last stable offset
    from streamscale.reliability.sender import Sender

    class Connection:
        def __init__(self):
            self.confs = []

        def producer(self, conf):
            self.confs.append(conf)
            return object()

    conn = Connection()
    s = Sender(conn, "t", "exactly-once", 10, 100, 0, 5, 30)
    s._producer()
    s._producer()
    ids = {c["transactional.id"] for c in conn.confs}
    assert len(conn.confs) == 2 and ids == {s.transactional_id}
    other = Sender(conn, "t", "exactly-once", 10, 100, 0, 5, 30)
    assert other.transactional_id != s.transactional_id  # runs do not fence each other


def test_a_fault_that_did_not_happen_is_said_so():
    import threading
    import time

    from streamscale.reliability.clusterfaults import ClusterFaultRun
    from streamscale.reliability.spec import ClusterFault

    sending = threading.Event()

    class Cluster:  # no active controller to kill; asked for one, sending ends
        nodes: dict = {}
        isolated: set = set()

        def controller(self):
            sending.set()
            return None

    steps = [{"at_s": 0, "do": "kill", "target": "controller"}, {"at_s": 5, "do": "heal", "target": "all"}]
    run = ClusterFaultRun(Cluster(), ClusterFault(kind="cluster", steps=steps), "t")
    sender = threading.Thread(target=sending.wait)
    sender.start()
    run.run(time.monotonic(), sender)
    sender.join()
    assert run.not_done == ["kill controller at 0 s (no such node)", "a step due at 5.0 s (sending had ended)"]


def test_a_record_whose_delivery_failed_is_not_acknowledged(tmp_path):
    # the link is cut for the whole of a 1 s delivery timeout: every delivery report is an error,
    # and no record may count as acknowledged (nor as acknowledged and lost)
    from streamscale.reliability.spec import Cut, ProxyFault
    from streamscale.reliability.testbeds import ProxyTestbed

    bed = ProxyTestbed(tmp_path, seed=5)
    try:
        fault = ProxyFault(kind="proxy", cut=Cut(at_s=0.0, for_s=4.0))
        r = run_trial(bed, Trial("at-least-once", 2000, 100, fault, partitions=1, send_timeout_s=1))
    finally:
        bed.close()
    assert r.acked == 0 and r.acked_but_lost == 0
    assert "_MSG_TIMED_OUT" in r.producer_errors
    assert r.lost + r.distinct == 2000 and r.unacked_lost == r.lost
