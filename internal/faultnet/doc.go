// Package faultnet holds the loopback network faults the multi-process
// fault harness (cmd/kwal/internal/chaos) and the integration tests put
// between real processes:
//
//   - Proxy, a TCP proxy whose link can be cut: Stall stops forwarding
//     bytes on every connection, open or new, as a network partition that
//     drops packets looks to both ends (TCP keeps the connections; a heal
//     lets the queued bytes through); Reset closes every connection and
//     accepts new ones only to close them, as a refusing peer looks.
//
//   - S3Proxy, an HTTP reverse proxy in front of an S3-compatible server
//     (versitygw) that injects the object-store faults at the protocol
//     level: latency, 503 SlowDown, and ambiguous PUTs (forwarded and
//     stored, then answered 500 InternalError). A backend that refuses
//     connections (versitygw stopped) shows to the client as a closed
//     connection, as a refused one would.
//
//     broker ──► Proxy (cut) ──► S3Proxy (mode) ──► versitygw
//     broker ──► Proxy (cut) ──► broker
//
// Neither reads the bytes it forwards beyond what HTTP needs; SigV4
// signatures stay valid because the Host header is passed through.
//
// Concurrency: every method is safe for concurrent use. Close stops every
// goroutine a proxy started.
package faultnet
