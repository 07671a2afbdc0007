// Package acl is sluice's authorizer: Kafka's ACL bindings, kept in the
// metadata store (so every broker of a cluster sees the same ones, kept
// in step by a watch), managed with CreateAcls, DescribeAcls and
// DeleteAcls, and checked per request with Kafka's rules (StandardAuthorizer):
//
//   - a binding applies to a resource of its type whose name equals it
//     (LITERAL), any name (LITERAL "*"), or a name it prefixes (PREFIXED);
//   - it applies to a principal equal to its own or to any user ("User:*"),
//     from a host equal to its own or from any host ("*");
//   - ALL covers every operation; READ, WRITE, DELETE and ALTER imply
//     DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS;
//   - a DENY that applies (the operation itself or ALL; implications widen
//     ALLOWs only) wins over any ALLOW; without an ALLOW the answer
//     is no, unless no binding at all names the resource and
//     allow_everyone_if_no_acl_found is set; super users may do
//     everything.
//
// The enums are the Kafka protocol's (kmsg).
package acl

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/meta"
)

// ClusterName is the only name of the CLUSTER resource.
const ClusterName = "kafka-cluster"

// keyPrefix is where bindings live: one key per binding, named by a hash
// of it, so creating an existing binding is a no-op (docs/formats.md).
const keyPrefix = "/acls/"

// Errors. ErrInvalid is Kafka's INVALID_REQUEST; ErrStorage is
// UNKNOWN_SERVER_ERROR.
var (
	ErrInvalid = errors.New("acl: invalid")
	ErrStorage = errors.New("acl: metadata store unavailable")
)

// Binding is one ACL: who may (or may not) do what to which resources.
type Binding struct {
	ResourceType kmsg.ACLResourceType        `json:"resource_type"`
	ResourceName string                      `json:"resource_name"`
	PatternType  kmsg.ACLResourcePatternType `json:"pattern_type"`
	Principal    string                      `json:"principal"`
	Host         string                      `json:"host"`
	Operation    kmsg.ACLOperation           `json:"operation"`
	Permission   kmsg.ACLPermissionType      `json:"permission"`
}

// Validate checks a binding to be created, as Kafka does.
func (b Binding) Validate() error {
	switch {
	case b.ResourceType <= kmsg.ACLResourceTypeAny || b.ResourceType > kmsg.ACLResourceTypeUser:
		return fmt.Errorf("%w: resource type %s", ErrInvalid, b.ResourceType)
	case b.PatternType != kmsg.ACLResourcePatternTypeLiteral && b.PatternType != kmsg.ACLResourcePatternTypePrefixed:
		return fmt.Errorf("%w: pattern type %s (LITERAL or PREFIXED)", ErrInvalid, b.PatternType)
	case b.ResourceName == "":
		return fmt.Errorf("%w: empty resource name", ErrInvalid)
	case b.ResourceType == kmsg.ACLResourceTypeCluster && b.ResourceName != ClusterName:
		return fmt.Errorf("%w: the only valid name for the CLUSTER resource is %s", ErrInvalid, ClusterName)
	case b.Operation <= kmsg.ACLOperationAny || b.Operation > kmsg.ACLOperationDescribeTokens:
		return fmt.Errorf("%w: operation %s", ErrInvalid, b.Operation)
	case b.Permission != kmsg.ACLPermissionTypeAllow && b.Permission != kmsg.ACLPermissionTypeDeny:
		return fmt.Errorf("%w: permission %s", ErrInvalid, b.Permission)
	case b.Host == "":
		return fmt.Errorf("%w: empty host (use * for any)", ErrInvalid)
	}
	if typ, name, ok := strings.Cut(b.Principal, ":"); !ok || typ == "" || name == "" {
		return fmt.Errorf("%w: principal %q is not Type:name", ErrInvalid, b.Principal)
	}
	return nil
}

func (b Binding) key() string {
	j, _ := json.Marshal(b)
	sum := sha256.Sum256(j)
	return keyPrefix + hex.EncodeToString(sum[:16])
}

// Filter selects bindings (DescribeAcls, DeleteAcls). Nil strings match
// anything; ANY enums match anything; PatternType MATCH selects the
// bindings that apply to the named resource.
type Filter struct {
	ResourceType kmsg.ACLResourceType
	ResourceName *string
	PatternType  kmsg.ACLResourcePatternType
	Principal    *string
	Host         *string
	Operation    kmsg.ACLOperation
	Permission   kmsg.ACLPermissionType
}

// Validate checks a filter as Kafka does.
func (f Filter) Validate() error {
	switch {
	case f.ResourceType == kmsg.ACLResourceTypeUnknown || f.ResourceType > kmsg.ACLResourceTypeUser:
		return fmt.Errorf("%w: resource type %s", ErrInvalid, f.ResourceType)
	case f.PatternType == kmsg.ACLResourcePatternTypeUnknown || f.PatternType > kmsg.ACLResourcePatternTypePrefixed:
		return fmt.Errorf("%w: pattern type %s", ErrInvalid, f.PatternType)
	case f.Operation == kmsg.ACLOperationUnknown || f.Operation > kmsg.ACLOperationDescribeTokens:
		return fmt.Errorf("%w: operation %s", ErrInvalid, f.Operation)
	case f.Permission == kmsg.ACLPermissionTypeUnknown || f.Permission > kmsg.ACLPermissionTypeAllow:
		return fmt.Errorf("%w: permission %s", ErrInvalid, f.Permission)
	}
	return nil
}

// Matches reports whether the filter selects b.
func (f Filter) Matches(b Binding) bool {
	if f.ResourceType != kmsg.ACLResourceTypeAny && f.ResourceType != b.ResourceType {
		return false
	}
	switch f.PatternType {
	case kmsg.ACLResourcePatternTypeAny:
		if f.ResourceName != nil && *f.ResourceName != b.ResourceName {
			return false
		}
	case kmsg.ACLResourcePatternTypeMatch:
		if f.ResourceName != nil && !b.appliesTo(*f.ResourceName) {
			return false
		}
	default:
		if f.PatternType != b.PatternType || (f.ResourceName != nil && *f.ResourceName != b.ResourceName) {
			return false
		}
	}
	return (f.Principal == nil || *f.Principal == b.Principal) &&
		(f.Host == nil || *f.Host == b.Host) &&
		(f.Operation == kmsg.ACLOperationAny || f.Operation == b.Operation) &&
		(f.Permission == kmsg.ACLPermissionTypeAny || f.Permission == b.Permission)
}

// appliesTo reports whether b's resource pattern covers resource name.
func (b Binding) appliesTo(name string) bool {
	if b.PatternType == kmsg.ACLResourcePatternTypePrefixed {
		return strings.HasPrefix(name, b.ResourceName)
	}
	return b.ResourceName == "*" || b.ResourceName == name
}

// appliesToClient reports whether b names principal (or any user) from
// host (or any host).
func (b Binding) appliesToClient(principal, host string) bool {
	return (b.Principal == principal || b.Principal == "User:*") && (b.Host == "*" || b.Host == host)
}

// denies reports whether b is a DENY of op itself (or ALL): implied
// operations widen ALLOWs only.
func (b Binding) denies(op kmsg.ACLOperation) bool {
	return b.Permission == kmsg.ACLPermissionTypeDeny && (b.Operation == op || b.Operation == kmsg.ACLOperationAll)
}

// Config configures checking.
type Config struct {
	// Enabled turns the authorizer on; off, every request is allowed and
	// the ACL APIs answer SECURITY_DISABLED, as Kafka without one.
	Enabled bool
	// SuperUsers are principals ("User:admin") allowed everything.
	SuperUsers []string
	// AllowIfNoACL allows an operation on a resource no binding names
	// (Kafka's allow.everyone.if.no.acl.found).
	AllowIfNoACL bool
}

// Authorizer holds the bindings and answers whether a request may go on.
// It is safe for concurrent use.
type Authorizer struct {
	cfg    Config
	md     meta.Store
	logger *slog.Logger

	mu       sync.RWMutex
	bindings map[string]Binding // by key name below keyPrefix
}

// New returns an Authorizer over md. Call Load before use.
func New(cfg Config, md meta.Store, logger *slog.Logger) *Authorizer {
	return &Authorizer{cfg: cfg, md: md, logger: logger, bindings: map[string]Binding{}}
}

// Enabled reports whether requests are checked.
func (a *Authorizer) Enabled() bool { return a != nil && a.cfg.Enabled }

// Load reads every stored binding.
func (a *Authorizer) Load(ctx context.Context) error {
	kvs, err := a.md.List(ctx, keyPrefix)
	if err != nil {
		return fmt.Errorf("reading ACLs: %w", err)
	}
	a.sync(kvs)
	return nil
}

// Watch follows bindings changed through other brokers until ctx ends.
func (a *Authorizer) Watch(ctx context.Context) {
	meta.FollowKeys(ctx, a.md, keyPrefix, a.logger, a.sync, a.apply)
}

// sync replaces every binding with kvs at once: checks meanwhile see either
// the old set or the new one, never an empty one.
func (a *Authorizer) sync(kvs []meta.KV) {
	bindings := make(map[string]Binding, len(kvs))
	for _, kv := range kvs {
		name := strings.TrimPrefix(kv.Key, keyPrefix)
		if b, ok := a.parse(name, kv.Value); ok {
			bindings[name] = b
		}
	}
	a.mu.Lock()
	a.bindings = bindings
	a.mu.Unlock()
}

func (a *Authorizer) apply(name string, v []byte) {
	b, ok := a.parse(name, v)
	a.mu.Lock()
	defer a.mu.Unlock()
	if ok {
		a.bindings[name] = b
	} else {
		delete(a.bindings, name)
	}
}

// parse decodes a stored binding; false for a removed (nil) or malformed one.
func (a *Authorizer) parse(name string, v []byte) (Binding, bool) {
	var b Binding
	if v == nil {
		return b, false
	}
	if err := json.Unmarshal(v, &b); err != nil || b.Validate() != nil {
		a.logger.Warn("ignoring a malformed ACL record", "key", keyPrefix+name)
		return b, false
	}
	return b, true
}

// Create stores bindings; the error of each, in order, is nil or wraps
// ErrInvalid or ErrStorage.
func (a *Authorizer) Create(ctx context.Context, bs []Binding) []error {
	errs := make([]error, len(bs))
	for i, b := range bs {
		if errs[i] = b.Validate(); errs[i] != nil {
			continue
		}
		j, _ := json.Marshal(b)
		if err := a.md.Txn(ctx, nil, meta.Put(b.key(), j)); err != nil {
			errs[i] = fmt.Errorf("%w: %v", ErrStorage, err)
			continue
		}
		a.apply(strings.TrimPrefix(b.key(), keyPrefix), j)
	}
	return errs
}

// Describe returns the bindings f selects, sorted.
func (a *Authorizer) Describe(f Filter) ([]Binding, error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	a.mu.RLock()
	var out []Binding
	for _, b := range a.bindings {
		if f.Matches(b) {
			out = append(out, b)
		}
	}
	a.mu.RUnlock()
	slices.SortFunc(out, compare)
	return out, nil
}

// Delete removes the bindings each filter selects and returns them, per
// filter, with each filter's error. Filters match the stored bindings, not
// this broker's copy, which follows the store a moment behind: as Kafka's
// controller, a delete sees every binding created before it through any
// broker.
func (a *Authorizer) Delete(ctx context.Context, fs []Filter) ([][]Binding, []error) {
	out := make([][]Binding, len(fs))
	errs := make([]error, len(fs))
	kvs, listErr := a.md.List(ctx, keyPrefix)
	stored := make([]Binding, 0, len(kvs))
	for _, kv := range kvs {
		if b, ok := a.parse(strings.TrimPrefix(kv.Key, keyPrefix), kv.Value); ok {
			stored = append(stored, b)
		}
	}
	slices.SortFunc(stored, compare)
	deleted := map[string]bool{}
	for i, f := range fs {
		if err := f.Validate(); err != nil {
			errs[i] = err
			continue
		}
		if listErr != nil {
			errs[i] = fmt.Errorf("%w: reading ACLs: %v", ErrStorage, listErr)
			continue
		}
		for _, b := range stored {
			if !f.Matches(b) || deleted[b.key()] {
				continue // a binding is reported by the first filter that deletes it
			}
			if err := a.md.Txn(ctx, nil, meta.Delete(b.key())); err != nil {
				errs[i] = fmt.Errorf("%w: %v", ErrStorage, err)
				break
			}
			deleted[b.key()] = true
			a.apply(strings.TrimPrefix(b.key(), keyPrefix), nil)
			out[i] = append(out[i], b)
		}
	}
	return out, errs
}

func compare(x, y Binding) int {
	return strings.Compare(fmt.Sprint(x.ResourceType, x.ResourceName, x.PatternType, x.Principal, x.Host, x.Operation, x.Permission),
		fmt.Sprint(y.ResourceType, y.ResourceName, y.PatternType, y.Principal, y.Host, y.Operation, y.Permission))
}

// implies reports whether a binding for op covers the operation want.
func implies(op, want kmsg.ACLOperation) bool {
	if op == want || op == kmsg.ACLOperationAll {
		return true
	}
	switch want {
	case kmsg.ACLOperationDescribe:
		return op == kmsg.ACLOperationRead || op == kmsg.ACLOperationWrite || op == kmsg.ACLOperationDelete || op == kmsg.ACLOperationAlter
	case kmsg.ACLOperationDescribeConfigs:
		return op == kmsg.ACLOperationAlterConfigs
	}
	return false
}

// Authorized reports whether principal ("User:alice"), connecting from
// host (an IP address), may do op to the resource of type rt named name.
// With the authorizer off it always may.
func (a *Authorizer) Authorized(principal, host string, op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string) bool {
	if !a.Enabled() || slices.Contains(a.cfg.SuperUsers, principal) {
		return true
	}
	a.mu.RLock()
	defer a.mu.RUnlock()
	named, allowed := false, false
	for _, b := range a.bindings {
		if b.ResourceType != rt || !b.appliesTo(name) {
			continue
		}
		named = true
		if !b.appliesToClient(principal, host) {
			continue
		}
		if b.denies(op) {
			return false
		}
		if b.Permission == kmsg.ACLPermissionTypeAllow && implies(b.Operation, op) {
			allowed = true
		}
	}
	return allowed || (!named && a.cfg.AllowIfNoACL)
}

// AuthorizedAny reports whether principal may do op to some resource of
// type rt (Kafka's authorizeByResourceType, which lets a client that may
// write any topic be an idempotent producer): an ALLOW for it on any name
// or prefix, unless a DENY covers every name ("*"). With no binding of
// the type at all, allow_everyone_if_no_acl_found decides.
func (a *Authorizer) AuthorizedAny(principal, host string, op kmsg.ACLOperation, rt kmsg.ACLResourceType) bool {
	if !a.Enabled() || slices.Contains(a.cfg.SuperUsers, principal) {
		return true
	}
	a.mu.RLock()
	defer a.mu.RUnlock()
	any, allowed := false, false
	for _, b := range a.bindings {
		if b.ResourceType != rt {
			continue
		}
		any = true
		if !b.appliesToClient(principal, host) {
			continue
		}
		if b.denies(op) && b.PatternType == kmsg.ACLResourcePatternTypeLiteral && b.ResourceName == "*" {
			return false
		}
		if b.Permission == kmsg.ACLPermissionTypeAllow && implies(b.Operation, op) {
			allowed = true
		}
	}
	return allowed || (!any && a.cfg.AllowIfNoACL)
}
