package latbench

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

func settingOf(t *testing.T, w Workload, key string) ProducerSetting {
	t.Helper()
	for _, s := range producerConfigFor(w).settings() {
		if s.Key == key {
			return s
		}
	}
	t.Fatalf("%s: no setting %q", w, key)
	return ProducerSetting{}
}

// TestProducerSettings pins each workload's producer to the KIP's stated
// properties and to the Java client's defaults for the rest: acks=all
// producers are idempotent with 5 requests in flight (the Java default),
// acks=1 producers are not idempotent (the Java client drops the default
// when acks conflicts with it) but still keep 5 in flight.
func TestProducerSettings(t *testing.T) {
	cases := []struct {
		w                  Workload
		key, value, source string
	}{
		{Produce, "acks", "1", SourceKIP},
		{Produce, "retries", "2", SourceKIP},
		{Produce, "linger.ms", "20", SourceKIP},
		{Produce, "delivery.timeout.ms", "300000", SourceKIP},
		{Produce, "request.timeout.ms", "30000", SourceKIP},
		{Produce, "batch.size", "16384", SourceJava},
		{Produce, "max.in.flight.requests.per.connection", "5", SourceJava},
		{ProduceAll, "acks", "all", SourceKIP},
		{ProduceAll, "enable.idempotence", "true", SourceJava},
		{ProduceAll, "linger.ms", "20", SourceKIP},
		{E2E, "batch.size", "32768", SourceKIP},
		{E2E, "linger.ms", "0", SourceJava},
		{E2E, "retries", "2147483647", SourceJava},
		{E2E, "delivery.timeout.ms", "120000", SourceJava},
		{E2EAll, "enable.idempotence", "true", SourceJava},
		{Stream, "linger.ms", "5", SourceSweep},
	}
	for _, c := range cases {
		s := settingOf(t, c.w, c.key)
		if s.Value != c.value || s.Source != c.source {
			t.Errorf("%s %s = %q (%s), want %q (%s)", c.w, c.key, s.Value, s.Source, c.value, c.source)
		}
	}
	for _, w := range []Workload{E2E, Produce, Stream} {
		if pc := producerConfigFor(w); pc.idempotent || pc.inFlight != 5 {
			t.Errorf("%s: idempotent %v, in flight %d; want false, 5", w, pc.idempotent, pc.inFlight)
		}
	}
	for _, w := range []Workload{E2EAll, ProduceAll} {
		if pc := producerConfigFor(w); !pc.idempotent || pc.inFlight != 5 {
			t.Errorf("%s: idempotent %v, in flight %d; want true, 5", w, pc.idempotent, pc.inFlight)
		}
	}
}

// TestProducerOptsAccepted: franz-go refuses contradictory producer
// options (idempotence with acks=1, an in-flight limit with idempotence)
// at NewClient, so every workload's options must build a client.
func TestProducerOptsAccepted(t *testing.T) {
	for _, w := range producerWorkloads() {
		opts := append([]kgo.Opt{kgo.SeedBrokers("127.0.0.1:1"), kgo.DefaultProduceTopic("t")}, producerConfigFor(w).opts()...)
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			t.Errorf("%s: %v", w, err)
			continue
		}
		cl.Close()
	}
}

func TestReportStatesProducerSettings(t *testing.T) {
	r := syntheticReport()
	r.Config.Producers = producerSettingsByWorkload()
	var b strings.Builder
	if err := r.WriteMarkdown(&b); err != nil {
		t.Fatal(err)
	}
	md := b.String()
	for _, want := range []string{
		"| enable.idempotence |", "| max.in.flight.requests.per.connection | 5 (J) |",
		"| batch.size | 32768 (K) | 16384 (J) |", "| linger.ms | 0 (J) | 20 (K) |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q", want)
		}
	}
}
