package broker

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kwal/kwal/kafkalog"
)

// A replica's life beside the controller's topic changes: configs applied
// to open partitions, logs removed from disk when their topic is deleted,
// and a partition directory tied to the topic incarnation that made it.
//
// Each partition directory holds partition.metadata (Kafka's file of the
// same name: "version: 0" and "topic_id: <id>"). A directory whose id is
// not the topic's belongs to a deleted incarnation (this broker missed the
// deletion, e.g. it was down): it is removed before the new incarnation's
// log opens, so a topic created again always starts empty at offset 0.
//
// Deleting a log renames its directory to <dir>.<random>-delete and then
// removes it; a crash in between leaves only a -delete directory, which the
// next start removes. A half-removed directory is therefore never opened
// as a log.

const (
	partitionMetadataFile = "partition.metadata"
	deletedDirSuffix      = "-delete"
)

// PartitionDeleter is implemented by a Replicator that removes what it
// keeps for a partition when its topic is deleted (the remote WAL
// publishes the partition's deletion and collects its objects). The broker
// calls DeletePartition instead of StopLeader and StopFollower, once per
// replica, from the controller notification; wasLeader says whether this
// broker led the partition when the topic was deleted.
type PartitionDeleter interface {
	DeletePartition(tp TopicPartition, wasLeader bool)
}

// replicaSettings are the topic configs a replica applies.
type replicaSettings struct {
	log           kafkalog.Tunables
	minISR        int
	logAppendTime bool // message.timestamp.type=LogAppendTime
	compacted     bool // cleanup.policy has compact
}

// partitionSettings reads the per-partition settings from a topic's
// configs, falling back to the broker's defaults. Values were checked by
// checkTopicConfigs.
func (b *Broker) partitionSettings(configs map[string]string) replicaSettings {
	t := kafkalog.Tunables{
		SegmentBytes: b.cfg.SegmentBytes, SegmentMs: kafkalog.DefaultSegmentMs,
		RetentionMs: b.cfg.RetentionMs, RetentionBytes: b.cfg.RetentionBytes, MaxBatchBytes: int(b.cfg.MessageMaxBytes),
	}
	if t.SegmentBytes == 0 {
		t.SegmentBytes = kafkalog.DefaultSegmentBytes
	}
	if t.RetentionMs == 0 {
		t.RetentionMs = kafkalog.DefaultRetentionMs
	}
	if t.RetentionBytes == 0 {
		t.RetentionBytes = -1 // log.retention.bytes 0: unlimited
	}
	minISR := b.cfg.MinInsyncReplicas
	num := func(key string, p *int64) {
		if v, ok := configs[key]; ok {
			*p, _ = strconv.ParseInt(v, 10, 64)
		}
	}
	num("segment.bytes", &t.SegmentBytes)
	num("segment.ms", &t.SegmentMs)
	// kafkalog reads 0 as "the default": Kafka's retention.ms=0 and
	// retention.bytes=0 ("keep nothing") become 1.
	if _, ok := configs["retention.ms"]; ok {
		num("retention.ms", &t.RetentionMs)
		t.RetentionMs = nonZero(t.RetentionMs)
	}
	if _, ok := configs["retention.bytes"]; ok {
		num("retention.bytes", &t.RetentionBytes)
		t.RetentionBytes = nonZero(t.RetentionBytes)
	}
	if v, ok := configs["max.message.bytes"]; ok {
		t.MaxBatchBytes, _ = strconv.Atoi(v)
	}
	if v, ok := configs["min.insync.replicas"]; ok {
		minISR, _ = strconv.Atoi(v)
	}
	_, compacted := compactConfigOf(configs)
	return replicaSettings{log: t, minISR: minISR, logAppendTime: configs["message.timestamp.type"] == "LogAppendTime", compacted: compacted}
}

func applyTunables(c *kafkalog.Config, t kafkalog.Tunables) {
	c.SegmentBytes, c.SegmentMs, c.RetentionMs, c.RetentionBytes, c.MaxBatchBytes = t.SegmentBytes, t.SegmentMs, t.RetentionMs, t.RetentionBytes, t.MaxBatchBytes
}

// retunePartition applies ts's configs to an open replica when the topic
// epoch moved (AlterConfigs), so segment, retention, message-size and
// min.insync.replicas changes reach running partitions.
func (b *Broker) retunePartition(p *partition, ts TopicState) {
	if p.topicID != ts.ID {
		return
	}
	p.appendMu.Lock()
	defer p.appendMu.Unlock()
	if ts.Epoch <= p.configEpoch {
		return
	}
	set := b.partitionSettings(ts.Configs)
	set.log.Compacted = set.compacted
	if err := p.log.Retune(set.log); err != nil {
		b.logger.Error("applying topic configs", "partition", p.tp, "err", err)
		return
	}
	p.minISR.Store(int64(set.minISR))
	p.logAppendTime, p.compacted, p.configEpoch = set.logAppendTime, set.compacted, ts.Epoch
	p.mu.Lock()
	if p.mu.leader != nil {
		p.mu.leader.SetMinISR(set.minISR)
	}
	p.mu.Unlock()
	t := set.log
	b.logger.Info("topic configs applied", "partition", p.tp, "topic_epoch", ts.Epoch,
		"segment_bytes", t.SegmentBytes, "segment_ms", t.SegmentMs, "retention_ms", t.RetentionMs, "retention_bytes", t.RetentionBytes,
		"max_message_bytes", t.MaxBatchBytes, "min_insync_replicas", set.minISR, "log_append_time", set.logAppendTime)
}

// deleteReplicas drops this broker's replicas of a deleted topic and
// removes their logs from disk. A replica of another incarnation (the
// same name created again since) is left alone.
func (b *Broker) deleteReplicas(ts TopicState) {
	for _, ps := range ts.Partitions {
		tp := TopicPartition{Topic: ts.Name, Partition: ps.Partition}
		b.mu.Lock()
		p := b.mu.partitions[tp]
		if p != nil && p.topicID != ts.ID {
			p = nil
		}
		if p != nil {
			delete(b.mu.partitions, tp)
		}
		b.mu.Unlock()
		if p == nil {
			continue
		}
		_, wasLeader := p.snapshot()
		b.fetchers.remove(tp)
		if b.cfg.Replicator != nil && p.mode == RemoteWAL {
			if d, ok := b.cfg.Replicator.(PartitionDeleter); ok {
				d.DeletePartition(tp, wasLeader)
			} else {
				b.cfg.Replicator.StopLeader(tp)
				b.cfg.Replicator.StopFollower(tp)
			}
		}
		b.wake(tp)
		// Appends, truncations and role changes hold appendMu: taking it
		// waits out the one in progress.
		p.appendMu.Lock()
		err := p.log.Close()
		p.appendMu.Unlock()
		if err != nil && !errors.Is(err, kafkalog.ErrClosed) {
			b.logger.Warn("closing the log of a deleted partition", "partition", tp, "err", err)
		}
		if err := removeDir(b.partitionDir(tp)); err != nil {
			b.logger.Error("removing the log of a deleted partition", "partition", tp, "err", err)
			continue
		}
		b.logger.Info("deleted partition", "partition", tp, "topic_id", ts.ID, "was_leader", wasLeader)
	}
}

// removeDir renames dir out of the way, then removes it.
func removeDir(dir string) error {
	var r [8]byte
	if _, err := rand.Read(r[:]); err != nil {
		return err
	}
	gone := dir + "." + hex.EncodeToString(r[:]) + deletedDirSuffix
	if err := os.Rename(dir, gone); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	return os.RemoveAll(gone)
}

// removeDeletedDirs removes what a crash left of deletions.
func (b *Broker) removeDeletedDirs() {
	entries, err := os.ReadDir(b.cfg.LogDir)
	if err != nil {
		return // a fresh log dir; kafkalog creates it
	}
	for _, e := range entries {
		if e.IsDir() && strings.HasSuffix(e.Name(), deletedDirSuffix) {
			if err := os.RemoveAll(filepath.Join(b.cfg.LogDir, e.Name())); err != nil {
				b.logger.Warn("removing a deleted partition directory", "dir", e.Name(), "err", err)
			} else {
				b.logger.Info("removed a deleted partition directory left by a crash", "dir", e.Name())
			}
		}
	}
}

// claimPartitionDir ties dir to topic incarnation id: a directory of
// another incarnation is removed first; a missing partition.metadata is
// written (a directory without one predates ids and is kept).
func (b *Broker) claimPartitionDir(dir string, id TopicID) error {
	if id.IsZero() {
		return nil
	}
	path := filepath.Join(dir, partitionMetadataFile)
	data, err := os.ReadFile(path)
	switch {
	case err == nil:
		have, perr := parsePartitionMetadata(data)
		if perr != nil {
			return fmt.Errorf("broker: %s: %w", path, perr)
		}
		if have == id {
			return nil
		}
		b.logger.Warn("partition directory belongs to a deleted topic incarnation; removing it", "dir", dir, "dir_topic_id", have, "topic_id", id)
		if err := removeDir(dir); err != nil {
			return err
		}
	case !errors.Is(err, fs.ErrNotExist):
		return err
	default:
		if _, serr := os.Stat(dir); serr == nil {
			b.logger.Info("partition directory without a topic id; adopting it", "dir", dir, "topic_id", id)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte("version: 0\ntopic_id: "+id.String()+"\n"), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func parsePartitionMetadata(data []byte) (TopicID, error) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == "topic_id" {
			return parseTopicID(strings.TrimSpace(v))
		}
	}
	return TopicID{}, errors.New("no topic_id")
}

// checkKeys is Kafka's produce rule for compacted topics: a record without
// a key is refused with INVALID_RECORD (the cleaner could never drop it).
func (p *partition) checkKeys(vb kafkalog.ValidBatch) (appendResult, bool) {
	keyless := false
	if err := kafkalog.EachRecord(vb.Bytes(), func(r kafkalog.Record) { keyless = keyless || r.Key == nil }); err != nil {
		return appendResult{err: logErrorCode(err), msg: err.Error()}, true
	}
	if keyless {
		return appendResult{err: kerr.InvalidRecord, msg: "Compacted topic cannot accept message without key in topic partition " + p.tp.String() + "."}, true
	}
	return appendResult{}, false
}

// DurableController is implemented by a controller whose Topics, at the
// time a broker starts, are the cluster's durable state (KafkaController:
// rebuilt from its topic before it returns). Only against such a
// controller does a starting broker remove stray replicas: with a
// MemController a restarted process knows no topics yet.
type DurableController interface {
	DurableState() bool
}

// removeStrayReplicas removes, at start, the partition directories (those
// with a partition.metadata) that no current topic assigns to this broker:
// replicas of topics deleted while it was down (Kafka's stray replicas).
func (b *Broker) removeStrayReplicas() {
	if d, ok := b.ctrl.(DurableController); !ok || !d.DurableState() {
		return
	}
	entries, err := os.ReadDir(b.cfg.LogDir)
	if err != nil {
		return
	}
	topics := map[string]TopicState{}
	for _, ts := range b.ctrl.Topics() {
		topics[ts.Name] = ts
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		dir := filepath.Join(b.cfg.LogDir, e.Name())
		data, err := os.ReadFile(filepath.Join(dir, partitionMetadataFile))
		if err != nil {
			continue // not a partition directory of ours
		}
		id, err := parsePartitionMetadata(data)
		if err != nil {
			continue
		}
		i := strings.LastIndexByte(e.Name(), '-')
		if i <= 0 {
			continue
		}
		p, err := strconv.Atoi(e.Name()[i+1:])
		if err != nil {
			continue
		}
		ts, ok := topics[e.Name()[:i]]
		if ok && ts.ID == id && p < len(ts.Partitions) && slices.Contains(ts.Partitions[p].Replicas, b.cfg.BrokerID) {
			continue
		}
		if b.partition(TopicPartition{Topic: e.Name()[:i], Partition: int32(p)}) != nil {
			continue
		}
		if err := removeDir(dir); err != nil {
			b.logger.Warn("removing a stray replica", "dir", e.Name(), "err", err)
			continue
		}
		b.logger.Warn("removed a stray replica: its topic was deleted (or re-created) while this broker was away", "dir", e.Name(), "topic_id", id)
	}
}
