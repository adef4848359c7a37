package rwnode

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/kwal/kwal/broker"
	"github.com/kwal/kwal/objstore"
)

// CheckStore proves store reachable by listing one key within timeout
// (remote.wal.storage.check.timeout.ms). The error wraps broker.ErrConfig
// and names remote.wal.storage.url, the URL (credentials hidden), the
// timeout and the cause.
func CheckStore(ctx context.Context, store objstore.Store, rawURL string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	_, err := store.List(ctx, objstore.ListOptions{Limit: 1})
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return fmt.Errorf("%w: remote.wal.storage.url=%q: no answer within remote.wal.storage.check.timeout.ms=%d: %v; check the endpoint and that the store is up",
			broker.ErrConfig, redactURL(rawURL), timeout.Milliseconds(), err)
	}
	return fmt.Errorf("%w: remote.wal.storage.url=%q: listing the store failed after %v: %v; check the endpoint, bucket and credentials",
		broker.ErrConfig, redactURL(rawURL), time.Since(start).Round(time.Millisecond), err)
}

// redactURL hides the credentials storeurl takes in the query
// (access_key, secret_key) and keeps the rest, the endpoint included.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		if i := strings.IndexByte(raw, '?'); i >= 0 {
			return raw[:i] + "?…"
		}
		return raw
	}
	q := u.Query()
	for k := range q {
		if strings.Contains(k, "secret") || strings.Contains(k, "access_key") || strings.Contains(k, "password") {
			q.Set(k, "REDACTED")
		}
	}
	u.RawQuery = q.Encode()
	if u.User != nil {
		u.User = url.User(u.User.Username())
	}
	s, _ := url.PathUnescape(u.String())
	return s
}
