// Package console is sluice's web console, served by the broker on the
// admin listener under /ui/ from templates and assets embedded in the
// binary (no Node step: htmx is vendored in static/, docs/console.md).
//
// Every page is drawn from the admin JSON API (docs/api.md), called in
// process with the logged-in principal, so the console shows and does
// exactly what that principal may through the API: the same ACLs, and in
// cluster mode the same cluster-wide answers. When the broker has SASL
// users the console asks for a login with the same credentials and keeps
// a server-side session (an HttpOnly, SameSite=Strict cookie); every
// action is a POST carrying the session's CSRF token, and nothing that
// changes data is reachable by GET.
//
// The schema pages and the message browser's decoding (decode/) reach the
// in-process schema registry as the logged-in principal through its
// per-subject authorization (registry.HandlerAs), so they show and change
// only the subjects that principal may on the registry's own listener;
// schemas are deleted soft, then permanently, each after a confirmation
// (schemadelete.go); a subject's and the registry-wide compatibility
// level and mode are changed or reset after a confirmation too
// (schemaconfig.go). A record's own page (record.go) reads its key and
// value whole, up to 8 MiB, one such page at a time, and decodes them as
// the browser decodes values of at most 64 KiB. Dead letters are replayed through
// POST /v1/dlq/{topic}/replay (internal/deadletter); users, ACLs and
// quotas are managed through /v1/security (internal/security).
package console
