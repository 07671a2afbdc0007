package kafka

import (
	"errors"
	"net"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/acl"
)

// DescribeAcls, CreateAcls and DeleteAcls v0-v3, Kafka 3.9's range (v0 has
// no pattern type: its filters and bindings are LITERAL, kmsg's default, so
// a v0 describe or delete never sees a PREFIXED binding, as in Kafka; v1
// adds pattern types, v2+ flexible). Without an authorizer Kafka answers every ACL request
// with SECURITY_DISABLED, and so does sluice; with one (authorizer.enabled)
// they manage its bindings: describing needs DESCRIBE on the cluster,
// creating and deleting ALTER.
func init() {
	register(kmsg.DescribeACLs, 0, 3, handleDescribeACLs)
	register(kmsg.CreateACLs, 0, 3, handleCreateACLs)
	register(kmsg.DeleteACLs, 0, 3, handleDeleteACLs)
}

var noAuthorizer = "no authorizer is configured on the broker"

// authorized reports whether the connection's principal may do op to the
// resource; always true without an authorizer.
func (rc *reqCtx) authorized(op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string) bool {
	a := rc.conn.srv.cfg.Authorizer
	if !a.Enabled() {
		return true
	}
	return a.Authorized("User:"+rc.conn.principal(), rc.conn.host(), op, rt, name)
}

// clusterAuthorized is authorized for the cluster resource.
func (rc *reqCtx) clusterAuthorized(op kmsg.ACLOperation) bool {
	return rc.authorized(op, kmsg.ACLResourceTypeCluster, acl.ClusterName)
}

// mayWriteAnyTopic reports whether the principal may write some topic:
// Kafka lets such a client be an idempotent producer without
// IDEMPOTENT_WRITE on the cluster.
func (rc *reqCtx) mayWriteAnyTopic() bool {
	return rc.conn.srv.cfg.Authorizer.AuthorizedAny("User:"+rc.conn.principal(), rc.conn.host(), kmsg.ACLOperationWrite, kmsg.ACLResourceTypeTopic)
}

// host is the client's IP address, as ACL hosts name it.
func (c *conn) host() string {
	h, _, err := net.SplitHostPort(c.nc.RemoteAddr().String())
	if err != nil {
		return c.nc.RemoteAddr().String()
	}
	return h
}

// aclError is the Kafka error code and message for an acl package error.
func aclError(err error) (int16, *string) {
	if err == nil {
		return 0, nil
	}
	msg := err.Error()
	if errors.Is(err, acl.ErrInvalid) {
		return kerr.InvalidRequest.Code, &msg
	}
	return kerr.UnknownServerError.Code, &msg
}

func handleDescribeACLs(rc *reqCtx, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.DescribeACLsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeACLsResponse)
	a := rc.conn.srv.cfg.Authorizer
	switch {
	case !a.Enabled():
		resp.ErrorCode = kerr.SecurityDisabled.Code
		resp.ErrorMessage = &noAuthorizer
		return done(resp)
	case !rc.clusterAuthorized(kmsg.ACLOperationDescribe):
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return done(resp)
	}
	bs, err := a.Describe(acl.Filter{ResourceType: req.ResourceType, ResourceName: req.ResourceName, PatternType: req.ResourcePatternType,
		Principal: req.Principal, Host: req.Host, Operation: req.Operation, Permission: req.PermissionType})
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = aclError(err)
		return done(resp)
	}
	for _, b := range bs { // sorted: a resource's bindings are together
		n := len(resp.Resources)
		if n == 0 || resp.Resources[n-1].ResourceType != b.ResourceType || resp.Resources[n-1].ResourceName != b.ResourceName ||
			resp.Resources[n-1].ResourcePatternType != b.PatternType {
			r := kmsg.NewDescribeACLsResponseResource()
			r.ResourceType, r.ResourceName, r.ResourcePatternType = b.ResourceType, b.ResourceName, b.PatternType
			resp.Resources = append(resp.Resources, r)
			n++
		}
		e := kmsg.NewDescribeACLsResponseResourceACL()
		e.Principal, e.Host, e.Operation, e.PermissionType = b.Principal, b.Host, b.Operation, b.Permission
		resp.Resources[n-1].ACLs = append(resp.Resources[n-1].ACLs, e)
	}
	return done(resp)
}

// aclAlterRefusal is why CreateAcls or DeleteAcls is refused: no
// authorizer, or no ALTER on the cluster; 0 when it may go on.
func (rc *reqCtx) aclAlterRefusal() (int16, *string) {
	switch {
	case !rc.conn.srv.cfg.Authorizer.Enabled():
		return kerr.SecurityDisabled.Code, &noAuthorizer
	case !rc.clusterAuthorized(kmsg.ACLOperationAlter):
		return kerr.ClusterAuthorizationFailed.Code, nil
	}
	return 0, nil
}

func handleCreateACLs(rc *reqCtx, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.CreateACLsRequest)
	resp := req.ResponseKind().(*kmsg.CreateACLsResponse)
	a := rc.conn.srv.cfg.Authorizer
	if code, msg := rc.aclAlterRefusal(); code != 0 {
		for range req.Creations {
			r := kmsg.NewCreateACLsResponseResult()
			r.ErrorCode, r.ErrorMessage = code, msg
			resp.Results = append(resp.Results, r)
		}
		return done(resp)
	}
	bs := make([]acl.Binding, len(req.Creations))
	for i, c := range req.Creations {
		bs[i] = acl.Binding{ResourceType: c.ResourceType, ResourceName: c.ResourceName, PatternType: c.ResourcePatternType,
			Principal: c.Principal, Host: c.Host, Operation: c.Operation, Permission: c.PermissionType}
	}
	for _, err := range a.Create(rc.ctx, bs) {
		r := kmsg.NewCreateACLsResponseResult()
		r.ErrorCode, r.ErrorMessage = aclError(err)
		resp.Results = append(resp.Results, r)
	}
	return done(resp)
}

func handleDeleteACLs(rc *reqCtx, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.DeleteACLsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteACLsResponse)
	a := rc.conn.srv.cfg.Authorizer
	if code, msg := rc.aclAlterRefusal(); code != 0 {
		for range req.Filters {
			r := kmsg.NewDeleteACLsResponseResult()
			r.ErrorCode, r.ErrorMessage = code, msg
			resp.Results = append(resp.Results, r)
		}
		return done(resp)
	}
	fs := make([]acl.Filter, len(req.Filters))
	for i, f := range req.Filters {
		fs[i] = acl.Filter{ResourceType: f.ResourceType, ResourceName: f.ResourceName, PatternType: f.ResourcePatternType,
			Principal: f.Principal, Host: f.Host, Operation: f.Operation, Permission: f.PermissionType}
	}
	deleted, errs := a.Delete(rc.ctx, fs)
	for i := range fs {
		r := kmsg.NewDeleteACLsResponseResult()
		r.ErrorCode, r.ErrorMessage = aclError(errs[i])
		for _, b := range deleted[i] {
			m := kmsg.NewDeleteACLsResponseResultMatchingACL()
			m.ResourceType, m.ResourceName, m.ResourcePatternType = b.ResourceType, b.ResourceName, b.PatternType
			m.Principal, m.Host, m.Operation, m.PermissionType = b.Principal, b.Host, b.Operation, b.Permission
			r.MatchingACLs = append(r.MatchingACLs, m)
		}
		resp.Results = append(resp.Results, r)
	}
	return done(resp)
}
