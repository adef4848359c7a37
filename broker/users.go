package broker

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// UserFile is the users a SASL listener accepts, read from a file
// (kwal.sasl.users.file) of lines
//
//	# comment
//	alice SCRAM-SHA-256 salt=…,stored_key=…,server_key=…,iterations=4096
//	alice SCRAM-SHA-512 salt=…,stored_key=…,server_key=…,iterations=4096
//
// one salted credential per user and mechanism, in Kafka's form
// (ScramCredential.String). Passwords are never stored: SASL/PLAIN is
// checked against the user's SCRAM credential. Make lines with
// kwal users add. The file is read once, at start.
type UserFile struct {
	creds map[userMech]ScramCredential
}

type userMech struct{ user, mech string }

var _ CredentialStore = (*UserFile)(nil)

// ScramCredential implements CredentialStore.
func (f *UserFile) ScramCredential(mech, user string) (ScramCredential, bool) {
	c, ok := f.creds[userMech{user, mech}]
	return c, ok
}

// Users returns the users, sorted, each with its mechanisms.
func (f *UserFile) Users() map[string][]string {
	out := map[string][]string{}
	for k := range f.creds {
		out[k.user] = append(out[k.user], k.mech)
	}
	for _, m := range out {
		sort.Strings(m)
	}
	return out
}

// ParseUserFile reads the users file format.
func ParseUserFile(r io.Reader) (*UserFile, error) {
	f := &UserFile{creds: map[userMech]ScramCredential{}}
	err := scanFields(r, 3, "users file", "USER MECHANISM CREDENTIAL", func(line int, fields []string) error {
		user, mech := fields[0], fields[1]
		if _, _, ok := scramHash(mech); !ok {
			return fmt.Errorf("users file line %d: mechanism %q (want SCRAM-SHA-256 or SCRAM-SHA-512)", line, mech)
		}
		c, err := ParseScramCredential(fields[2])
		if err != nil {
			return fmt.Errorf("users file line %d: %w", line, err)
		}
		k := userMech{user, mech}
		if _, dup := f.creds[k]; dup {
			return fmt.Errorf("users file line %d: %s %s given twice", line, user, mech)
		}
		f.creds[k] = c
		return nil
	})
	if err != nil {
		return nil, err
	}
	return f, nil
}

// LoadUserFile reads a users file.
func LoadUserFile(path string) (*UserFile, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	f, err := ParseUserFile(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return f, nil
}

// scanFields calls fn with the whitespace-separated fields of each line
// of r that is not blank or a '#' comment; a line without n fields is an
// error naming what (the file) and want (its fields).
func scanFields(r io.Reader, n int, what, want string, fn func(line int, fields []string) error) error {
	sc := bufio.NewScanner(r)
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" || text[0] == '#' {
			continue
		}
		fields := strings.Fields(text)
		if len(fields) != n {
			return fmt.Errorf("%s line %d: want %s", what, line, want)
		}
		if err := fn(line, fields); err != nil {
			return err
		}
	}
	return sc.Err()
}

// checkUserName: a user name is one field of the users file.
func checkUserName(user string) error {
	if user == "" || strings.ContainsAny(user, " \t\r\n#") || user != strings.TrimSpace(user) {
		return fmt.Errorf("broker: user name %q: must be non-empty, without whitespace or '#'", user)
	}
	return nil
}

// AddUser salts password for each of mechs and writes the credentials
// into the users file at path (created with mode 0600 if missing),
// replacing the user's old credentials for those mechanisms. The file is
// rewritten through a temporary file and a rename.
func AddUser(path, user, password string, mechs []string, iterations int) error {
	if err := checkUserName(user); err != nil {
		return err
	}
	if password == "" {
		return errors.New("broker: empty password")
	}
	var old []byte
	if b, err := os.ReadFile(path); err == nil {
		old = b
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if _, err := ParseUserFile(bytes.NewReader(old)); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	replace := map[string]bool{}
	for _, m := range mechs {
		replace[m] = true
	}
	var out bytes.Buffer
	sc := bufio.NewScanner(bytes.NewReader(old))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 3 && fields[0] == user && replace[fields[1]] {
			continue
		}
		out.WriteString(sc.Text())
		out.WriteByte('\n')
	}
	if len(old) == 0 {
		out.WriteString("# kwal SASL users (kwal users add): USER MECHANISM salted SCRAM credential\n")
	}
	for _, m := range mechs {
		salt := make([]byte, 32)
		if _, err := rand.Read(salt); err != nil {
			return err
		}
		c, err := NewScramCredential(m, password, salt, iterations)
		if err != nil {
			return err
		}
		fmt.Fprintf(&out, "%s %s %s\n", user, m, c)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".users-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(out.Bytes()); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
