"""Hosts of their own on this machine: a Spark master, Spark workers and Kafka brokers, each in a
network namespace with its own address, its own private temporary folder (a mount namespace) and,
for a worker, its own CPUs, with one folder every host shares; started in the background by
``streamscale cluster start`` or for one execution by a spec's ``cluster:`` section (root only)."""
