package brokerbench

import (
	"os"
	"testing"
)

func TestParseStatCPU(t *testing.T) {
	// A command name with spaces and parentheses: fields count after the
	// last ')'. utime 250, stime 50 ticks.
	line := []byte("4242 (kwal (x) y) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 8 0 1000 100000 500 18446744073709551615\n")
	got, err := parseStatCPU(line)
	if err != nil || got != 3.0 {
		t.Fatalf("parseStatCPU = %v, %v; want 3.0", got, err)
	}
	for _, bad := range []string{"", "12 (x", "12 (x) S 1 2", "12 (x) S 1 2 3 4 5 6 7 8 9 10 a b c"} {
		if _, err := parseStatCPU([]byte(bad)); err == nil {
			t.Errorf("parseStatCPU(%q) accepted", bad)
		}
	}
	// This process has used some CPU by now.
	if s, err := ProcessCPUSeconds(os.Getpid()); err != nil || s < 0 {
		t.Fatalf("own CPU: %v, %v", s, err)
	}
}
