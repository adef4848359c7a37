package purgbench

import (
	"fmt"
	"os"
	"testing"
	"time"
)

func TestExpP(t *testing.T) {
	names := []string{"", Kwal, Runtime, Russell}
	if s := os.Getenv("NAMES"); s != "" {
		names = nil
		for _, x := range []string{"", Kwal, Runtime, Russell} {
			if x == "" || contains(s, x) {
				names = append(names, x)
			}
		}
	}
	via := ViaForce
	if os.Getenv("VIA") == "check" {
		via = ViaCheck
	}
	for _, mix := range Mixes {
		for _, rate := range []float64{50_000, 200_000, 400_000} {
			var floor float64
			for _, c := range names {
				f := P(c, rate, time.Second, mix, via, 1)
				if c == "" {
					floor = f.CPUNsPerTimer
				}
				fmt.Printf("%s %s rate=%.0fk: cpu %.0f net %.0f p99 %.2f max %.2f rate %.0f fired %.0f/%.0f\n", mix.Name, c, rate/1000, f.CPUNsPerTimer, f.CPUNsPerTimer-floor, f.P99LateMs, f.MaxLateMs, f.Rate, f.Fired, f.Expected)
			}
		}
	}
}

func contains(s, x string) bool { return len(x) > 0 && (s == x || len(s) > len(x) && (s[:len(x)+1] == x+"," || contains(s[1:], x))) }
