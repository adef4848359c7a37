package brokerbench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ClientConfig is one client process of the one-broker case.
type ClientConfig struct {
	Bootstrap   []string
	Topic       string
	Mode        string // produce or consume
	Records     int
	RecordBytes int
}

// ClientResult is what a client process prints (JSON).
type ClientResult struct {
	Mode    string  `json:"mode"`
	Records int     `json:"records"`
	Bytes   int64   `json:"bytes"` // record values
	Seconds float64 `json:"seconds"`
	MBps    float64 `json:"mbps"`
	// CPUSeconds is the client process's own user+system CPU, start to end.
	CPUSeconds float64 `json:"cpu_seconds"`
}

// RunClient produces Records records of RecordBytes incompressible bytes
// (acks=1, idempotence off, no compression, linger 5 ms), or consumes the
// topic from the start until it has read Records records.
func RunClient(ctx context.Context, cfg ClientConfig) (ClientResult, error) {
	if len(cfg.Bootstrap) == 0 || cfg.Topic == "" || cfg.Records <= 0 || cfg.RecordBytes <= 0 {
		return ClientResult{}, errors.New("brokerbench: client needs a bootstrap, a topic and positive records and record bytes")
	}
	res := ClientResult{Mode: cfg.Mode, Records: cfg.Records}
	cpu0 := selfCPUSeconds()
	var err error
	switch cfg.Mode {
	case "produce":
		err = clientProduce(ctx, cfg, &res)
	case "consume":
		err = clientConsume(ctx, cfg, &res)
	default:
		err = fmt.Errorf("brokerbench: client mode %q (produce or consume)", cfg.Mode)
	}
	res.CPUSeconds = selfCPUSeconds() - cpu0
	if res.Seconds > 0 {
		res.MBps = float64(res.Bytes) / res.Seconds / 1e6
	}
	return res, err
}

func clientProduce(ctx context.Context, cfg ClientConfig, res *ClientResult) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(cfg.Bootstrap...), kgo.DefaultProduceTopic(cfg.Topic),
		kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite(), kgo.ProducerLinger(5*time.Millisecond),
		kgo.ProducerBatchMaxBytes(1<<20), kgo.MaxBufferedRecords(50000), kgo.ProduceRequestTimeout(30*time.Second),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		return err
	}
	defer cl.Close()
	value := make([]byte, cfg.RecordBytes)
	rng := rand.New(rand.NewPCG(uint64(len(cfg.Topic)), 7))
	for i := range value {
		value[i] = byte(rng.Uint32())
	}
	// Leaders known and connections open before the clock starts.
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: value}).FirstErr(); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		firstEr error
	)
	start := time.Now()
	for i := 1; i < cfg.Records; i++ {
		wg.Add(1)
		cl.Produce(ctx, &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
			if err != nil {
				mu.Lock()
				firstEr = cmpOr(firstEr, err)
				mu.Unlock()
			}
			wg.Done()
		})
	}
	wg.Wait()
	res.Seconds = time.Since(start).Seconds()
	res.Bytes = int64(cfg.Records-1) * int64(cfg.RecordBytes)
	return firstEr
}

func cmpOr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

func clientConsume(ctx context.Context, cfg ClientConfig, res *ClientResult) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(cfg.Bootstrap...), kgo.ConsumeTopics(cfg.Topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	n := 0
	var start time.Time
	for n < cfg.Records {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("consumed %d of %d records: %w", n, cfg.Records, err)
		}
		for _, fe := range fs.Errors() {
			return fmt.Errorf("fetch %s[%d]: %w", fe.Topic, fe.Partition, fe.Err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if start.IsZero() {
				// From the first record on: the group-less client's
				// metadata and offset look-ups are not throughput.
				start = time.Now()
			}
			n++
			res.Bytes += int64(len(r.Value))
		})
	}
	res.Seconds = time.Since(start).Seconds()
	return nil
}

func selfCPUSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// StartKfake starts one kfake broker on loopback, as `kwal bench
// kfake-server` serves it to the one-broker case.
func StartKfake() (*kfake.Cluster, error) {
	return kfake.NewCluster(kfake.NumBrokers(1))
}
