#!/usr/bin/env bash
# Sustainable throughput of UC1-UC4 on local[1] and local[2]; one line per run, RESULT lines per UC.
# Usage: bash benchmarks/run_all_throughput.sh [duration_s] [warmup_s]   (about 30 minutes at 60/20)
set -u
cd "$(dirname "$0")/.."
D=${1:-60}; W=${2:-20}
PY=.venv/bin/python
export STREAMSCALE_SPARK_LOG_LEVEL=ERROR
run() { $PY benchmarks/sustainable_throughput.py --duration "$D" --warmup "$W" "$@" 2>/dev/null | grep -E "^(uc|RESULT)"; }
run --uc uc1 --master 'local[1]' --rates 10000,15000
run --uc uc1 --master 'local[2]' --rates 15000,20000,25000,30000
run --uc uc2 --master 'local[1]' --rates 2000,4000,6000
run --uc uc2 --master 'local[2]' --rates 4000,8000,12000
run --uc uc3 --master 'local[1]' --rates 1000,2000,4000
run --uc uc3 --master 'local[2]' --rates 2000,4000,8000
run --uc uc4 --master 'local[1]' --rates 4,5,6
run --uc uc4 --master 'local[2]' --rates 5,6,7
