package metadata

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TopicRecord is one record read for inspection: its place and what it
// decoded to, or the decoding error.
type TopicRecord struct {
	Partition int32 // -1 when read from a file
	Offset    int64 // record offset, or index in the file
	Event     Event
	Err       error
}

// ReadTopic reads every metadata partition of cfg's topic from the earliest
// offset up to the end offsets listed at start, calling fn for each record
// in partition order. It does not create the topic.
func ReadTopic(ctx context.Context, cfg TopicConfig, logger *slog.Logger, fn func(TopicRecord) error) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(cfg.Bootstrap...), kgo.ClientID(cfg.ClientID)}, cfg.Security.Opts()...)...)
	if err != nil {
		return fmt.Errorf("metadata: dump client: %w", err)
	}
	defer cl.Close()
	n, err := TopicPartitions(ctx, cl, cfg.Topic)
	if err != nil {
		return err
	}
	parts := followedPartitions(nil, n)
	starts, ends, err := listOffsets(ctx, cl, cfg.Topic, parts)
	if err != nil {
		return err
	}
	for _, p := range parts {
		if starts[p] >= ends[p] {
			continue
		}
		if err := readPartition(ctx, cl, cfg.Topic, p, ends[p], logger, fn); err != nil {
			return err
		}
	}
	return nil
}

func readPartition(ctx context.Context, cl *kgo.Client, topic string, p int32, end int64, logger *slog.Logger, fn func(TopicRecord) error) error {
	cl.AddConsumePartitions(map[string]map[int32]kgo.Offset{topic: {p: kgo.NewOffset().AtStart()}})
	defer cl.RemoveConsumePartitions(map[string][]int32{topic: {p}})
	for {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return fmt.Errorf("metadata: read %s-%d: %w", topic, p, ctx.Err())
		}
		for _, fe := range fetches.Errors() {
			logger.Warn("metadata fetch error", "partition", fe.Partition, "err", fe.Err)
		}
		done := false
		var ferr error
		fetches.EachRecord(func(r *kgo.Record) {
			if done || ferr != nil || r.Partition != p {
				return
			}
			ev, err := DecodeRecord(r.Key, r.Value)
			ferr = fn(TopicRecord{Partition: r.Partition, Offset: r.Offset, Event: ev, Err: err})
			if r.Offset+1 >= end {
				done = true
			}
		})
		if ferr != nil {
			return ferr
		}
		if done {
			return nil
		}
	}
}

// WriteEventFile appends ev to w in the event-file format: a uvarint length
// then the encoded event. kwal metadata dump --file reads such files.
func WriteEventFile(w io.Writer, ev Event) error {
	b, err := Encode(nil, ev)
	if err != nil {
		return err
	}
	hdr := binary.AppendUvarint(nil, uint64(len(b)))
	if _, err := w.Write(append(hdr, b...)); err != nil {
		return fmt.Errorf("metadata: write event file: %w", err)
	}
	return nil
}

// maxFileEvent bounds one event in an event file (16 MiB).
const maxFileEvent = 16 << 20

// ReadEventFile calls fn for every event of an event file; an event that
// fails to decode is passed with its error and reading goes on; a broken
// length prefix ends reading with an error wrapping ErrMalformedEvent.
func ReadEventFile(r *bufio.Reader, fn func(TopicRecord) error) error {
	for i := int64(0); ; i++ {
		n, err := binary.ReadUvarint(r)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil || n > maxFileEvent {
			return malformed("event %d: bad length prefix (%d, %v)", i, n, err)
		}
		b := make([]byte, n)
		if _, err := io.ReadFull(r, b); err != nil {
			return malformed("event %d: truncated: %v", i, err)
		}
		ev, err := Decode(b)
		if err := fn(TopicRecord{Partition: -1, Offset: i, Event: ev, Err: err}); err != nil {
			return err
		}
	}
}

// EventJSON returns a JSON-friendly view of ev: ids in hex, states by name.
func EventJSON(ev Event) any {
	switch e := ev.(type) {
	case *ObjectMetadata:
		type entry struct {
			Topic       string `json:"topic"`
			Partition   int32  `json:"partition"`
			LeaderEpoch int32  `json:"leader_epoch"`
			BaseOffset  int64  `json:"base_offset"`
			LastOffset  int64  `json:"last_offset"`
			Position    int64  `json:"position"`
			Length      int64  `json:"length"`
			RawLength   int64  `json:"raw_length"`
			Codec       string `json:"codec"`
			CRC32C      uint32 `json:"crc32c"`
		}
		entries := make([]entry, len(e.Entries))
		for i, x := range e.Entries {
			entries[i] = entry{x.Topic, x.Partition, x.LeaderEpoch, x.BaseOffset, x.LastOffset,
				x.Position, x.Length, x.RawLength, x.Codec.String(), x.CRC32C}
		}
		return map[string]any{
			"id": e.ID.String(), "metadata_partition": e.MetadataPartition, "bucket": e.Bucket,
			"key": e.Key, "broker_id": e.BrokerID, "state": e.State.String(),
			"event_timestamp_ms": e.EventTimestampMs, "entries": entries,
		}
	case *StateUpdate:
		return map[string]any{
			"id": e.ID.String(), "metadata_partition": e.MetadataPartition, "state": e.State.String(),
			"event_timestamp_ms": e.EventTimestampMs, "broker_id": e.BrokerID,
		}
	case *PartitionDelete:
		return map[string]any{
			"topic": e.Topic, "partition": e.Partition, "state": e.State.String(),
			"event_timestamp_ms": e.EventTimestampMs, "broker_id": e.BrokerID,
		}
	case *DeadRange:
		return map[string]any{
			"topic": e.Topic, "partition": e.Partition, "leader_epoch": e.LeaderEpoch,
			"start_offset": e.StartOffset, "event_timestamp_ms": e.EventTimestampMs, "broker_id": e.BrokerID,
		}
	case *ReplicatedOffset:
		return map[string]any{
			"topic": e.Topic, "partition": e.Partition, "leader_epoch": e.LeaderEpoch,
			"offset": e.Offset, "event_timestamp_ms": e.EventTimestampMs, "broker_id": e.BrokerID,
		}
	case *Tombstone:
		return map[string]any{"id": e.ID.String(), "metadata_partition": e.MetadataPartition}
	}
	return nil
}
