package integration

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.yaml.in/yaml/v3"

	"github.com/kwal/kwal/broker"
	"github.com/kwal/kwal/internal/kclient"
	"github.com/kwal/kwal/internal/stagehist"
	"github.com/kwal/kwal/localcluster"
)

// grafanaDashboard is the part of a dashboard JSON the test reads.
type grafanaDashboard struct {
	UID    string `json:"uid"`
	Panels []struct {
		Title      string `json:"title"`
		Type       string `json:"type"`
		Datasource *struct {
			UID string `json:"uid"`
		} `json:"datasource"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

var metricName = regexp.MustCompile(`\bkwal_[a-z0-9_]+`)

// baseMetric maps a histogram series name to its family.
func baseMetric(s string) string {
	for _, suf := range []string{"_bucket", "_count", "_sum"} {
		if strings.HasSuffix(s, "_seconds"+suf) {
			return strings.TrimSuffix(s, suf)
		}
	}
	return s
}

// The Grafana dashboard in deploy/ parses, every panel queries the
// provisioned Prometheus data source, every metric a panel queries is in
// the scrape of a running remotewal cluster's brokers (the production
// assembly), and every stage histogram has a panel.
func TestGrafanaDashboardMetricsExist(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "deploy", "grafana", "dashboards", "kwal.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d grafanaDashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("dashboard JSON: %v", err)
	}
	var ds struct {
		Datasources []struct {
			UID  string `yaml:"uid"`
			Type string `yaml:"type"`
			URL  string `yaml:"url"`
		} `yaml:"datasources"`
	}
	readYAML(t, filepath.Join("..", "deploy", "grafana", "provisioning", "datasources", "prometheus.yml"), &ds)
	if len(ds.Datasources) != 1 || ds.Datasources[0].Type != "prometheus" || ds.Datasources[0].URL != "http://prometheus:9090" {
		t.Fatalf("provisioned data sources: %+v", ds.Datasources)
	}
	queried := map[string][]string{} // metric → panels
	for _, p := range d.Panels {
		if p.Type == "row" {
			continue
		}
		if p.Datasource == nil || p.Datasource.UID != ds.Datasources[0].UID {
			t.Errorf("panel %q does not use the provisioned data source %q", p.Title, ds.Datasources[0].UID)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			names := metricName.FindAllString(tg.Expr, -1)
			if len(names) == 0 {
				t.Errorf("panel %q: query %q names no kwal metric", p.Title, tg.Expr)
			}
			for _, n := range names {
				queried[baseMetric(n)] = append(queried[baseMetric(n)], p.Title)
			}
		}
	}
	for _, s := range stagehist.Stages {
		if _, ok := queried[s.Metric()]; !ok {
			t.Errorf("no panel shows the histogram %s", s.Metric())
		}
	}

	scraped := scrapeRemoteWALCluster(t)
	for m, panels := range queried {
		if !scraped[m] {
			t.Errorf("panel(s) %q query %s, which no broker exports", panels, m)
		}
	}
}

// scrapeRemoteWALCluster starts two brokers in two racks (the production
// assembly, in process), produces to a remotewal topic with acks=all and
// returns the metric families the brokers' /metrics carry.
func scrapeRemoteWALCluster(t *testing.T) map[string]bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	lc, err := localcluster.Start(ctx, localcluster.Config{
		Racks: []string{"az1", "az2"}, Dir: t.TempDir(), StorageURL: "mem://", LatencyModel: "none",
		RemoteWAL: broker.RemoteWALConfig{CombinerTaskInterval: 5 * time.Millisecond},
		Logger:    slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lc.Close() })
	cl, err := kgo.NewClient(kgo.SeedBrokers(lc.Bootstrap()...), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic("dash"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := kclient.CreateTopic(ctx, cl, "dash", 1, 2, map[string]string{broker.TopicConfigRemoteWAL: "true"}, false); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	families := map[string]bool{}
	for _, b := range lc.Brokers {
		addr, err := b.ServeMetrics("127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(body), "\n") {
			if f, ok := strings.CutPrefix(line, "# TYPE "); ok {
				families[strings.Fields(f)[0]] = true
			}
		}
	}
	return families
}

// deploy/prometheus.yml scrapes exactly the kwal brokers docker-compose.yml
// runs, each on the port of its kwal.metrics.listener, and the compose file
// mounts the Prometheus and Grafana files that exist.
func TestPrometheusScrapesComposeBrokers(t *testing.T) {
	var prom struct {
		ScrapeConfigs []struct {
			MetricsPath   string `yaml:"metrics_path"`
			StaticConfigs []struct {
				Targets []string `yaml:"targets"`
			} `yaml:"static_configs"`
		} `yaml:"scrape_configs"`
	}
	readYAML(t, filepath.Join("..", "deploy", "prometheus.yml"), &prom)
	var targets []string
	for _, sc := range prom.ScrapeConfigs {
		if sc.MetricsPath != "/metrics" {
			t.Errorf("metrics_path %q, want /metrics", sc.MetricsPath)
		}
		for _, st := range sc.StaticConfigs {
			targets = append(targets, st.Targets...)
		}
	}
	var compose struct {
		Services map[string]struct {
			Command []string `yaml:"command"`
			Volumes []string `yaml:"volumes"`
		} `yaml:"services"`
	}
	readYAML(t, filepath.Join("..", "docker-compose.yml"), &compose)
	var want []string
	for name, svc := range compose.Services {
		for _, v := range svc.Volumes {
			host := strings.Split(v, ":")[0]
			if strings.HasPrefix(host, "./") {
				if _, err := os.Stat(filepath.Join("..", host)); err != nil {
					t.Errorf("service %s mounts %s: %v", name, host, err)
				}
			}
		}
		if !slices.Contains(svc.Command, "broker") {
			continue
		}
		for _, v := range svc.Volumes {
			host := strings.Split(v, ":")[0]
			if !strings.HasSuffix(host, ".properties") {
				continue
			}
			props, err := os.ReadFile(filepath.Join("..", host))
			if err != nil {
				t.Fatal(err)
			}
			port := ""
			for _, line := range strings.Split(string(props), "\n") {
				if l, ok := strings.CutPrefix(strings.TrimSpace(line), "kwal.metrics.listener="); ok {
					port = l[strings.LastIndex(l, ":")+1:]
				}
			}
			if port == "" {
				t.Errorf("%s (service %s) sets no kwal.metrics.listener", host, name)
				continue
			}
			want = append(want, name+":"+port)
		}
	}
	if _, ok := compose.Services["prometheus"]; !ok {
		t.Error("docker-compose.yml has no prometheus service")
	}
	if _, ok := compose.Services["grafana"]; !ok {
		t.Error("docker-compose.yml has no grafana service")
	}
	slices.Sort(want)
	slices.Sort(targets)
	if len(want) == 0 || !slices.Equal(want, targets) {
		t.Errorf("prometheus scrapes %v, compose brokers serve metrics at %v", targets, want)
	}
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
