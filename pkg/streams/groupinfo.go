package streams

import (
	"encoding/json"
	"errors"
	"fmt"
)

// ErrGroupProtocol is wrapped by every error about the group protocol data
// instances exchange: member metadata UserData and assignment UserData,
// bytes that come from other members (maybe of another version) through
// the broker.
var ErrGroupProtocol = errors.New("streams: bad group protocol data")

// groupInfoVersion is the version of memberInfo and assignInfo this
// instance writes. Version 0 is the same JSON without the field. A reader
// takes the fields it knows from any version: fields are only ever added.
const groupInfoVersion = 1

// Bounds on what a decoder accepts, so that a hostile or broken member
// cannot make another allocate without limit. The assignment's UserData
// lists every task's owner endpoint, so it is the larger one.
const (
	maxMemberInfoBytes = 1 << 20
	maxAssignInfoBytes = 8 << 20
	maxEndpointBytes   = 1024
)

// decodeMemberInfo parses a member's JoinGroup UserData. Empty data (a
// member without endpoint or standbys) is a zero memberInfo.
func decodeMemberInfo(b []byte) (memberInfo, error) {
	var info memberInfo
	if len(b) == 0 {
		return info, nil
	}
	if len(b) > maxMemberInfoBytes {
		return memberInfo{}, fmt.Errorf("%w: member metadata of %d bytes, more than %d", ErrGroupProtocol, len(b), maxMemberInfoBytes)
	}
	if err := json.Unmarshal(b, &info); err != nil {
		return memberInfo{}, fmt.Errorf("%w: member metadata: %v", ErrGroupProtocol, err)
	}
	if len(info.Endpoint) > maxEndpointBytes {
		return memberInfo{}, fmt.Errorf("%w: member endpoint of %d bytes", ErrGroupProtocol, len(info.Endpoint))
	}
	if err := checkPartitions("standby", info.Standby); err != nil {
		return memberInfo{}, err
	}
	return info, nil
}

// decodeAssignInfo parses the UserData of this member's assignment.
func decodeAssignInfo(b []byte) (assignInfo, error) {
	var info assignInfo
	if len(b) == 0 {
		return info, nil
	}
	if len(b) > maxAssignInfoBytes {
		return assignInfo{}, fmt.Errorf("%w: assignment data of %d bytes, more than %d", ErrGroupProtocol, len(b), maxAssignInfoBytes)
	}
	if err := json.Unmarshal(b, &info); err != nil {
		return assignInfo{}, fmt.Errorf("%w: assignment data: %v", ErrGroupProtocol, err)
	}
	if err := checkPartitions("standby", info.Standby); err != nil {
		return assignInfo{}, err
	}
	for g, ps := range info.Owners {
		for p, ep := range ps {
			if p < 0 {
				return assignInfo{}, fmt.Errorf("%w: owner of %s partition %d", ErrGroupProtocol, g, p)
			}
			if len(ep) > maxEndpointBytes {
				return assignInfo{}, fmt.Errorf("%w: owner endpoint of %d bytes", ErrGroupProtocol, len(ep))
			}
		}
	}
	return info, nil
}

func checkPartitions(what string, m map[string][]int32) error {
	for g, ps := range m {
		for _, p := range ps {
			if p < 0 {
				return fmt.Errorf("%w: %s partition %d of %s", ErrGroupProtocol, what, p, g)
			}
		}
	}
	return nil
}
