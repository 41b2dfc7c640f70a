# Two commands on a fresh machine with Python 3.11+, Java 17+ and Maven: `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
# Apache Kafka's jars (the embedded broker), copied from Maven Central by jvm/kafka/pom.xml
KAFKA_LIBS  := $(VENV)/share/streamscale/kafka
KAFKA_STAMP := $(KAFKA_LIBS)/.installed-stamp
# Spark's Kafka connector and Avro functions at exactly the installed pyspark's version (jvm/spark-kafka/pom.xml)
SPARK_KAFKA_LIBS  := $(VENV)/share/streamscale/spark-kafka
SPARK_KAFKA_STAMP := $(SPARK_KAFKA_LIBS)/.installed-stamp
MVN := mvn -q -B
PYTEST_ARGS ?=

.PHONY: install demo lint test test-all bench check-java check-mvn clean

check-java:
	@java_bin="$${JAVA_HOME:+$$JAVA_HOME/bin/}java"; \
	v=$$($$java_bin -version 2>&1 | sed -n 's/.*version "\([0-9][0-9]*\).*/\1/p' | head -1); \
	if [ -z "$$v" ] || [ "$$v" -lt 17 ]; then \
	  echo "streamscale needs Java 17+ for Spark (found: $${v:-none}); install it, e.g. 'apt-get install openjdk-17-jre-headless', or set JAVA_HOME"; \
	  exit 1; \
	fi

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || { echo "streamscale needs Python 3.11+ (set PYTHON=...)"; exit 1; }
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@echo "installing streamscale and its Python packages into $(VENV)"
	@{ $(BIN)/python -m pip install --quiet --upgrade pip && $(BIN)/python -m pip install --quiet -e ".[test]"; } \
	  > $(VENV)/pip.log 2>&1 || { echo "pip could not install streamscale's packages (see $(VENV)/pip.log)"; exit 1; }
	@touch $(STAMP)

check-mvn:
	@command -v mvn >/dev/null 2>&1 || { echo "streamscale fetches Apache Kafka's jars with Maven: install it, e.g. 'apt-get install maven'"; exit 1; }

# Once: a second install finds the stamp and fetches nothing. Copied to a temporary folder first, so
# an interrupted fetch leaves no half-filled one behind.
$(KAFKA_STAMP): jvm/kafka/pom.xml | $(STAMP)
	@$(MAKE) --no-print-directory check-mvn
	@rm -rf $(KAFKA_LIBS).tmp
	@echo "fetching Apache Kafka's jars with Maven into $(KAFKA_LIBS)"
	@$(MVN) -f jvm/kafka/pom.xml dependency:copy-dependencies -DincludeScope=runtime \
	  -DoutputDirectory=$(abspath $(KAFKA_LIBS)).tmp > $(VENV)/maven-kafka.log 2>&1 \
	  || { echo "Maven could not fetch Apache Kafka's jars (see $(VENV)/maven-kafka.log)"; exit 1; }
	@rm -rf $(KAFKA_LIBS) && mv $(KAFKA_LIBS).tmp $(KAFKA_LIBS)
	@touch $(KAFKA_STAMP)

$(SPARK_KAFKA_STAMP): jvm/spark-kafka/pom.xml $(STAMP)
	@$(MAKE) --no-print-directory check-mvn
	@rm -rf $(SPARK_KAFKA_LIBS).tmp
	@v=$$($(BIN)/python -c 'import pyspark; print(pyspark.__version__)'); \
	echo "fetching Spark's Kafka connector and Avro functions $$v with Maven into $(SPARK_KAFKA_LIBS)"; \
	$(MVN) -f jvm/spark-kafka/pom.xml dependency:copy-dependencies -DincludeScope=runtime -Dspark.version=$$v \
	  -DoutputDirectory=$(abspath $(SPARK_KAFKA_LIBS)).tmp > $(VENV)/maven-spark-kafka.log 2>&1 \
	  || { echo "Maven could not fetch spark-sql-kafka-0-10 and spark-avro $$v (see $(VENV)/maven-spark-kafka.log)"; exit 1; }
	@rm -rf $(SPARK_KAFKA_LIBS) && mv $(SPARK_KAFKA_LIBS).tmp $(SPARK_KAFKA_LIBS)
	@touch $(SPARK_KAFKA_STAMP)

# Java's class-data archives of what a Spark session and a Kafka broker load first
# (streamscale/sparkio/classdata.py, streamscale/broker/classdata.py): starts take ~40 % less time
# and CPU. An optimization only: without them, JVMs start as before, so a failure is one line and
# the install goes on (the stamp keeps it from retrying).
CDS_STAMP := $(VENV)/.class-data-stamp
CDS_INPUTS := streamscale/sparkio/classdata.py streamscale/sparkio/driveropts.py streamscale/sparkio/home.py streamscale/broker/classdata.py
$(CDS_STAMP): $(STAMP) $(KAFKA_STAMP) $(SPARK_KAFKA_STAMP) $(CDS_INPUTS)
	@echo "writing class-data archives of the broker's and Spark's JVMs (faster starts)"
	@$(BIN)/python -m streamscale.broker.classdata > $(VENV)/class-data.log 2>&1 \
	  || echo "no class-data archive for the broker (see $(VENV)/class-data.log): it starts without one"
	@$(BIN)/python -m streamscale.sparkio.classdata >> $(VENV)/class-data.log 2>&1 \
	  || echo "no class-data archive for Spark (see $(VENV)/class-data.log): sessions start without one"
	@touch $(CDS_STAMP)

install: check-java $(STAMP) $(KAFKA_STAMP) $(SPARK_KAFKA_STAMP) $(CDS_STAMP)

demo: install
	$(BIN)/streamscale demo

# The house's habits: ruff (lint and format) and the import layers (pyproject's importlinter contract).
lint: install
	$(BIN)/ruff check streamscale tests benchmarks
	$(BIN)/ruff format --check streamscale tests benchmarks
	$(BIN)/lint-imports

# Three workers on 2 CPUs: most tests wait on a JVM (a broker's or Spark's start, a micro-batch's
# trigger) for part of their time, and a third worker fills the CPU time two leave idle
# (docs/performance.md, "Test suite"). The longest tests go first (tests/conftest.py), so that
# they overlap with the many short ones instead of ending the run alone.
TEST_WORKERS ?= 3

test: install lint
	$(BIN)/python -m pytest -n $(TEST_WORKERS) $(PYTEST_ARGS)

# The long experiments (marked slow) as well.
test-all: install
	$(BIN)/python -m pytest -m "slow or not slow" $(PYTEST_ARGS)

bench: install
	$(BIN)/python benchmarks/loadgen_throughput.py
	$(BIN)/python benchmarks/source_throughput.py

clean:
	rm -rf $(VENV) demo-results .pytest_cache
