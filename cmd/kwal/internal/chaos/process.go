package chaos

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kwal/kwal/broker"
	"github.com/kwal/kwal/internal/faultnet"
	"github.com/kwal/kwal/internal/procs"
	"github.com/kwal/kwal/internal/retry"
	"github.com/kwal/kwal/kafkalog"
	"github.com/kwal/kwal/metadata"
	"github.com/kwal/kwal/objstore"
	"github.com/kwal/kwal/objstore/storeurl"
)

// The process runner's cluster, all on loopback:
//
//	client ─(dialer: proxy address → broker)─► broker i ─► P(i→j) ─► broker j
//	broker i ─► S(i) ─► S3Proxy ─► versitygw (bucket wal-<rack> per rack)
//	broker i ─► kfake in this process (MetadataSwitch)
//
// Each broker's static cluster.brokers list names every peer j by the
// address of its own proxy P(i→j), so cutting P(i→j) and P(j→i) cuts the
// pair and nothing else. Clients that learn those addresses from a
// Metadata answer dial the broker behind the proxy: the faults are
// between the servers, not between them and the workload.
type procCluster struct {
	cfg     Config
	emb     *metadata.Embedded
	meta    *MetadataSwitch
	vgw     *procs.Process
	vgwAddr string
	s3      *faultnet.S3Proxy
	brokers map[int32]*procBroker
	pairs   map[[2]int32]*faultnet.Proxy // (from, to)
	rewrite map[string]string            // proxy address -> broker address
}

type procBroker struct {
	id     int32
	rack   string
	addr   string
	logDir string
	proc   *procs.Process
	store  *faultnet.Proxy // between the broker and the S3 proxy
}

var _ cluster = (*procCluster)(nil)

const (
	s3Access = "kwalchaos"
	s3Secret = "kwalchaossecret123"
)

// s3Env gives storeurl the runner's own versitygw credentials.
func s3Env(key string) string {
	return map[string]string{"KWAL_S3_ACCESS_KEY": s3Access, "KWAL_S3_SECRET_KEY": s3Secret}[key]
}

func startProcesses(ctx context.Context, cfg Config) (_ *procCluster, err error) {
	c := &procCluster{cfg: cfg, brokers: map[int32]*procBroker{}, pairs: map[[2]int32]*faultnet.Proxy{}, rewrite: map[string]string{}}
	defer func() {
		if err != nil {
			c.close()
		}
	}()
	bin := cfg.KwalBinary
	if bin == "" {
		if bin, err = os.Executable(); err != nil {
			return nil, err
		}
	}
	vgwBin := cfg.VersitygwBinary
	if vgwBin == "" {
		if vgwBin, err = procs.FindVersitygw(); err != nil {
			return nil, err
		}
	}
	if c.emb, err = metadata.StartEmbedded(filepath.Join(cfg.Dir, "metadata-kfake"), cfg.Logger); err != nil {
		return nil, fmt.Errorf("chaos: starting the metadata Kafka: %w", err)
	}
	c.meta = NewMetadataSwitch(c.emb.Cluster())
	s3dir := filepath.Join(cfg.Dir, "s3", "data")
	if err := os.MkdirAll(s3dir, 0o755); err != nil {
		return nil, err
	}
	port, err := procs.FreePort()
	if err != nil {
		return nil, err
	}
	c.vgwAddr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	c.vgw = procs.Versitygw(vgwBin, c.vgwAddr, s3Access, s3Secret, s3dir)
	sctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := c.vgw.Start(sctx); err != nil {
		return nil, err
	}
	if c.s3, err = faultnet.NewS3Proxy(faultnet.S3ProxyConfig{Target: "http://" + c.vgwAddr, Seed: cfg.Seed, Logger: cfg.Logger}); err != nil {
		return nil, err
	}
	var ids []int32
	for i, rack := range cfg.Racks {
		id := int32(i + 1)
		port, err := procs.FreePort()
		if err != nil {
			return nil, err
		}
		b := &procBroker{id: id, rack: rack, addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
			logDir: filepath.Join(cfg.Dir, fmt.Sprintf("broker-%d", id), "logs")}
		if b.store, err = faultnet.Listen("127.0.0.1:0", c.s3.Addr(), cfg.Logger); err != nil {
			return nil, err
		}
		c.brokers[id] = b
		ids = append(ids, id)
	}
	for _, from := range ids {
		for _, to := range ids {
			if from == to {
				continue
			}
			p, err := faultnet.Listen("127.0.0.1:0", c.brokers[to].addr, cfg.Logger)
			if err != nil {
				return nil, err
			}
			c.pairs[[2]int32{from, to}] = p
			c.rewrite[p.Addr()] = c.brokers[to].addr
		}
	}
	for _, id := range ids {
		b := c.brokers[id]
		var list []string
		for _, peer := range ids {
			addr := b.addr
			if peer != id {
				addr = c.pairs[[2]int32{id, peer}].Addr()
			}
			list = append(list, fmt.Sprintf("%d@%s#%s", peer, addr, c.brokers[peer].rack))
		}
		dir := filepath.Dir(b.logDir)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		props := filepath.Join(dir, "server.properties")
		if err := procs.WriteProperties(props, c.props(b, strings.Join(list, ","))); err != nil {
			return nil, err
		}
		b.proc = procs.Broker(fmt.Sprintf("broker %d", id), bin, props, b.addr)
		b.proc.Env = []string{"KWAL_S3_ACCESS_KEY=" + s3Access, "KWAL_S3_SECRET_KEY=" + s3Secret}
	}
	var wg sync.WaitGroup
	errs := make([]error, len(ids))
	for i, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = c.brokers[id].proc.Start(sctx)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if err := c.createTopics(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// props is broker b's server.properties.
func (c *procCluster) props(b *procBroker, clusterList string) map[string]string {
	// The credentials go in the environment (a store URL may not carry them).
	store := url.Values{
		"endpoint": {"http://" + b.store.Addr()}, "region": {"us-east-1"}, "path_style": {"true"}, "create_bucket": {"true"},
	}
	ms := func(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }
	return map[string]string{
		"broker.id":                                        strconv.Itoa(int(b.id)),
		"listeners":                                        "PLAINTEXT://" + b.addr,
		"log.dirs":                                         b.logDir,
		"cluster.brokers":                                  clusterList,
		"default.replication.factor":                       strconv.Itoa(len(c.cfg.Racks)),
		"min.insync.replicas":                              "2",
		"remote.log.wal.storage.system.enable":             "true",
		"remote.wal.storage.url":                           "s3://wal-{rack}/kwal?" + store.Encode(),
		"remote.wal.metadata.bootstrap.servers":            strings.Join(c.emb.Bootstrap(), ","),
		"broker.session.timeout.ms":                        ms(c.cfg.SessionTimeout),
		"broker.heartbeat.interval.ms":                     ms(c.cfg.SessionTimeout / 8),
		"replica.lag.time.max.ms":                          ms(c.cfg.SessionTimeout),
		"replica.fetch.wait.max.ms":                        "50",
		"replica.fetch.backoff.ms":                         "20",
		"leader.imbalance.check.interval.seconds":          "1",
		"remote.wal.log.manager.combiner.task.interval.ms": "10",
	}
}

func (c *procCluster) ids() []int32 { return slices.Sorted(maps.Keys(c.brokers)) }

func (c *procCluster) clientOpts() []kgo.Opt {
	var seeds []string
	for _, id := range c.ids() {
		seeds = append(seeds, c.brokers[id].addr)
	}
	d := &net.Dialer{Timeout: 5 * time.Second}
	return []kgo.Opt{kgo.SeedBrokers(seeds...), kgo.Dialer(func(ctx context.Context, network, host string) (net.Conn, error) {
		if real, ok := c.rewrite[host]; ok {
			host = real
		}
		return d.DialContext(ctx, network, host)
	})}
}

func (c *procCluster) createTopics(ctx context.Context) error {
	cl, err := kgo.NewClient(c.clientOpts()...)
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for _, t := range Topics {
		configs := map[string]*string{"min.insync.replicas": kmsg.StringPtr("2")}
		if t == "remotewal" {
			configs[broker.TopicConfigRemoteWAL] = kmsg.StringPtr("true")
		}
		resp, err := adm.CreateTopic(cctx, partitions, int16(len(c.cfg.Racks)), configs, t)
		if err == nil {
			err = resp.Err
		}
		if err != nil {
			return fmt.Errorf("chaos: creating %s: %w", t, err)
		}
	}
	// Every broker learns the topics through the metadata Kafka.
	if !poll(ctx, time.Now().Add(60*time.Second), func() bool {
		for _, id := range c.ids() {
			views, err := c.brokerViews(cctx, c.brokers[id].addr)
			if err != nil || len(views) != len(tps()) {
				return false
			}
			for _, v := range views {
				if v.leader < 0 {
					return false
				}
			}
		}
		return true
	}) {
		return errors.New("chaos: partitions have no leaders 60 s after creation")
	}
	return nil
}

// view is a partition's leadership as one broker answers it.
type view struct {
	leader, epoch int32
	isr, replicas []int32
}

// brokerViews asks the broker at addr (it alone) about the topics.
func (c *procCluster) brokerViews(ctx context.Context, addr string) (map[broker.TopicPartition]view, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	req := kmsg.NewPtrMetadataRequest()
	for _, t := range Topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(t)
		req.Topics = append(req.Topics, rt)
	}
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	resp, err := req.RequestWith(rctx, cl.SeedBrokers()[0])
	if err != nil {
		return nil, err
	}
	out := map[broker.TopicPartition]view{}
	for _, t := range resp.Topics {
		if t.ErrorCode != 0 || t.Topic == nil {
			continue
		}
		for _, p := range t.Partitions {
			out[broker.TopicPartition{Topic: *t.Topic, Partition: p.Partition}] = view{leader: p.Leader, epoch: p.LeaderEpoch, isr: p.ISR, replicas: p.Replicas}
		}
	}
	return out, nil
}

func (c *procCluster) metadataBootstrap() []string { return c.emb.Bootstrap() }

// auditStores opens each rack's bucket directly on versitygw.
func (c *procCluster) auditStores() map[string]objstore.Store {
	out := map[string]objstore.Store{}
	for _, rack := range uniq(c.cfg.Racks) {
		q := url.Values{"endpoint": {"http://" + c.vgwAddr}, "region": {"us-east-1"}, "path_style": {"true"}, "create_bucket": {"true"}}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		st, err := storeurl.Open(ctx, "s3://wal-"+rack+"/kwal?"+q.Encode(), storeurl.WithGetenv(s3Env))
		cancel()
		if err != nil {
			c.cfg.Logger.Error("chaos: opening a store to audit", "rack", rack, "err", err)
			continue
		}
		out[rack] = st
	}
	return out
}

func (c *procCluster) storeFaults() int64 { return c.s3.Injected() }

// restart starts broker id again, retrying while it refuses to start,
// as a supervisor would (supervise): 100 ms after the first refusal,
// doubling to a second.
func (c *procCluster) restart(id int32) {
	b := c.brokers[id]
	supervise(c.cfg.Logger, id, c.cfg.Settle, retry.Backoff{Base: 100 * time.Millisecond, Max: time.Second}, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		err := b.proc.Start(ctx)
		if err != nil {
			b.proc.Kill()
		}
		return err
	})
}

func (c *procCluster) setPairs(pairs [][2]int32, m faultnet.Mode) {
	for _, p := range pairs {
		for _, dir := range [][2]int32{{p[0], p[1]}, {p[1], p[0]}} {
			if px := c.pairs[dir]; px != nil {
				px.Set(m)
			}
		}
	}
}

func (c *procCluster) rackPairs(rack string) [][2]int32 {
	var out [][2]int32
	for _, a := range c.ids() {
		for _, b := range c.ids() {
			if a < b && (c.brokers[a].rack == rack) != (c.brokers[b].rack == rack) {
				out = append(out, [2]int32{a, b})
			}
		}
	}
	return out
}

func (c *procCluster) start(e Event) (undo func()) {
	log := c.cfg.Logger
	b := c.brokers[e.Broker]
	cut := func(pairs [][2]int32) func() {
		c.setPairs(pairs, faultnet.Stall)
		return func() { c.setPairs(pairs, faultnet.Open) }
	}
	switch e.Kind {
	case KillBroker:
		if err := b.proc.Kill(); err != nil {
			log.Warn("chaos: SIGKILL", "broker", e.Broker, "err", err)
		}
		return func() { c.restart(e.Broker) }
	case PauseBroker:
		if err := b.proc.Signal(syscall.SIGSTOP); err != nil {
			log.Warn("chaos: SIGSTOP", "broker", e.Broker, "err", err)
		}
		return func() {
			if err := b.proc.Signal(syscall.SIGCONT); err != nil {
				log.Warn("chaos: SIGCONT", "broker", e.Broker, "err", err)
			}
		}
	case DiskFull:
		if err := b.proc.SetFileSizeLimit(0); err != nil {
			log.Warn("chaos: disk full", "broker", e.Broker, "err", err)
		}
		return func() {
			// Space freed, the operator restarts the broker (a new
			// process has the runner's file-size limit: none).
			b.proc.Kill()
			c.restart(e.Broker)
		}
	case PartitionPair:
		return cut([][2]int32{{e.Broker, e.Peer}})
	case PartitionRack:
		return cut(c.rackPairs(e.Rack))
	case PartitionStore:
		b.store.Set(faultnet.Stall)
		return func() { b.store.Set(faultnet.Open) }
	case StoreDown:
		if err := c.vgw.Kill(); err != nil {
			log.Warn("chaos: stopping versitygw", "err", err)
		}
		return func() {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			if err := c.vgw.Start(ctx); err != nil {
				log.Error("chaos: starting versitygw again", "err", err)
			}
		}
	case StoreSlow, StoreSlowDown, AmbiguousPut:
		c.s3.Set(map[Kind]faultnet.StoreMode{StoreSlow: faultnet.StoreSlow, StoreSlowDown: faultnet.StoreSlowDown,
			AmbiguousPut: faultnet.StoreAmbiguousPut}[e.Kind])
		return func() { c.s3.Set(faultnet.StoreOK) }
	case MetadataDown:
		c.meta.SetDown(true)
		return func() { c.meta.SetDown(false) }
	}
	panic(fmt.Sprintf("chaos: unknown fault kind %q", e.Kind))
}

// converge waits until every partition has a leader with every replica in
// its ISR and the high watermarks have stood still for a second (nothing
// is produced any more: followers in the ISR have fetched to the leader's
// log end), and returns them.
func (c *procCluster) converge(ctx context.Context, deadline time.Time) (map[broker.TopicPartition]int64, error) {
	cl, err := kgo.NewClient(c.clientOpts()...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	var (
		why    string
		last   map[broker.TopicPartition]int64
		stable time.Time
	)
	for {
		hws, reason := c.snapshot(ctx, adm)
		switch {
		case reason != "":
			why, last = reason, nil
		case !maps.Equal(hws, last):
			why, last, stable = "high watermarks still moving", hws, time.Now()
		case time.Since(stable) >= time.Second:
			return hws, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return last, fmt.Errorf("converged: replicas did not converge within %v after the faults: %s", c.cfg.Settle, why)
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// snapshot returns the high watermarks, or why they are not settled.
func (c *procCluster) snapshot(ctx context.Context, adm *kadm.Client) (map[broker.TopicPartition]int64, string) {
	best := map[broker.TopicPartition]view{}
	for _, id := range c.ids() {
		vs, err := c.brokerViews(ctx, c.brokers[id].addr)
		if err != nil {
			return nil, fmt.Sprintf("broker %d does not answer Metadata: %v", id, err)
		}
		for tp, v := range vs {
			if b, ok := best[tp]; !ok || v.epoch > b.epoch {
				best[tp] = v
			}
		}
	}
	for _, tp := range tps() {
		v, ok := best[tp]
		switch {
		case !ok || v.leader < 0:
			return nil, fmt.Sprintf("%s has no leader", tp)
		case len(v.isr) != len(c.cfg.Racks):
			return nil, fmt.Sprintf("%s: ISR %v of replicas %v (leader %d)", tp, v.isr, v.replicas, v.leader)
		}
	}
	lctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	ends, err := adm.ListEndOffsets(lctx, Topics...)
	if err != nil {
		return nil, fmt.Sprintf("listing end offsets: %v", err)
	}
	hws := map[broker.TopicPartition]int64{}
	for _, tp := range tps() {
		o, ok := ends.Lookup(tp.Topic, tp.Partition)
		if !ok || o.Err != nil {
			return nil, fmt.Sprintf("%s: no end offset (%v)", tp, o.Err)
		}
		hws[tp] = o.Offset
	}
	return hws, ""
}

// compareReplicas stops every broker (SIGTERM: a controlled shutdown
// flushes the logs) and compares their log files: every replica holds the
// high watermark, and all are byte-identical over their common offsets.
func (c *procCluster) compareReplicas(hws map[broker.TopicPartition]int64) (int, error) {
	var wg sync.WaitGroup
	for _, id := range c.ids() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if !c.brokers[id].proc.Stop(30 * time.Second) {
				c.cfg.Logger.Warn("chaos: broker did not stop on SIGTERM within 30 s; killed", "broker", id)
			}
		}()
	}
	wg.Wait()
	n := 0
	for _, tp := range tps() {
		var first *kafkalog.Log
		var firstID int32
		for _, id := range c.ids() {
			dir := filepath.Join(c.brokers[id].logDir, tp.Topic+"-"+strconv.Itoa(int(tp.Partition)))
			l, err := kafkalog.Open(dir, kafkalog.Config{Logger: c.cfg.Logger})
			if err != nil {
				return n, fmt.Errorf("replicas: opening %s's log on broker %d: %w", tp, id, err)
			}
			defer l.Close()
			if end := l.LogEndOffset(); end < hws[tp] {
				return n, fmt.Errorf("replicas: %s on broker %d ends at %d, below the high watermark %d", tp, id, end, hws[tp])
			}
			if first == nil {
				first, firstID = l, id
				continue
			}
			if err := sameLogs(first, l); err != nil {
				return n, fmt.Errorf("replicas: %s on broker %d differs from broker %d: %v", tp, id, firstID, err)
			}
			n++
		}
	}
	return n, nil
}

// logFloods counts the WARN-or-worse lines of each broker's log by
// message (slog's text format: level=WARN msg="...").
func (c *procCluster) logFloods(elapsed time.Duration) ([]string, int) {
	bound := floodBound(elapsed)
	var out []string
	total := 0
	for _, id := range c.ids() {
		byMsg := map[string]int{}
		f, err := os.Open(c.brokers[id].proc.LogPath)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if !strings.Contains(line, "level=WARN") && !strings.Contains(line, "level=ERROR") {
				continue
			}
			total++
			byMsg[logMessage(line)]++
		}
		f.Close()
		msgs := slices.Collect(maps.Keys(byMsg))
		sort.Slice(msgs, func(i, j int) bool { return byMsg[msgs[i]] > byMsg[msgs[j]] })
		for _, m := range msgs {
			if byMsg[m] > bound {
				out = append(out, fmt.Sprintf("log flood: broker %d logged %q %d times at WARN or worse (bound %d for this run)", id, m, byMsg[m], bound))
			}
		}
	}
	return out, total
}

// logMessage returns the msg value of a slog text line.
func logMessage(line string) string {
	i := strings.Index(line, " msg=")
	if i < 0 {
		return line
	}
	rest := line[i+5:]
	if strings.HasPrefix(rest, `"`) {
		if s, err := strconv.QuotedPrefix(rest); err == nil {
			if u, err := strconv.Unquote(s); err == nil {
				return u
			}
		}
	}
	if j := strings.IndexByte(rest, ' '); j >= 0 {
		return rest[:j]
	}
	return rest
}

func (c *procCluster) close() {
	for _, b := range c.brokers {
		if b.proc != nil {
			b.proc.Kill()
		}
		if b.store != nil {
			b.store.Close()
		}
	}
	for _, p := range c.pairs {
		p.Close()
	}
	if c.s3 != nil {
		c.s3.Close()
	}
	if c.vgw != nil {
		c.vgw.Stop(5 * time.Second)
	}
	if c.emb != nil {
		c.emb.Close()
	}
}
