package bench

import (
	"time"
	_ "unsafe" // for go:linkname
)

// nanotime is the runtime's monotonic clock: one vDSO call, where time.Now
// makes two (wall and monotonic). On this project's VMs a clock read costs
// ~80 ns, and the load driver reads the clock for every record, so the
// difference shows up as driver CPU stolen from the broker under test.
//
//go:linkname nanotime runtime.nanotime
func nanotime() int64

// clock converts nanotime readings to wall time for record timestamps, so
// the driver can stamp records itself instead of letting the client call
// time.Now once more per record.
type clock struct {
	wall time.Time
	mono int64
}

func newClock() clock { return clock{wall: time.Now(), mono: nanotime()} }

func (c clock) at(mono int64) time.Time { return c.wall.Add(time.Duration(mono - c.mono)) }
