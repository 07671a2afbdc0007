package security

import (
	"errors"
	"net/http"
	"slices"

	"github.com/sluice-mq/sluice/internal/adminapi"
	"github.com/sluice-mq/sluice/internal/quota"
)

// EntityPart is one component of a quota entity: a type ("user",
// "client-id") and a name, or the type's default (name null).
type EntityPart struct {
	Type string  `json:"type"`
	Name *string `json:"name"`
}

// Quota is one entity's quotas.
type Quota struct {
	Entity []EntityPart       `json:"entity"`
	Values map[string]float64 `json:"values"`
}

func (s *Service) listQuotas(w http.ResponseWriter, r *http.Request) {
	ds, err := s.quotas.Describe(nil, false)
	if err != nil {
		adminapi.Error(w, status(err), err.Error())
		return
	}
	out := []Quota{}
	for _, d := range ds {
		q := Quota{Values: d.Values}
		for _, c := range d.Entity {
			q.Entity = append(q.Entity, EntityPart{Type: c.Type, Name: c.Name})
		}
		out = append(out, q)
	}
	adminapi.JSON(w, http.StatusOK, map[string]any{"quotas": out})
}

// QuotaRequest sets and removes quota keys of one entity.
type QuotaRequest struct {
	Entity []EntityPart       `json:"entity"`
	Set    map[string]float64 `json:"set"`
	Remove []string           `json:"remove"`
}

func (s *Service) alterQuotas(w http.ResponseWriter, r *http.Request) {
	var req QuotaRequest
	if !decode(w, r, &req) {
		return
	}
	var e quota.Entity
	for _, p := range req.Entity {
		e = append(e, quota.Component{Type: p.Type, Name: p.Name})
	}
	var ops []quota.Op
	keys := make([]string, 0, len(req.Set))
	for k := range req.Set {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		ops = append(ops, quota.Op{Key: k, Value: req.Set[k]})
	}
	for _, k := range req.Remove {
		ops = append(ops, quota.Op{Key: k, Remove: true})
	}
	if len(ops) == 0 {
		adminapi.Error(w, http.StatusBadRequest, "nothing to set or remove")
		return
	}
	if err := s.quotas.Alter(r.Context(), e, ops, false); err != nil {
		code := http.StatusServiceUnavailable
		if quotaInvalid(err) {
			code = http.StatusBadRequest
		}
		adminapi.Error(w, code, err.Error())
		return
	}
	adminapi.JSON(w, http.StatusOK, map[string]any{"entity": req.Entity})
}

func quotaInvalid(err error) bool { return errors.Is(err, quota.ErrInvalid) }
