"""The live consumer-group autoscaler of Landau et al., §V: monitor, controller and consumers over Kafka.

* :mod:`.monitor` measures each partition's write speed (bytes/s, sliding window) and publishes it
  to ``<group>.monitor.writeSpeed`` (topics are per group).
* :mod:`.controller` runs the state machine Sentinel → Reassign → Group management → Synchronize and
  talks to consumers through ``<group>.consumer.metadata`` (partition 0: replies to the controller;
  partition i: messages for consumer i-1).
* :mod:`.consumer` is one consumer process: fetch, process, write, check metadata.
* :mod:`.backend` starts and deletes consumer "deployments" (local processes).
* :mod:`.sink` is the SQLite sink, which also holds the offsets and consumer state transactionally.
"""
