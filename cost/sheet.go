package cost

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
)

//go:embed sheets/*.json
var defaultSheets embed.FS // read-only

// Kind says what a price sheet prices; it selects the one section a sheet
// file must carry.
type Kind string

// The kinds of price sheet.
const (
	KindObjectStore  Kind = "object-store"  // section "object_store"
	KindNetwork      Kind = "network"       // section "network"
	KindBlockStorage Kind = "block-storage" // section "block_storage"
	KindInstance     Kind = "instance"      // section "instance"
)

// Figure is one price in US dollars with where it comes from.
type Figure struct {
	USD    float64 `json:"usd"`
	Source string  `json:"source"` // URL and what on the page
	Date   string  `json:"date"`   // when the figure took effect or was listed
}

// Quantity is a non-price figure (a threshold, a size) with its source.
type Quantity struct {
	Value  float64 `json:"value"`
	Source string  `json:"source"`
	Date   string  `json:"date"`
}

// ObjectStorePrices are the prices of one object-store class.
type ObjectStorePrices struct {
	PutPer1000     Figure `json:"put_per_1000"`
	GetPer1000     Figure `json:"get_per_1000"`
	HeadPer1000    Figure `json:"head_per_1000"`
	ListPer1000    Figure `json:"list_per_1000"`
	DeletePer1000  Figure `json:"delete_per_1000"`
	UploadPerGB    Figure `json:"upload_per_gb"`
	RetrievalPerGB Figure `json:"retrieval_per_gb"`
	// PerGBThresholdBytes: the upload and retrieval fees apply only to the
	// part of each request above this many bytes; 0 means every byte.
	PerGBThresholdBytes Quantity `json:"per_gb_threshold_bytes"`
	StoragePerGBMonth   Figure   `json:"storage_per_gb_month"`
	// CrossAZTransferPerGB is charged on bytes read by GETs, as if every
	// read crossed AZs; 0 for S3 within a region.
	CrossAZTransferPerGB Figure `json:"cross_az_transfer_per_gb"`
}

// NetworkPrices price traffic between availability zones.
type NetworkPrices struct {
	CrossAZPerGBEachDirection Figure `json:"cross_az_per_gb_each_direction"`
}

// BlockStoragePrices price a block-storage volume class.
type BlockStoragePrices struct {
	StoragePerGBMonth Figure `json:"storage_per_gb_month"`
}

// InstancePrices price one instance type.
type InstancePrices struct {
	Type           string  `json:"type"`
	LocalStorageGB float64 `json:"local_storage_gb"` // instance store included in the price
	PerHour        Figure  `json:"per_hour"`
}

// Sheet is one price sheet. Exactly the section named by Kind is set.
type Sheet struct {
	Name   string `json:"name"`
	Kind   Kind   `json:"kind"`
	Title  string `json:"title"`
	Region string `json:"region"`
	Note   string `json:"note,omitempty"`
	// File is where the sheet was read from ("embedded:sheets/x.json" for
	// the defaults); it is not part of the file format.
	File string `json:"-"`

	ObjectStore  *ObjectStorePrices  `json:"object_store,omitempty"`
	Network      *NetworkPrices      `json:"network,omitempty"`
	BlockStorage *BlockStoragePrices `json:"block_storage,omitempty"`
	Instance     *InstancePrices     `json:"instance,omitempty"`
}

// namedFigure is a figure with its JSON path, for validation and printing.
type namedFigure struct {
	path string
	usd  *float64
	src  *string
	date *string
}

func (s *Sheet) figures() []namedFigure {
	var out []namedFigure
	add := func(path string, f *Figure) {
		out = append(out, namedFigure{path, &f.USD, &f.Source, &f.Date})
	}
	addQ := func(path string, q *Quantity) {
		out = append(out, namedFigure{path, &q.Value, &q.Source, &q.Date})
	}
	if o := s.ObjectStore; o != nil {
		add("object_store.put_per_1000", &o.PutPer1000)
		add("object_store.get_per_1000", &o.GetPer1000)
		add("object_store.head_per_1000", &o.HeadPer1000)
		add("object_store.list_per_1000", &o.ListPer1000)
		add("object_store.delete_per_1000", &o.DeletePer1000)
		add("object_store.upload_per_gb", &o.UploadPerGB)
		add("object_store.retrieval_per_gb", &o.RetrievalPerGB)
		addQ("object_store.per_gb_threshold_bytes", &o.PerGBThresholdBytes)
		add("object_store.storage_per_gb_month", &o.StoragePerGBMonth)
		add("object_store.cross_az_transfer_per_gb", &o.CrossAZTransferPerGB)
	}
	if n := s.Network; n != nil {
		add("network.cross_az_per_gb_each_direction", &n.CrossAZPerGBEachDirection)
	}
	if b := s.BlockStorage; b != nil {
		add("block_storage.storage_per_gb_month", &b.StoragePerGBMonth)
	}
	if i := s.Instance; i != nil {
		add("instance.per_hour", &i.PerHour)
	}
	return out
}

// ErrSheet is wrapped by every *SheetError.
var ErrSheet = errors.New("bad price sheet")

// ErrNoSheet is returned by Book.Sheet for a name that is not loaded.
var ErrNoSheet = errors.New("no such price sheet")

// SheetError says which file and which field of a price sheet is wrong.
type SheetError struct {
	File  string // path of the sheet file
	Field string // JSON path of the field, "" for the whole file
	Msg   string
}

func (e *SheetError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("price sheet %s: %s", e.File, e.Msg)
	}
	return fmt.Sprintf("price sheet %s: field %s: %s", e.File, e.Field, e.Msg)
}

// Unwrap makes errors.Is(err, ErrSheet) true.
func (e *SheetError) Unwrap() error { return ErrSheet }

// ParseSheet decodes and validates one sheet file. Unknown fields, a
// missing or second section, a negative or non-finite figure, or a figure
// without a source or date are errors; every error is a *SheetError naming
// file and field.
func ParseSheet(file string, data []byte) (Sheet, error) {
	var s Sheet
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return Sheet{}, jsonSheetError(file, data, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return Sheet{}, &SheetError{File: file, Msg: "trailing data after the JSON object"}
	}
	s.File = file
	if err := s.Validate(); err != nil {
		return Sheet{}, err
	}
	return s, nil
}

// Validate checks a sheet as ParseSheet does.
func (s *Sheet) Validate() error {
	bad := func(field, format string, args ...any) error {
		return &SheetError{File: s.File, Field: field, Msg: fmt.Sprintf(format, args...)}
	}
	if strings.TrimSpace(s.Name) == "" {
		return bad("name", "missing")
	}
	sections := map[Kind]bool{
		KindObjectStore:  s.ObjectStore != nil,
		KindNetwork:      s.Network != nil,
		KindBlockStorage: s.BlockStorage != nil,
		KindInstance:     s.Instance != nil,
	}
	has, known := sections[s.Kind]
	if !known {
		return bad("kind", "%q is not one of object-store, network, block-storage, instance", s.Kind)
	}
	section := strings.ReplaceAll(string(s.Kind), "-", "_")
	if !has {
		return bad(section, "missing: a %q sheet needs this section", s.Kind)
	}
	for k, present := range sections {
		if present && k != s.Kind {
			return bad(strings.ReplaceAll(string(k), "-", "_"), "not allowed in a %q sheet", s.Kind)
		}
	}
	if s.Instance != nil && strings.TrimSpace(s.Instance.Type) == "" {
		return bad("instance.type", "missing")
	}
	if s.Instance != nil && (s.Instance.LocalStorageGB < 0 || math.IsNaN(s.Instance.LocalStorageGB)) {
		return bad("instance.local_storage_gb", "negative or not a number")
	}
	for _, f := range s.figures() {
		switch {
		case math.IsNaN(*f.usd) || math.IsInf(*f.usd, 0):
			return bad(f.path, "not a finite number")
		case *f.usd < 0:
			return bad(f.path, "negative (%g)", *f.usd)
		case strings.TrimSpace(*f.src) == "":
			return bad(f.path+".source", "missing: every figure needs its source")
		case strings.TrimSpace(*f.date) == "":
			return bad(f.path+".date", "missing: every figure needs its date")
		}
	}
	return nil
}

func jsonSheetError(file string, data []byte, err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		line := 1 + bytes.Count(data[:min(int(syn.Offset), len(data))], []byte("\n"))
		return &SheetError{File: file, Msg: fmt.Sprintf("malformed JSON at line %d: %v", line, syn)}
	case errors.As(err, &typ):
		return &SheetError{File: file, Field: typ.Field, Msg: fmt.Sprintf("want a %s, got JSON %s", typ.Type, typ.Value)}
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		var doc any
		if json.Unmarshal(data, &doc) == nil {
			if path := unknownPath(doc, reflect.TypeOf(Sheet{}), ""); path != "" {
				name = path
			}
		}
		return &SheetError{File: file, Field: name, Msg: "unknown field"}
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return &SheetError{File: file, Msg: "empty or truncated JSON"}
	}
	return &SheetError{File: file, Msg: err.Error()}
}

// Book is a set of price sheets by name. Build it with DefaultBook and
// LoadDir; do not change it once it is shared.
type Book struct {
	sheets map[string]Sheet
}

// DefaultBook returns the embedded sheets (sheets/*.json).
func DefaultBook() (*Book, error) {
	b := &Book{sheets: map[string]Sheet{}}
	if err := b.loadFS(defaultSheets, "sheets", "embedded:"); err != nil {
		return nil, err
	}
	return b, nil
}

// LoadDir adds every *.json file of dir. A sheet whose name is already in
// the book is an error naming both files: to change a default, give the
// new sheet a new name.
func (b *Book) LoadDir(dir string) error {
	return b.loadFS(os.DirFS(dir), ".", dir+string(filepath.Separator))
}

func (b *Book) loadFS(fsys fs.FS, dir, prefix string) error {
	names, err := fs.Glob(fsys, pathJoin(dir, "*.json"))
	if err != nil {
		return err
	}
	if len(names) == 0 {
		return fmt.Errorf("price sheets: no *.json files in %s", strings.TrimSuffix(prefix, string(filepath.Separator))+"")
	}
	sort.Strings(names)
	for _, n := range names {
		data, err := fs.ReadFile(fsys, n)
		if err != nil {
			return fmt.Errorf("price sheets: %w", err)
		}
		s, err := ParseSheet(prefix+strings.TrimPrefix(n, "./"), data)
		if err != nil {
			return err
		}
		if err := b.Add(s); err != nil {
			return err
		}
	}
	return nil
}

func pathJoin(dir, name string) string {
	if dir == "." {
		return name
	}
	return dir + "/" + name
}

// Add validates s and adds it.
func (b *Book) Add(s Sheet) error {
	if err := s.Validate(); err != nil {
		return err
	}
	if b.sheets == nil {
		b.sheets = map[string]Sheet{}
	}
	if old, ok := b.sheets[s.Name]; ok {
		return &SheetError{File: s.File, Field: "name", Msg: fmt.Sprintf("%q is already defined by %s", s.Name, old.File)}
	}
	b.sheets[s.Name] = s
	return nil
}

// Sheet returns the sheet called name, or an error wrapping ErrNoSheet.
func (b *Book) Sheet(name string) (Sheet, error) {
	s, ok := b.sheets[name]
	if !ok {
		return Sheet{}, fmt.Errorf("%w: %q (have %s)", ErrNoSheet, name, strings.Join(b.names(""), ", "))
	}
	return s, nil
}

// Sheets returns the sheets of one kind ("" for all), sorted by name.
func (b *Book) Sheets(kind Kind) []Sheet {
	var out []Sheet
	for _, n := range b.names(kind) {
		out = append(out, b.sheets[n])
	}
	return out
}

func (b *Book) names(kind Kind) []string {
	var out []string
	for n, s := range b.sheets {
		if kind == "" || s.Kind == kind {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// Figures lists every figure of the sheet as (field path, value, source,
// date), in file order, for printing the sources of a table.
func (s Sheet) Figures() []SourcedFigure {
	var out []SourcedFigure
	for _, f := range s.figures() {
		out = append(out, SourcedFigure{Sheet: s.Name, Field: f.path, Value: *f.usd, Source: *f.src, Date: *f.date})
	}
	return out
}

// SourcedFigure is one figure of a sheet, flattened.
type SourcedFigure struct {
	Sheet  string  `json:"sheet"`
	Field  string  `json:"field"`
	Value  float64 `json:"value"`
	Source string  `json:"source"`
	Date   string  `json:"date"`
}

// unknownPath finds the JSON path of the first key of doc that t has no
// field for, since encoding/json names only the key.
func unknownPath(doc any, t reflect.Type, prefix string) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	obj, ok := doc.(map[string]any)
	if !ok || t.Kind() != reflect.Struct {
		return ""
	}
	fields := map[string]reflect.Type{}
	for i := 0; i < t.NumField(); i++ {
		tag := strings.Split(t.Field(i).Tag.Get("json"), ",")[0]
		if tag != "" && tag != "-" {
			fields[tag] = t.Field(i).Type
		}
	}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		ft, ok := fields[k]
		if !ok {
			return prefix + k
		}
		if p := unknownPath(obj[k], ft, prefix+k+"."); p != "" {
			return p
		}
	}
	return ""
}
