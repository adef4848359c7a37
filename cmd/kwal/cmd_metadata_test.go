package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kwal/kwal/metadata"
)

func TestMetadataDumpFile(t *testing.T) {
	var buf bytes.Buffer
	obj := &metadata.ObjectMetadata{ID: metadata.ObjectID{1}, MetadataPartition: 3, Key: "wal/a", State: metadata.CopySegmentFinished,
		Entries: []metadata.SliceEntry{{TopicPartition: metadata.TopicPartition{Topic: "orders", Partition: 2}, BaseOffset: 5, LastOffset: 9}}}
	for _, ev := range []metadata.Event{obj, &metadata.PartitionDelete{TopicPartition: metadata.TopicPartition{Topic: "orders", Partition: 2}, State: metadata.DeletePartitionMarked}} {
		if err := metadata.WriteEventFile(&buf, ev); err != nil {
			t.Fatal(err)
		}
	}
	// A third, corrupt event is reported on its line, not fatal.
	buf.Write([]byte{3, 1, 1, 0})
	path := filepath.Join(t.TempDir(), "events.bin")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if code := run([]string{"metadata", "dump", "--file", path}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines:\n%s", len(lines), out.String())
	}
	var first struct {
		Type  string
		Event struct {
			State   string
			Key     string
			Entries []struct{ Topic string }
		}
	}
	if err := json.Unmarshal([]byte(lines[0]), &first); err != nil {
		t.Fatal(err)
	}
	if first.Type != "object" || first.Event.State != "COPY_SEGMENT_FINISHED" || first.Event.Key != "wal/a" || len(first.Event.Entries) != 1 {
		t.Fatalf("first line %s", lines[0])
	}
	if !strings.Contains(lines[1], "DELETE_PARTITION_MARKED") || !strings.Contains(lines[2], `"error"`) {
		t.Fatalf("lines:\n%s", out.String())
	}
	if code := run([]string{"metadata", "dump"}, &out, &errOut); code == 0 {
		t.Fatal("dump with no source succeeded")
	}
}
