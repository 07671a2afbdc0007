package security

import (
	"errors"
	"net/http"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/acl"
	"github.com/sluice-mq/sluice/internal/adminapi"
)

// errDisabled is Kafka's SECURITY_DISABLED: ACLs are kept only when the
// authorizer is on.
var errDisabled = errors.New("the authorizer is off (authorizer.enabled): there are no ACLs to manage")

func (s *Service) listACLs(w http.ResponseWriter, r *http.Request) {
	if !s.acls.Enabled() {
		adminapi.JSON(w, http.StatusOK, map[string]any{"enabled": false, "acls": []acl.Binding{}})
		return
	}
	bs, err := s.acls.Describe(acl.Filter{ResourceType: kmsg.ACLResourceTypeAny, PatternType: kmsg.ACLResourcePatternTypeAny,
		Operation: kmsg.ACLOperationAny, Permission: kmsg.ACLPermissionTypeAny})
	if err != nil {
		adminapi.Error(w, status(err), err.Error())
		return
	}
	if bs == nil {
		bs = []acl.Binding{}
	}
	adminapi.JSON(w, http.StatusOK, map[string]any{"enabled": true, "acls": bs})
}

// createACL stores one binding: {"resource_type": "TOPIC", "resource_name":
// "orders", "pattern_type": "LITERAL", "principal": "User:alice", "host":
// "*", "operation": "READ", "permission": "ALLOW"}.
func (s *Service) createACL(w http.ResponseWriter, r *http.Request) {
	if !s.acls.Enabled() {
		adminapi.Error(w, http.StatusConflict, errDisabled.Error())
		return
	}
	var b acl.Binding
	if !decode(w, r, &b) {
		return
	}
	if b.Host == "" {
		b.Host = "*"
	}
	if b.PatternType == kmsg.ACLResourcePatternTypeUnknown {
		b.PatternType = kmsg.ACLResourcePatternTypeLiteral
	}
	if err := s.acls.Create(r.Context(), []acl.Binding{b})[0]; err != nil {
		adminapi.Error(w, status(err), err.Error())
		return
	}
	adminapi.JSON(w, http.StatusCreated, b)
}

// deleteACLs deletes the one binding the body names exactly (the fields of
// a binding, as createACL takes them) and answers what it deleted.
func (s *Service) deleteACLs(w http.ResponseWriter, r *http.Request) {
	if !s.acls.Enabled() {
		adminapi.Error(w, http.StatusConflict, errDisabled.Error())
		return
	}
	var b acl.Binding
	if !decode(w, r, &b) {
		return
	}
	if err := b.Validate(); err != nil {
		adminapi.Error(w, status(err), err.Error())
		return
	}
	f := acl.Filter{ResourceType: b.ResourceType, ResourceName: &b.ResourceName, PatternType: b.PatternType,
		Principal: &b.Principal, Host: &b.Host, Operation: b.Operation, Permission: b.Permission}
	deleted, errs := s.acls.Delete(r.Context(), []acl.Filter{f})
	if errs[0] != nil {
		adminapi.Error(w, status(errs[0]), errs[0].Error())
		return
	}
	if len(deleted[0]) == 0 {
		adminapi.Error(w, http.StatusNotFound, "no such ACL binding")
		return
	}
	adminapi.JSON(w, http.StatusOK, map[string]any{"deleted": deleted[0]})
}
