// A kafkajs client for raftq's end-to-end tests (cmd/raftq/e2e_kafkajs_test.go).
//
//   node client.js create  BROKERS TOPIC PARTITIONS RF [KEY=VALUE,...]
//   node client.js produce BROKERS TOPIC PARTITION PREFIX COUNT
//   node client.js consume BROKERS GROUP TOPIC COUNT
//   node client.js load    BROKERS TOPIC PARTITION PREFIX COUNT
//
// produce sends PREFIX-0 .. PREFIX-(COUNT-1) to one partition with an
// idempotent producer (acks=all), ten records a request, and prints "ack
// FIRST BASEOFFSET" for each request. load does the same five records a
// request and, after its 100th request, waits for a line on stdin, which
// a test writes once it has killed the leader. consume reads as a member
// of GROUP from the beginning, printing a "PARTITION OFFSET VALUE" line
// for each record as it comes (a record delivered again after a rejoin
// prints again) and committing it, until it has seen COUNT distinct
// records. Every failure, or no result within two minutes, exits 1.
'use strict';
const { Kafka, logLevel } = require('kafkajs');

const [mode, brokers, ...args] = process.argv.slice(2);
const kafka = new Kafka({
  clientId: 'raftq-e2e',
  brokers: brokers.split(','),
  logLevel: logLevel.ERROR,
  retry: { retries: 10 },
});

async function create(topic, partitions, rf, configs) {
  const admin = kafka.admin();
  await admin.connect();
  const configEntries = (configs || "").split(",").filter((kv) => kv !== "").map((kv) => {
    const i = kv.indexOf("=");
    return { name: kv.slice(0, i), value: kv.slice(i + 1) };
  });
  const ok = await admin.createTopics({
    waitForLeaders: true,
    topics: [{ topic, numPartitions: Number(partitions), replicationFactor: Number(rf), configEntries }],
  });
  const meta = await admin.fetchTopicMetadata({ topics: [topic] });
  await admin.disconnect();
  console.log(`created ${ok} partitions ${meta.topics[0].partitions.length}`);
}

async function produce(topic, partition, prefix, count) {
  await send(topic, partition, prefix, Number(count), 10, 0);
}

async function load(topic, partition, prefix, count) {
  await send(topic, partition, prefix, Number(count), 5, 100);
}

// send produces count records, per a request, and after holdAfter
// requests (0: never) waits for a line on stdin.
async function send(topic, partition, prefix, count, per, holdAfter) {
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();
  for (let i = 0; i < count; i += per) {
    const messages = [];
    for (let j = i; j < Math.min(i + per, count); j++) {
      messages.push({ partition: Number(partition), value: `${prefix}-${j}` });
    }
    const res = await producer.send({ topic, acks: -1, messages });
    console.log(`ack ${i} ${res[0].baseOffset}`);
    if (i / per + 1 === holdAfter) {
      await new Promise((resolve) => process.stdin.once('data', resolve));
    }
  }
  await producer.disconnect();
}

async function consume(group, topic, count) {
  const consumer = kafka.consumer({ groupId: group, heartbeatInterval: 500, sessionTimeout: 10000 });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  const seen = new Set();
  await new Promise((resolve, reject) => {
    consumer.on(consumer.events.CRASH, ({ payload }) => {
      if (!payload.restart) reject(payload.error);
    });
    consumer.run({
      autoCommit: false,
      eachMessage: async ({ partition, message }) => {
        console.log(`${partition} ${message.offset} ${message.value.toString()}`);
        seen.add(`${partition} ${message.offset}`);
        await consumer.commitOffsets([{ topic, partition, offset: String(Number(message.offset) + 1) }]);
        if (seen.size === Number(count)) resolve();
      },
    }).catch(reject);
  });
  await consumer.disconnect();
}

const modes = { create, produce, consume, load };
const timer = setTimeout(() => { console.error(`${mode}: no result within two minutes`); process.exit(1); }, 120000);
modes[mode](...args).then(
  () => { clearTimeout(timer); process.exit(0); },
  (err) => { console.error(`${mode}: ${err.stack || err}`); process.exit(1); },
);
