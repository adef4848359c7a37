package follower

import (
	"context"
	"fmt"
	"sync"

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

// hedgedRead is one read in flight: its state, shared by the goroutine
// that runs it (and its first GET) and the hedge the driver may send
// meanwhile (sendHedge). Every answer is taken under mu.
type hedgedRead struct {
	f      *Follower
	r      Read
	ctx    context.Context
	cancel context.CancelCauseFunc // the read's end cancels the GET still out

	mu  sync.Mutex
	res readResult
	sr  objformat.SliceReader
	// sent counts the GETs sent: the first, then at most one more, a
	// hedge or a re-read. done: every slice is verified.
	sent int
	done bool
	// hedged, once a hedge is sent, is closed when its answer is taken.
	hedged chan struct{}
}

func (f *Follower) newHedgedRead(ctx context.Context, cancel context.CancelCauseFunc, r Read) *hedgedRead {
	f.c.gets.Add(1)
	return &hedgedRead{f: f, r: r, ctx: ctx, cancel: cancel, sent: 1, res: readResult{read: r,
		raws: make([][]byte, len(r.Slices)), bodies: make([]*objstore.Body, len(r.Slices)),
		errs: make([]error, len(r.Slices)), batchesOK: make([]bool, len(r.Slices))}}
}

// read performs one planned read, off the driver: its first GET on the
// calling goroutine, with no hand-off to another worker and back. A second
// GET of the same range goes out at once when the first answers with
// slices still unverified (an error, a corrupt body), or, sent by the
// driver (watchFlights, sendHedge), when the first has not answered
// after HedgeDelay: no timer nor goroutine per read while it waits. Each
// answer is checked slice by slice; a slice is taken from the first
// answer that verifies it, and the read ends when every slice is verified
// (the other GET is cancelled, and its answer released when it comes) or
// both GETs have answered. The read's context is its own: the driver
// cancels it with errReadBudget once the read's budget is spent
// (watchFlights), which fails the GETs in flight.
func (f *Follower) read(h *hedgedRead) readResult {
	first := f.get(h.ctx, h.r, false)
	h.mu.Lock()
	all := h.take(first)
	reread := !all && h.sent < 2 && h.ctx.Err() == nil
	if reread {
		h.sent++ // no hedge now: this is the second GET
		f.c.gets.Add(1)
	}
	hedged := h.hedged
	h.mu.Unlock()
	switch {
	case reread:
		h.second()
	case !all && hedged != nil:
		<-hedged
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.sr.Close()
	return h.res
}

// sendHedge sends h's second GET on a worker, unless the read has ended
// or sent one already. The driver calls it at the read's hedge time.
func (f *Follower) sendHedge(h *hedgedRead) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.done || h.sent >= 2 || h.ctx.Err() != nil {
		return
	}
	h.sent++
	f.c.gets.Add(1)
	f.c.hedges.Add(1)
	hedged := make(chan struct{})
	h.hedged = hedged
	f.pool.run(func() {
		h.second()
		close(hedged)
	})
}

// second sends h's second GET (a hedge or a re-read) and takes its answer.
func (h *hedgedRead) second() {
	a := h.f.get(h.ctx, h.r, true)
	h.mu.Lock()
	h.take(a)
	h.mu.Unlock()
}

// take takes one GET's answer into h's result and reports whether every
// slice is verified now; then the GET still out is cancelled. An answer
// after that is released untaken. Caller holds h.mu.
func (h *hedgedRead) take(a getAnswer) bool {
	if h.done {
		if a.err == nil {
			a.body.Release()
		}
		return true
	}
	if h.f.answered(h.ctx, &h.sr, a, h.r, &h.res) {
		h.done = true
		h.cancel(nil)
	}
	return h.done
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
