package objstoretest

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kwal/kwal/objstore"
)

// Env is the S3 test environment scripts/test-env.sh exports.
type Env struct {
	Endpoint  string // KWAL_S3_ENDPOINT, e.g. http://127.0.0.1:9000
	AccessKey string // KWAL_S3_ACCESS_KEY
	SecretKey string // KWAL_S3_SECRET_KEY
	Bucket    string // KWAL_S3_BUCKET
}

// SkipMessage is what tests print when no S3 server is configured.
const SkipMessage = "KWAL_S3_ENDPOINT not set: S3 acceptance suite SKIPPED; run via scripts/test-env.sh"

// S3Env returns the S3 environment, or skips tb loudly when it is not set.
func S3Env(tb testing.TB) Env {
	tb.Helper()
	e := Env{
		Endpoint:  os.Getenv("KWAL_S3_ENDPOINT"),
		AccessKey: os.Getenv("KWAL_S3_ACCESS_KEY"),
		SecretKey: os.Getenv("KWAL_S3_SECRET_KEY"),
		Bucket:    os.Getenv("KWAL_S3_BUCKET"),
	}
	if e.Endpoint == "" {
		tb.Skip(SkipMessage)
	}
	if e.Bucket == "" {
		e.Bucket = "kwal-test"
	}
	return e
}

// RandomPrefix returns a fresh prefix ("kwaltest-<random>/") so runs against
// a shared bucket do not collide.
func RandomPrefix() string {
	return "kwaltest-" + strings.ToLower(rand.Text()[:16]) + "/"
}

// Run runs the acceptance suite. newStore is called once per sub-test and
// must return an empty store (a fresh prefix for shared buckets).
func Run(t *testing.T, newStore func(t *testing.T) objstore.Store) {
	t.Helper()
	for _, tc := range []struct {
		name string
		fn   func(*testing.T, objstore.Store)
	}{
		{"RoundTrip", testRoundTrip},
		{"Ranges", testRanges},
		{"EmptyObjectRanges", testEmptyObjectRanges},
		{"CreateOnly", testCreateOnly},
		{"Overwrite", testOverwrite},
		{"HeadAndNotFound", testHeadAndNotFound},
		{"Delete", testDelete},
		{"List", testList},
		{"ListAll", testListAll},
		{"InvalidKey", testInvalidKey},
		{"Cancelled", testCancelled},
		{"ConcurrentPuts", testConcurrentPuts},
		{"Bodies", testBodies},
		{"ConcurrentBodies", testConcurrentBodies},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newStore(t)) })
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i/251)
	}
	return b
}

func mustPut(t *testing.T, s objstore.Store, key string, body []byte) {
	t.Helper()
	if err := s.Put(ctxT(t), key, body, objstore.PutOptions{}); err != nil {
		t.Fatalf("Put(%q, %d bytes): %v", key, len(body), err)
	}
}

func testRoundTrip(t *testing.T, s objstore.Store) {
	ctx := ctxT(t)
	for _, n := range []int{0, 1, 3<<20 + 17} {
		key := fmt.Sprintf("rt/size-%d", n)
		body := pattern(n)
		mustPut(t, s, key, body)
		if n > 0 {
			body[0] ^= 0xff // the store must have copied the body
			body[0] ^= 0xff
		}
		got, err := s.GetRange(ctx, key, 0, -1)
		if err != nil {
			t.Fatalf("GetRange(%q, 0, -1): %v", key, err)
		}
		if !bytes.Equal(got, body) {
			t.Fatalf("GetRange(%q) returned %d bytes, want %d equal bytes", key, len(got), n)
		}
		info, err := s.Head(ctx, key)
		if err != nil {
			t.Fatalf("Head(%q): %v", key, err)
		}
		if info.Size != int64(n) || info.Key != key {
			t.Fatalf("Head(%q) = %+v, want size %d", key, info, n)
		}
		if info.LastModified.IsZero() {
			t.Fatalf("Head(%q).LastModified is zero", key)
		}
	}
}

func testRanges(t *testing.T, s objstore.Store) {
	ctx := ctxT(t)
	const n = 1000
	body := pattern(n)
	mustPut(t, s, "ranges/obj", body)
	for _, tc := range []struct {
		name        string
		off, length int64
		want        []byte
		err         error
	}{
		{"first byte", 0, 1, body[:1], nil},
		{"last byte", n - 1, 1, body[n-1:], nil},
		{"middle", 100, 200, body[100:300], nil},
		{"to end", 990, -1, body[990:], nil},
		{"whole", 0, n, body, nil},
		{"past end clipped", 900, 500, body[900:], nil},
		{"off at end", n, 1, nil, objstore.ErrInvalidRange},
		{"off after end", n + 10, 5, nil, objstore.ErrInvalidRange},
		{"off at end to end", n, -1, nil, objstore.ErrInvalidRange},
		{"suffix", -10, 0, body[n-10:], nil},
		{"suffix longer than object", -5000, 3, body, nil},
	} {
		got, err := s.GetRange(ctx, "ranges/obj", tc.off, tc.length)
		if tc.err != nil {
			if !errors.Is(err, tc.err) {
				t.Errorf("%s: GetRange(off=%d, len=%d) error = %v, want %v", tc.name, tc.off, tc.length, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: GetRange(off=%d, len=%d): %v", tc.name, tc.off, tc.length, err)
			continue
		}
		if !bytes.Equal(got, tc.want) {
			t.Errorf("%s: GetRange(off=%d, len=%d) = %d bytes, want %d bytes", tc.name, tc.off, tc.length, len(got), len(tc.want))
		}
	}
	got, err := s.GetRange(ctx, "ranges/obj", 5, 0)
	if err != nil || len(got) != 0 {
		t.Errorf("GetRange(off=5, len=0) = %d bytes, %v; want 0 bytes, nil", len(got), err)
	}
	got, _ = s.GetRange(ctx, "ranges/obj", 0, 4)
	if len(got) == 4 {
		got[0] ^= 0xff // the caller owns the returned slice
		again, err := s.GetRange(ctx, "ranges/obj", 0, 4)
		if err != nil || !bytes.Equal(again, body[:4]) {
			t.Errorf("mutating a returned slice changed the stored object: %v", err)
		}
	}
	if _, err := s.GetRange(ctx, "ranges/missing", 0, 1); !errors.Is(err, objstore.ErrNotFound) {
		t.Errorf("GetRange(missing) error = %v, want ErrNotFound", err)
	}
}

// testBodies: objstore.GetBody (GetRangeBody for a BodyGetter) keeps
// GetRange's range rules and errors, and a body lent before an overwrite
// still holds the bytes it was read from.
func testBodies(t *testing.T, s objstore.Store) {
	ctx := ctxT(t)
	const n = 1000
	body := pattern(n)
	mustPut(t, s, "bodies/obj", body)
	mustPut(t, s, "bodies/empty", nil)
	for _, r := range []struct {
		key         string
		off, length int64
	}{
		{"bodies/obj", 0, 1}, {"bodies/obj", n - 1, 1}, {"bodies/obj", 100, 200}, {"bodies/obj", 990, -1},
		{"bodies/obj", 0, n}, {"bodies/obj", 900, 500}, {"bodies/obj", n, 1}, {"bodies/obj", n + 10, -1},
		{"bodies/obj", -10, 0}, {"bodies/obj", -5000, 3}, {"bodies/obj", 5, 0}, {"bodies/empty", 0, -1},
		{"bodies/empty", -4, 0}, {"bodies/empty", 1, 1}, {"bodies/missing", 0, 1},
	} {
		want, werr := s.GetRange(ctx, r.key, r.off, r.length)
		got, err := objstore.GetBody(ctx, s, r.key, r.off, r.length)
		switch {
		case werr != nil:
			for _, sentinel := range []error{objstore.ErrInvalidRange, objstore.ErrNotFound} {
				if errors.Is(werr, sentinel) != errors.Is(err, sentinel) {
					t.Errorf("GetBody(%s, off=%d, len=%d) error = %v, GetRange's %v", r.key, r.off, r.length, err, werr)
				}
			}
		case err != nil:
			t.Errorf("GetBody(%s, off=%d, len=%d): %v", r.key, r.off, r.length, err)
		default:
			if !bytes.Equal(got.Bytes(), want) {
				t.Errorf("GetBody(%s, off=%d, len=%d) = %d bytes, GetRange %d", r.key, r.off, r.length, got.Len(), len(want))
			}
			got.Release()
		}
	}
	lent, err := objstore.GetBody(ctx, s, "bodies/obj", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	mustPut(t, s, "bodies/obj", pattern(2 * n)[n:])
	if !bytes.Equal(lent.Bytes(), body) {
		t.Errorf("a body lent before an overwrite changed with it")
	}
	lent.Release()
}

// testConcurrentBodies reads bodies of different objects concurrently,
// releasing each after checking it, so that pooled buffers are reused
// across goroutines: a buffer handed out twice, or reused before its
// release, shows as wrong bytes.
func testConcurrentBodies(t *testing.T, s objstore.Store) {
	ctx := ctxT(t)
	const objects, workers, rounds = 6, 4, 12
	bodies := make([][]byte, objects)
	for i := range bodies {
		bodies[i] = pattern(3000 + 7919*i)[i:]
		mustPut(t, s, fmt.Sprintf("cbodies/%d", i), bodies[i])
	}
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var held []*objstore.Body
			var heldWant [][]byte
			for r := range rounds {
				i := (w + r) % objects
				off := int64(r * 13 % 100)
				b, err := objstore.GetBody(ctx, s, fmt.Sprintf("cbodies/%d", i), off, -1)
				if err != nil {
					errs <- err
					return
				}
				held, heldWant = append(held, b), append(heldWant, bodies[i][off:])
				if len(held) == 3 || r == rounds-1 { // keep a few alive while others are read
					for k, h := range held {
						if !bytes.Equal(h.Bytes(), heldWant[k]) {
							errs <- fmt.Errorf("worker %d: a held body changed before its release", w)
							return
						}
						h.Release()
					}
					held, heldWant = held[:0], heldWant[:0]
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func testEmptyObjectRanges(t *testing.T, s objstore.Store) {
	ctx := ctxT(t)
	mustPut(t, s, "empty/obj", nil)
	for _, r := range [][2]int64{{0, -1}, {0, 10}, {-4, 0}} {
		got, err := s.GetRange(ctx, "empty/obj", r[0], r[1])
		if err != nil || len(got) != 0 {
			t.Errorf("empty object GetRange(off=%d, len=%d) = %d bytes, %v; want 0 bytes, nil", r[0], r[1], len(got), err)
		}
	}
	if _, err := s.GetRange(ctx, "empty/obj", 1, 1); !errors.Is(err, objstore.ErrInvalidRange) {
		t.Errorf("empty object GetRange(off=1) error = %v, want ErrInvalidRange", err)
	}
}

func testCreateOnly(t *testing.T, s objstore.Store) {
	ctx := ctxT(t)
	create := objstore.PutOptions{IfNoneMatch: true}
	if err := s.Put(ctx, "co/obj", []byte("first"), create); err != nil {
		t.Fatalf("first create-only Put: %v", err)
	}
	err := s.Put(ctx, "co/obj", []byte("second!"), create)
	if !errors.Is(err, objstore.ErrExists) {
		t.Fatalf("second create-only Put error = %v, want ErrExists", err)
	}
	got, err := s.GetRange(ctx, "co/obj", 0, -1)
	if err != nil || string(got) != "first" {
		t.Fatalf("after conflicting Put, object = %q, %v; want %q", got, err, "first")
	}
	if err := s.Delete(ctx, "co/obj"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if err := s.Put(ctx, "co/obj", []byte("third"), create); err != nil {
		t.Fatalf("create-only Put after Delete: %v", err)
	}
}

func testOverwrite(t *testing.T, s objstore.Store) {
	ctx := ctxT(t)
	mustPut(t, s, "ow/obj", []byte("one"))
	mustPut(t, s, "ow/obj", []byte("two-longer"))
	got, err := s.GetRange(ctx, "ow/obj", 0, -1)
	if err != nil || string(got) != "two-longer" {
		t.Fatalf("after overwrite, object = %q, %v", got, err)
	}
}

func testHeadAndNotFound(t *testing.T, s objstore.Store) {
	ctx := ctxT(t)
	if _, err := s.Head(ctx, "head/missing"); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("Head(missing) error = %v, want ErrNotFound", err)
	}
	mustPut(t, s, "head/dir/obj", []byte("x"))
	// "head/dir" is a directory on file-backed stores, not an object.
	if _, err := s.Head(ctx, "head/dir"); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("Head(directory-like prefix) error = %v, want ErrNotFound", err)
	}
	if _, err := s.GetRange(ctx, "head/dir", 0, -1); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("GetRange(directory-like prefix) error = %v, want ErrNotFound", err)
	}
}

func testDelete(t *testing.T, s objstore.Store) {
	ctx := ctxT(t)
	if err := s.Delete(ctx, "del/missing"); err != nil {
		t.Fatalf("Delete(missing) = %v, want nil", err)
	}
	mustPut(t, s, "del/a/b/obj", []byte("x"))
	if err := s.Delete(ctx, "del/a/b/obj"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, err := s.Head(ctx, "del/a/b/obj"); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("Head after Delete error = %v, want ErrNotFound", err)
	}
	if err := s.Delete(ctx, "del/a/b/obj"); err != nil {
		t.Fatalf("second Delete = %v, want nil", err)
	}
	p, err := s.List(ctx, objstore.ListOptions{Prefix: "del/"})
	if err != nil || len(p.Objects) != 0 {
		t.Fatalf("List after Delete = %+v, %v; want empty", p, err)
	}
}

// listKeys has keys whose lexical order differs from a per-directory walk:
// "l/a-c" sorts before "l/a/b" because '-' < '/'.
var listKeys = []string{
	"l/a-c", "l/a/b", "l/a/c/d", "l/a0", "l/b", "l/b.x/1", "l/c/1", "l/c/2", "l/c/3", "l/d",
	"other/x", "l0/y",
}

func putListKeys(t *testing.T, s objstore.Store) []string {
	for _, k := range listKeys {
		mustPut(t, s, k, []byte(k))
	}
	var want []string
	for _, k := range listKeys {
		if strings.HasPrefix(k, "l/") {
			want = append(want, k)
		}
	}
	sort.Strings(want)
	return want
}

func testList(t *testing.T, s objstore.Store) {
	ctx := ctxT(t)
	want := putListKeys(t, s)
	p, err := s.List(ctx, objstore.ListOptions{Prefix: "l/"})
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if got := keysOf(p); !slices.Equal(got, want) || p.Truncated {
		t.Fatalf("List(l/) = %q truncated=%v, want %q", got, p.Truncated, want)
	}
	for _, o := range p.Objects {
		if o.Size != int64(len(o.Key)) {
			t.Errorf("List: %q size %d, want %d", o.Key, o.Size, len(o.Key))
		}
	}
	// Paging with a small limit.
	var paged []string
	after := ""
	for pages := 0; ; pages++ {
		if pages > len(want) {
			t.Fatalf("paging did not end")
		}
		p, err := s.List(ctx, objstore.ListOptions{Prefix: "l/", StartAfter: after, Limit: 3})
		if err != nil {
			t.Fatalf("List page: %v", err)
		}
		if len(p.Objects) > 3 {
			t.Fatalf("List(Limit 3) returned %d keys", len(p.Objects))
		}
		paged = append(paged, keysOf(p)...)
		if !p.Truncated {
			break
		}
		after = p.Objects[len(p.Objects)-1].Key
	}
	if !slices.Equal(paged, want) {
		t.Fatalf("paged listing = %q, want %q", paged, want)
	}
	// StartAfter inside a directory-like prefix and not itself a key.
	p, err = s.List(ctx, objstore.ListOptions{Prefix: "l/", StartAfter: "l/a/bb"})
	if err != nil {
		t.Fatal(err)
	}
	if got, w := keysOf(p), want[slices.Index(want, "l/a/c/d"):]; !slices.Equal(got, w) {
		t.Fatalf("List(StartAfter l/a/bb) = %q, want %q", got, w)
	}
	// A prefix that is not a directory boundary.
	p, err = s.List(ctx, objstore.ListOptions{Prefix: "l/a"})
	if err != nil {
		t.Fatal(err)
	}
	if got, w := keysOf(p), []string{"l/a-c", "l/a/b", "l/a/c/d", "l/a0"}; !slices.Equal(got, w) {
		t.Fatalf("List(l/a) = %q, want %q", got, w)
	}
	// StartAfter before the prefix, and after everything.
	p, err = s.List(ctx, objstore.ListOptions{Prefix: "l/c/", StartAfter: "l/a"})
	if err != nil || !slices.Equal(keysOf(p), []string{"l/c/1", "l/c/2", "l/c/3"}) {
		t.Fatalf("List(l/c/, StartAfter l/a) = %q, %v", keysOf(p), err)
	}
	p, err = s.List(ctx, objstore.ListOptions{Prefix: "l/", StartAfter: "l/z"})
	if err != nil || len(p.Objects) != 0 || p.Truncated {
		t.Fatalf("List(StartAfter past end) = %+v, %v", p, err)
	}
	p, err = s.List(ctx, objstore.ListOptions{Prefix: "nothing/"})
	if err != nil || len(p.Objects) != 0 {
		t.Fatalf("List(no match) = %+v, %v", p, err)
	}
}

func testListAll(t *testing.T, s objstore.Store) {
	ctx := ctxT(t)
	want := putListKeys(t, s)
	var got []string
	err := objstore.ListAll(ctx, s, "l/", func(o objstore.ObjectInfo) error {
		got = append(got, o.Key)
		return nil
	})
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("ListAll = %q, %v; want %q", got, err, want)
	}
	stop := errors.New("stop")
	n := 0
	err = objstore.ListAll(ctx, s, "l/", func(objstore.ObjectInfo) error { n++; return stop })
	if !errors.Is(err, stop) || n != 1 {
		t.Fatalf("ListAll with failing callback = %v after %d calls", err, n)
	}
}

func testInvalidKey(t *testing.T, s objstore.Store) {
	ctx := ctxT(t)
	if err := s.Put(ctx, "", []byte("x"), objstore.PutOptions{}); !errors.Is(err, objstore.ErrInvalidKey) {
		t.Errorf("Put(\"\") error = %v, want ErrInvalidKey", err)
	}
	if _, err := s.GetRange(ctx, "", 0, -1); !errors.Is(err, objstore.ErrInvalidKey) {
		t.Errorf("GetRange(\"\") error = %v, want ErrInvalidKey", err)
	}
}

func testCancelled(t *testing.T, s objstore.Store) {
	mustPut(t, s, "cancel/obj", []byte("x"))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	if err := s.Put(ctx, "cancel/new", []byte("y"), objstore.PutOptions{}); err == nil {
		t.Errorf("Put with cancelled ctx succeeded")
	}
	if _, err := s.GetRange(ctx, "cancel/obj", 0, -1); err == nil {
		t.Errorf("GetRange with cancelled ctx succeeded")
	}
	if _, err := s.Head(ctx, "cancel/obj"); err == nil {
		t.Errorf("Head with cancelled ctx succeeded")
	}
	if _, err := s.List(ctx, objstore.ListOptions{Prefix: "cancel/"}); err == nil {
		t.Errorf("List with cancelled ctx succeeded")
	}
	if err := s.Delete(ctx, "cancel/obj"); err == nil {
		t.Errorf("Delete with cancelled ctx succeeded")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("cancelled calls took %v", d)
	}
}

func testConcurrentPuts(t *testing.T, s objstore.Store) {
	ctx := ctxT(t)
	const workers, each = 8, 8
	var wg sync.WaitGroup
	errs := make(chan error, workers*each)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				key := fmt.Sprintf("conc/w%d/k%02d", w, i)
				if err := s.Put(ctx, key, []byte(key), objstore.PutOptions{IfNoneMatch: true}); err != nil {
					errs <- err
				}
				if _, err := s.GetRange(ctx, key, 0, -1); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	n := 0
	if err := objstore.ListAll(ctx, s, "conc/", func(objstore.ObjectInfo) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	if n != workers*each {
		t.Fatalf("listed %d keys after concurrent puts, want %d", n, workers*each)
	}
}

func keysOf(p objstore.Page) []string {
	out := make([]string, len(p.Objects))
	for i, o := range p.Objects {
		out[i] = o.Key
	}
	return out
}
