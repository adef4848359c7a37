// kafkajs admin calls against kwal, for the compatibility tests
// (integration/compat_test.go, TestCompat kafkajs-admin):
//
//   node admin.js <bootstrap,...> <topic>
//
// The topic exists with one partition. The script grows it to 3 partitions
// (admin.createPartitions), produces 10 records in one batch to partition 0
// with timestamps t0, t0+1s, ..., t0+9s, asks for the offsets at t0+5s
// (admin.fetchTopicOffsetsByTimestamp: Kafka answers 5, the first record
// whose timestamp reaches the target, even inside one batch), deletes the
// topic (admin.deleteTopics) and lists the topics again. It prints one JSON
// line with what it saw and exits 0 when every call succeeded.
'use strict';

const { Kafka, logLevel } = require('kafkajs');

async function main() {
  const [bootstrap, topic] = process.argv.slice(2);
  if (!topic) {
    throw new Error('usage: node admin.js <bootstrap> <topic>');
  }
  const kafka = new Kafka({
    clientId: 'kwal-compat-kafkajs-admin',
    brokers: bootstrap.split(','),
    logLevel: logLevel.WARN,
    retry: { retries: 10 },
  });
  const admin = kafka.admin();
  const producer = kafka.producer({ allowAutoTopicCreation: false });
  await admin.connect();
  await producer.connect();
  const out = {};
  try {
    await admin.createPartitions({ topicPartitions: [{ topic, count: 3 }] });
    const md = await admin.fetchTopicMetadata({ topics: [topic] });
    out.partitions = md.topics[0].partitions.length;

    const t0 = Date.now() - 60000;
    const messages = [];
    for (let i = 0; i < 10; i++) {
      messages.push({ partition: 0, value: `ts-${i}`, timestamp: String(t0 + i * 1000) });
    }
    await producer.send({ topic, acks: -1, messages });
    const byTs = await admin.fetchTopicOffsetsByTimestamp(topic, t0 + 5000);
    out.offsetAtTimestamp = Number(byTs.find((p) => p.partition === 0).offset);

    await admin.deleteTopics({ topics: [topic], timeout: 10000 });
    const topics = await admin.listTopics();
    out.listedAfterDelete = topics.includes(topic);
  } finally {
    await producer.disconnect();
    await admin.disconnect();
  }
  console.log(JSON.stringify(out));
}

main().catch((err) => {
  console.error(err && err.stack ? err.stack : err);
  process.exit(1);
});
