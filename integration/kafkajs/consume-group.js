// Runs two kafkajs consumers (consumer.run) in one group until together
// they have read count distinct records of topic, for kwal's group tests
// (integration/groups_test.go).
//
//   node consume-group.js <bootstrap,...> <topic> <group> <count>
//
// Prints one JSON line {"members": [n1, n2], "distinct": d, "duplicates": k,
// "partitions": [[...], [...]]} and exits 0 when d == count; exits 1 on a
// timeout (90 s) or an error.
'use strict';

const { Kafka, logLevel } = require('kafkajs');

async function main() {
  const [bootstrap, topic, groupId, countArg] = process.argv.slice(2);
  if (!countArg) {
    throw new Error('usage: node consume-group.js <bootstrap> <topic> <group> <count>');
  }
  const count = Number(countArg);
  const kafka = new Kafka({
    clientId: 'kwal-compat-kafkajs-group',
    brokers: bootstrap.split(','),
    logLevel: logLevel.WARN,
    retry: { retries: 10 },
  });
  const seen = new Map();
  const perMember = [0, 0];
  const partitions = [new Set(), new Set()];
  let finish;
  const done = new Promise((resolve) => { finish = resolve; });
  const consumers = [];
  for (let m = 0; m < 2; m++) {
    const consumer = kafka.consumer({ groupId, sessionTimeout: 10000, heartbeatInterval: 1000 });
    await consumer.connect();
    await consumer.subscribe({ topic, fromBeginning: true });
    await consumer.run({
      eachMessage: async ({ partition, message }) => {
        const v = message.value.toString();
        seen.set(v, (seen.get(v) || 0) + 1);
        perMember[m]++;
        partitions[m].add(partition);
        if (seen.size >= count) finish();
      },
    });
    consumers.push(consumer);
  }
  const timer = setTimeout(() => finish('timeout'), 90000);
  const why = await done;
  clearTimeout(timer);
  for (const c of consumers) await c.disconnect();
  let duplicates = 0;
  for (const n of seen.values()) duplicates += n - 1;
  console.log(JSON.stringify({
    members: perMember, distinct: seen.size, duplicates,
    partitions: partitions.map((s) => [...s].sort((a, b) => a - b)),
  }));
  if (why === 'timeout' || seen.size !== count) process.exit(1);
}

main().catch((err) => {
  console.error(err && err.stack ? err.stack : err);
  process.exit(1);
});
