"""Run in a process of its own (a second SparkContext cannot share the test session's JVM): a
stateful streaming job on a cluster of hosts — the total of each key's amounts over a topic's
records ``key,amount`` — read once (availableNow), its checkpoint in the cluster's shared folder.
Writes the totals, the executors as Spark lists them and the driver's address as JSON.

    python tests/hosts/onhosts.py MASTER BOOTSTRAP TOPIC CHECKPOINT OUT.json
"""

import json
import subprocess
import sys
import time


def main(master: str, bootstrap: str, topic: str, checkpoint: str, out: str) -> None:
    from pyspark.sql import functions as F

    from streamscale.sparkio.address import driver_conf
    from streamscale.sparkio.executors import executor_list
    from streamscale.sparkio.io import read_kafka
    from streamscale.sparkio.session import build_session

    conf = {
        **driver_conf(master, None),
        "spark.executor.instances": 2,
        "spark.executor.cores": 1,
        "spark.cores.max": 2,
        "spark.executor.memory": "512m",
        "spark.sql.shuffle.partitions": 4,
    }
    spark = build_session(master, "onhosts", conf)
    deadline = time.monotonic() + 120
    while len(executor_list(spark)) < 2 and time.monotonic() < deadline:  # both registered
        time.sleep(0.2)
    raw = read_kafka(spark, bootstrap, topic, "earliest", impl="spark")
    parts = F.split(F.col("value").cast("string"), ",")
    totals = raw.select(parts[0].alias("key"), parts[1].cast("long").alias("amount")).groupBy("key").sum("amount")
    seen: dict[str, int] = {}

    def keep(batch, _id):
        for row in batch.collect():
            seen[row[0]] = int(row[1])

    query = (
        totals.writeStream.outputMode("update")
        .foreachBatch(keep)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(180)
    sc = spark.sparkContext._jsc.sc()
    ports = {int(spark.conf.get("spark.driver.port")), int(sc.env().blockManager().blockManagerId().port())}
    ss = subprocess.run(["ss", "-ltnH"], capture_output=True, text=True).stdout
    rows = [line.split() for line in ss.splitlines()]
    # the address of each listening socket on those ports (a JVM's IPv4 sockets read [::ffff:a.b.c.d])
    on_ports = [f[3].rsplit(":", 1) for f in rows if len(f) > 3 and int(f[3].rsplit(":", 1)[1]) in ports]
    listens = sorted({address.strip("[]").removeprefix("::ffff:") for address, _ in on_ports})
    result = {
        # where the driver's RPC and block manager listen: what every executor reaches
        "driver_listens": listens,
        "totals": seen,
        "executors": [[e.id, e.host, e.cores] for e in executor_list(spark)],
        "driver_host": spark.conf.get("spark.driver.host"),
        "finished": not query.isActive,
    }
    spark.stop()
    with open(out, "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main(*sys.argv[1:6])
