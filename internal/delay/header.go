package delay

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/log/batch"
)

// The headers, as the broker reads them.
const (
	HeaderDeliverAt = batch.HeaderDeliverAt // Unix epoch ms, decimal ASCII
	HeaderDelayMs   = batch.HeaderDelayMs   // ms from the broker's receipt, decimal ASCII
	// HeaderMessageID is what `sluice delay cancel --message-id` matches.
	HeaderMessageID = "sluice-message-id"
)

// ErrBadHeader is a delay header the broker refuses (INVALID_RECORD).
var ErrBadHeader = errors.New("delay: bad delay header")

// DueTime returns when a record with these headers is due, in Unix ms, and
// whether it asks to be delayed at all. now is the broker's receipt time;
// max the longest delay taken. sluice-deliver-at wins when both are given.
// A time at or before now is due at once (ok false).
func DueTime(hs []kmsg.Header, now int64, max time.Duration) (due int64, ok bool, err error) {
	var at, delay []byte
	var hasAt, hasDelay bool
	for i := range hs {
		switch hs[i].Key {
		case HeaderDeliverAt:
			at, hasAt = hs[i].Value, true
		case HeaderDelayMs:
			delay, hasDelay = hs[i].Value, true
		}
	}
	return dueTime(at, delay, hasAt, hasDelay, now, max)
}

// dueTimeRaw is DueTime for a record's headers as encoded (a varint
// count, then each key and value: batch.WalkFunc's hdrs), read in place.
// Headers that do not frame are ErrFormat (the log validated the batch:
// this does not happen).
func dueTimeRaw(hdrs []byte, now int64, max time.Duration) (due int64, ok bool, err error) {
	n, w := binary.Varint(hdrs)
	if w <= 0 || n < 0 || n > int64(len(hdrs)) {
		return 0, false, fmt.Errorf("%w: header count", ErrFormat)
	}
	r := hdrs[w:]
	var at, delay []byte
	var hasAt, hasDelay bool
	for range n {
		var k, v []byte
		if k, r, err = readBytes(r); err != nil {
			return 0, false, err
		}
		if k == nil {
			return 0, false, fmt.Errorf("%w: null header key", ErrFormat)
		}
		if v, r, err = readBytes(r); err != nil {
			return 0, false, err
		}
		if len(k) == len(HeaderDeliverAt) || len(k) == len(HeaderDelayMs) {
			switch string(k) {
			case HeaderDeliverAt:
				at, hasAt = v, true
			case HeaderDelayMs:
				delay, hasDelay = v, true
			}
		}
	}
	return dueTime(at, delay, hasAt, hasDelay, now, max)
}

// dueTime is DueTime once the headers' values are found.
func dueTime(at, delay []byte, hasAt, hasDelay bool, now int64, max time.Duration) (due int64, ok bool, err error) {
	maxMs := max.Milliseconds()
	switch {
	case hasAt:
		v, err := parseMs(HeaderDeliverAt, at)
		if err != nil {
			return 0, false, err
		}
		if v-now > maxMs {
			return 0, false, fmt.Errorf("%w: header %s: %d is more than the maximum delay %s from now", ErrBadHeader, HeaderDeliverAt, v, max)
		}
		return v, v > now, nil
	case hasDelay:
		v, err := parseMs(HeaderDelayMs, delay)
		if err != nil {
			return 0, false, err
		}
		if v > maxMs {
			return 0, false, fmt.Errorf("%w: header %s: %d is more than the maximum delay %s", ErrBadHeader, HeaderDelayMs, v, max)
		}
		return now + v, v > 0, nil
	}
	return 0, false, nil
}

// parseMs reads a non-negative decimal number of milliseconds: digits
// only, no sign, no spaces, at most 18 of them.
func parseMs(name string, v []byte) (int64, error) {
	if len(v) == 0 {
		return 0, fmt.Errorf("%w: header %s is empty; want a decimal number of milliseconds", ErrBadHeader, name)
	}
	if v[0] == '-' {
		return 0, fmt.Errorf("%w: header %s: %.40q is negative", ErrBadHeader, name, v)
	}
	if len(v) > 18 {
		return 0, fmt.Errorf("%w: header %s: %.40q is too large", ErrBadHeader, name, v)
	}
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("%w: header %s: %.40q is not a decimal number of milliseconds", ErrBadHeader, name, v)
		}
	}
	n, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: header %s: %.40q: %v", ErrBadHeader, name, v, err)
	}
	return n, nil
}
