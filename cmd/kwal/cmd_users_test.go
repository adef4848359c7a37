package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kwal/kwal/broker"
	"github.com/twmb/franz-go/pkg/kfake"
)

// kwal users add reads the password from stdin, stores only salted
// credentials, refuses a password given as an argument, and kwal users
// list shows what was stored.
func TestUsersAddAndList(t *testing.T) {
	path := filepath.Join(t.TempDir(), "users")
	var out, errOut bytes.Buffer
	if err := runUsersAdd([]string{"--file", path, "--user", "alice"}, strings.NewReader("pa ss-word\n"), &out, &errOut); err != nil {
		t.Fatalf("%v: %s", err, errOut.String())
	}
	if err := runUsersAdd([]string{"--file", path, "--user", "bob", "--mechanism", "SCRAM-SHA-512", "--iterations", "8192"}, strings.NewReader("bobpw"), &out, &errOut); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(path)
	if bytes.Contains(raw, []byte("pa ss-word")) || bytes.Contains(raw, []byte("bobpw")) {
		t.Fatalf("password stored:\n%s", raw)
	}
	f, err := broker.LoadUserFile(path)
	if err != nil {
		t.Fatal(err)
	}
	c, ok := f.ScramCredential("SCRAM-SHA-256", "alice")
	if !ok {
		t.Fatal("alice has no SCRAM-SHA-256 credential")
	}
	want, _ := broker.NewScramCredential("SCRAM-SHA-256", "pa ss-word", c.Salt, c.Iterations)
	if !bytes.Equal(want.StoredKey, c.StoredKey) {
		t.Fatal("stored credential does not match the password from stdin (trailing newline kept?)")
	}
	for _, bad := range [][]string{
		{"--file", path, "--user", "carol", "secret"},
		{"--file", path, "--user", "carol", "--mechanism", "PLAIN"},
		{"--file", path},
		{"--file", path, "--user", "carol", "--iterations", "10"},
	} {
		if err := runUsersAdd(bad, strings.NewReader("pw\n"), &out, &errOut); err == nil {
			t.Errorf("users add %q accepted", bad)
		}
	}
	if err := runUsersAdd([]string{"--file", path, "--user", "carol"}, strings.NewReader(""), &out, &errOut); err == nil {
		t.Error("empty stdin accepted as a password")
	}
	out.Reset()
	if code := run([]string{"users", "list", "--file", path}, &out, &errOut); code != 0 {
		t.Fatalf("list exit %d: %s", code, errOut.String())
	}
	if got := out.String(); got != "alice\tSCRAM-SHA-256,SCRAM-SHA-512\nbob\tSCRAM-SHA-512\n" {
		t.Fatalf("list:\n%s", got)
	}
	if code := run([]string{"users", "add", "--help"}, &out, &errOut); code != 0 {
		t.Fatalf("users add --help exit %d", code)
	}
}

// kwal metadata dump --config reads the broker's remote.wal.metadata.*
// keys: it gets into a SASL Kafka with the password from the
// environment, and not without it or with a wrong one.
func TestMetadataDumpConfigSASL(t *testing.T) {
	kf, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.EnableSASL(),
		kfake.Superuser("SCRAM-SHA-256", "kwal", "md-secret"), kfake.SeedTopics(2, "__remote_wal_log_metadata"))
	if err != nil {
		t.Fatal(err)
	}
	defer kf.Close()
	path := filepath.Join(t.TempDir(), "server.properties")
	props := "remote.wal.metadata.bootstrap.servers=" + strings.Join(kf.ListenAddrs(), ",") + "\n" +
		"remote.wal.metadata.security.protocol=SASL_PLAINTEXT\n" +
		"remote.wal.metadata.sasl.mechanism=SCRAM-SHA-256\n" +
		"remote.wal.metadata.sasl.username=kwal\n"
	if err := os.WriteFile(path, []byte(props), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	t.Setenv(broker.EnvMetadataSASLPassword, "")
	if code := run([]string{"metadata", "dump", "--config", path, "--timeout", "5s"}, &out, &errOut); code == 0 || !strings.Contains(errOut.String(), broker.EnvMetadataSASLPassword) {
		t.Fatalf("no password: exit %d: %s", code, errOut.String())
	}
	t.Setenv(broker.EnvMetadataSASLPassword, "zq-wrong-9")
	errOut.Reset()
	if code := run([]string{"metadata", "dump", "--config", path, "--timeout", "5s"}, &out, &errOut); code == 0 {
		t.Fatal("wrong password: dump succeeded")
	}
	if strings.Contains(errOut.String(), "zq-wrong-9") {
		t.Fatalf("password in the error: %s", errOut.String())
	}
	t.Setenv(broker.EnvMetadataSASLPassword, "md-secret")
	errOut.Reset()
	if code := run([]string{"metadata", "dump", "--config", path, "--timeout", "20s"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
}
