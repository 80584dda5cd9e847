"""The options we hand Spark's format("kafka"): one set of client settings serves librdkafka and
the Java client, bad ones are named before Spark sees them, and Spark's data-loss failure is
said in the operator's terms (no Spark, no broker)."""

from datetime import timedelta

import pytest

from streaming.kafka.options import (
    KafkaOptionsError,
    explain_data_loss,
    explain_kafka_failure,
    java_client_options,
    offset_retries,
    sink_options,
    source_options,
)

CONFLUENT_CLOUD = {"bootstrap.servers": "pkc-1.example:9092", "security.protocol": "SASL_SSL",
                   "sasl.mechanisms": "PLAIN", "sasl.username": "KEY", "sasl.password": 'se"cret'}


def test_sasl_credentials_become_the_java_clients_jaas_config():
    java = java_client_options(CONFLUENT_CLOUD)
    assert java["kafka.security.protocol"] == "SASL_SSL" and java["kafka.sasl.mechanism"] == "PLAIN"
    assert java["kafka.sasl.jaas.config"] == ('org.apache.kafka.common.security.plain.PlainLoginModule required '
                                              'username="KEY" password="se\\"cret";')
    assert not any(key.endswith(("sasl.username", "sasl.password", "sasl.mechanisms")) for key in java)


def test_scram_uses_its_login_module_and_a_users_own_jaas_config_wins():
    scram = java_client_options({**CONFLUENT_CLOUD, "sasl.mechanisms": "SCRAM-SHA-512"})
    assert scram["kafka.sasl.jaas.config"].startswith("org.apache.kafka.common.security.scram.ScramLoginModule ")
    own = java_client_options({**CONFLUENT_CLOUD, "sasl.jaas.config": "x required;"})
    assert own["kafka.sasl.jaas.config"] == "x required;"


def test_a_pem_ca_file_becomes_a_pem_truststore_and_librdkafka_only_settings_are_left_out():
    java = java_client_options({"bootstrap.servers": "b:9093", "ssl.ca.location": "/etc/ca.pem",
                                "queue.buffering.max.ms": "5", "linger.ms": "7"})
    assert java == {"kafka.bootstrap.servers": "b:9093", "kafka.ssl.truststore.type": "PEM",
                    "kafka.ssl.truststore.location": "/etc/ca.pem", "kafka.linger.ms": "7"}


def test_settings_spark_manages_or_a_missing_bootstrap_are_named():
    with pytest.raises(KafkaOptionsError, match="'group.id' is managed by Spark"):
        java_client_options({"bootstrap.servers": "b:1", "group.id": "mine"})
    with pytest.raises(KafkaOptionsError, match="'bootstrap.servers' is required"):
        java_client_options({})
    with pytest.raises(KafkaOptionsError, match="not GSSAPI"):
        java_client_options({"bootstrap.servers": "b:1", "sasl.mechanism": "GSSAPI", "sasl.username": "u"})


def test_the_ride_out_time_is_spent_in_offset_retries_each_a_request_long():
    assert offset_retries(timedelta(minutes=2)) == {
        "fetchOffset.numRetries": "11", "fetchOffset.retryIntervalMs": "1000",
        "kafka.request.timeout.ms": "10000", "kafka.default.api.timeout.ms": "10000"}
    assert offset_retries(timedelta(seconds=5))["fetchOffset.numRetries"] == "1"
    assert offset_retries(timedelta(minutes=1), request_timeout_ms=29_000)["fetchOffset.numRetries"] == "2"


def test_source_options_start_at_the_earliest_record_or_at_a_kafka_time():
    options = source_options({"bootstrap.servers": "b:1"}, "trades", max_offsets_per_trigger=500, min_partitions=2)
    assert options["subscribe"] == "trades" and options["startingOffsets"] == "earliest"
    assert options["failOnDataLoss"] == "true" and options["maxOffsetsPerTrigger"] == "500"
    assert options["minPartitions"] == "2" and "startingTimestamp" not in options
    replay = source_options({"bootstrap.servers": "b:1"}, "trades", starting_timestamp_ms=1_772_442_000_000,
                            fail_on_data_loss=False)
    assert replay["startingTimestamp"] == "1772442000000" and replay["failOnDataLoss"] == "false"
    # a partition with nothing after that time starts at its end instead of failing the query
    assert replay["startingOffsetsByTimestampStrategy"] == "latest"


def test_the_sink_writes_one_topic_with_an_idempotent_producer_unless_the_user_says_otherwise():
    assert sink_options({"bootstrap.servers": "b:1"}, "trades") == {
        "kafka.bootstrap.servers": "b:1", "kafka.acks": "all", "kafka.enable.idempotence": "true", "topic": "trades"}
    assert sink_options({"bootstrap.servers": "b:1", "acks": "1"}, "t")["kafka.acks"] == "1"


def test_sparks_data_loss_failure_says_which_offsets_went_and_what_to_do():
    spark_text = ("org.apache.spark.sql.kafka010.KafkaIllegalStateException: [KAFKA_DATA_LOSS] Some data may "
                  "have been lost because they are not available in Kafka any more;\neither the data was aged out "
                  "...\nReason: Partition trades-1a2b-2 offset was changed from 2 to 0.")
    said = explain_data_loss(spark_text)
    assert said.startswith("Kafka partition trades-1a2b/2 ends at offset 0, but the query has read up to 2")
    assert "--fail-on-data-loss false" in said and "--replay-from" in said
    aged = explain_data_loss("[KAFKA_DATA_LOSS] Some data may have been lost because ...\nReason: Cannot fetch "
                             "offset 5 (GroupId: g, TopicPartition: t-0).")
    assert aged.startswith("Kafka no longer holds records the query expects (Cannot fetch offset 5")
    assert explain_data_loss("java.lang.OutOfMemoryError") is None


def test_kafka_not_answering_is_said_as_such_and_other_errors_are_left_alone():
    spark_text = ("py4j...StreamingQueryException: [STREAM_FAILED] ...\nCaused by: "
                  "org.apache.kafka.common.errors.TimeoutException: Timed out waiting for a node assignment. "
                  "Call: listNodes\n\tat org.apache...")
    said = explain_kafka_failure(spark_text)
    assert said.startswith("cannot reach Kafka: no answer within --kafka-retry-timeout (Timed out waiting")
    assert explain_kafka_failure("Reason: Partition t-0 offset was changed from 2 to 0.").startswith("Kafka partition")
    assert explain_kafka_failure("ZeroDivisionError: division by zero") is None
