#!/usr/bin/env bash
# Sustainable throughput of UC1-UC4 on local[1] and local[2]; one line per run, RESULT lines at the end.
# Usage: bash benchmarks/run_all_throughput.sh [duration_s] [warmup_s]   (about 40 minutes at 60/20)
set -u
cd "$(dirname "$0")/.."
D=${1:-60}; W=${2:-20}
PY=.venv/bin/python
export STREAMSCALE_SPARK_LOG_LEVEL=ERROR
run() { $PY benchmarks/sustainable_throughput.py --duration "$D" --warmup "$W" "$@" 2>/dev/null | grep -E "^(uc|RESULT)"; }
run --uc uc1 --master 'local[1]' --rates 10000,15000,20000,25000
run --uc uc1 --master 'local[2]' --rates 15000,20000,25000,30000,40000
run --uc uc2 --master 'local[1]' --rates 2000,5000,10000,15000
run --uc uc2 --master 'local[2]' --rates 5000,10000,15000,20000
run --uc uc3 --master 'local[1]' --rates 1000,2000,5000,10000 --params '{"window_s": 259200, "slide_s": 86400}'
run --uc uc3 --master 'local[2]' --rates 2000,5000,10000,15000 --params '{"window_s": 259200, "slide_s": 86400}'
run --uc uc4 --master 'local[1]' --rates 4,5,6,7 --gen-workers 1
run --uc uc4 --master 'local[2]' --rates 5,6,7 --gen-workers 1
