package kafka

import (
	"path/filepath"
	"syscall"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeLogDirs v0-v4, Kafka 3.9's range (KIP-896 dropped v0 in Kafka 4;
// v1 only changes throttling; v2+ flexible; v3 adds
// the top-level error code, v4 total and usable bytes). sluice has one log
// directory per node, the data directory; partition sizes are the bytes of
// record batches each partition holds.
func init() { register(kmsg.DescribeLogDirs, 0, 4, handleDescribeLogDirs) }

func handleDescribeLogDirs(rc *reqCtx, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.DescribeLogDirsRequest)
	b := rc.broker()
	resp := req.ResponseKind().(*kmsg.DescribeLogDirsResponse)
	if !rc.clusterAuthorized(kmsg.ACLOperationDescribe) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code // v3+; older clients see no directories
		return done(resp)
	}
	dir := kmsg.NewDescribeLogDirsResponseDir()
	dir.Dir, _ = filepath.Abs(b.DataDir())
	dir.TotalBytes, dir.UsableBytes = -1, -1
	var st syscall.Statfs_t
	if err := syscall.Statfs(b.DataDir(), &st); err == nil {
		dir.TotalBytes = int64(st.Blocks) * st.Bsize
		dir.UsableBytes = int64(st.Bavail) * st.Bsize
	}
	add := func(topic string, parts []int32) {
		dt := kmsg.NewDescribeLogDirsResponseDirTopic()
		dt.Topic = topic
		for _, p := range parts {
			lp, err := b.Partition(topic, p)
			if err != nil {
				continue // Kafka omits partitions it does not host
			}
			dp := kmsg.NewDescribeLogDirsResponseDirTopicPartition()
			dp.Partition = p
			dp.Size = lp.Size()
			dt.Partitions = append(dt.Partitions, dp)
		}
		if len(dt.Partitions) > 0 {
			dir.Topics = append(dir.Topics, dt)
		}
	}
	if req.Topics == nil {
		for _, t := range b.Engine().Topics() {
			parts := make([]int32, t.Partitions)
			for i := range parts {
				parts[i] = int32(i)
			}
			add(t.Name, parts)
		}
	} else {
		for _, rt := range req.Topics {
			add(rt.Topic, rt.Partitions)
		}
	}
	resp.Dirs = append(resp.Dirs, dir)
	return done(resp)
}
