import pytest

from streamscale.broker.connection import KafkaConnection
from streamscale.broker.log_dirs import LogDirSizes, LogDirsUnavailable, admin_arguments, collect_sizes


def _answer(*brokers):
    return [{"broker": i, "log_dirs": dirs} for i, dirs in enumerate(brokers)]


def _dir(topics, error=0):
    return {"error_code": error, "log_dir": "/data", "topics": topics}


def _part(p, size, future=False):
    return {"partition_index": p, "partition_size": size, "offset_lag": 0, "is_future_key": future}


def test_sizes_take_the_largest_replica_skip_moving_ones_and_other_topics():
    answer = _answer(
        [
            _dir(
                [
                    {"name": "a", "partitions": [_part(0, 500), _part(1, 70)]},
                    {"name": "b", "partitions": [_part(0, 9)]},
                ]
            )
        ],
        # a follower one batch behind, and a replica of a-1 being moved into another directory
        [_dir([{"name": "a", "partitions": [_part(0, 430), _part(1, 999, future=True)]}])],
    )
    assert collect_sizes(answer, {"a"}) == {("a", 0): 500, ("a", 1): 70}


def test_an_error_in_a_log_directory_is_unavailable_not_zero():
    with pytest.raises(LogDirsUnavailable, match="broker 0 answered DescribeLogDirs with error code 57"):
        collect_sizes(_answer([_dir([], error=57)]), {"a"})


def test_the_connections_security_settings_reach_the_client():
    conn = KafkaConnection.of(
        "h1:9093,h2:9093",
        {
            "security.protocol": "sasl_ssl",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "u",
            "sasl.password": "p",
            "ssl.key.password": "kp",
            "ssl.endpoint.identification.algorithm": "none",
            "client.id": "me",
            "socket.keepalive.enable": "true",  # librdkafka tuning: not needed for one call
        },
    )
    assert admin_arguments(conn) == {
        "bootstrap_servers": ["h1:9093", "h2:9093"],
        "request_timeout_ms": 10_000,
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "u",
        "sasl_plain_password": "p",
        "ssl_password": "kp",
        "ssl_check_hostname": False,
        "client_id": "me",
    }


def test_a_security_setting_without_equivalent_is_unavailable_not_ignored():
    conn = KafkaConnection.of(
        "h:9093",
        {"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER", "sasl.oauthbearer.config": "principal=me"},
    )
    with pytest.raises(LogDirsUnavailable, match="no equivalent of the property sasl.oauthbearer.config"):
        admin_arguments(conn)


def test_sizes_from_the_broker_match_its_segment_files(broker, topic_factory):
    if not hasattr(broker, "data_dir"):
        pytest.skip("the reference reads the embedded broker's segment files")
    from confluent_kafka import Producer

    topic = topic_factory(3)
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for i in range(40):
        p.produce(topic, key=b"k", value=b"v" * (i + 1), partition=i % 2)  # partition 2 stays empty
        p.flush(10)  # one batch per record: sizes include each batch's header
    sizes = LogDirSizes(broker.bootstrap)
    try:
        got = sizes.sizes({topic: [0, 1, 2]})
        # a partition the answer lacks (as for a client without DESCRIBE on the cluster): no sizes
        with pytest.raises(LogDirsUnavailable, match=f"lacks {topic}-3 "):
            sizes.sizes({topic: [0, 1, 2, 3]})
    finally:
        sizes.close()
    on_disk = {
        (topic, p): sum(f.stat().st_size for f in (broker.data_dir / "logs" / f"{topic}-{p}").glob("*.log"))
        for p in range(3)
    }
    assert got == on_disk
    assert got[(topic, 2)] == 0 and got[(topic, 0)] > sum(i + 2 for i in range(0, 40, 2))
