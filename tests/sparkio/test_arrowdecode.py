"""Spark's connector's decoder runs where streamscale is not installed: it is shipped by value."""

import base64
import subprocess
import sys

from pyspark import cloudpickle

from streamscale.sparkio.arrowdecode import StructDecoder, pickle_by_value

_EXECUTOR = r"""
import base64, pickle, sys
class NoStreamscale:
    def find_spec(self, name, path=None, target=None):
        if name == "streamscale" or name.startswith("streamscale."):
            raise ImportError("streamscale is not installed here")
sys.meta_path.insert(0, NoStreamscale())
import pyarrow as pa
decoder = pickle.loads(base64.b64decode(sys.stdin.read()))
values = pa.array([b'{"identifier":"a","timestamp":1,"valueInW":2}', b"NaN"], pa.binary())
for row in decoder(values).to_pylist():
    print(row)
print(sorted(m for m in sys.modules if m.startswith("streamscale")))
"""


def test_the_decoder_needs_only_pyarrow_on_an_executor():
    pickle_by_value()
    blob = cloudpickle.dumps(
        StructDecoder("json", "identifier STRING, timestamp BIGINT, valueInW DOUBLE", "value_error")
    )
    out = subprocess.run(
        [sys.executable, "-c", _EXECUTOR],
        input=base64.b64encode(blob).decode(),
        capture_output=True,
        text=True,
        cwd="/",
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.splitlines()
    assert lines[0] == str({"identifier": "a", "timestamp": 1, "valueInW": 2.0, "value_error": None})
    assert lines[1].startswith("{'identifier': None,") and "NaN is not a JSON number" in lines[1]
    assert lines[2] == "[]"  # nothing of streamscale was imported
