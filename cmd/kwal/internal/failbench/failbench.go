package failbench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/kwal/kwal/broker"
	"github.com/kwal/kwal/internal/stats"
	"github.com/kwal/kwal/localcluster"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kwal/kwal/cmd/kwal/internal/benchreport"
)

// Config is one benchmark.
type Config struct {
	Kills             int           // leader kills per mode
	SessionTimeout    time.Duration // broker.session.timeout.ms
	HeartbeatInterval time.Duration // broker.heartbeat.interval.ms
	RecordBytes       int
	LatencyModel      string // objstore/latency preset
	Modes             []string
	Dir               string // scratch; default a temporary directory
	Logger            *slog.Logger
}

// Kill is one leader kill.
type Kill struct {
	Victim        int32   `json:"victim"`
	NewLeader     int32   `json:"new_leader"`
	ToLeaderMs    float64 `json:"to_new_leader_ms"`
	ToFirstAckMs  float64 `json:"to_first_ack_ms"`
	LeaderEpoch   int32   `json:"leader_epoch"`
	AcksOneLost   int     `json:"acks1_lost"`
	AcksOneLostMs float64 `json:"acks1_lost_ms"`
	killedAt      time.Time
}

// ModeResult is one mode's run.
type ModeResult struct {
	Mode  string `json:"mode"`
	Kills []Kill `json:"kills"`
	// ToLeader and ToFirstAck are p50 and p99 over the kills, in ms.
	ToLeaderP50       float64 `json:"to_new_leader_p50_ms"`
	ToLeaderP99       float64 `json:"to_new_leader_p99_ms"`
	ToFirstAckP50     float64 `json:"to_first_ack_p50_ms"`
	ToFirstAckP99     float64 `json:"to_first_ack_p99_ms"`
	AcksAllAcked      int     `json:"acks_all_acked"`
	AcksAllLost       int     `json:"acks_all_lost"`
	AcksAllDuplicated int     `json:"acks_all_duplicated"`
	AcksOneAcked      int     `json:"acks1_acked"`
	AcksOneLost       int     `json:"acks1_lost"`
	// AcksOneLostMs sums the kills' acks=1 losses in ms of traffic;
	// AcksOnePerMs is the median acks=1 ack rate in the second before a
	// kill; AcksOneLostMsP50 and P99 are over the kills.
	AcksOneLostMs    float64 `json:"acks1_lost_ms"`
	AcksOnePerMs     float64 `json:"acks1_acked_per_ms"`
	AcksOneLostMsP50 float64 `json:"acks1_lost_ms_per_kill_p50"`
	AcksOneLostMsP99 float64 `json:"acks1_lost_ms_per_kill_p99"`
}

// Report is the whole benchmark.
type Report struct {
	Config struct {
		Kills            int     `json:"kills"`
		SessionTimeoutMs float64 `json:"session_timeout_ms"`
		HeartbeatMs      float64 `json:"heartbeat_interval_ms"`
		LatencyModel     string  `json:"latency_model"`
		RecordBytes      int     `json:"record_bytes"`
	} `json:"config"`
	Modes []ModeResult `json:"modes"`
}

func (c *Config) fill() {
	if c.Kills <= 0 {
		c.Kills = 5
	}
	if c.SessionTimeout <= 0 {
		c.SessionTimeout = broker.DefaultBrokerSessionTimeout
	}
	if c.HeartbeatInterval <= 0 {
		c.HeartbeatInterval = broker.DefaultBrokerHeartbeatInterval
	}
	if c.RecordBytes <= 0 {
		c.RecordBytes = 256
	}
	if c.LatencyModel == "" {
		c.LatencyModel = "s3express"
	}
	if len(c.Modes) == 0 {
		c.Modes = []string{"classic", "remotewal"}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
}

// Run runs every mode.
func Run(ctx context.Context, cfg Config, progress io.Writer) (*Report, error) {
	cfg.fill()
	rep := &Report{}
	rep.Config.Kills, rep.Config.LatencyModel, rep.Config.RecordBytes = cfg.Kills, cfg.LatencyModel, cfg.RecordBytes
	rep.Config.SessionTimeoutMs = ms(cfg.SessionTimeout)
	rep.Config.HeartbeatMs = ms(cfg.HeartbeatInterval)
	dir := cfg.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "kwal-bench-failover-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	for _, mode := range cfg.Modes {
		mdir, err := os.MkdirTemp(dir, mode+"-")
		if err != nil {
			return nil, err
		}
		r, err := runMode(ctx, cfg, mode, mdir, progress)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", mode, err)
		}
		rep.Modes = append(rep.Modes, *r)
	}
	return rep, nil
}

// load is one producer's record of what was acknowledged.
type load struct {
	mu    sync.Mutex
	acked []ack
	errs  int
}

type ack struct {
	value    string
	sent, at time.Time
}

func runMode(ctx context.Context, cfg Config, mode, dir string, progress io.Writer) (*ModeResult, error) {
	lc, err := localcluster.Start(ctx, localcluster.Config{
		Racks: []string{"az1", "az2", "az3"}, Dir: dir, LatencyModel: cfg.LatencyModel, Logger: cfg.Logger,
		Liveness: &broker.LivenessConfig{SessionTimeout: cfg.SessionTimeout},
		Tweak: func(c *broker.Config) {
			c.BrokerSessionTimeout, c.BrokerHeartbeatInterval = cfg.SessionTimeout, cfg.HeartbeatInterval
			c.MinInsyncReplicas, c.DefaultReplicationFactor = 2, 3
			c.DisableAutoLeaderRebalance = true // the kills decide leadership
		},
	})
	if err != nil {
		return nil, err
	}
	defer lc.Close()
	configs := map[string]string{}
	if mode == "remotewal" {
		configs[broker.TopicConfigRemoteWAL] = "true"
	}
	// One partition takes both producers (value prefixes "all-" and
	// "one-"), so that one kill hits both.
	if _, err := lc.Controller.CreateTopic(broker.TopicSpec{Name: topic, Partitions: 1, ReplicationFactor: 3, Configs: configs}); err != nil {
		return nil, err
	}
	if err := waitFor(ctx, 30*time.Second, func() bool { return allInISR(lc, 3) }); err != nil {
		return nil, fmt.Errorf("initial ISR: %w", err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	all, one := &load{}, &load{}
	var lastAllAck, sentAfter atomic.Int64
	for _, l := range []struct {
		prefix string
		acks   kgo.Acks
		ld     *load
	}{{"all", kgo.AllISRAcks(), all}, {"one", kgo.LeaderAck(), one}} {
		opts := []kgo.Opt{kgo.SeedBrokers(lc.Bootstrap()...), kgo.RequiredAcks(l.acks), kgo.ProducerLinger(time.Millisecond),
			kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.MaxBufferedRecords(1000),
			kgo.MetadataMinAge(50 * time.Millisecond), kgo.RetryBackoffFn(func(int) time.Duration { return 20 * time.Millisecond })}
		if l.prefix == "one" {
			opts = append(opts, kgo.DisableIdempotentWrite())
		}
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			return nil, err
		}
		defer cl.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			produce(ctx, cl, l.prefix, cfg.RecordBytes, stop, l.ld, &lastAllAck, &sentAfter, l.prefix == "all")
		}()
	}
	res := &ModeResult{Mode: mode}
	for k := 0; k < cfg.Kills; k++ {
		if err := waitFor(ctx, 30*time.Second, func() bool { return count(all) > 200 && count(one) > 200 }); err != nil {
			return nil, err
		}
		time.Sleep(300 * time.Millisecond) // steady load before the kill
		ts, _ := lc.Controller.Topic(topic)
		victim, epoch := ts.Partitions[0].Leader, ts.Partitions[0].LeaderEpoch
		killedAt := time.Now()
		sentAfter.Store(killedAt.UnixNano())
		if err := lc.StopBroker(victim); err != nil {
			return nil, err
		}
		kill := Kill{Victim: victim, killedAt: killedAt}
		if err := waitFor(ctx, cfg.SessionTimeout+30*time.Second, func() bool {
			ts, _ := lc.Controller.Topic(topic)
			ps := ts.Partitions[0]
			if ps.Leader >= 0 && ps.Leader != victim && ps.LeaderEpoch > epoch {
				kill.NewLeader, kill.LeaderEpoch = ps.Leader, ps.LeaderEpoch
				kill.ToLeaderMs = ms(time.Since(killedAt))
				return true
			}
			return false
		}); err != nil {
			return nil, fmt.Errorf("kill %d: no new leader: %w", k, err)
		}
		if err := waitFor(ctx, 60*time.Second, func() bool { return lastAllAck.Load() > killedAt.UnixNano() }); err != nil {
			return nil, fmt.Errorf("kill %d: no acknowledgement after the kill: %w", k, err)
		}
		kill.ToFirstAckMs = ms(time.Unix(0, firstAckAfter(all, killedAt)).Sub(killedAt))
		if err := lc.RestartBroker(victim); err != nil {
			return nil, err
		}
		if err := waitFor(ctx, 60*time.Second, func() bool { return allInISR(lc, 3) }); err != nil {
			return nil, fmt.Errorf("kill %d: broker %d not back in the ISR: %w", k, victim, err)
		}
		res.Kills = append(res.Kills, kill)
		fmt.Fprintf(progress, "%s kill %d/%d: broker %d; new leader %d after %.0f ms, first acks=all ack after %.0f ms\n",
			mode, k+1, cfg.Kills, victim, kill.NewLeader, kill.ToLeaderMs, kill.ToFirstAckMs)
	}
	close(stop)
	wg.Wait()
	// Read the partition back from its leader.
	got, err := readAll(ctx, lc, topic)
	if err != nil {
		return nil, err
	}
	for _, a := range all.acked {
		switch n := got[a.value]; {
		case n == 0:
			res.AcksAllLost++
		case n > 1:
			res.AcksAllDuplicated++
		}
	}
	res.AcksAllAcked, res.AcksOneAcked = len(all.acked), len(one.acked)
	// Each acks=1 loss belongs to the first kill after its ack; it is
	// counted in milliseconds at that producer's ack rate over the second
	// before the kill (steady load, not diluted by the outages).
	var rates []float64
	for i := range res.Kills {
		k := &res.Kills[i]
		n := 0
		for _, a := range one.acked {
			if !a.at.Before(k.killedAt.Add(-time.Second)) && a.at.Before(k.killedAt) {
				n++
			}
		}
		rates = append(rates, float64(n)/1000)
	}
	for _, a := range one.acked {
		if got[a.value] != 0 {
			continue
		}
		res.AcksOneLost++
		for i := range res.Kills {
			if !res.Kills[i].killedAt.Before(a.at) {
				res.Kills[i].AcksOneLost++
				break
			}
		}
	}
	for i := range res.Kills {
		if rates[i] > 0 {
			res.Kills[i].AcksOneLostMs = float64(res.Kills[i].AcksOneLost) / rates[i]
		}
		res.AcksOneLostMs += res.Kills[i].AcksOneLostMs
	}
	res.AcksOnePerMs = stats.Median(rates)
	var lostMs []float64
	for _, k := range res.Kills {
		lostMs = append(lostMs, k.AcksOneLostMs)
	}
	res.AcksOneLostMsP50, res.AcksOneLostMsP99 = stats.Percentile(lostMs, 50), stats.Percentile(lostMs, 99)
	var toLeader, toAck []float64
	for _, k := range res.Kills {
		toLeader, toAck = append(toLeader, k.ToLeaderMs), append(toAck, k.ToFirstAckMs)
	}
	res.ToLeaderP50, res.ToLeaderP99 = stats.Percentile(toLeader, 50), stats.Percentile(toLeader, 99)
	res.ToFirstAckP50, res.ToFirstAckP99 = stats.Percentile(toAck, 50), stats.Percentile(toAck, 99)
	return res, nil
}

// topic is the measured topic (one partition).
const topic = "failover"

// valueKeyLen is the length of a value's unique key, "all-%010d-".
const valueKeyLen = 15

// produce produces until stop; with track, lastAck is set to the time of
// each acknowledgement of a record sent at or after sentAfter (ns).
func produce(ctx context.Context, cl *kgo.Client, prefix string, size int, stop <-chan struct{}, ld *load, lastAck, sentAfter *atomic.Int64, track bool) {
	pad := make([]byte, size)
	for i := range pad {
		pad[i] = 'x'
	}
	for i := 0; ; i++ {
		select {
		case <-stop:
			cl.Flush(ctx)
			return
		default:
		}
		v := fmt.Sprintf("%s-%010d-", prefix, i)
		val := append([]byte(v), pad[:max(0, size-len(v))]...)
		sent := time.Now()
		cl.Produce(ctx, &kgo.Record{Topic: topic, Partition: 0, Value: val}, func(_ *kgo.Record, err error) {
			now := time.Now()
			ld.mu.Lock()
			defer ld.mu.Unlock()
			if err != nil {
				ld.errs++
				return
			}
			ld.acked = append(ld.acked, ack{value: v, sent: sent, at: now})
			if track && !sent.Before(time.Unix(0, sentAfter.Load())) {
				lastAck.Store(now.UnixNano())
			}
		})
	}
}

func count(l *load) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.acked)
}

// firstAckAfter is the first acknowledgement of a record sent at or
// after t, in ns.
func firstAckAfter(l *load, t time.Time) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	i, _ := slices.BinarySearchFunc(l.acked, t, func(a ack, t time.Time) int { return a.at.Compare(t) })
	for ; i < len(l.acked); i++ {
		if !l.acked[i].sent.Before(t) {
			return l.acked[i].at.UnixNano()
		}
	}
	return time.Now().UnixNano()
}

func allInISR(lc *localcluster.Cluster, n int) bool {
	for _, ts := range lc.Controller.Topics() {
		for _, ps := range ts.Partitions {
			if len(ps.ISR) != n || ps.Leader < 0 {
				return false
			}
		}
	}
	return true
}

// readAll reads topic-0 from the start to its high watermark and counts
// each value's key (its first valueKeyLen bytes).
func readAll(ctx context.Context, lc *localcluster.Cluster, topic string) (map[string]int, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(lc.Bootstrap()...), kgo.FetchMaxWait(100*time.Millisecond),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	out := map[string]int{}
	for {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("reading %s: %w", topic, err)
		}
		done := false
		fs.EachPartition(func(fp kgo.FetchTopicPartition) {
			for _, r := range fp.Records {
				v := string(r.Value)
				if len(v) >= valueKeyLen {
					v = v[:valueKeyLen]
				}
				out[v]++
			}
			if len(fp.Records) > 0 {
				done = fp.Records[len(fp.Records)-1].Offset+1 >= fp.HighWatermark
			}
		})
		if done {
			return out, nil
		}
	}
}

func waitFor(ctx context.Context, d time.Duration, cond func() bool) error {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return errors.New("timed out")
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		time.Sleep(time.Millisecond)
	}
	return nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// WriteTable prints the report.
func WriteTable(w io.Writer, rep *Report) {
	fmt.Fprintf(w, "failover: %d leader kills per mode, session timeout %.0f ms, heartbeat %.0f ms, %s store model\n",
		rep.Config.Kills, rep.Config.SessionTimeoutMs, rep.Config.HeartbeatMs, rep.Config.LatencyModel)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "mode\tnew leader p50 ms\tp99 ms\tfirst ack p50 ms\tp99 ms\tacks=all acked\tlost\tdup\tacks=1 acked\tlost\tlost ms/kill p50\tp99\t")
	for _, m := range rep.Modes {
		fmt.Fprintf(tw, "%s\t%.0f\t%.0f\t%.0f\t%.0f\t%d\t%d\t%d\t%d\t%d\t%.1f\t%.1f\t\n", m.Mode,
			m.ToLeaderP50, m.ToLeaderP99, m.ToFirstAckP50, m.ToFirstAckP99,
			m.AcksAllAcked, m.AcksAllLost, m.AcksAllDuplicated, m.AcksOneAcked, m.AcksOneLost, m.AcksOneLostMsP50, m.AcksOneLostMsP99)
	}
	tw.Flush()
}

// WriteJSON writes the report.
func WriteJSON(w io.Writer, rep *Report) error { return benchreport.WriteJSON(w, rep) }
