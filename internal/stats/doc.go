// Package stats holds the few order statistics kwal's benchmarks and
// reports share: medians over repetitions and nearest-rank percentiles.
package stats
