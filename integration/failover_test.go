package integration

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/kwal/kwal/kafkalog/kafkalogtest"
	"github.com/kwal/kwal/metadata"
	"github.com/kwal/kwal/objstore/objstoretest"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func startFailoverCluster(t *testing.T) *compatCluster {
	t.Helper()
	if testing.Short() {
		t.Skip("SKIPPED: -short: the multi-process failover tests did not run")
	}
	env := objstoretest.S3Env(t)
	bin := buildKwal(t)
	emb, err := metadata.StartEmbedded(t.TempDir(), testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(emb.Close)
	// A short session, so that elections happen within seconds.
	c := startCompatCluster(t, bin, []string{"az1", "az2", "az3"}, clusterProps(s3StoreURL(env, "failover"), emb.Bootstrap(), map[string]string{
		"replica.lag.time.max.ms":                 "3000",
		"broker.session.timeout.ms":               "3000",
		"broker.heartbeat.interval.ms":            "300",
		"leader.imbalance.check.interval.seconds": "5",
	}))
	t.Cleanup(func() { c.stopAll(t) })
	return c
}

// modeConfigs are the topic configs of a topic in mode: none for classic,
// the remote WAL switched on for remotewal.
func modeConfigs(mode string) map[string]*string {
	configs := map[string]*string{}
	if mode == "remotewal" {
		on := "true"
		configs["remote.wal.storage.enable"] = &on
	}
	return configs
}

// leaderView is a partition's leader as a live broker reports it.
type leaderView struct {
	leader, epoch int32
	isr, replicas []int32
}

// partitionView asks the brokers not in skip (dead or paused) for the leader
// of topic-p, and returns the answer with the highest leader epoch.
func (c *compatCluster) partitionView(t *testing.T, topic string, p int32, skip ...int32) leaderView {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	best := leaderView{leader: -1, epoch: -1}
	for _, b := range c.brokers {
		if slices.Contains(skip, b.id) {
			continue
		}
		md, err := brokerMetadata(ctx, b.addr(), topic)
		if err != nil || len(md.Topics) != 1 || int(p) >= len(md.Topics[0].Partitions) {
			continue
		}
		pd := md.Topics[0].Partitions[p]
		if pd.LeaderEpoch > best.epoch {
			best = leaderView{leader: pd.Leader, epoch: pd.LeaderEpoch, isr: pd.ISR, replicas: pd.Replicas}
		}
	}
	return best
}

// index returns the position of broker id in c.brokers.
func (c *compatCluster) index(id int32) int {
	for i, b := range c.brokers {
		if b.id == id {
			return i
		}
	}
	return -1
}

// ackLog is what an idempotent acks=all producer had acknowledged, per
// partition in acknowledgement order.
type ackLog struct {
	mu     sync.Mutex
	acked  map[int32][]string
	failed []error
}

// produceLoad produces distinct values round-robin to partitions of topic
// until stop is closed, at most inflight records buffered, and returns
// when every produced record has been answered.
func produceLoad(t *testing.T, c *compatCluster, topic string, partitions int32, prefix string, stop <-chan struct{}, acks *ackLog, count *atomic.Int64) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.addrs()...),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.MaxBufferedRecords(2000), kgo.ProducerLinger(2*time.Millisecond),
		kgo.MetadataMinAge(100*time.Millisecond), kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }))
	if err != nil {
		t.Error(err)
		return
	}
	defer cl.Close()
	ctx := context.Background()
	for i := 0; ; i++ {
		select {
		case <-stop:
			if err := cl.Flush(ctx); err != nil {
				t.Error(err)
			}
			return
		default:
		}
		p := int32(i) % partitions
		v := fmt.Sprintf("%s-p%d-%08d", prefix, p, i)
		cl.Produce(ctx, &kgo.Record{Topic: topic, Partition: p, Value: []byte(v)}, func(r *kgo.Record, err error) {
			acks.mu.Lock()
			defer acks.mu.Unlock()
			if err != nil {
				acks.failed = append(acks.failed, fmt.Errorf("%s: %w", v, err))
				return
			}
			acks.acked[r.Partition] = append(acks.acked[r.Partition], v)
			count.Add(1)
		})
	}
}

// checkAcked checks that log holds every acknowledged value exactly once,
// in acknowledgement order, and no value twice.
func checkAcked(t *testing.T, who string, log [][]byte, acked []string) {
	t.Helper()
	pos := map[string]int{}
	for i, v := range log {
		if j, dup := pos[string(v)]; dup {
			t.Errorf("%s: %q at offsets %d and %d", who, v, j, i)
			return
		}
		pos[string(v)] = i
	}
	last := -1
	for _, v := range acked {
		i, ok := pos[v]
		if !ok {
			t.Errorf("%s: acknowledged %q is lost (log of %d records)", who, v, len(log))
			return
		}
		if i < last {
			t.Errorf("%s: acknowledged %q at offset %d, before the previous acknowledged record (%d)", who, v, i, last)
			return
		}
		last = i
	}
}

// TestFailoverKillLeaders kills (SIGKILL) the leader of every partition in
// turn under an idempotent acks=all franz-go producer, in classic and
// remotewal mode, with three `kwal broker` processes, versitygw and a
// shared kfake: the controller must fence the dead broker and elect a new
// leader from the ISR, the producer must follow, and every acknowledged
// record must be read back exactly once and in order from every replica.
// The killed broker is restarted (a new broker epoch) before the next
// kill, so that two in-sync replicas remain for min.insync.replicas=2.
func TestFailoverKillLeaders(t *testing.T) {
	c := startFailoverCluster(t)
	for _, mode := range []string{"classic", "remotewal"} {
		t.Run(mode, func(t *testing.T) {
			const partitions = 3
			topic := "failover-kill-" + mode
			c.createTopic(t, topic, partitions, modeConfigs(mode))
			acks := &ackLog{acked: map[int32][]string{}}
			var count atomic.Int64
			stop := make(chan struct{})
			done := make(chan struct{})
			go func() {
				defer close(done)
				produceLoad(t, c, topic, partitions, mode, stop, acks, &count)
			}()
			ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
			defer cancel()
			waitUntil(t, ctx, "the first acknowledgements", func() bool { return count.Load() > 500 })
			for p := int32(0); p < partitions; p++ {
				before := c.partitionView(t, topic, p)
				victim := c.index(before.leader)
				if victim < 0 {
					t.Fatalf("partition %d has no leader: %+v", p, before)
				}
				atKill := count.Load()
				killed := time.Now()
				c.kill(t, victim)
				var after leaderView
				waitUntil(t, ctx, fmt.Sprintf("a new leader of %s-%d", topic, p), func() bool {
					after = c.partitionView(t, topic, p, before.leader)
					return after.leader >= 0 && after.leader != before.leader && after.epoch > before.epoch
				})
				elected := time.Since(killed)
				waitUntil(t, ctx, "acknowledgements after the election", func() bool { return count.Load() > atKill+300 })
				t.Logf("partition %d: killed leader %d at epoch %d; %d leads at epoch %d after %v, produce resumed after %v (ISR %v)",
					p, before.leader, before.epoch, after.leader, after.epoch, elected.Round(time.Millisecond), time.Since(killed).Round(time.Millisecond), after.isr)
				c.start(t, victim)
				waitUntil(t, ctx, fmt.Sprintf("broker %d back in every ISR", before.leader), func() bool {
					for q := int32(0); q < partitions; q++ {
						if !slices.Contains(c.partitionView(t, topic, q).isr, before.leader) {
							return false
						}
					}
					return true
				})
			}
			// auto.leader.rebalance.enable: each preferred leader, back in
			// the ISR, leads its partition again (checked every 5 s).
			rebalanceStart := time.Now()
			waitUntil(t, ctx, "every preferred replica leading again", func() bool {
				for q := int32(0); q < partitions; q++ {
					if v := c.partitionView(t, topic, q); len(v.replicas) == 0 || v.leader != v.replicas[0] {
						return false
					}
				}
				return true
			})
			t.Logf("preferred leaders restored %v after the last restart", time.Since(rebalanceStart).Round(time.Millisecond))
			close(stop)
			<-done
			acks.mu.Lock()
			defer acks.mu.Unlock()
			if len(acks.failed) > 0 {
				t.Errorf("%d records failed; first: %v", len(acks.failed), acks.failed[0])
			}
			for p := int32(0); p < partitions; p++ {
				checkAcked(t, fmt.Sprintf("consumer of %s-%d", topic, p), consumeFranz(t, c, topic, p, len(acks.acked[p])), acks.acked[p])
				for _, b := range c.brokers {
					waitUntil(t, ctx, fmt.Sprintf("broker %d to reach the high watermark of %s-%d", b.id, topic, p), func() bool {
						return len(fetchFromBrokerQuiet(ctx, b.addr(), topic, p)) >= len(acks.acked[p])
					})
					checkAcked(t, fmt.Sprintf("broker %d's replica of %s-%d", b.id, topic, p), fetchFromBroker(t, ctx, b.addr(), topic, p), acks.acked[p])
				}
				t.Logf("%s-%d: %d acknowledged records read back from the leader and every replica", topic, p, len(acks.acked[p]))
			}
		})
	}
}

// TestFailoverZombieLeader pauses (SIGSTOP) a partition's leader past the
// session timeout, waits for the new leader, keeps producing, resumes the
// old leader (SIGCONT) and sends it produces of its own: nothing it
// acknowledges or uploads after being deposed may be visible to any
// consumer, and every record acknowledged by the cluster is there once.
func TestFailoverZombieLeader(t *testing.T) {
	c := startFailoverCluster(t)
	for _, mode := range []string{"classic", "remotewal"} {
		t.Run(mode, func(t *testing.T) {
			topic := "failover-zombie-" + mode
			c.createTopic(t, topic, 1, modeConfigs(mode))
			acks := &ackLog{acked: map[int32][]string{}}
			var count atomic.Int64
			stop := make(chan struct{})
			done := make(chan struct{})
			go func() {
				defer close(done)
				produceLoad(t, c, topic, 1, mode, stop, acks, &count)
			}()
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			waitUntil(t, ctx, "the first acknowledgements", func() bool { return count.Load() > 300 })
			before := c.partitionView(t, topic, 0)
			zombie := c.brokers[c.index(before.leader)]
			if err := zombie.proc.Signal(syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			paused := true
			defer func() {
				if paused {
					zombie.proc.Signal(syscall.SIGCONT)
				}
			}()
			var after leaderView
			waitUntil(t, ctx, "a new leader", func() bool {
				after = c.partitionView(t, topic, 0, zombie.id)
				return after.leader >= 0 && after.leader != zombie.id && after.epoch > before.epoch
			})
			atElection := count.Load()
			waitUntil(t, ctx, "acknowledgements from the new leader", func() bool { return count.Load() > atElection+300 })
			t.Logf("paused leader %d (epoch %d); %d leads at epoch %d", zombie.id, before.epoch, after.leader, after.epoch)
			// Produces queued in the paused leader's sockets: it reads them
			// the moment it runs again, before it can have learned from the
			// metadata Kafka that it was deposed. Its lease ran out while it
			// was paused, so it must refuse them all.
			zombieValues := map[string]bool{}
			type queuedConn struct {
				rc   *rawConn
				acks int16
			}
			var queued []queuedConn
			for _, acks := range []int16{1, -1} {
				rc := dialRaw(t, zombie.addr())
				defer rc.conn.Close()
				for i := range 10 {
					v := fmt.Sprintf("zombie-queued-%s-%d-%d", mode, i, acks)
					zombieValues[v] = true
					rc.sendProduce(t, topic, acks, v)
				}
				queued = append(queued, queuedConn{rc, acks})
			}
			if err := zombie.proc.Signal(syscall.SIGCONT); err != nil {
				t.Fatal(err)
			}
			paused = false
			for _, q := range queued {
				for i := range 10 {
					if code := q.rc.readProduce(t); code == 0 {
						t.Errorf("deposed leader %d acknowledged produce %d (acks=%d) queued while it was paused", zombie.id, i, q.acks)
					}
				}
			}
			// Resumed, it is sent more: it must acknowledge none.
			for i := range 20 {
				for _, acks := range []int16{1, -1} {
					v := fmt.Sprintf("zombie-%s-%d-%d", mode, i, acks)
					zombieValues[v] = true
					if code := produceTo(t, ctx, zombie.addr(), topic, acks, v); code == 0 {
						t.Errorf("deposed leader %d acknowledged %q (acks=%d)", zombie.id, v, acks)
					}
				}
			}
			waitUntil(t, ctx, fmt.Sprintf("broker %d back in the ISR", zombie.id), func() bool {
				return slices.Contains(c.partitionView(t, topic, 0).isr, zombie.id)
			})
			close(stop)
			<-done
			acks.mu.Lock()
			defer acks.mu.Unlock()
			if len(acks.failed) > 0 {
				t.Errorf("%d records failed; first: %v", len(acks.failed), acks.failed[0])
			}
			acked := acks.acked[0]
			logs := map[string][][]byte{"consumer": consumeFranz(t, c, topic, 0, len(acked))}
			for _, b := range c.brokers {
				waitUntil(t, ctx, fmt.Sprintf("broker %d to reach the high watermark", b.id), func() bool {
					return len(fetchFromBrokerQuiet(ctx, b.addr(), topic, 0)) >= len(acked)
				})
				logs[fmt.Sprintf("broker %d", b.id)] = fetchFromBroker(t, ctx, b.addr(), topic, 0)
			}
			for who, log := range logs {
				checkAcked(t, who, log, acked)
				for _, v := range log {
					if zombieValues[string(v)] {
						t.Errorf("%s reads %q, produced to the deposed leader", who, v)
					}
				}
			}
			t.Logf("%d acknowledged records read back; none of the %d produced to the zombie", len(acked), len(zombieValues))
		})
	}
}

// produceTo sends one produce of value to partition 0 of topic to the
// broker at addr only and returns the partition's error code.
func produceTo(t *testing.T, ctx context.Context, addr, topic string, acks int16, value string) int16 {
	t.Helper()
	// kgo rewrites a ProduceRequest's acks to its client's RequiredAcks.
	required := kgo.AllISRAcks()
	switch acks {
	case 0:
		required = kgo.NoAck()
	case 1:
		required = kgo.LeaderAck()
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RequiredAcks(required), kgo.DisableIdempotentWrite())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = acks, 2000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = kafkalogtest.Encode(kafkalogtest.BatchSpec{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1,
		BaseTimestamp: time.Now().UnixMilli(), Records: []kafkalogtest.Record{{Value: []byte(value)}}})
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := req.RequestWith(rctx, cl.SeedBrokers()[0])
	if err != nil {
		t.Logf("produce of %q to %s: %v", value, addr, err)
		return kerr.RequestTimedOut.Code // not acknowledged
	}
	return resp.Topics[0].Partitions[0].ErrorCode
}

// fetchFromBrokerQuiet is fetchFromBroker without failing: nil on error.
func fetchFromBrokerQuiet(ctx context.Context, addr, topic string, p int32) [][]byte {
	out, err := readBroker(ctx, addr, topic, p)
	if err != nil {
		return nil
	}
	return out
}

// rawConn writes Kafka requests without waiting for the broker (which may
// be paused: the kernel accepts the connection and buffers the bytes).
type rawConn struct {
	conn net.Conn
	corr int32
}

func dialRaw(t *testing.T, addr string) *rawConn {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return &rawConn{conn: conn}
}

// sendProduce writes a Produce v7 request (header v1) of one record.
func (rc *rawConn) sendProduce(t *testing.T, topic string, acks int16, value string) {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = 7, acks, 2000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = kafkalogtest.Encode(kafkalogtest.BatchSpec{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1,
		BaseTimestamp: time.Now().UnixMilli(), Records: []kafkalogtest.Record{{Value: []byte(value)}}})
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	rc.corr++
	body := binary.BigEndian.AppendUint16(nil, uint16(req.Key()))
	body = binary.BigEndian.AppendUint16(body, uint16(req.Version))
	body = binary.BigEndian.AppendUint32(body, uint32(rc.corr))
	body = binary.BigEndian.AppendUint16(body, uint16(len("zombie-test")))
	body = append(body, "zombie-test"...)
	body = req.AppendTo(body)
	frame := binary.BigEndian.AppendUint32(nil, uint32(len(body)))
	if _, err := rc.conn.Write(append(frame, body...)); err != nil {
		t.Fatal(err)
	}
}

// readProduce reads the next Produce v7 response and returns its error code.
func (rc *rawConn) readProduce(t *testing.T) int16 {
	t.Helper()
	rc.conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	var size [4]byte
	if _, err := io.ReadFull(rc.conn, size[:]); err != nil {
		t.Fatalf("reading a produce response: %v", err)
	}
	buf := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(rc.conn, buf); err != nil {
		t.Fatalf("reading a produce response: %v", err)
	}
	resp := kmsg.NewPtrProduceResponse()
	resp.Version = 7
	if err := resp.ReadFrom(buf[4:]); err != nil {
		t.Fatalf("decoding a produce response: %v", err)
	}
	return resp.Topics[0].Partitions[0].ErrorCode
}
