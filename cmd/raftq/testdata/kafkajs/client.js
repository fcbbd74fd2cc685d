// A kafkajs client for raftq's end-to-end tests (cmd/raftq/e2e_kafkajs_test.go).
//
//   node client.js create  BROKERS TOPIC PARTITIONS RF [KEY=VALUE,...]
//   node client.js produce BROKERS TOPIC PARTITION PREFIX COUNT
//   node client.js consume BROKERS GROUP TOPIC COUNT
//   node client.js load    BROKERS TOPIC PARTITION PREFIX COUNT
//   node client.js txn     BROKERS TXNID TOPIC PARTITIONS PREFIX COUNT SOURCE GROUP
//   node client.js readc   BROKERS GROUP TOPIC ENDS
//
// produce sends PREFIX-0 .. PREFIX-(COUNT-1) to one partition with an
// idempotent producer (acks=all), ten records a request, and prints "ack
// FIRST BASEOFFSET" for each request. load does the same five records a
// request and, after its 100th request, waits for a line on stdin, which
// a test writes once it has killed the leader. consume reads as a member
// of GROUP from the beginning, printing a "PARTITION OFFSET VALUE" line
// for each record as it comes (a record delivered again after a rejoin
// prints again) and committing it, until it has seen COUNT distinct
// records.
//
// txn runs a transactional producer (TXNID, idempotent, one request in
// flight): a transaction sending PREFIX-commit-pP-0 .. -(COUNT-1) to
// each of TOPIC's PARTITIONS that commits ("committed"), one sending
// PREFIX-abort-pP-... that aborts ("aborted"), then consume-transform-
// produce: a member of GROUP (read_committed, no commits of its own)
// reads SOURCE from the beginning to its end offsets and, per batch, a
// transaction sends each value, "ctp-" before it, to the same partition
// of TOPIC and commits the batch's offsets for GROUP with sendOffsets
// ("ctp PARTITION FIRST NEXT" per transaction). readc reads TOPIC as a
// member of GROUP with readUncommitted false, from the beginning up to
// ENDS, its partitions' end offsets (PARTITION:OFFSET,...), printing
// "PARTITION OFFSET VALUE" per record; its position counts the aborted
// records and markers kafkajs skips. Every failure, or no result within two minutes, exits 1.
// $RAFTQ_KAFKAJS_SASL (MECHANISM:USER:PASSWORD) makes every mode
// authenticate with SASL.
'use strict';
const { Kafka, logLevel } = require('kafkajs');

const [mode, brokers, ...args] = process.argv.slice(2);
// RAFTQ_KAFKAJS_SASL=MECHANISM:USER:PASSWORD (e.g. scram-sha-256:alice:pw)
// authenticates every connection.
const saslEnv = process.env.RAFTQ_KAFKAJS_SASL;
const sasl = saslEnv ? (([mechanism, username, ...pw]) => ({ mechanism, username, password: pw.join(':') }))(saslEnv.split(':')) : undefined;
const kafka = new Kafka({
  clientId: 'raftq-e2e',
  brokers: brokers.split(','),
  logLevel: logLevel.ERROR,
  retry: { retries: 10 },
  sasl,
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

async function txn(txnId, topic, partitions, prefix, count, source, group) {
  const producer = kafka.producer({ transactionalId: txnId, idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();
  for (const outcome of ['commit', 'abort']) {
    const tx = await producer.transaction();
    const messages = [];
    for (let p = 0; p < Number(partitions); p++) {
      for (let i = 0; i < Number(count); i++) {
        messages.push({ partition: p, value: `${prefix}-${outcome}-p${p}-${i}` });
      }
    }
    await tx.send({ topic, messages });
    await tx[outcome]();
    console.log(outcome === 'commit' ? 'committed' : 'aborted');
  }

  const admin = kafka.admin();
  await admin.connect();
  const ends = await admin.fetchTopicOffsets(source);
  await admin.disconnect();
  const consumer = kafka.consumer({ groupId: group, readUncommitted: false, heartbeatInterval: 500, sessionTimeout: 10000, maxWaitTimeInMs: 200 });
  await consumer.connect();
  await consumer.subscribe({ topic: source, fromBeginning: true });
  const next = new Map(ends.map(({ partition }) => [partition, 0]));
  const done = () => ends.every(({ partition, high }) => next.get(partition) >= Number(high));
  await new Promise((resolve, reject) => {
    consumer.on(consumer.events.CRASH, ({ payload }) => {
      if (!payload.restart) reject(payload.error);
    });
    consumer.run({
      autoCommit: false,
      eachBatchAutoResolve: false,
      eachBatch: async ({ batch, resolveOffset }) => {
        if (batch.messages.length === 0) return;
        const tx = await producer.transaction();
        try {
          await tx.send({
            topic,
            messages: batch.messages.map((m) => ({ partition: batch.partition, value: `ctp-${m.value.toString()}` })),
          });
          const last = batch.messages[batch.messages.length - 1].offset;
          await tx.sendOffsets({
            consumerGroupId: group,
            topics: [{ topic: source, partitions: [{ partition: batch.partition, offset: String(Number(last) + 1) }] }],
          });
          await tx.commit();
          console.log(`ctp ${batch.partition} ${batch.messages[0].offset} ${Number(last) + 1}`);
          resolveOffset(last);
          next.set(batch.partition, Number(last) + 1);
        } catch (err) {
          await tx.abort().catch(() => {});
          throw err;
        }
        if (done()) resolve();
      },
    }).catch(reject);
  });
  await consumer.disconnect();
  await producer.disconnect();
}

async function readc(group, topic, endsArg) {
  const ends = endsArg.split(',').map((pe) => {
    const [partition, high] = pe.split(':').map(Number);
    return { partition, high };
  });
  const consumer = kafka.consumer({ groupId: group, readUncommitted: false, heartbeatInterval: 500, sessionTimeout: 10000, maxWaitTimeInMs: 200 });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  // next is each partition's position: past the batches read, counting
  // the ones kafkajs filters out whole (aborted records, markers).
  const next = new Map(ends.map(({ partition }) => [partition, 0]));
  const done = () => ends.every(({ partition, high }) => next.get(partition) >= Number(high));
  await new Promise((resolve, reject) => {
    consumer.on(consumer.events.CRASH, ({ payload }) => {
      if (!payload.restart) reject(payload.error);
    });
    consumer.on(consumer.events.END_BATCH_PROCESS, ({ payload }) => {
      if (payload.topic !== topic) return;
      next.set(payload.partition, Math.max(next.get(payload.partition), Number(payload.lastOffset) + 1));
      if (done()) resolve();
    });
    if (done()) resolve();
    consumer.run({
      autoCommit: false,
      eachMessage: async ({ partition, message }) => {
        console.log(`${partition} ${message.offset} ${message.value.toString()}`);
      },
    }).catch(reject);
  });
  await consumer.disconnect();
}

const modes = { create, produce, consume, load, txn, readc };
const timer = setTimeout(() => { console.error(`${mode}: no result within two minutes`); process.exit(1); }, 120000);
modes[mode](...args).then(
  () => { clearTimeout(timer); process.exit(0); },
  (err) => { console.error(`${mode}: ${err.stack || err}`); process.exit(1); },
);
