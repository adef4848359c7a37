// Package wiretest holds test helpers for the network edge: loopback
// addresses that refuse or never answer, and a raw ApiVersions round trip
// that needs no Kafka client (for tests of connection handling, where a
// client's own retries and timeouts would hide what the broker does).
// Nothing here is for production use.
package wiretest
