package follower

import (
	"context"
	"fmt"

	"github.com/kwal/kwal/combiner/objformat"
	"github.com/kwal/kwal/internal/stagehist"
	"github.com/kwal/kwal/kafkalog"
	"github.com/kwal/kwal/metadata"
	"github.com/kwal/kwal/objstore"
)

// readResult is a finished read: per slice of the Read, either its raw log
// bytes (CRC32C and length checked, decompressed) or why not.
type readResult struct {
	read Read
	raws [][]byte
	// bodies[i], when not nil, is the GET body raws[i] points into, with a
	// reference held for raws[i]: whoever drops raws[i] releases it (see
	// buffers.go).
	bodies []*objstore.Body
	errs   []error
	// batchesOK[i]: raws[i]'s batches were validated with its CRC32C.
	batchesOK []bool
}

type getAnswer struct {
	body  *objstore.Body
	err   error
	hedge bool
}

// read performs one planned read with a hedge: a second GET of the same
// range goes out when the first has not answered after HedgeDelay, or at
// once when the first fails. Each answer is checked slice by slice; a slice
// is taken from the first answer that verifies it, and the read ends when
// every slice is verified (the other GET is cancelled) or both GETs have
// answered. It runs off the driver. ctx is the read's own: the driver
// cancels it with errReadBudget once the read's budget is spent
// (watchBudgets), which fails the GETs in flight and sends no hedge.
//
// Without a hedge (HedgeDelay < 0) there is nothing to time while a GET
// is out, so the GETs (the first, and the re-read after a bad answer) run
// on the read's own goroutine, one after the other: no hand-off to
// another worker and back per read.
func (f *Follower) read(ctx context.Context, r Read) readResult {
	res := readResult{read: r, raws: make([][]byte, len(r.Slices)), bodies: make([]*objstore.Body, len(r.Slices)),
		errs: make([]error, len(r.Slices)), batchesOK: make([]bool, len(r.Slices))}
	if len(r.Slices) > 0 {
		tp := r.Slices[0].Entry.TopicPartition
		ctx = objstore.WithTags(ctx, objstore.Tags{Component: "follower", Topic: tp.Topic, Partition: tp.Partition, Rack: f.cfg.Rack})
	}
	var sr objformat.SliceReader
	defer sr.Close()
	if f.cfg.HedgeDelay < 0 {
		for launched := 0; launched < 2 && (launched == 0 || ctx.Err() == nil); launched++ {
			f.c.gets.Add(1)
			if f.answered(ctx, &sr, f.get(ctx, r, launched > 0), r, &res) {
				return res
			}
		}
		return res
	}
	ctx, cancel := context.WithCancelCause(ctx) // the read's end cancels the other GET
	defer cancel(nil)
	answers := make(chan getAnswer, 2)
	launched, outstanding := 0, 0
	launch := func(hedge bool) {
		launched++
		outstanding++
		f.c.gets.Add(1)
		f.pool.run(func() { answers <- f.get(ctx, r, hedge) })
	}
	launch(false)
	t := f.cfg.Clock.NewTimer(f.cfg.HedgeDelay)
	defer t.Stop()
	hedgeC := t.C()
	for outstanding > 0 {
		select {
		case <-hedgeC:
			hedgeC = nil
			if launched < 2 && ctx.Err() == nil {
				f.c.hedges.Add(1)
				launch(true)
			}
		case a := <-answers:
			outstanding--
			if f.answered(ctx, &sr, a, r, &res) {
				return res
			}
			if launched < 2 && ctx.Err() == nil {
				launch(true) // re-read at once: the first answer was bad
				hedgeC = nil
			}
		}
	}
	return res
}

// get sends one GET of r's range. The body is lent (objstore.GetBody):
// verified slices point into it until they are appended, with no copy.
// An answer nobody receives (the read ended first) is left to the GC.
func (f *Follower) get(ctx context.Context, r Read, hedge bool) getAnswer {
	t0 := f.cfg.Clock.Now()
	b, err := objstore.GetBody(ctx, f.cfg.Store, r.Key, r.Off, r.Len)
	if err == nil && f.cfg.Observer != nil {
		f.cfg.Observer.Observe(stagehist.Get, f.cfg.Clock.Since(t0))
	}
	return getAnswer{b, err, hedge}
}

// answered takes one GET's answer into res and reports whether every
// slice of r is verified now.
func (f *Follower) answered(ctx context.Context, sr *objformat.SliceReader, a getAnswer, r Read, res *readResult) bool {
	a.err = budgetErr(ctx, a.err)
	f.getAnswered(a.err)
	if a.err != nil {
		f.c.readErrors.Add(1)
		f.cfg.Logger.Debug("follower: GET failed", "key", r.Key, "off", r.Off, "len", r.Len, "hedge", a.hedge, "err", a.err)
		for i := range res.errs {
			if res.raws[i] == nil {
				res.errs[i] = fmt.Errorf("follower: GET %s [%d, +%d): %w", r.Key, r.Off, r.Len, a.err)
			}
		}
		return false
	}
	f.c.bytesRead.Add(int64(a.body.Len()))
	all := f.verify(sr, a.body, r, res)
	a.body.Release() // the slices verified from it hold their own references
	if all && a.hedge {
		f.c.hedgeWins.Add(1)
	}
	return all
}

// verify checks every slice of r not yet verified against the body of
// [r.Off, r.Off+r.Len) and reports whether all are verified now. A slice
// verified in place (uncompressed) points into the body and takes a
// reference to it.
func (f *Follower) verify(sr *objformat.SliceReader, b *objstore.Body, r Read, res *readResult) bool {
	body := b.Bytes()
	all := true
	for i, s := range r.Slices {
		if res.raws[i] != nil {
			continue
		}
		lo, hi := s.Entry.Position-r.Off, s.Entry.Position-r.Off+s.Entry.Length
		var raw []byte
		var err error
		if lo < 0 || hi > int64(len(body)) {
			err = fmt.Errorf("%w: body of %d bytes at %d does not hold [%d, %d)", objformat.ErrCorruptObject, len(body), r.Off, s.Entry.Position, s.Entry.Position+s.Entry.Length)
		} else if s.Entry.Codec == metadata.CodecNone {
			raw, res.batchesOK[i], err = verifyPlain(body[lo:hi:hi], s.Entry)
			if err == nil {
				b.Retain()
				res.bodies[i] = b
			}
		} else {
			raw, err = sr.Read(body[lo:hi:hi], s.Entry)
		}
		if err != nil {
			ce := &CorruptSliceError{Key: s.Key, Entry: s.Entry, Err: err}
			f.c.corrupt.Add(1)
			f.cfg.Logger.Error("follower: corrupt slice", "partition", s.Entry.TopicPartition, "key", s.Key,
				"base", s.Entry.BaseOffset, "last", s.Entry.LastOffset, "err", err)
			res.errs[i] = ce
			all = false
			continue
		}
		res.raws[i], res.errs[i] = raw, nil
	}
	return all
}

// verifyPlain checks an uncompressed slice (stored bytes are log bytes):
// its CRC32C and, in the same pass over the bytes, every batch's CRC32C
// and header (kafkalog.ValidateBatchesCRC32C: what Kafka's follower checks
// of a replicated batch; the leader walked the records when it appended
// them), so that the append need not checksum them again (batchesOK). A
// batch that fails is a corrupt slice even when the slice's CRC32C
// matches (the bytes were bad before they were cut): a slice holds bytes
// of the leader's active segment, which compaction never touches, so
// every batch in it must pass whole.
func verifyPlain(stored []byte, e metadata.SliceEntry) (raw []byte, batchesOK bool, err error) {
	if int64(len(stored)) != e.Length || e.RawLength != e.Length {
		return nil, false, fmt.Errorf("%w: slice of %v at %d: %d bytes, entry says length %d, raw length %d",
			objformat.ErrCorruptObject, e.TopicPartition, e.Position, len(stored), e.Length, e.RawLength)
	}
	crc, err := kafkalog.ValidateBatchesCRC32C(stored)
	if err != nil {
		return nil, false, err
	}
	if crc != e.CRC32C {
		return nil, false, fmt.Errorf("%w: slice of %v at %d: CRC32C %#08x, entry says %#08x",
			objformat.ErrCorruptObject, e.TopicPartition, e.Position, crc, e.CRC32C)
	}
	return stored, true, nil
}
