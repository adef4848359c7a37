// Produces count records to one partition with kafkajs and acks=all, for
// kwal's compatibility tests (integration/compat_test.go).
//
//   node produce.js <bootstrap,...> <topic> <partition> <count> <prefix> [gzip]
//
// With gzip, every batch is sent gzip-compressed (the codec kafkajs has
// without plugins), so the broker's record validation sees a JavaScript
// client's compressed batches.
// Record i has the value `${prefix}-${i zero-padded to 8 digits}`; the test
// builds the same values to compare. Prints one JSON line {"acked": n} and
// exits 0 only when every record was acknowledged.
'use strict';

const { Kafka, logLevel, CompressionTypes } = require('kafkajs');

async function main() {
  const [bootstrap, topic, partitionArg, countArg, prefix, compressionArg] = process.argv.slice(2);
  if (!prefix) {
    throw new Error('usage: node produce.js <bootstrap> <topic> <partition> <count> <prefix>');
  }
  if (compressionArg && compressionArg !== 'gzip') {
    throw new Error(`compression ${compressionArg}: only gzip`);
  }
  const compression = compressionArg === 'gzip' ? CompressionTypes.GZIP : CompressionTypes.None;
  const partition = Number(partitionArg);
  const count = Number(countArg);
  const kafka = new Kafka({
    clientId: 'kwal-compat-kafkajs',
    brokers: bootstrap.split(','),
    logLevel: logLevel.WARN,
    retry: { retries: 10 },
  });
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1, allowAutoTopicCreation: false });
  await producer.connect();
  const batch = 500;
  let acked = 0;
  try {
    for (let start = 0; start < count; start += batch) {
      const messages = [];
      for (let i = start; i < Math.min(count, start + batch); i++) {
        messages.push({ partition, value: `${prefix}-${String(i).padStart(8, '0')}` });
      }
      await producer.send({ topic, acks: -1, compression, messages });
      acked += messages.length;
    }
  } finally {
    await producer.disconnect();
  }
  console.log(JSON.stringify({ acked }));
}

main().catch((err) => {
  console.error(err && err.stack ? err.stack : err);
  process.exit(1);
});
