package combiner

import (
	"context"
	"errors"
	"log/slog"

	"github.com/kwal/kwal/combiner/objformat"
	"github.com/kwal/kwal/metadata"
)

// ReadObjectFooter reads a stored object's footer from its tail (two suffix
// range GETs), as the auditor does, and returns its entries and size. A
// corrupt or truncated object gives an error wrapping
// objformat.ErrCorruptObject and is logged at error level with its key.
func ReadObjectFooter(ctx context.Context, r objformat.RangeReader, key string, log *slog.Logger) ([]metadata.SliceEntry, int64, error) {
	entries, size, err := objformat.ReadFooter(tagged(ctx), r, key)
	if errors.Is(err, objformat.ErrCorruptObject) && log != nil {
		log.Error("combiner: corrupt combined object", "key", key, "err", err)
	}
	return entries, size, err
}
