// Package security serves the admin API's security resources for an
// administrator (docs/api.md, /v1/security): SCRAM users, ACL bindings and
// client quotas, listed, created and deleted through the same stores the
// Kafka APIs manage them with (internal/scram, internal/acl,
// internal/quota; Describe/AlterUserScramCredentials, Create/Describe/
// DeleteAcls, Describe/AlterClientQuotas), passed in as small interfaces.
// Every request needs ALTER on the CLUSTER (a super user has it): seeing
// who may do what is itself an administrator's business.
//
// It does not authenticate (the admin listener's Guard does) and keeps no
// state of its own.
package security
