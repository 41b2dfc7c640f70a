"""`streamscale benchmark run --serve`: a page on loopback that follows the current experiment.

The page (inline HTML/JS/canvas, no network fetches beyond this server) polls ``/status.json``
every two seconds and redraws the lag curve and the rates.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from streamscale.observe import prometheus


class LiveState:
    def __init__(self):
        self._lock = threading.Lock()
        self.experiment: dict = {}
        self.samples: list[tuple[float, int]] = []
        self.finished: list[dict] = []

    def start_experiment(self, **info) -> None:
        with self._lock:
            self.experiment = {**info, "started": time.time()}
            self.samples = []

    def add_sample(self, t_s: float, lag: int) -> None:
        with self._lock:
            self.samples.append((t_s, lag))

    def end_experiment(self, result: dict) -> None:
        with self._lock:
            self.finished.append(result)

    def snapshot(self) -> dict:
        def value(name: str) -> float | None:
            return prometheus.REGISTRY.get_sample_value(name)

        with self._lock:
            return {
                "experiment": dict(self.experiment),
                "samples": list(self.samples),
                "finished": list(self.finished),
                "time": time.time(),
                "generated_per_s": value("streamscale_generated_records_per_second"),
                "processed_per_s": value("streamscale_processed_records_per_second"),
                "lag_trend": value("streamscale_lag_trend_records_per_second"),
                "batch_s": value("streamscale_microbatch_duration_seconds"),
            }


PAGE = """<!DOCTYPE html><html><head><meta charset="utf-8"><title>streamscale live</title>
<style>body{font-family:system-ui,sans-serif;margin:2em}td{padding:2px 12px}canvas{border:1px solid #ccc}</style>
</head><body><h1>streamscale: <span id="exp">waiting for the first experiment</span></h1>
<table><tr><td>lag samples</td><td id="n">0</td></tr><tr><td>consumer lag</td><td id="lag">-</td></tr>
<tr><td>lag trend (records/s)</td><td id="trend">-</td></tr>
<tr><td>generated (records/s)</td><td id="gen">-</td></tr><tr><td>processed (records/s)</td><td id="proc">-</td></tr>
<tr><td>micro-batch (s)</td><td id="batch">-</td></tr><tr><td>finished experiments</td><td id="done">0</td></tr>
<tr><td>updated</td><td id="updated">never</td></tr></table>
<canvas id="chart" width="800" height="300"></canvas>
<script>
function fmt(x) { return (x === null || x === undefined) ? '-' : Math.round(x).toLocaleString(); }
function draw(samples) {
  var c = document.getElementById('chart'), g = c.getContext('2d');
  g.clearRect(0, 0, c.width, c.height);
  if (samples.length < 2) return;
  var tmax = samples[samples.length - 1][0], lmax = Math.max.apply(null, samples.map(function (s) { return s[1]; })) || 1;
  g.beginPath();
  samples.forEach(function (s, i) {
    var x = 40 + (c.width - 50) * s[0] / tmax, y = c.height - 20 - (c.height - 40) * s[1] / lmax;
    if (i === 0) g.moveTo(x, y); else g.lineTo(x, y);
  });
  g.strokeStyle = '#1f77b4'; g.stroke();
  g.fillText('lag (max ' + fmt(lmax) + ')', 45, 12); g.fillText('t = ' + tmax.toFixed(0) + ' s', c.width - 80, c.height - 5);
}
function refresh() {
  fetch('/status.json').then(function (r) { return r.json(); }).then(function (s) {
    var e = s.experiment;
    if (e.exp_id) document.getElementById('exp').textContent = e.exp_id;
    document.getElementById('n').textContent = s.samples.length;
    document.getElementById('lag').textContent = s.samples.length ? fmt(s.samples[s.samples.length - 1][1]) : '-';
    document.getElementById('trend').textContent = fmt(s.lag_trend);
    document.getElementById('gen').textContent = fmt(s.generated_per_s);
    document.getElementById('proc').textContent = fmt(s.processed_per_s);
    document.getElementById('batch').textContent = s.batch_s === null ? '-' : s.batch_s.toFixed(2);
    document.getElementById('done').textContent = s.finished.length;
    document.getElementById('updated').textContent = new Date(s.time * 1000).toLocaleTimeString();
    draw(s.samples);
  }).catch(function () { document.getElementById('updated').textContent = 'server gone'; });
}
refresh(); setInterval(refresh, 2000);
</script></body></html>"""


class LiveServer:
    def __init__(self, state: LiveState, port: int = 0):
        state_ref = state

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - http.server's naming
                if self.path.startswith("/status.json"):
                    body, ctype = json.dumps(state_ref.snapshot()).encode(), "application/json"
                elif self.path in ("/", "/index.html"):
                    body, ctype = PAGE.encode(), "text/html; charset=utf-8"
                else:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Type", ctype)
                self.send_header("Cache-Control", "no-store")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):  # quiet
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True, name="live-page")

    def start(self) -> LiveServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
