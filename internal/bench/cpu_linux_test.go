package bench

import (
	"os"
	"testing"
	"time"
)

func TestParseProcStat(t *testing.T) {
	tests := []struct {
		name, line string
		want       time.Duration
		ok         bool
	}{
		{"plain", "4242 (sluice) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 31 0 0 20 0 9 0 100 1 1", 2810 * time.Millisecond, true},
		{"name with spaces and parens", "7 (a) b) (c) R 1 7 7 0 -1 0 0 0 0 0 1 2 0 0 20 0 1 0 5 1 1", 30 * time.Millisecond, true},
		{"no parens", "7 sluice R 1 7 7", 0, false},
		{"short", "7 (x) R 1 7 7 0", 0, false},
		{"not a number", "7 (x) R 1 7 7 0 -1 0 0 0 0 0 x 2 0", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseProcStat([]byte(tt.line))
			if (err == nil) != tt.ok || got != tt.want {
				t.Errorf("parseProcStat = %v, %v; want %v, ok %t", got, err, tt.want, tt.ok)
			}
		})
	}
}

// TestProcessCPU reads this process's own stat file: it must parse and
// never run backwards.
func TestProcessCPU(t *testing.T) {
	a, err := processCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(50 * time.Millisecond); time.Now().Before(end); {
	}
	b, err := processCPU(os.Getpid())
	if err != nil || b < a {
		t.Errorf("CPU went from %v to %v (%v)", a, b, err)
	}
	if _, err := processCPU(1 << 30); err == nil {
		t.Error("no error for a PID with no process")
	}
}
