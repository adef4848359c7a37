package broker

import (
	"fmt"
	"net"
	"strings"
)

// SplitBootstrap splits a host:port,... list, dropping empty entries.
func SplitBootstrap(list string) []string {
	var out []string
	for _, s := range strings.Split(list, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// NamesCluster says whether one of the addresses of bootstrap is a broker
// of this cluster: one of cluster.brokers, or this broker's own listener.
// Host names are compared as written (127.0.0.1 and localhost differ).
func NamesCluster(bootstrap []string, listener string, cluster []BrokerInfo) bool {
	own := map[string]bool{normalizeAddr(listener): true}
	for _, b := range cluster {
		own[normalizeAddr(b.Addr())] = true
	}
	for _, a := range bootstrap {
		if own[normalizeAddr(a)] {
			return true
		}
	}
	return false
}

func normalizeAddr(a string) string {
	host, port, err := net.SplitHostPort(strings.TrimSpace(a))
	if err != nil {
		return a
	}
	return net.JoinHostPort(strings.ToLower(host), port)
}

// ControllerBootstrap is where the controller's __kwal_cluster_state log
// lives: controller.bootstrap.servers, else
// remote.wal.metadata.bootstrap.servers (empty: none, the in-memory
// controller). It refuses a list naming this cluster's own brokers: the
// controller elects the leaders that cluster needs to answer at all. key
// is the server.properties key the list came from.
func ControllerBootstrap(cfg *Config, cluster []BrokerInfo) (key string, bootstrap []string, err error) {
	key, list := "controller.bootstrap.servers", cfg.RemoteWAL.ControllerBootstrapServers
	if strings.TrimSpace(list) == "" {
		key, list = "remote.wal.metadata.bootstrap.servers", cfg.RemoteWAL.MetadataBootstrapServers
	}
	bs := SplitBootstrap(list)
	if NamesCluster(bs, cfg.Listener, cluster) {
		if key == "controller.bootstrap.servers" {
			return key, nil, fmt.Errorf("controller.bootstrap.servers=%s names this cluster's own brokers: the controller's log must live on another Kafka (the cluster cannot elect its own leaders through itself)", list)
		}
		return key, nil, fmt.Errorf("remote.wal.metadata.bootstrap.servers=%s names this cluster's own brokers, which then host the metadata topic; "+
			"set controller.bootstrap.servers to another Kafka for the controller's log (the cluster cannot elect its own leaders through itself)", list)
	}
	return key, bs, nil
}
