"""Produce one record with a Python Kafka client and print its offset.

usage: produce.py kafka-python|confluent|confluent-txn BROKERS TOPIC VALUE

confluent-txn is a transactional confluent-kafka producer: it prints the
error init_transactions gives, whether it is fatal, and how long it took.

Used by cmd/raftq/e2e_python_test.go. Each client waits at most 10 s for
metadata and delivery, so a broker that never makes the topic fails the
run in seconds, not after the clients' default minute.
"""
import sys


def kafka_python(brokers, topic, value):
    from kafka import KafkaProducer
    p = KafkaProducer(bootstrap_servers=brokers.split(","), acks="all",
                      max_block_ms=10000, request_timeout_ms=10000)
    md = p.send(topic, value.encode()).get(timeout=10)
    p.close()
    return md.partition, md.offset


def confluent(brokers, topic, value):
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": brokers, "acks": "all",
                  "message.timeout.ms": 10000})
    got = []
    p.produce(topic, value.encode(), on_delivery=lambda err, msg: got.append((err, msg)))
    p.flush(15)
    if not got:
        raise SystemExit("no delivery report within 15 s")
    err, msg = got[0]
    if err is not None:
        raise SystemExit("delivery failed: %s" % err)
    return msg.partition(), msg.offset()


def confluent_txn(brokers, topic, value):
    import time
    from confluent_kafka import KafkaException, Producer
    p = Producer({"bootstrap.servers": brokers, "transactional.id": topic,
                  "transaction.timeout.ms": 60000})
    start = time.monotonic()
    try:
        p.init_transactions(20)
    except KafkaException as e:
        err = e.args[0]
        print("fatal=%s after %.1fs: %s" % (err.fatal(), time.monotonic() - start, err.str()))
        raise SystemExit(0)
    raise SystemExit("init_transactions succeeded")


def main():
    client, brokers, topic, value = sys.argv[1:5]
    if client == "confluent-txn":
        confluent_txn(brokers, topic, value)
    part, off = {"kafka-python": kafka_python, "confluent": confluent}[client](brokers, topic, value)
    print("ack %d %d" % (part, off))


if __name__ == "__main__":
    main()
