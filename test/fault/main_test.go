package fault

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/testbroker"
)

func TestMain(m *testing.M) { os.Exit(testbroker.Main(m)) }

// soakEnv, set to a Go duration, turns each test's single pass through its
// faults into a rotation that repeats until the duration has passed, with
// randomised targets and fault lengths.
const soakEnv = "SLUICE_FAULT_SOAK"

// seedEnv replays a run's random choices (the seed is logged at the start).
const seedEnv = "SLUICE_FAULT_SEED"

// settings are what a run is asked to do.
type settings struct {
	soak time.Duration // 0: one pass through the faults (CI)
	seed uint64
}

func loadSettings(t *testing.T) settings {
	t.Helper()
	var s settings
	if v := os.Getenv(soakEnv); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			t.Fatalf("%s=%q: want a positive Go duration such as 20m", soakEnv, v)
		}
		s.soak = d
	}
	s.seed = uint64(time.Now().UnixNano())
	if v := os.Getenv(seedEnv); v != "" {
		if _, err := fmt.Sscan(v, &s.seed); err != nil {
			t.Fatalf("%s=%q: want an unsigned integer", seedEnv, v)
		}
	}
	mode := "short run, each fault once"
	if s.soak > 0 {
		mode = fmt.Sprintf("soak for %v", s.soak)
	}
	t.Logf("%s; random seed %d (replay with %s=%d)", mode, s.seed, seedEnv, s.seed)
	return s
}

func (s settings) rng() *rand.Rand { return rand.New(rand.NewPCG(s.seed, 0x5eed)) }

// problems collects what a checker found wrong, keeping the first few in
// full and counting the rest.
type problems struct {
	list  []string
	total int
}

const maxProblemsShown = 8

func (p *problems) add(format string, args ...any) {
	p.total++
	if len(p.list) < maxProblemsShown {
		p.list = append(p.list, fmt.Sprintf(format, args...))
	}
}

func (p *problems) String() string {
	s := strings.Join(p.list, "\n\t")
	if p.total > len(p.list) {
		s += fmt.Sprintf("\n\t... and %d more", p.total-len(p.list))
	}
	return s
}

// verdict is what one checker concluded.
type verdict struct {
	check string // what it checks, for the failure message
	bad   problems
	ok    string // what it checked, logged when it passed
}

// report logs a passed check and fails t with a failed one, saying when
// it ran (after which fault).
func (v *verdict) report(t *testing.T, when string) bool {
	t.Helper()
	if v.bad.total == 0 {
		if v.ok != "" {
			t.Logf("  ok: %s: %s", v.check, v.ok)
		}
		return true
	}
	t.Errorf("CHECK FAILED: %s (%s): %d problem(s):\n\t%s", v.check, when, v.bad.total, &v.bad)
	return false
}
