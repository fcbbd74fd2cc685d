"""Produce one record with a Python Kafka client and print its offset.

usage: produce.py kafka-python|confluent|confluent-txn BROKERS TOPIC VALUE

confluent-txn is a transactional confluent-kafka producer: it commits a
transaction of VALUE-commit and aborts one of VALUE-abort, then prints what
a read_committed consumer of TOPIC reads.

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
    from confluent_kafka import Consumer, Producer
    p = Producer({"bootstrap.servers": brokers, "transactional.id": topic,
                  "transaction.timeout.ms": 60000})
    p.init_transactions(20)
    for outcome in ("commit", "abort"):
        p.begin_transaction()
        p.produce(topic, ("%s-%s" % (value, outcome)).encode())
        p.flush(15)
        if outcome == "commit":
            p.commit_transaction(20)
        else:
            p.abort_transaction(20)
    c = Consumer({"bootstrap.servers": brokers, "group.id": topic + "-reader",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False,
                  "isolation.level": "read_committed"})
    c.subscribe([topic])
    seen, deadline, quiet = [], time.monotonic() + 20, None
    while time.monotonic() < deadline and (quiet is None or time.monotonic() < quiet):
        m = c.poll(0.5)
        if m is None or m.error():
            continue
        seen.append(m.value().decode())
        if quiet is None:
            quiet = time.monotonic() + 2  # anything more shows by then
    c.close()
    print("read_committed=%s" % ",".join(seen))
    raise SystemExit(0)


def main():
    client, brokers, topic, value = sys.argv[1:5]
    if client == "confluent-txn":
        confluent_txn(brokers, topic, value)
    part, off = {"kafka-python": kafka_python, "confluent": confluent}[client](brokers, topic, value)
    print("ack %d %d" % (part, off))


if __name__ == "__main__":
    main()
