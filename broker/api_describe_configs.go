package broker

import (
	"sort"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeConfigs: v0-4.
//
// Where it differs from Kafka: topics report the configs in
// topicConfigCheck (set ones as DYNAMIC_TOPIC_CONFIG, the rest as
// DEFAULT_CONFIG); a broker resource (this broker's id or "") reports the
// server.properties keys this broker knows as STATIC_BROKER_CONFIG;
// synonyms are not listed; documentation is null.

func (b *Broker) handleDescribeConfigs(req *kmsg.DescribeConfigsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
	for _, rr := range req.Resources {
		sr := kmsg.NewDescribeConfigsResponseResource()
		sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
		var (
			values map[string]string
			set    map[string]bool
			source kmsg.ConfigSource
		)
		switch rr.ResourceType {
		case kmsg.ConfigResourceTypeTopic:
			ts, ok := b.ctrl.Topic(rr.ResourceName)
			if !ok {
				sr.ErrorCode = kerr.UnknownTopicOrPartition.Code
				break
			}
			values, set = b.topicConfigDefaults(), map[string]bool{}
			for k, v := range ts.Configs {
				values[k], set[k] = v, true
			}
			source = kmsg.ConfigSourceDynamicTopicConfig
		case kmsg.ConfigResourceTypeBroker:
			if rr.ResourceName != "" && rr.ResourceName != strconv.Itoa(int(b.cfg.BrokerID)) {
				sr.ErrorCode = kerr.InvalidRequest.Code
				break
			}
			values, set = b.brokerConfigValues(), map[string]bool{}
			for k := range values {
				set[k] = true
			}
			source = kmsg.ConfigSourceStaticBrokerConfig
		default:
			sr.ErrorCode = kerr.InvalidRequest.Code
		}
		names := rr.ConfigNames
		if names == nil {
			for k := range values {
				names = append(names, k)
			}
			sort.Strings(names)
		}
		for _, name := range names {
			v, ok := values[name]
			if !ok {
				continue
			}
			c := kmsg.NewDescribeConfigsResponseResourceConfig()
			c.Name = name
			val := v
			c.Value = &val
			c.Source = kmsg.ConfigSourceDefaultConfig
			c.IsDefault = !set[name]
			if set[name] {
				c.Source = source
			}
			c.ReadOnly = rr.ResourceType == kmsg.ConfigResourceTypeBroker
			c.ConfigType = kmsg.ConfigTypeString
			sr.Configs = append(sr.Configs, c)
		}
		resp.Resources = append(resp.Resources, sr)
	}
	return resp
}

func (b *Broker) brokerConfigValues() map[string]string {
	c := &b.cfg
	return map[string]string{
		"broker.id":                            strconv.Itoa(int(c.BrokerID)),
		"broker.rack":                          c.Rack,
		"log.dirs":                             c.LogDir,
		"num.partitions":                       strconv.Itoa(int(c.NumPartitions)),
		"default.replication.factor":           strconv.Itoa(int(c.DefaultReplicationFactor)),
		"min.insync.replicas":                  strconv.Itoa(c.MinInsyncReplicas),
		"replica.lag.time.max.ms":              strconv.FormatInt(c.ReplicaLagTimeMax.Milliseconds(), 10),
		"socket.request.max.bytes":             strconv.Itoa(int(c.SocketRequestMaxBytes)),
		"message.max.bytes":                    strconv.Itoa(int(c.MessageMaxBytes)),
		"auto.create.topics.enable":            strconv.FormatBool(!c.DisableAutoCreateTopics),
		"remote.log.wal.storage.system.enable": strconv.FormatBool(c.RemoteWAL.SystemEnable),
		"remote.wal.storage.url":               c.RemoteWAL.StorageURL,
	}
}
