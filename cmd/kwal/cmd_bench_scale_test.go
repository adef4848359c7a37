package main

import (
	"testing"
)

func TestParseScaleFlags(t *testing.T) {
	ns, err := parseCounts("1000, 10000")
	if err != nil || len(ns) != 2 || ns[0] != 1000 || ns[1] != 10000 {
		t.Fatalf("parseCounts = %v, %v", ns, err)
	}
	for _, bad := range []string{"", "0", "10,x", "-5"} {
		if _, err := parseCounts(bad); err == nil {
			t.Errorf("parseCounts(%q) accepted", bad)
		}
	}
	for in, want := range map[string]float64{"50MB/s": 50, "50MB": 50, "12.5": 12.5, " 7 MB/s": 7} {
		if got, err := parseRate(in); err != nil || got != want {
			t.Errorf("parseRate(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "fast", "0MB/s", "-1"} {
		if _, err := parseRate(bad); err == nil {
			t.Errorf("parseRate(%q) accepted", bad)
		}
	}
}
