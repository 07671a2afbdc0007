package compat

// KafkaJS's admin client, ACLs and SASL (kafkajs_test.go has the set-up,
// producers, consumers and transactions).

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sluice-mq/sluice/internal/config"
	"github.com/sluice-mq/sluice/internal/testbroker"
)

// jsError is an error a script caught and printed, by kafkajs's name for
// it and the Kafka error type it carries.
type jsError struct {
	Name    string   `json:"name"`
	Type    *string  `json:"type"`
	Message string   `json:"message"`
	Errors  []string `json:"errors"`
	Groups  []struct {
		GroupID   string `json:"groupId"`
		ErrorCode int16  `json:"errorCode"`
		Type      string `json:"type"`
	} `json:"groups"`
}

func (e *jsError) typ() string {
	if e == nil || e.Type == nil {
		return ""
	}
	return *e.Type
}

type jsOffsets []struct {
	Partition int32 `json:"partition"`
	Offset    int64 `json:"offset"`
	High      int64 `json:"high"`
	Low       int64 `json:"low"`
}

// offsetsString is "p:offset" for each partition, and with low and high
// watermarks "p:low-high".
func (o jsOffsets) String() string {
	s := ""
	for _, p := range o {
		if p.High != 0 || p.Low != 0 {
			s += fmt.Sprintf(" %d:%d-%d", p.Partition, p.Low, p.High)
		} else {
			s += fmt.Sprintf(" %d:%d", p.Partition, p.Offset)
		}
	}
	return s
}

type jsConfigs []struct {
	Name      string `json:"name"`
	ErrorCode int16  `json:"errorCode"`
	Configs   []struct {
		Name      string `json:"name"`
		Value     string `json:"value"`
		IsDefault bool   `json:"isDefault"`
	} `json:"configs"`
}

func (c jsConfigs) String() string {
	s := ""
	for _, r := range c {
		s += fmt.Sprintf("%s(%d):", r.Name, r.ErrorCode)
		for _, e := range r.Configs {
			s += fmt.Sprintf(" %s=%s default=%v", e.Name, e.Value, e.IsDefault)
		}
	}
	return s
}

// TestKafkaJSAdmin sweeps kafkajs's admin client: topics (create, again,
// a bad name, list, partitions, metadata, delete), offsets (end, by
// timestamp, after deleteTopicRecords), group offsets (set, reset to
// earliest and latest), groups (list, describe, delete, a missing one),
// the cluster, and topic, broker and broker-logger configs (describe,
// alter, a bad value).
func TestKafkaJSAdmin(t *testing.T) {
	b := startKafkaJSBroker(t)
	prefix := topicName(t)
	group := prefix + "-group"
	var got struct {
		Created, CreatedAgain bool
		BadName, UnknownTopic *jsError
		Listed                []string
		Metadata              []struct {
			Name       string `json:"name"`
			Partitions []struct {
				PartitionID int32   `json:"partitionId"`
				Leader      int32   `json:"leader"`
				Replicas    []int32 `json:"replicas"`
				Isr         []int32 `json:"isr"`
			} `json:"partitions"`
		}
		Offsets, ByTimestamp, AfterDelete, AfterDeleteAll jsOffsets
		SetOffsets, ResetEarliest, ResetLatest            jsOffsets
		DeletePastEnd                                     *jsError
		GroupsListed                                      []struct{ GroupID, ProtocolType string }
		GroupsDescribed                                   []struct {
			GroupID, State, ProtocolType string
			ErrorCode                    int16
			Members                      int
		}
		GroupsDeleted []struct {
			GroupID   string
			ErrorCode int16
		}
		GroupsAfterDelete  []struct{ GroupID string }
		DeleteMissingGroup *jsError
		Cluster            struct {
			Brokers, BrokerPort, Controller int
			ClusterID                       string
		}
		Configs, ConfigsAfter jsConfigs
		Altered               struct {
			Resources []struct {
				ErrorCode    int16
				ResourceName string
			}
		}
		BadConfig     *jsError
		BrokerConfigs []string
		BrokerLoggers []struct {
			Name, Value string
			Source      int
		}
		ListedAfterDelete []string
	}
	kafkajs(t, "admin.js", map[string]any{"broker": b.Addr(), "prefix": prefix, "group": group, "base": 1700000000000}, &got)
	ta, tb := prefix+"-a", prefix+"-b"

	check := func(what string, got, want any) {
		t.Helper()
		if g, w := fmt.Sprint(got), fmt.Sprint(want); g != w {
			t.Errorf("%s: %s, want %s", what, g, w)
		}
	}
	check("createTopics", got.Created, true)
	check("createTopics of an existing topic", got.CreatedAgain, false)
	check("createTopics of 'bad name!'", got.BadName != nil && fmt.Sprint(got.BadName.Errors) == "[INVALID_TOPIC_EXCEPTION]", true)
	check("listTopics", got.Listed, []string{ta, tb})
	check("fetchTopicMetadata of a missing topic", got.UnknownTopic.typ(), "UNKNOWN_TOPIC_OR_PARTITION")
	if len(got.Metadata) != 1 || got.Metadata[0].Name != ta || len(got.Metadata[0].Partitions) != 5 {
		t.Errorf("fetchTopicMetadata after createPartitions to 5: %+v", got.Metadata)
	} else {
		for i, p := range got.Metadata[0].Partitions {
			if p.PartitionID != int32(i) || p.Leader != 1 || fmt.Sprint(p.Replicas) != "[1]" || fmt.Sprint(p.Isr) != "[1]" {
				t.Errorf("fetchTopicMetadata partition %d: %+v, want leader 1, replicas and isr [1]", i, p)
			}
		}
	}
	check("fetchTopicOffsets", got.Offsets, " 0:0-10 1:0-3 2:0 3:0 4:0")
	// Kafka answers -1 where no record is that late; kafkajs gives the end
	// offset instead.
	check("fetchTopicOffsetsByTimestamp(base+4.5s)", got.ByTimestamp, " 0:5 1:0 2:0 3:0 4:0")
	check("fetchTopicOffsets after deleteTopicRecords(p0, 3)", got.AfterDelete, " 0:3-10 1:0-3 2:0 3:0 4:0")
	check("fetchTopicOffsets after deleteTopicRecords(p1, -1)", got.AfterDeleteAll, " 0:3-10 1:3-3 2:0 3:0 4:0")
	check("deleteTopicRecords(p0, 99) past the end", got.DeletePastEnd != nil && fmt.Sprint(got.DeletePastEnd.Errors) == "[OFFSET_OUT_OF_RANGE]", true)
	check("fetchOffsets after setOffsets", got.SetOffsets, " 0:7 1:1 2:-1 3:-1 4:-1")
	// kafkajs commits -2 and -1 as they are, and reads them back so from
	// Kafka too (its own resetOffsets tests expect '-2' and '-1').
	check("fetchOffsets after resetOffsets(earliest)", got.ResetEarliest, " 0:-2 1:-2 2:-2 3:-2 4:-2")
	check("fetchOffsets after resetOffsets(latest)", got.ResetLatest, " 0:-1 1:-1 2:-1 3:-1 4:-1")
	check("listGroups", fmt.Sprintf("%+v", got.GroupsListed), fmt.Sprintf("[{GroupID:%s ProtocolType:consumer}]", group))
	check("describeGroups", fmt.Sprintf("%+v", got.GroupsDescribed), fmt.Sprintf("[{GroupID:%s State:Empty ProtocolType:consumer ErrorCode:0 Members:0}]", group))
	check("deleteGroups", fmt.Sprintf("%+v", got.GroupsDeleted), fmt.Sprintf("[{GroupID:%s ErrorCode:0}]", group))
	check("listGroups after deleteGroups", len(got.GroupsAfterDelete), 0)
	if e := got.DeleteMissingGroup; e == nil || len(e.Groups) != 1 || e.Groups[0].Type != "GROUP_ID_NOT_FOUND" || e.Groups[0].ErrorCode != 69 {
		t.Errorf("deleteGroups of a missing group: %+v, want GROUP_ID_NOT_FOUND (69)", e)
	}
	_, port, _ := strings.Cut(b.Addr(), ":")
	check("describeCluster", fmt.Sprintf("%d brokers, port %d, controller %d, id set %v", got.Cluster.Brokers, got.Cluster.BrokerPort, got.Cluster.Controller, got.Cluster.ClusterID != ""),
		fmt.Sprintf("1 brokers, port %s, controller 1, id set true", port))
	check("describeConfigs", got.Configs, ta+"(0): cleanup.policy=delete default=true retention.ms=3600000 default=false")
	check("alterConfigs", fmt.Sprintf("%+v", got.Altered.Resources), fmt.Sprintf("[{ErrorCode:0 ResourceName:%s}]", ta))
	check("describeConfigs after alterConfigs", got.ConfigsAfter, ta+"(0): cleanup.policy=compact default=false retention.ms=7200000 default=false")
	check("alterConfigs retention.ms=soon", got.BadConfig.typ(), "INVALID_CONFIG")
	check("describeConfigs of the broker", got.BrokerConfigs, []string{"log.retention.ms", "num.partitions"})
	// BROKER_LOGGER (KIP-412): sluice's one logger at the test broker's
	// level, source DYNAMIC_BROKER_LOGGER_CONFIG (6).
	check("describeConfigs of the broker's loggers", fmt.Sprintf("%+v", got.BrokerLoggers), "[{Name:root Value:DEBUG Source:6}]")
	check("listTopics after deleteTopics", got.ListedAfterDelete, []string{ta})
}

// startKafkaJSSASLBroker starts a broker with a SASL_PLAINTEXT listener
// (users admin, a super user, and bob) beside PLAINTEXT; with acls the
// authorizer is on.
func startKafkaJSSASLBroker(t testing.TB, acls bool) (*testbroker.Broker, string) {
	t.Helper()
	b := startKafkaJSBroker(t, testbroker.WithConfig(func(c *config.Config) {
		c.Listeners = []string{"PLAINTEXT://127.0.0.1:0", "SASL_PLAINTEXT://127.0.0.1:0"}
		c.SASL.Users = []string{"admin:admin-secret", "bob:bob-secret"}
		if acls {
			c.Authorizer = config.Authorizer{Enabled: true, SuperUsers: []string{"User:ANONYMOUS", "User:admin"}}
		}
	}))
	addr := b.Server().ListenerAddr(config.SASLPlaintext)
	if addr == "" {
		t.Fatal("no SASL_PLAINTEXT listener")
	}
	return b, addr
}

func jsSCRAM(mech, user, password string) map[string]string {
	return map[string]string{"mechanism": mech, "username": user, "password": password}
}

// TestKafkaJSSASL: kafkajs produces and consumes through the SASL listener
// with SCRAM-SHA-256, SCRAM-SHA-512 and PLAIN; a wrong password is refused with
// an authentication error.
func TestKafkaJSSASL(t *testing.T) {
	b, saslAddr := startKafkaJSSASLBroker(t, false)
	for _, mech := range []string{"scram-sha-256", "scram-sha-512", "plain"} {
		t.Run(mech, func(t *testing.T) {
			topic := topicName(t)
			testbroker.CreateTopic(t, b.Addr(), topic, 1, nil)
			want := sampleRecords(10, sampleOpts{headers: true})
			auth := jsSCRAM(mech, "admin", "admin-secret")
			kafkajsProduce(t, map[string]any{"broker": saslAddr, "topic": topic, "compression": "none", "sasl": auth}, want)
			checkSame(t, "franz-go reading kafkajs's over SASL", want, readKgo(t, b.Addr(), topic, 0, len(want)))
			var got jsConsumed
			kafkajs(t, "consume.js", map[string]any{"broker": saslAddr, "topic": topic, "group": topic + "-g", "count": 10, "sasl": auth}, &got)
			checkSame(t, "kafkajs reading its own over SASL", want, got.recs())

			var refused struct{ Error *jsError }
			kafkajs(t, "produce.js", map[string]any{"broker": saslAddr, "topic": topic, "records": []any{}, "retries": 0,
				"sasl": jsSCRAM(mech, "admin", "wrong"), "expectError": true}, &refused)
			if e := refused.Error; e == nil || e.Name != "KafkaJSSASLAuthenticationError" {
				t.Errorf("a wrong password: %+v, want KafkaJSSASLAuthenticationError", e)
			}
		})
	}
}

// TestKafkaJSACLs: with the authorizer on, kafkajs (as a SCRAM super user)
// creates, describes and deletes ACLs; bob, allowed to write one topic by
// them, produces there and is refused on another.
func TestKafkaJSACLs(t *testing.T) {
	b, saslAddr := startKafkaJSSASLBroker(t, true)
	prefix := topicName(t)
	var got struct {
		Created   bool
		Described struct {
			Resources []struct {
				ResourceType        int
				ResourceName        string
				ResourcePatternType int
				Acls                []struct {
					Principal, Host           string
					Operation, PermissionType int
				}
			}
		}
		Deleted struct {
			FilterResponses []struct {
				ErrorCode    int16
				MatchingAcls []struct{ Principal string }
			}
		}
		After struct {
			Resources []struct {
				Acls []struct{ Principal string }
			}
		}
	}
	kafkajs(t, "admin.js", map[string]any{"broker": saslAddr, "prefix": prefix, "acls": true,
		"sasl": jsSCRAM("scram-sha-512", "admin", "admin-secret")}, &got)
	if !got.Created {
		t.Errorf("createAcls answered false")
	}
	// Kafka's codes: TOPIC 2, LITERAL 3, READ 3, WRITE 4, ALLOW 3.
	want := fmt.Sprintf("[{ResourceType:2 ResourceName:%s-acl ResourcePatternType:3 Acls:[{Principal:User:alice Host:* Operation:3 PermissionType:3} {Principal:User:bob Host:* Operation:4 PermissionType:3}]}]", prefix)
	if g := fmt.Sprintf("%+v", got.Described.Resources); g != want {
		t.Errorf("describeAcls:\n got %s\nwant %s", g, want)
	}
	if g := fmt.Sprintf("%+v", got.Deleted.FilterResponses); g != "[{ErrorCode:0 MatchingAcls:[{Principal:User:alice}]}]" {
		t.Errorf("deleteAcls of alice's: %s", g)
	}
	if g := fmt.Sprintf("%+v", got.After.Resources); g != "[{Acls:[{Principal:User:bob}]}]" {
		t.Errorf("describeAcls after deleteAcls: %s", g)
	}

	allowed, other := prefix+"-acl", prefix+"-other"
	testbroker.CreateTopic(t, b.Addr(), allowed, 1, nil)
	testbroker.CreateTopic(t, b.Addr(), other, 1, nil)
	bob := jsSCRAM("scram-sha-256", "bob", "bob-secret")
	recs := []rec{{Key: []byte("k"), Value: []byte("bob was here")}}
	kafkajsProduce(t, map[string]any{"broker": saslAddr, "topic": allowed, "compression": "none", "sasl": bob}, recs)
	checkSame(t, "franz-go reading bob's", recs, readKgo(t, b.Addr(), allowed, 0, 1))
	var refused struct{ Error *jsError }
	kafkajs(t, "produce.js", map[string]any{"broker": saslAddr, "topic": other, "compression": "none", "sasl": bob, "retries": 0,
		"records": []any{map[string]any{"partition": 0, "value": "no"}}, "expectError": true}, &refused)
	// kafkajs's retrier rethrows the protocol error as a non-retriable one
	// with the message of its error table for code 29.
	if e := refused.Error; e == nil || e.Message != "Not authorized to access topics: [Topic authorization failed]" {
		t.Errorf("bob producing to %s without an ACL: %+v, want TOPIC_AUTHORIZATION_FAILED", other, refused.Error)
	}
}
