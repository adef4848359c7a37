package follower

import "github.com/kwal/kwal/objstore"

// GET bodies are lent, not copied (objstore.GetBody): a verified
// uncompressed slice is a sub-slice of its read's body, and the body is
// handed back (to the store's buffer pool) once every slice verified from
// it has been appended or dropped. The references:
//
//   - the read holds one while it verifies an answer (read.go);
//   - each slice verified in place takes one (readResult.bodies[i]);
//   - readDone moves it into the slot (hold) or releases it;
//   - the slot releases it when its bytes are appended, or when it drops
//     them (drop): fenced, a duplicate, below the log end, truncated away.
//
// Only the driver touches slots, so a slot's reference needs no lock; the
// count itself is atomic because reads take theirs on their goroutines. A
// slot dropped without drop (a removed partition, Close) leaves its body to
// the garbage collector: a lost buffer, never a buffer handed out twice.

// hold makes raw, verified from body at offset at (body nil when raw is
// a buffer of its own), the slot's bytes, taking over the reference held
// for it.
func (s *slot) hold(raw []byte, body *objstore.Body, at int, batchesOK bool) {
	s.drop()
	s.raw, s.body, s.at, s.batchesOK = raw, body, at, batchesOK
}

// drop forgets the slot's bytes and releases their body.
func (s *slot) drop() {
	release(s.body)
	s.raw, s.body, s.at, s.batchesOK = nil, nil, 0, false
}

// release drops a reference to b, if any.
func release(b *objstore.Body) {
	if b != nil {
		b.Release()
	}
}

// bodyOf is r.bodies[i], or nil when r holds no bodies.
func (r *readResult) bodyOf(i int) *objstore.Body {
	if i < len(r.bodies) {
		return r.bodies[i]
	}
	return nil
}
