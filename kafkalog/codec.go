package kafkalog

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// decompressRecords returns the records section of a compressed batch
// decompressed whole, refusing more than limit bytes. The log cleaner
// uses it on batches that were validated when they were appended.
func decompressRecords(codec int8, data []byte, limit int64) ([]byte, error) {
	var r io.Reader
	switch codec {
	case CodecGzip:
		gz, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			return nil, err
		}
		r = gz
	case CodecSnappy:
		return decodeSnappy(nil, data, limit)
	case CodecLZ4:
		r = lz4.NewReader(bytes.NewReader(data))
	case CodecZstd:
		zs, err := zstd.NewReader(bytes.NewReader(data), zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(maxZstdWindow))
		if err != nil {
			return nil, err
		}
		defer zs.Close()
		r = zs
	default:
		return nil, fmt.Errorf("unknown compression codec %d", codec)
	}
	out, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(out)) > limit {
		return nil, fmt.Errorf("%s records decompress to more than %d bytes", codecName(codec), limit)
	}
	return out, nil
}

// compressRecords compresses a records section with codec, in the framing
// Kafka's clients read: gzip, xerial-framed snappy (as the Java client
// writes it), the LZ4 frame format, a zstd frame.
func compressRecords(codec int8, raw []byte) ([]byte, error) {
	var buf bytes.Buffer
	switch codec {
	case CodecGzip:
		w := gzip.NewWriter(&buf)
		if _, err := w.Write(raw); err != nil {
			return nil, err
		}
		if err := w.Close(); err != nil {
			return nil, err
		}
	case CodecSnappy:
		buf.Write(xerialMagic)
		var ver [8]byte
		binary.BigEndian.PutUint32(ver[0:], 1) // version
		binary.BigEndian.PutUint32(ver[4:], 1) // minimum compatible version
		buf.Write(ver[:])
		const chunk = 32 << 10 // xerial's default block size
		for p := 0; p < len(raw); p += chunk {
			block := s2.EncodeSnappy(nil, raw[p:min(p+chunk, len(raw))])
			var n [4]byte
			binary.BigEndian.PutUint32(n[:], uint32(len(block)))
			buf.Write(n[:])
			buf.Write(block)
		}
	case CodecLZ4:
		w := lz4.NewWriter(&buf)
		if _, err := w.Write(raw); err != nil {
			return nil, err
		}
		if err := w.Close(); err != nil {
			return nil, err
		}
	case CodecZstd:
		w, err := zstd.NewWriter(&buf, zstd.WithEncoderConcurrency(1))
		if err != nil {
			return nil, err
		}
		if _, err := w.Write(raw); err != nil {
			return nil, err
		}
		if err := w.Close(); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("unknown compression codec %d", codec)
	}
	return buf.Bytes(), nil
}
