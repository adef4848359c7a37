package latbench

import (
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Where a producer setting's value comes from.
const (
	SourceKIP   = "KIP-1176 appendix"
	SourceJava  = "Java client default (Kafka 3.9)"
	SourceSweep = "kwal sweep"
)

// ProducerSetting is one producer property in the Java client's words,
// the value the runs use, and where the value comes from.
type ProducerSetting struct {
	Key    string `json:"key"`
	Value  string `json:"value"`
	Source string `json:"source"`
}

// producerConfig is what a workload's producer is set to. The KIP states
// a few properties of its runs (the perf test's --producer-props, the E2E
// script's batch size); every other property takes the Java client's
// default, since the KIP's tools are Java ones.
type producerConfig struct {
	acks       int16 // 1 or -1
	idempotent bool
	inFlight   int // max.in.flight.requests.per.connection
	linger     time.Duration
	batchBytes int32 // batch.size
	// retries < 0: the Java default (Integer.MAX_VALUE, bounded by the
	// delivery timeout).
	retries         int
	deliveryTimeout time.Duration
	requestTimeout  time.Duration
	bufferBytes     int // buffer.memory

	// sources of the properties that do not always come from the Java
	// defaults.
	acksSrc, lingerSrc, batchSrc, retriesSrc, deliverySrc, requestSrc string
}

// Java client defaults (Kafka 3.9 ProducerConfig).
const (
	javaBatchSize       = 16384
	javaLinger          = 0
	javaInFlight        = 5
	javaDeliveryTimeout = 120 * time.Second
	javaRequestTimeout  = 30 * time.Second
	javaBufferMemory    = 32 << 20
)

// producerConfigFor returns the producer of workload w.
func producerConfigFor(w Workload) producerConfig {
	pc := producerConfig{
		acks: w.Acks(), inFlight: javaInFlight, linger: javaLinger, batchBytes: javaBatchSize, retries: -1,
		deliveryTimeout: javaDeliveryTimeout, requestTimeout: javaRequestTimeout, bufferBytes: javaBufferMemory,
		acksSrc: SourceKIP, lingerSrc: SourceJava, batchSrc: SourceJava, retriesSrc: SourceJava,
		deliverySrc: SourceJava, requestSrc: SourceJava,
	}
	switch w {
	case E2E, E2EAll:
		// "100 records, 1.6 KB avg record size, max batch size 32kb,
		// acks=1"; 4a is the same with acks=all.
		pc.batchBytes, pc.batchSrc = e2eMaxBatch, SourceKIP
	case Produce, ProduceAll:
		// --producer-props acks=1 retries=2 linger.ms=20
		// delivery.timeout.ms=300000 request.timeout.ms=30000
		pc.retries, pc.retriesSrc = 2, SourceKIP
		pc.linger, pc.lingerSrc = perfLinger, SourceKIP
		pc.deliveryTimeout, pc.deliverySrc = 300*time.Second, SourceKIP
		pc.requestTimeout, pc.requestSrc = 30*time.Second, SourceKIP
	case Stream:
		pc.acksSrc = SourceSweep
		pc.linger, pc.lingerSrc = streamLinger, SourceSweep
	}
	// enable.idempotence defaults to true, but the Java client turns it
	// off when acks is not all and it was not set explicitly (KIP-679).
	pc.idempotent = pc.acks == -1
	return pc
}

// settings lists pc in the Java client's property names.
func (pc producerConfig) settings() []ProducerSetting {
	acks := "1"
	if pc.acks == -1 {
		acks = "all"
	}
	retries := strconv.Itoa(pc.retries)
	if pc.retries < 0 {
		retries = "2147483647"
	}
	idem := "true"
	if !pc.idempotent {
		idem = "false (the default true gives way to acks=1)"
	}
	return []ProducerSetting{
		{"acks", acks, pc.acksSrc},
		{"enable.idempotence", idem, SourceJava},
		{"max.in.flight.requests.per.connection", strconv.Itoa(pc.inFlight), SourceJava},
		{"linger.ms", strconv.FormatInt(pc.linger.Milliseconds(), 10), pc.lingerSrc},
		{"batch.size", strconv.Itoa(int(pc.batchBytes)), pc.batchSrc},
		{"retries", retries, pc.retriesSrc},
		{"delivery.timeout.ms", strconv.FormatInt(pc.deliveryTimeout.Milliseconds(), 10), pc.deliverySrc},
		{"request.timeout.ms", strconv.FormatInt(pc.requestTimeout.Milliseconds(), 10), pc.requestSrc},
		{"buffer.memory", strconv.Itoa(pc.bufferBytes), SourceJava},
		{"compression.type", "none", SourceJava},
	}
}

// opts returns franz-go options that make its producer behave as pc.
func (pc producerConfig) opts() []kgo.Opt {
	opts := []kgo.Opt{
		kgo.ProducerLinger(pc.linger),
		kgo.ProducerBatchMaxBytes(pc.batchBytes),
		kgo.RecordDeliveryTimeout(pc.deliveryTimeout),
		kgo.ProduceRequestTimeout(pc.requestTimeout),
		kgo.MaxBufferedBytes(pc.bufferBytes),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
	}
	if pc.retries >= 0 {
		opts = append(opts, kgo.RecordRetries(pc.retries))
	}
	if pc.acks == -1 {
		opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
	} else {
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()))
	}
	if pc.idempotent {
		// franz-go keeps 5 requests in flight per broker once the first
		// idempotent produce has answered; the option that sets it is
		// refused with idempotence on.
		if pc.inFlight != 5 {
			panic(fmt.Sprintf("latbench: franz-go's idempotent producer keeps 5 in flight, not %d", pc.inFlight))
		}
	} else {
		opts = append(opts, kgo.DisableIdempotentWrite(), kgo.MaxProduceRequestsInflightPerBroker(pc.inFlight))
	}
	return opts
}
