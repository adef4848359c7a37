package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"time"

	"github.com/kwal/kwal/metadata"
)

func init() {
	register(command{
		words: []string{"metadata", "dump"},
		short: "print the remote-WAL metadata events as JSON lines",
		run:   runMetadataDump,
	})
}

func runMetadataDump(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("metadata dump", flag.ContinueOnError)
	fs.SetOutput(stderr)
	bootstrap := fs.String("bootstrap", "", "Kafka bootstrap servers, comma separated (remote.wal.metadata.bootstrap.servers)")
	topic := fs.String("topic", metadata.DefaultTopic, "metadata topic")
	file := fs.String("file", "", "read encoded events from this file instead (each a uvarint length then the bytes), - for stdin")
	timeout := fs.Duration("timeout", 30*time.Second, "give up reading the topic after this long")
	mc := addMetadataClientFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	out := bufio.NewWriter(stdout)
	defer out.Flush()
	enc := json.NewEncoder(out)
	switch {
	case *file != "":
		return dumpFile(*file, enc)
	case *bootstrap != "" || *mc.config != "":
		ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt)
		defer cancel()
		ctx, cancel2 := context.WithTimeout(ctx, *timeout)
		defer cancel2()
		cfg, err := mc.topicConfig(*bootstrap, *topic)
		if err != nil {
			return err
		}
		logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
		return metadata.ReadTopic(ctx, cfg, logger, func(r metadata.TopicRecord) error {
			return enc.Encode(jsonRecord(r))
		})
	}
	return errors.New("give --bootstrap host:port, --config server.properties or --file F")
}

func dumpFile(path string, enc *json.Encoder) error {
	var in io.Reader = os.Stdin
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		in = f
	}
	return metadata.ReadEventFile(bufio.NewReader(in), func(r metadata.TopicRecord) error {
		return enc.Encode(jsonRecord(r))
	})
}

// dumpLine is one JSON line: where the record was, what it decoded to or
// why it did not.
type dumpLine struct {
	Partition *int32 `json:"partition,omitempty"`
	Offset    int64  `json:"offset"`
	Type      string `json:"type,omitempty"`
	Error     string `json:"error,omitempty"`
	Event     any    `json:"event,omitempty"`
}

func jsonRecord(r metadata.TopicRecord) dumpLine {
	l := dumpLine{Offset: r.Offset}
	if r.Partition >= 0 {
		p := r.Partition
		l.Partition = &p
	}
	if r.Err != nil {
		l.Error = r.Err.Error()
		return l
	}
	l.Type = r.Event.Type().String()
	l.Event = metadata.EventJSON(r.Event)
	return l
}
