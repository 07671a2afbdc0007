package streams

import (
	"encoding/binary"
	"time"
)

// Deduplicate drops every record whose id (idOf) was already seen, as long
// as the id is remembered: from the first record with it until stream time
// (the highest record time the store has seen) passes that record's time
// plus retention. Seen ids live in the key-value store named store, with
// a changelog, so a restart or a move of the task forgets none. The ids
// of a task are only those of its partition: key the stream by id first
// (SelectKey and Repartition) so that every copy of a message reaches the
// same task. A record already older than its retention when it arrives
// is passed on without being remembered.
func Deduplicate[K, V any](s *KStream[K, V], idOf func(K, V) string, retention time.Duration, store string) *KStream[K, V] {
	s.b.addStore(store, s.origins)
	if retention < time.Millisecond {
		s.b.fail("deduplication retention %v, want at least 1ms", retention)
	}
	keep := retention.Milliseconds()
	return derive(s, func(c *Context, r Record[K, V], out *node[K, V]) error {
		st := c.task.store(store)
		ts := r.Timestamp.UnixMilli()
		streamTime, prevTime, err := advanceStreamTime(st, ts)
		if err != nil {
			return err
		}
		// Forget ids whose time + retention stream time has passed.
		if streamTime > prevTime {
			err := st.scan(dedupExpiryKey(closingFrom(prevTime, keep+1), ""), dedupExpiryKey(streamTime-keep, ""), func(k, _ []byte) error {
				st.delete(k)
				st.delete(dedupIDKey(string(k[9:])))
				return nil
			})
			if err != nil {
				return err
			}
		}
		id := idOf(r.Key, r.Value)
		if _, seen, err := st.get(dedupIDKey(id)); err != nil {
			return err
		} else if seen {
			return nil
		}
		if ts+keep < streamTime {
			// Already past its retention: remembering it would not last.
			return out.forward(c, r)
		}
		st.put(dedupIDKey(id), binary.BigEndian.AppendUint64(nil, uint64(ts)))
		st.put(dedupExpiryKey(ts, id), []byte{})
		return out.forward(c, r)
	})
}

// Deduplication store keys: 'i' id -> the time it was first seen (8 bytes
// big-endian); 'x' time (8, sign bit flipped) id -> empty, in time order
// for expiry; stream time under streamTimeKey.
func dedupIDKey(id string) []byte { return append([]byte{'i'}, id...) }

func dedupExpiryKey(ts int64, id string) []byte {
	return append(binary.BigEndian.AppendUint64([]byte{'x'}, uint64(ts)^(1<<63)), id...)
}
