package brokerbench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kwal/kwal/broker"
	"github.com/kwal/kwal/internal/kclient"
	"github.com/kwal/kwal/internal/stats"
)

// The one-broker case: one broker, RF 1, and the franz-go client in its
// own process, so that broker and client do not share a Go runtime (the
// fair comparison with kfake, itself run as a separate process). For each
// target a fresh server process is started; a client process produces the
// records, another consumes them all from the start; the server's
// CPU-seconds over each phase come from /proc/<pid>/stat (utime + stime).

// OneBrokerTargets are the servers measured, in order.
var OneBrokerTargets = []string{"kfake", "kwal-classic", "kwal-remotewal"}

// OneBrokerConfig configures RunOneBroker.
type OneBrokerConfig struct {
	// Exe is the kwal binary: it runs `kwal broker`, `kwal bench
	// kfake-server` and `kwal bench broker-client`.
	Exe         string
	Records     int
	RecordBytes int
	Partitions  int32
	Runs        int
}

// OneBrokerRow is one target's runs and medians.
type OneBrokerRow struct {
	Target string `json:"target"`
	// Per run.
	ProduceMBps       []float64 `json:"produce_mbps_runs"`
	ConsumeMBps       []float64 `json:"consume_mbps_runs"`
	ProduceCPUPerGB   []float64 `json:"broker_cpu_s_per_gb_produced_runs"`
	ConsumeCPUPerGB   []float64 `json:"broker_cpu_s_per_gb_consumed_runs"`
	ClientConsumeCPUs []float64 `json:"consumer_client_cpu_s_per_gb_runs"`
	// Medians over runs.
	MedianProduceMBps     float64 `json:"median_produce_mbps"`
	MedianConsumeMBps     float64 `json:"median_consume_mbps"`
	MedianProduceCPUPerGB float64 `json:"median_broker_cpu_s_per_gb_produced"`
	MedianConsumeCPUPerGB float64 `json:"median_broker_cpu_s_per_gb_consumed"`
	MedianClientCPUPerGB  float64 `json:"median_consumer_client_cpu_s_per_gb"`
	// Ratios to kfake, of the medians (1 for kfake).
	ProduceVsKfake       float64   `json:"produce_vs_kfake"`
	ConsumeVsKfake       float64   `json:"consume_vs_kfake"`
	ProduceCPUVsKfake    float64   `json:"broker_cpu_per_gb_produced_vs_kfake"`
	ConsumeCPUVsKfake    float64   `json:"broker_cpu_per_gb_consumed_vs_kfake"`
	RunConsumeVsKfake    []float64 `json:"consume_vs_kfake_runs"`
	RunConsumeCPUVsKfake []float64 `json:"broker_cpu_per_gb_consumed_vs_kfake_runs"`
}

// OneBrokerReport is the one-broker case.
type OneBrokerReport struct {
	Records     int            `json:"records"`
	RecordBytes int            `json:"record_bytes"`
	Partitions  int32          `json:"partitions"`
	Runs        int            `json:"runs"`
	Rows        []OneBrokerRow `json:"rows"`
	Notes       []string       `json:"notes"`
}

// RunOneBroker measures every target Runs times, alternating targets
// within a run so the shared machine's drift hits them alike; ratios to
// kfake are also given per run (same run, neighbouring in time).
func RunOneBroker(ctx context.Context, cfg OneBrokerConfig, progress io.Writer) (*OneBrokerReport, error) {
	if cfg.Exe == "" || cfg.Records <= 0 || cfg.RecordBytes <= 0 || cfg.Partitions <= 0 || cfg.Runs <= 0 {
		return nil, errors.New("brokerbench: one-broker case needs the kwal binary and positive records, record bytes, partitions and runs")
	}
	dir, err := os.MkdirTemp("", "kwal-bench-onebroker-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	rows := make([]OneBrokerRow, len(OneBrokerTargets))
	for i, t := range OneBrokerTargets {
		rows[i].Target = t
	}
	for run := 0; run < cfg.Runs; run++ {
		for i, t := range OneBrokerTargets {
			m, err := measureOneBroker(ctx, cfg, dir, t, run)
			if err != nil {
				return nil, fmt.Errorf("one broker, %s, run %d: %w", t, run+1, err)
			}
			r := &rows[i]
			r.ProduceMBps = append(r.ProduceMBps, m.produceMBps)
			r.ConsumeMBps = append(r.ConsumeMBps, m.consumeMBps)
			r.ProduceCPUPerGB = append(r.ProduceCPUPerGB, m.produceCPUPerGB)
			r.ConsumeCPUPerGB = append(r.ConsumeCPUPerGB, m.consumeCPUPerGB)
			r.ClientConsumeCPUs = append(r.ClientConsumeCPUs, m.clientCPUPerGB)
			if progress != nil {
				fmt.Fprintf(progress, "one broker run %d/%d  %-15s produce %7.1f MB/s (%.2f CPU-s/GB)  consume %7.1f MB/s (%.2f CPU-s/GB)\n",
					run+1, cfg.Runs, t, m.produceMBps, m.produceCPUPerGB, m.consumeMBps, m.consumeCPUPerGB)
			}
		}
	}
	k := rows[0]
	for i := range rows {
		r := &rows[i]
		r.MedianProduceMBps, r.MedianConsumeMBps = stats.Median(r.ProduceMBps), stats.Median(r.ConsumeMBps)
		r.MedianProduceCPUPerGB, r.MedianConsumeCPUPerGB = stats.Median(r.ProduceCPUPerGB), stats.Median(r.ConsumeCPUPerGB)
		r.MedianClientCPUPerGB = stats.Median(r.ClientConsumeCPUs)
		kp, kc := stats.Median(k.ProduceMBps), stats.Median(k.ConsumeMBps)
		kpc, kcc := stats.Median(k.ProduceCPUPerGB), stats.Median(k.ConsumeCPUPerGB)
		r.ProduceVsKfake, r.ConsumeVsKfake = ratio(r.MedianProduceMBps, kp), ratio(r.MedianConsumeMBps, kc)
		r.ProduceCPUVsKfake, r.ConsumeCPUVsKfake = ratio(r.MedianProduceCPUPerGB, kpc), ratio(r.MedianConsumeCPUPerGB, kcc)
		for j := range r.ConsumeMBps {
			r.RunConsumeVsKfake = append(r.RunConsumeVsKfake, ratio(r.ConsumeMBps[j], k.ConsumeMBps[j]))
			r.RunConsumeCPUVsKfake = append(r.RunConsumeCPUVsKfake, ratio(r.ConsumeCPUPerGB[j], k.ConsumeCPUPerGB[j]))
		}
	}
	return &OneBrokerReport{
		Records: cfg.Records, RecordBytes: cfg.RecordBytes, Partitions: cfg.Partitions, Runs: cfg.Runs, Rows: rows,
		Notes: []string{
			"acks=1, idempotence off, no compression, linger 5 ms, incompressible values; consumer reads every record from the start",
			"broker CPU: utime+stime of the server process from /proc/<pid>/stat over the phase; produce includes the settle after the last ack (remotewal uploads)",
			"kwal-remotewal: RF 1, so no follower reads back; the store is file:// without a latency model and the metadata topic is an embedded kfake inside the broker process (its CPU counted)",
			"kwal serves plaintext fetches with sendfile (zero-copy); kfake copies",
		},
	}, nil
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

type oneBrokerMeasure struct {
	produceMBps, consumeMBps         float64
	produceCPUPerGB, consumeCPUPerGB float64
	clientCPUPerGB                   float64
}

// server is a broker or kfake child process.
type server struct {
	cmd    *exec.Cmd
	addr   string
	logBuf *lockedBuffer
	exited chan struct{}
}

// lockedBuffer is a child's stderr, written by exec's copier goroutine.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.b.Len() > 1<<20 {
		l.b.Reset() // only the tail is ever shown
	}
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

var listeningRe = regexp.MustCompile(`listening on (\S+?),?(\s|$)`)

func startServer(ctx context.Context, cfg OneBrokerConfig, dir, target string) (*server, error) {
	var args []string
	switch target {
	case "kfake":
		args = []string{"bench", "kfake-server"}
	case "kwal-classic", "kwal-remotewal":
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		props := fmt.Sprintf("broker.id=1\nlisteners=PLAINTEXT://%s\nlog.dirs=%s\ndefault.replication.factor=1\nmin.insync.replicas=1\n",
			addr, filepath.Join(dir, "logs"))
		if target == "kwal-remotewal" {
			props += "remote.log.wal.storage.system.enable=true\n"
		}
		path := filepath.Join(dir, "server.properties")
		if err := os.WriteFile(path, []byte(props), 0o644); err != nil {
			return nil, err
		}
		args = []string{"broker", "--config", path}
	default:
		return nil, fmt.Errorf("unknown target %q", target)
	}
	s := &server{cmd: exec.CommandContext(ctx, cfg.Exe, args...), logBuf: &lockedBuffer{}, exited: make(chan struct{})}
	s.cmd.Stderr = s.logBuf
	out, err := s.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	addrCh := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if m := listeningRe.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case addrCh <- m[1]:
				default:
				}
			}
		}
	}()
	go func() { s.cmd.Wait(); close(s.exited) }()
	select {
	case s.addr = <-addrCh:
		return s, nil
	case <-s.exited:
		return nil, fmt.Errorf("%s exited at start: %s", target, lastLines(s.logBuf.String(), 10))
	case <-time.After(60 * time.Second):
		s.stop()
		return nil, fmt.Errorf("%s did not start in 60 s: %s", target, lastLines(s.logBuf.String(), 10))
	}
}

func (s *server) stop() {
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(30 * time.Second):
		s.cmd.Process.Kill()
		<-s.exited
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's times: 100 on
// every Linux architecture Go supports.
const clockTicks = 100

// ProcessCPUSeconds returns utime+stime of pid, from /proc/<pid>/stat.
func ProcessCPUSeconds(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseStatCPU(b)
}

// parseStatCPU reads fields 14 and 15 (utime, stime) of a /proc/<pid>/stat
// line; the command name (field 2) is in parentheses and may hold spaces,
// so fields are counted after the last ')'.
func parseStatCPU(b []byte) (float64, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("brokerbench: /proc stat line without a command: %q", b)
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state), so field n is f[n-3].
	if len(f) < 13 {
		return 0, fmt.Errorf("brokerbench: /proc stat line with %d fields after the command", len(f))
	}
	ut, err1 := strconv.ParseUint(f[14-3], 10, 64)
	st, err2 := strconv.ParseUint(f[15-3], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("brokerbench: /proc stat utime/stime: %w", err)
	}
	return float64(ut+st) / clockTicks, nil
}

// settle waits until pid uses less than 5% of a core over 200 ms (a
// remotewal broker still uploading what it acknowledged), at most 10 s.
func settle(pid int) error {
	prev, err := ProcessCPUSeconds(pid)
	if err != nil {
		return err
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		time.Sleep(200 * time.Millisecond)
		cur, err := ProcessCPUSeconds(pid)
		if err != nil {
			return err
		}
		if cur-prev < 0.01 {
			return nil
		}
		prev = cur
	}
	return nil
}

func measureOneBroker(ctx context.Context, cfg OneBrokerConfig, parent, target string, run int) (m oneBrokerMeasure, err error) {
	dir, err := os.MkdirTemp(parent, target+"-")
	if err != nil {
		return m, err
	}
	defer os.RemoveAll(dir)
	srv, err := startServer(ctx, cfg, dir, target)
	if err != nil {
		return m, err
	}
	defer srv.stop()
	pid := srv.cmd.Process.Pid
	topic := fmt.Sprintf("onebroker-%d", run)
	admin, err := kgo.NewClient(kgo.SeedBrokers(srv.addr))
	if err != nil {
		return m, err
	}
	configs := map[string]string{}
	if target == "kwal-remotewal" {
		configs[broker.TopicConfigRemoteWAL] = "true"
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	err = kclient.CreateTopic(cctx, admin, topic, cfg.Partitions, 1, configs, false)
	cancel()
	admin.Close()
	if err != nil {
		return m, fmt.Errorf("create topic: %w", err)
	}
	if err := settle(pid); err != nil {
		return m, err
	}
	bytesTotal := float64(cfg.Records) * float64(cfg.RecordBytes)
	gb := bytesTotal / 1e9
	phase := func(mode string) (ClientResult, float64, error) {
		c0, err := ProcessCPUSeconds(pid)
		if err != nil {
			return ClientResult{}, 0, err
		}
		res, err := runClient(ctx, cfg, srv.addr, topic, mode)
		if err != nil {
			return res, 0, fmt.Errorf("%s client: %w (server log: %s)", mode, err, lastLines(srv.logBuf.String(), 5))
		}
		if mode == "produce" {
			if err := settle(pid); err != nil {
				return res, 0, err
			}
		}
		c1, err := ProcessCPUSeconds(pid)
		return res, c1 - c0, err
	}
	pr, pcpu, err := phase("produce")
	if err != nil {
		return m, err
	}
	cr, ccpu, err := phase("consume")
	if err != nil {
		return m, err
	}
	if cr.Bytes != int64(bytesTotal) {
		return m, fmt.Errorf("consumed %d bytes of values, produced %d", cr.Bytes, int64(bytesTotal))
	}
	return oneBrokerMeasure{
		produceMBps: pr.MBps, consumeMBps: cr.MBps,
		produceCPUPerGB: pcpu / gb, consumeCPUPerGB: ccpu / gb,
		clientCPUPerGB: cr.CPUSeconds / gb,
	}, nil
}

func runClient(ctx context.Context, cfg OneBrokerConfig, addr, topic, mode string) (ClientResult, error) {
	cmd := exec.CommandContext(ctx, cfg.Exe, "bench", "broker-client", "--bootstrap", addr, "--topic", topic, "--mode", mode,
		"--records", strconv.Itoa(cfg.Records), "--record-bytes", strconv.Itoa(cfg.RecordBytes))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return ClientResult{}, fmt.Errorf("%w: %s", err, lastLines(stderr.String(), 5))
	}
	var res ClientResult
	if err := json.Unmarshal(out, &res); err != nil {
		return res, fmt.Errorf("client output %q: %w", out, err)
	}
	return res, nil
}

// WriteOneBrokerTable prints the one-broker case.
func WriteOneBrokerTable(w io.Writer, rep *OneBrokerReport) {
	fmt.Fprintf(w, "one broker, RF 1, broker and franz-go client in separate processes: %d records of %d B, %d partitions; medians of %d runs\n",
		rep.Records, rep.RecordBytes, rep.Partitions, rep.Runs)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "target\tproduce MB/s\tvs kfake\tconsume MB/s\tvs kfake\tbroker CPU-s/GB produced\tvs kfake\tbroker CPU-s/GB consumed\tvs kfake\tconsumer CPU-s/GB\t")
	for _, r := range rep.Rows {
		fmt.Fprintf(tw, "%s\t%.0f\t%.2fx\t%.0f\t%.2fx\t%.2f\t%.2fx\t%.2f\t%.2fx\t%.2f\t\n", r.Target,
			r.MedianProduceMBps, r.ProduceVsKfake, r.MedianConsumeMBps, r.ConsumeVsKfake,
			r.MedianProduceCPUPerGB, r.ProduceCPUVsKfake, r.MedianConsumeCPUPerGB, r.ConsumeCPUVsKfake, r.MedianClientCPUPerGB)
	}
	tw.Flush()
	fmt.Fprintln(w, "runs (produce MB/s | consume MB/s | consume vs kfake, same run | broker CPU-s/GB consumed vs kfake, same run):")
	for _, r := range rep.Rows {
		fmt.Fprintf(w, "  %-15s %s | %s | %s | %s\n", r.Target, fmtRuns(r.ProduceMBps), fmtRuns(r.ConsumeMBps), fmtRatios(r.RunConsumeVsKfake), fmtRatios(r.RunConsumeCPUVsKfake))
	}
	for _, n := range rep.Notes {
		fmt.Fprintf(w, "  note: %s\n", n)
	}
}

func fmtRatios(v []float64) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmt.Sprintf("%.2f", x)
	}
	return strings.Join(s, " ")
}
